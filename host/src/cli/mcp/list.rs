//! `wasmclaw mcp list`: each server of `[mcp.servers]`, whether it
//! started, and its tools.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use crate::config::Config;
use crate::home::Home;

#[derive(Args, Debug)]
pub struct ListArgs {}

pub async fn run(_home: &Home, _config: &Config, _args: &ListArgs) -> Result<ExitCode> {
    bail!("wasmclaw mcp list: not available yet")
}
