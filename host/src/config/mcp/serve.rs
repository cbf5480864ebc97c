//! `[mcp.server]`: wasmclaw as an MCP server.

use serde::Deserialize;

/// `[mcp.server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServeToml {}
