//! `[mcp.servers.NAME]`: an MCP server whose tools the agents may call.

use serde::Deserialize;

/// `[mcp.servers.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerToml {}
