//! An MCP server on rmcp, for the MCP client tests: the tool `hello`
//! answers `hello from rmcp`.
//!
//!     rmcp_server           over stdio
//!     rmcp_server --http    streamable HTTP on a free loopback port; prints
//!                           `http://127.0.0.1:PORT/mcp` and serves until killed

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServiceExt, tool, tool_router};

struct Hello;

#[tool_router(server_handler)]
impl Hello {
    /// Says hello.
    #[tool]
    async fn hello(&self) -> Result<String, rmcp::ErrorData> {
        Ok("hello from rmcp".to_string())
    }
}

// The URL on stdout is how a test learns where it serves.
#[allow(clippy::print_stdout)]
#[tokio::main]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("--http") {
        let service = StreamableHttpService::new(
            || Ok(Hello),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        println!("http://{addr}/mcp");
        axum::serve(listener, app).await.expect("serving");
        return;
    }
    let service = Hello
        .serve(rmcp::transport::stdio())
        .await
        .expect("the handshake");
    let _ = service.waiting().await;
}
