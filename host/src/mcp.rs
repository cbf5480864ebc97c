//! MCP (the Model Context Protocol) both ways, on the official Rust SDK
//! (`rmcp`):
//! - [`client`]: the tools of the MCP servers in `[mcp.servers.NAME]`
//!   join the tool registry beside the plugins' (a
//!   [`crate::agent::registry::ToolSource`] per server);
//! - [`server`]: an agent's tools (its plugins', built-ins' and MCP
//!   servers'), and the named agents of `[mcp.server] agents` as tools,
//!   served to MCP clients over stdio (`wasmclaw mcp`) and streamable HTTP
//!   (`/mcp` on `wasmclaw serve`); their approvals are asked of the client.

pub mod client;
pub mod server;
