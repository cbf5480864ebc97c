//! `wasmclaw mcp`: wasmclaw as an MCP server on stdio ([`serve`]), and
//! `wasmclaw mcp list`: the MCP servers it uses, their state and tools
//! ([`list`]).

pub mod list;
pub mod serve;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    #[command(flatten)]
    pub serve: serve::McpServeArgs,
}

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// The MCP servers of `[mcp.servers]`: their state and their tools.
    List(list::ListArgs),
}
