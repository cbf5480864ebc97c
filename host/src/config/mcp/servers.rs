//! `[mcp.servers.NAME]`: an MCP server whose tools the agents may call.
//!
//! A server is reached one of two ways: a child process spoken to over its
//! stdin and stdout (`command`, with `args`, `env` and `cwd`), or streamable
//! HTTP (`url`, with `headers_env`: each header's value is read from the
//! environment variable named, so no secret is written in the file).
//! `protocol` pins the revision (and so the handshake); any other value
//! than the two revisions is refused when the file is read, naming
//! `mcp.servers.NAME.protocol` and the values accepted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `[mcp.servers.NAME]`.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerToml {
    /// stdio: the program to start.
    pub command: Option<String>,
    /// stdio: its arguments.
    pub args: Option<Vec<String>>,
    /// stdio: variables set for it (beside the host's own).
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: the folder it runs in.
    pub cwd: Option<PathBuf>,
    /// streamable HTTP: the server's endpoint.
    pub url: Option<String>,
    /// streamable HTTP: header name → the environment variable that holds
    /// its value.
    pub headers_env: Option<BTreeMap<String, String>>,
    /// Only these of its tools are offered (globs; default: all).
    pub allow: Option<Vec<String>>,
    /// These of its tools are never offered (globs).
    pub deny: Option<Vec<String>>,
    /// The longest a call may take (default 60).
    pub timeout_secs: Option<u64>,
    /// The most a call's result may hold, in KiB (default 1024).
    pub output_kib: Option<u64>,
    /// The one protocol revision to speak (default: 2026-07-28 through
    /// `server/discover`, falling back to 2025-11-25 through `initialize`).
    pub protocol: Option<ProtocolToml>,
}

/// `protocol`: a revision of the MCP protocol, and with it the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ProtocolToml {
    /// `initialize` and `notifications/initialized`, then a session.
    #[serde(rename = "2025-11-25")]
    V2025_11_25,
    /// Stateless: `server/discover`, every request carrying its own
    /// revision and client info.
    #[serde(rename = "2026-07-28")]
    V2026_07_28,
}

/// `[mcp]` as the client uses it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct McpClientSettings {
    /// Every server's tools are named `SERVER__tool`.
    pub always_prefix: bool,
    /// How long `wasmclaw mcp list` (and a host start) waits for the
    /// servers to answer, in seconds.
    pub startup_wait_secs: u64,
    pub servers: BTreeMap<String, McpServerToml>,
}

impl McpClientSettings {
    /// The settings `[mcp]` writes.
    pub fn from_toml(toml: Option<&super::McpToml>) -> McpClientSettings {
        let Some(toml) = toml else {
            return McpClientSettings {
                startup_wait_secs: 10,
                ..Default::default()
            };
        };
        McpClientSettings {
            always_prefix: toml.always_prefix.unwrap_or(false),
            startup_wait_secs: toml.startup_wait_secs.unwrap_or(10),
            servers: toml.servers.clone().unwrap_or_default(),
        }
    }
}
