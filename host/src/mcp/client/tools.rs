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
use crate::plugin::tools::{
    MAX_DESCRIPTION, MAX_SCHEMA, MAX_SPECS, MAX_TOOLS_PER_PLUGIN, Tool, is_valid_tool_name,
};
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
            let mut description = tool.description.as_deref().unwrap_or_default();
            description = &description[..description.floor_char_boundary(MAX_DESCRIPTION)];
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

/// The tools of `list` that a model request can carry, as a plugin's are
/// held to (`plugin/tools.rs`): a name the model APIs accept, each name
/// once, an input schema of at most [`MAX_SCHEMA`], the first
/// [`MAX_TOOLS_PER_PLUGIN`], and their schemas and descriptions together
/// within [`MAX_SPECS`]. A server is not trusted more than a plugin: one
/// bad tool of its list must not make every request fail. Every tool left
/// out is logged, naming the server, the tool and why.
pub fn acceptable(server: &str, list: Vec<rmcp::model::Tool>) -> Vec<rmcp::model::Tool> {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut kept = Vec::new();
    for tool in list {
        let schema = serde_json::to_string(&*tool.input_schema).map_or(usize::MAX, |s| s.len());
        let description = (tool.description.as_deref().map_or(0, str::len)).min(MAX_DESCRIPTION);
        let why = if !is_valid_tool_name(&tool.name) {
            "its name is not accepted by model APIs (1 to 64 of a-z, A-Z, 0-9, '_' and '-')"
                .to_string()
        } else if !seen.insert(tool.name.to_string()) {
            "its name is listed twice".to_string()
        } else if schema > MAX_SCHEMA {
            format!("its input schema is {schema} bytes, over {MAX_SCHEMA}")
        } else if kept.len() == MAX_TOOLS_PER_PLUGIN {
            format!("the server lists more than {MAX_TOOLS_PER_PLUGIN} tools")
        } else if total + schema + description > MAX_SPECS {
            format!("its tools' schemas and descriptions take more than {MAX_SPECS} bytes")
        } else {
            total += schema + description;
            kept.push(tool);
            continue;
        };
        tracing::warn!(server, tool = %tool.name, "an MCP server's tool is left out: {why}");
    }
    kept
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn tool(name: &str, description: &str, schema: Value) -> rmcp::model::Tool {
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        rmcp::model::Tool::new(name.to_string(), description.to_string(), Arc::new(schema))
    }

    /// A hostile or careless server's list: only what a model request can
    /// carry is offered.
    #[test]
    fn a_tool_a_model_request_cannot_carry_is_left_out() {
        let object = json!({"type": "object"});
        let huge = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA)});
        let list = vec![
            tool("ok", "fine", object.clone()),
            tool("not.a.model.name", "", object.clone()),
            tool("has space", "", object.clone()),
            tool(&"n".repeat(65), "", object.clone()),
            tool("ok", "the same name again", object.clone()),
            tool("huge_schema", "", huge),
            tool("fine", "", object.clone()),
        ];
        let kept = acceptable("s", list);
        let names: Vec<&str> = kept.iter().map(|t| &*t.name).collect();
        assert_eq!(names, ["ok", "fine"]);
        assert_eq!(kept[0].description.as_deref(), Some("fine"));

        let many =
            (0..MAX_TOOLS_PER_PLUGIN + 5).map(|i| tool(&format!("t{i}"), "", object.clone()));
        assert_eq!(acceptable("s", many.collect()).len(), MAX_TOOLS_PER_PLUGIN);

        // Long descriptions are cut as a plugin's are, and count so.
        let long = "é".repeat(MAX_DESCRIPTION);
        let wordy = (0..40).map(|i| tool(&format!("w{i}"), &long, object.clone()));
        let kept = acceptable("s", wordy.collect());
        assert!(
            kept.len() < 40 && kept.len() * MAX_DESCRIPTION <= MAX_SPECS,
            "{}",
            kept.len()
        );
        let offered = McpTools::new(Weak::new(), kept.iter().map(|t| (t.name.to_string(), t)));
        let description = &offered.tools[0].description;
        assert!(description.len() <= MAX_DESCRIPTION && description.len() > MAX_DESCRIPTION - 2);
    }
}
