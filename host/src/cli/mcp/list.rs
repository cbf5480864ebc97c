//! `wasmclaw mcp list`: each server of `[mcp.servers]`, whether it
//! started, and its tools.
//!
//! It starts every server (as a host start does), waits for each one's
//! first answer (at most `[mcp] startup_wait_secs`), and prints one block
//! per server: `NAME: ready (protocol P)` and its tools under the names the
//! agents see, or `NAME: failed: ERROR`.

use std::fmt::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::agent::registry::ToolSource;
use crate::bus::EventBus;
use crate::config::Config;
use crate::home::Home;
use crate::mcp::client::{self, Status};
use crate::plugin::Plugins;

#[derive(Args, Debug)]
pub struct ListArgs {}

pub async fn run(home: &Home, config: &Config, _args: &ListArgs) -> Result<ExitCode> {
    let settings = &config.mcp_client;
    if settings.servers.is_empty() {
        println!("no MCP servers configured ([mcp.servers.NAME])");
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = crate::cli::runtime(home, config)?;
    let plugins = Plugins::load_dir(runtime, &config.plugins.dir).await;
    let servers = client::start(settings, &plugins, &EventBus::new(0));
    servers.iter().for_each(|s| s.announce());
    let wait = Duration::from_secs(settings.startup_wait_secs);
    let mut out = String::new();
    for server in servers {
        let status = server.settled(wait).await;
        let source = client::server::Source(Arc::clone(&server));
        match status {
            Status::Starting => writeln!(
                out,
                "{}: starting (no answer within {} s)",
                server.name,
                wait.as_secs()
            )?,
            Status::Failed { error } => writeln!(out, "{}: failed: {error}", server.name)?,
            Status::Ready { protocol } => {
                writeln!(out, "{}: ready (protocol {protocol})", server.name)?;
                for tool in source.current().tools() {
                    writeln!(out, "  {}", tool.name)?;
                }
            }
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}
