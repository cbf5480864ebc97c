//! wasmclaw as an MCP server: the plugins' tools and the named agents.
//!
//! One [`ToolServer`] serves one MCP client (over stdio, `wasmclaw mcp`;
//! over streamable HTTP, one per HTTP MCP session on `/mcp`). It holds the
//! [`Core`] and nothing else of the host:
//!
//! - `tools/list` is what the serving agent offers now
//!   ([`Core::agent_tools`]): each tool's name, description and input
//!   schema as the model would see them;
//! - `tools/call` runs through [`Core::call_tool`], the same path a
//!   model's call takes (hooks, approvals, events, a fresh sandboxed
//!   instance with the plugin's grants and limits). Every failure (an
//!   unknown tool, arguments that do not fit the schema, a trap) is an
//!   `isError` result whose text is the error as the model reads it, so the
//!   client's user sees why;
//! - a call that runs long sends `notifications/progress` every
//!   [`PROGRESS_EVERY`] to a client that gave a progress token;
//! - a client's `notifications/cancelled` drops the call, which stops the
//!   plugin instance;
//! - a plugin loaded or unloaded while the client is connected is told to
//!   it as `notifications/tools/list_changed`.
//!
//! Each client gets its own session key, `mcp:<client name>:<id>` ([`session_key`]), so its
//! calls and their events are kept apart from every other client's.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};

use crate::bus::Filter;
use crate::core::Core;
use crate::protocol::EventKind;

/// How often a call that runs long tells the client it still runs (when
/// the client asked for progress): `notifications/progress` whose progress
/// is the seconds the call has run.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The session key of a client that calls itself `name`: `mcp:NAME:ID`,
/// NAME cut to 32 characters of those a session key may hold (others
/// become `_`), ID new for each connection (a UUID v7). Unique across
/// restarts too: the store keeps a session's history and the approvals
/// kept for it, which a later client of the same name must not inherit.
pub fn session_key(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.@".contains(c);
    let name: String = (name.chars().take(32))
        .map(|c| if allowed(c) { c } else { '_' })
        .collect();
    let name = if name.is_empty() { "client" } else { &name };
    format!("mcp:{name}:{}", uuid::Uuid::now_v7().simple())
}

/// The MCP server one client talks to.
#[derive(Clone)]
pub struct ToolServer {
    core: Core,
    /// The agent whose tools are served (`None`: the default agent).
    agent: Option<String>,
    session: Arc<std::sync::OnceLock<String>>,
}

impl ToolServer {
    pub fn new(core: Core, agent: Option<String>) -> ToolServer {
        ToolServer {
            core,
            agent,
            session: Arc::default(),
        }
    }

    /// The session key of this client, named once it has introduced itself.
    fn session(&self, context: &RequestContext<RoleServer>) -> String {
        self.session
            .get_or_init(|| {
                let name = context
                    .peer
                    .peer_info()
                    .map(|info| info.client_info.name.clone())
                    .unwrap_or_default();
                session_key(&name)
            })
            .clone()
    }

    fn agent_name(&self) -> String {
        self.agent
            .clone()
            .unwrap_or_else(|| self.core.default_agent())
    }

    fn tools(&self) -> Result<Vec<Tool>, McpError> {
        let defs = self
            .core
            .agent_tools(&self.agent_name())
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(defs
            .into_iter()
            .map(|def| {
                let schema = match def.parameters {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(def.name, def.description, Arc::new(schema))
            })
            .collect())
    }
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("wasmclaw", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = self.session(&context);
        let arguments =
            serde_json::Value::Object(request.arguments.unwrap_or_default()).to_string();
        let agent = self.agent_name();
        let call = self
            .core
            .call_tool(&session, Some(&agent), &request.name, &arguments);
        tokio::pin!(call);
        let progress = context.meta.get_progress_token();
        let started = std::time::Instant::now();
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let result = loop {
            tokio::select! {
                result = &mut call => {
                    break result.map_err(|e| McpError::internal_error(e.to_string(), None))?;
                }
                () = context.ct.cancelled() => {
                    return Err(McpError::internal_error("the call was cancelled", None));
                }
                _ = ticks.tick(), if progress.is_some() => {
                    let token = progress.clone().expect("ticks only with a token");
                    let elapsed = started.elapsed().as_secs_f64();
                    let note = ProgressNotificationParam::new(token, elapsed)
                        .with_message(format!("{} running for {elapsed:.0} s", request.name));
                    // A client that is gone is told nothing more.
                    let _ = context.peer.notify_progress(note).await;
                }
            }
        };
        let content = vec![ContentBlock::text(result.content)];
        Ok(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let filter = Filter {
            session: None,
            no_deltas: true,
            kinds: vec![EventKind::PluginLoaded, EventKind::PluginUnloaded],
        };
        let mut events = self.core.subscribe(filter, None);
        let peer = context.peer;
        tokio::spawn(async move {
            while events.recv().await.is_some() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::session_key;

    #[test]
    fn a_clients_session_key_is_new_and_a_valid_key_whatever_it_calls_itself() {
        let key = session_key("claude-code");
        assert!(
            key.starts_with("mcp:claude-code:") && key.len() == 16 + 32,
            "{key}"
        );
        assert_ne!(session_key("x"), session_key("x"));
        let hostile = session_key(&format!("../a b/\u{202e}{}", "y".repeat(200)));
        let name = hostile.split(':').nth(1).unwrap();
        assert_eq!(name, format!(".._a_b__{}", "y".repeat(24)));
        assert!(session_key("").starts_with("mcp:client:"));
        assert!(session_key(":::").starts_with("mcp:___:"));
    }
}
