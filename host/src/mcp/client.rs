//! wasmclaw as an MCP client: the servers of `[mcp.servers.NAME]`.
//!
//! Each server is a [`McpServer`]: a [`crate::agent::registry::ToolSource`]
//! placed after the plugins in the registry. It keeps its latest tool list
//! and hands it out as a [`tools::McpTools`] snapshot, replaced when the
//! server sends `notifications/tools/list_changed` or is restarted.
//!
//! - Names: a server's tool keeps its own name unless a plugin or a
//!   built-in has it, or `[mcp] always_prefix` is set: then it is
//!   `SERVER__tool`. `allow` and `deny` (globs on the server's names) pick
//!   the tools offered.
//! - Calls run in the same turn path as a plugin's (hooks, approvals,
//!   events); the source adds the server's deadline (`timeout_secs`) and
//!   output limit (`output_kib`). A call whose future is dropped (a hard
//!   interrupt, the deadline) sends `notifications/cancelled` (rmcp's
//!   request guard does, on drop).
//! - Supervision ([`supervise`]): a server that fails to start or stops is
//!   reported (`mcp_server_failed`, with the tail of its stderr), its calls
//!   fail with an `upstream` error that says so, and it is started again
//!   after a backoff of 0.5 s doubling to 30 s.
//! - Protocol ([`connect`]): by default `server/discover` for the
//!   stateless 2026-07-28 revision, falling back to `initialize` at
//!   2025-11-25 for a server that refuses it (one that ignores it fails
//!   its first start after the startup wait and is started again with
//!   `initialize` alone); the server's `protocol` key pins one of the two. The revision agreed on is in
//!   `mcp_server_ready` and `wasmclaw mcp list`.

mod connect;
pub mod server;
mod supervise;
pub mod tools;

use std::sync::Arc;

pub use server::{McpServer, Status};

use crate::bus::EventBus;
use crate::config::mcp::McpClientSettings;
use crate::plugin::Plugins;

/// Starts every server of `settings` (each supervised in its own task);
/// in name order, as the registry's sources after the plugins.
pub fn start(
    settings: &McpClientSettings,
    plugins: &Arc<Plugins>,
    bus: &EventBus,
) -> Vec<Arc<McpServer>> {
    settings
        .servers
        .iter()
        .map(|(name, toml)| {
            let wait = std::time::Duration::from_secs(settings.startup_wait_secs);
            let server = McpServer::new(
                name,
                toml.clone(),
                settings.always_prefix,
                wait,
                plugins.clone(),
            );
            tokio::spawn(supervise::supervise(server.clone(), bus.clone()));
            server
        })
        .collect()
}
