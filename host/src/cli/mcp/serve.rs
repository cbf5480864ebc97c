//! `wasmclaw mcp`: the tools of the agent it runs (`--agent`, default the
//! host's default agent), and the agents of `[mcp.server] agents`, served
//! to one MCP client over stdin and stdout.
//!
//! stdout carries only the protocol's messages; notes and logs go to
//! stderr. The plugin directory is watched as `serve` watches it: a plugin
//! added, replaced or removed is told to the client as
//! `notifications/tools/list_changed`. The server ends when the client
//! closes stdin, then winds the host down as `serve` does.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use rmcp::ServiceExt;

use crate::config::Config;
use crate::config::overrides::AgentFlags;
use crate::config::watch::Loader;
use crate::home::Home;
use crate::mcp::server::ToolServer;

#[derive(Args, Debug)]
pub struct McpServeArgs {
    #[command(flatten)]
    pub agent: AgentFlags,
}

/// How long running calls get to end once the client has gone.
const GRACE: Duration = Duration::from_secs(5);

pub async fn run(
    home: &Home,
    config: &Config,
    loader: Loader,
    _args: &McpServeArgs,
) -> Result<ExitCode> {
    let (core, _home) = crate::cli::agent::start(home, config, false).await?;
    let _watch = core.watch_plugins()?;
    core.announce_mcp();
    let _reload = crate::config::watch::watch(core.clone(), loader, config.clone())?;
    // The first listing already holds every plugin of the directory.
    core.until_plugins_scanned().await;
    let settings = std::sync::Arc::new(config.mcp_server.clone());
    let parked = std::sync::Arc::default();
    let server = ToolServer::new(core.clone(), None, settings, parked)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session on stdio")?;
    server.waiting().await.context("serving MCP on stdio")?;
    core.shut_down(GRACE).await;
    Ok(ExitCode::SUCCESS)
}
