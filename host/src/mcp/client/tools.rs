//! One snapshot of an MCP server's tools, and how a call of one goes over
//! the server's connection.

use std::collections::HashMap;
use std::sync::Weak;

use futures_util::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use serde_json::Value;

use super::server::McpServer;
use crate::agent::registry::{Caller, ToolSet};
use crate::plugin::call::within_output_limit;
use crate::plugin::tools::Tool;
use crate::plugin::{ErrorKind, ToolError};

/// A server's tools as offered, under wasmclaw's names.
pub struct McpTools {
    server: Weak<McpServer>,
    tools: Vec<Tool>,
    /// wasmclaw's name → the server's.
    remote: HashMap<String, String>,
}

impl McpTools {
    pub fn new<'a>(
        server: Weak<McpServer>,
        named: impl Iterator<Item = (String, &'a rmcp::model::Tool)>,
    ) -> McpTools {
        let mut tools = Vec::new();
        let mut remote = HashMap::new();
        for (name, tool) in named {
            let schema = Value::Object((*tool.input_schema).clone());
            let description = tool.description.as_deref().unwrap_or_default();
            tools.push(Tool::builtin(&name, description, schema));
            remote.insert(name, tool.name.to_string());
        }
        McpTools {
            server,
            tools,
            remote,
        }
    }
}

impl ToolSet for McpTools {
    fn tools(&self) -> Vec<&Tool> {
        self.tools.iter().collect()
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    fn output_limit(&self, _name: &str) -> usize {
        self.server
            .upgrade()
            .map_or(crate::plugin::Limits::default().output_bytes, |s| {
                s.output_limit()
            })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a str,
        _caller: Caller<'a>,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let (Some(server), Some(remote), Some(tool)) = (
                self.server.upgrade(),
                self.remote.get(name),
                self.tool(name),
            ) else {
                return Err(ToolError::new(
                    ErrorKind::NotFound,
                    format!("unknown tool {name:?}"),
                ));
            };
            tool.check_arguments(arguments)?;
            call(&server, remote, arguments).await
        })
    }
}

/// Calls the server's tool `remote` with `arguments` (a JSON object).
async fn call(server: &McpServer, remote: &str, arguments: &str) -> Result<String, ToolError> {
    let who = &server.name;
    let timeout = server.timeout();
    let peer = server.wait_peer(timeout).await.map_err(|why| {
        ToolError::new(
            ErrorKind::Upstream,
            format!("MCP server {who:?} is not running: {why}; it is being restarted"),
        )
        .retryable()
    })?;
    let arguments = match serde_json::from_str(arguments) {
        Ok(Value::Object(map)) => map,
        _ => {
            return Err(ToolError::new(
                ErrorKind::InvalidInput,
                "the arguments must be a JSON object",
            ));
        }
    };
    let params = CallToolRequestParams::new(remote.to_string()).with_arguments(arguments);
    let limit = server.output_limit();
    // Dropped on the deadline or an interrupt: rmcp then sends
    // `notifications/cancelled` for the request.
    let result = match tokio::time::timeout(timeout, peer.call_tool(params)).await {
        Err(_) => {
            return Err(ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "MCP server {who:?} did not answer the call of {remote:?} within {} s",
                    timeout.as_secs()
                ),
            ));
        }
        Ok(Err(e)) => {
            return Err(ToolError::new(
                ErrorKind::Upstream,
                format!("MCP server {who:?} failed during the call of {remote:?}: {e}"),
            )
            .retryable());
        }
        Ok(Ok(result)) => result,
    };
    let failed = result.is_error == Some(true);
    let text = result_text(result);
    if failed {
        return Err(ToolError::new(ErrorKind::Upstream, text).cut_to(limit));
    }
    within_output_limit(text, limit, |got, limit| {
        format!(
            "MCP server {who:?} returned {got} from {remote:?}, over its output limit of {limit}"
        )
    })
}

/// A result as the model reads it: its text blocks joined by newlines,
/// other blocks as JSON; the structured content when there is no block.
fn result_text(result: CallToolResult) -> String {
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        return structured.to_string();
    }
    let parts: Vec<String> = (result.content.iter())
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    parts.join("\n")
}
