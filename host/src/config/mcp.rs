//! `[mcp]` as written: the MCP servers wasmclaw uses (`[mcp.servers.NAME]`,
//! [`servers`]) and wasmclaw as an MCP server (`[mcp.server]`, [`serve`]).

pub mod serve;
pub mod servers;

use std::collections::BTreeMap;

use serde::Deserialize;

pub use serve::{McpApprove, McpServeSettings, McpServeToml};
pub use servers::{McpClientSettings, McpServerToml};

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToml {
    /// Name every MCP server's tools `SERVER__tool`, not only those whose
    /// name is taken.
    pub always_prefix: Option<bool>,
    /// How long a start waits for the servers' first answer (default 10).
    pub startup_wait_secs: Option<u64>,
    /// `[mcp.servers.NAME]`: the servers whose tools the agents may call.
    pub servers: Option<BTreeMap<String, McpServerToml>>,
    /// `[mcp.server]`: what wasmclaw serves to MCP clients.
    pub server: Option<McpServeToml>,
}
