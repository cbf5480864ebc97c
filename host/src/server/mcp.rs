//! `/mcp` on `wasmclaw serve`: the MCP server of [`crate::mcp::server`]
//! over streamable HTTP, one [`ToolServer`] per HTTP MCP session.
//!
//! It is mounted among the API's routes, behind the same bearer token.
//! Requests are also checked against allow-lists before the MCP service
//! reads them, so a web page cannot reach a local wasmclaw through DNS
//! rebinding: the `Host` header must name a loopback host (`localhost`,
//! `127.0.0.1`, `::1`, any port) or one of `[mcp.server] allowed_hosts`,
//! and an `Origin` header, when a browser sends one, must be a loopback
//! origin or one of `allowed_origins`. A request failing either is
//! refused with 403 before any MCP message is read.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::config::mcp::McpServeSettings;
use crate::core::Core;
use crate::mcp::server::{Parked, ToolServer};

/// The streamable HTTP MCP service over `core`, as `settings` say.
pub fn service(
    core: &Core,
    settings: &McpServeSettings,
) -> StreamableHttpService<ToolServer, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.allowed_hosts.clone())
        .with_allowed_origins(settings.allowed_origins.clone())
        .enforce_origin_validation();
    let (core, settings) = (core.clone(), Arc::new(settings.clone()));
    let parked = Arc::new(Parked::default());
    StreamableHttpService::new(
        move || {
            let server = ToolServer::new(core.clone(), None, settings.clone(), parked.clone());
            Ok(server)
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
