//! `/mcp` on `wasmclaw serve`: the MCP server of [`crate::mcp::server`]
//! over streamable HTTP, one [`ToolServer`] per HTTP MCP session.
//!
//! It is mounted among the API's routes, behind the same bearer token.
//! Requests are also checked against allow-lists before the MCP service
//! reads them, so a web page cannot reach a local wasmclaw through DNS
//! rebinding: the `Host` header must name a loopback host (`localhost`,
//! `127.0.0.1`, `::1`, any port), and an `Origin` header, when a browser
//! sends one, must be a loopback origin. A request failing either is
//! refused with 403 before any MCP message is read.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::core::Core;
use crate::mcp::server::ToolServer;

/// The hosts `/mcp` answers for.
pub const ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The browser origins `/mcp` answers.
pub const ALLOWED_ORIGINS: [&str; 3] =
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// The streamable HTTP MCP service over `core`.
pub fn service(core: Core) -> StreamableHttpService<ToolServer, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(ALLOWED_HOSTS)
        .with_allowed_origins(ALLOWED_ORIGINS)
        .enforce_origin_validation();
    StreamableHttpService::new(
        move || Ok(ToolServer::new(core.clone(), None)),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
