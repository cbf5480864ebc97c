//! `[mcp.server]`: wasmclaw as an MCP server (`wasmclaw mcp`, and `/mcp` on
//! `wasmclaw serve`).

use std::time::Duration;

use serde::Deserialize;

/// `[mcp.server]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServeToml {
    /// Named agents offered as tools `agent__NAME` (globs; `["*"]`: all).
    pub agents: Option<Vec<String>>,
    /// A call that waits for approval when the client cannot be asked.
    pub approve: Option<McpApprove>,
    /// How often a long call tells the client it still runs.
    pub progress_ms: Option<u64>,
    /// `Host` values `/mcp` also answers, besides the loopback ones.
    pub allowed_hosts: Option<Vec<String>>,
    /// Browser origins `/mcp` also answers, besides the loopback ones.
    pub allowed_origins: Option<Vec<String>>,
}

/// What a served call that waits for approval gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum McpApprove {
    /// The client is asked (an MCP elicitation) when it can be; otherwise
    /// the call is denied, saying why.
    #[default]
    Ask,
    /// Allowed without asking.
    Allow,
    /// Denied without asking.
    Deny,
}

/// `[mcp.server]` resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServeSettings {
    /// The agents served as tools, by name, in order.
    pub agents: Vec<String>,
    pub approve: McpApprove,
    pub progress: Duration,
    /// Every `Host` `/mcp` answers: loopback, then those configured.
    pub allowed_hosts: Vec<String>,
    /// Every `Origin` `/mcp` answers: loopback, then those configured.
    pub allowed_origins: Vec<String>,
}

/// The hosts `/mcp` always answers.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The browser origins `/mcp` always answers.
pub const LOOPBACK_ORIGINS: [&str; 3] =
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// The default of `progress_ms`.
pub const DEFAULT_PROGRESS: Duration = Duration::from_secs(1);

impl Default for McpServeSettings {
    fn default() -> McpServeSettings {
        McpServeSettings {
            agents: Vec::new(),
            approve: McpApprove::Ask,
            progress: DEFAULT_PROGRESS,
            allowed_hosts: LOOPBACK_HOSTS.map(String::from).to_vec(),
            allowed_origins: LOOPBACK_ORIGINS.map(String::from).to_vec(),
        }
    }
}
