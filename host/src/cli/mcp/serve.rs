//! `wasmclaw mcp`: the plugins' tools (and, by a setting, the named
//! agents) served to one MCP client over stdin and stdout.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use crate::config::Config;
use crate::config::overrides::AgentFlags;
use crate::config::watch::Loader;
use crate::home::Home;

#[derive(Args, Debug)]
pub struct McpServeArgs {
    #[command(flatten)]
    pub agent: AgentFlags,
}

pub async fn run(
    _home: &Home,
    _config: &Config,
    _loader: Loader,
    _args: &McpServeArgs,
) -> Result<ExitCode> {
    bail!("wasmclaw mcp: not available yet")
}
