//! An MCP server on rmcp over stdio, for the MCP client tests: the tool
//! `hello` answers `hello from rmcp`.

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

#[tokio::main]
async fn main() {
    let service = Hello
        .serve(rmcp::transport::stdio())
        .await
        .expect("the handshake");
    let _ = service.waiting().await;
}
