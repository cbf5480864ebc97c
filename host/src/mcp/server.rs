//! wasmclaw as an MCP server: the plugins' tools and the named agents.
//!
//! One [`ToolServer`] serves one MCP client (over stdio, `wasmclaw mcp`;
//! over streamable HTTP, one per HTTP MCP session on `/mcp`). It holds the
//! [`Core`] and nothing else of the host:
//!
//! - `tools/list` is what the serving agent offers now
//!   ([`Core::agent_tools`]): each tool's name, description and input
//!   schema as the model would see them; then, for each agent of
//!   `[mcp.server] agents`, a tool `agent__NAME` that hands that agent a
//!   task;
//! - a plugin tool's `tools/call` runs through [`Core::call_tool`], the
//!   same path a model's call takes (hooks, approvals, events, a fresh
//!   sandboxed instance with the plugin's grants and limits). Every failure
//!   (an unknown tool, arguments that do not fit the schema, a trap) is an
//!   `isError` result whose text is the error as the model reads it, so the
//!   client's user sees why;
//! - an agent's `tools/call` runs a whole turn of that agent, in a new
//!   session, and answers with the turn's answer;
//! - a call that waits for approval is put to the client's user
//!   ([`asking`]);
//! - a call that runs long sends `notifications/progress` every
//!   `[mcp.server] progress_ms` to a client that gave a progress token;
//! - a client's `notifications/cancelled` drops the call, which stops the
//!   plugin instance, or interrupts the agent's turn;
//! - a plugin loaded or unloaded while the client is connected is told to
//!   it as `notifications/tools/list_changed`: on 2025-11-25 on its session,
//!   on 2026-07-28 on a `subscriptions/listen` stream it opened.
//!
//! Each client gets its own session key, `mcp:<client name>:<id>`
//! ([`session_key`]), so its calls and their events are kept apart from
//! every other client's.

mod asking;
mod running;

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitResult, Implementation, InputRequest, InputRequiredResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use tokio_util::task::AbortOnDropHandle;

use self::asking::{Ask, Question};
use self::running::{AGENT_TOOL_PREFIX, Running};
use crate::agent::lone_call::LoneResult;
use crate::bus::Filter;
use crate::config::mcp::McpServeSettings;
use crate::core::{Core, Events};
use crate::protocol::{ApprovalDecision, ApprovalRequested, ApprovalScope, EventKind};

pub use self::asking::Parked;

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
    settings: Arc<McpServeSettings>,
    /// Calls waiting for a 2026-07-28 client's answers: shared by every
    /// `ToolServer` of a transport, since each request of a stateless
    /// client may reach another one.
    parked: Arc<Parked>,
    session: Arc<std::sync::OnceLock<String>>,
}

impl ToolServer {
    pub fn new(
        core: Core,
        agent: Option<String>,
        settings: Arc<McpServeSettings>,
        parked: Arc<Parked>,
    ) -> ToolServer {
        ToolServer {
            core,
            agent,
            settings,
            parked,
            session: Arc::default(),
        }
    }

    fn client_name(context: &RequestContext<RoleServer>) -> String {
        context
            .client_info()
            .map(|info| info.name.clone())
            .unwrap_or_default()
    }

    /// The session key of this client, named once it has introduced itself.
    fn session(&self, context: &RequestContext<RoleServer>) -> String {
        self.session
            .get_or_init(|| session_key(&Self::client_name(context)))
            .clone()
    }

    /// A plugin loaded or unloaded from now on: the served tools changed.
    fn plugin_changes(&self) -> Events {
        let filter = Filter {
            session: None,
            no_deltas: true,
            kinds: vec![EventKind::PluginLoaded, EventKind::PluginUnloaded],
        };
        self.core.subscribe(filter, None)
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
        let mut tools: Vec<Tool> = (defs.into_iter())
            .map(|def| {
                let schema = match def.parameters {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(def.name, def.description, Arc::new(schema))
            })
            .collect();
        for agent in &self.settings.agents {
            let name = format!("{AGENT_TOOL_PREFIX}{agent}");
            if tools.iter().any(|t| t.name == name) {
                tracing::warn!(tool = %name, "a plugin's tool has the name of a served agent's; the agent is not served");
                continue;
            }
            tools.push(Tool::new(
                name,
                agent_description(agent),
                Arc::new(agent_schema()),
            ));
        }
        Ok(tools)
    }

    /// Follows `running` to its end, putting each approval it waits for to
    /// the client; on 2026-07-28, parks it and answers `input_required`.
    async fn follow(
        &self,
        mut running: Running,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let ask = asking::how(context, self.settings.approve);
        let progress = context.meta.get_progress_token();
        let every = self.settings.progress;
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        // Questions put to the client, each answered in its own task.
        let mut elicits = Vec::new();
        loop {
            tokio::select! {
                result = &mut running.result => {
                    let result = result.unwrap_or_else(|e| LoneResult {
                        content: format!("error (internal): the call failed inside the host: {e}"),
                        is_error: true,
                    });
                    return Ok(complete(result));
                }
                () = context.ct.cancelled() => {
                    return Err(McpError::internal_error("the call was cancelled", None));
                }
                Some(event) = running.approvals.recv() => {
                    let Some((question, request)) = Question::of(&event) else { continue };
                    match ask {
                        Ask::Decide(decision, note) => {
                            question.decide(&self.core, decision, ApprovalScope::Once, note.into()).await;
                        }
                        Ask::Elicit => elicits.push(self.elicit(question, request, context)),
                        Ask::Rounds => {
                            let asked = vec![(question, asking::elicitation(request))];
                            match self.park(running, asked).await {
                                Ok(input_required) => return Ok(input_required),
                                Err(back) => running = back,
                            }
                        }
                    }
                }
                _ = ticks.tick(), if progress.is_some() => {
                    let token = progress.clone().expect("ticks only with a token");
                    let elapsed = running.started.elapsed().as_secs_f64();
                    let note = ProgressNotificationParam::new(token, elapsed)
                        .with_message(format!("{} running for {elapsed:.0} s", running.name));
                    // A client that is gone is told nothing more.
                    let _ = context.peer.notify_progress(note).await;
                }
            }
        }
    }

    /// Puts `question` to the client in an `elicitation/create` request, and
    /// decides the call by the answer: in a task, so the call is followed
    /// on meanwhile (it may end first, at the approval's timeout).
    fn elicit(
        &self,
        question: Question,
        request: &ApprovalRequested,
        context: &RequestContext<RoleServer>,
    ) -> AbortOnDropHandle<()> {
        let (core, peer) = (self.core.clone(), context.peer.clone());
        let params = asking::elicitation(request);
        AbortOnDropHandle::new(tokio::spawn(async move {
            match peer.create_elicitation(params).await {
                Ok(answer) => question.answer(&core, &answer).await,
                Err(e) => {
                    let note = format!("the MCP client did not answer: {e}");
                    let deny = ApprovalDecision::Deny;
                    question
                        .decide(&core, deny, ApprovalScope::Once, note)
                        .await;
                }
            }
        }))
    }

    /// Parks `running` with the questions `asked` (and any other already
    /// waiting) and answers `input_required`; gives `running` back, its
    /// questions denied, when too many calls are parked.
    async fn park(
        &self,
        mut running: Running,
        mut asked: Vec<(Question, ElicitRequestParams)>,
    ) -> Result<CallToolResponse, Running> {
        while let Some(event) = running.approvals.try_next().await {
            if let Some((question, request)) = Question::of(&event) {
                asked.push((question, asking::elicitation(request)));
            }
        }
        let requests = (asked.iter())
            .map(|(q, params)| {
                let request = InputRequest::Elicitation(ElicitRequest::new(params.clone()));
                (q.call_id.clone(), request)
            })
            .collect();
        let questions: Vec<Question> = asked.into_iter().map(|(q, _)| q).collect();
        match self.parked.park(Box::new(running), questions.clone()) {
            Ok(state) => {
                let result = InputRequiredResult::new(Some(requests), Some(state));
                Ok(CallToolResponse::InputRequired(result))
            }
            Err(back) => {
                for q in questions {
                    let note = "too many calls wait for an MCP client's answer".to_string();
                    (q.decide(
                        &self.core,
                        ApprovalDecision::Deny,
                        ApprovalScope::Once,
                        note,
                    ))
                    .await;
                }
                Err(*back)
            }
        }
    }

    /// A 2026-07-28 client's next round: its answers to the parked call's
    /// questions, then the call followed on.
    async fn resume(
        &self,
        state: &str,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let parking = (self.parked.take(state))
            .filter(|p| p.running.name == request.name)
            .ok_or_else(|| {
                McpError::invalid_params(
                    "unknown requestState: the call it named has ended, or was another tool's",
                    None,
                )
            })?;
        let responses = request.input_responses.clone().unwrap_or_default();
        for question in &parking.asked {
            let answer = (responses.get(&question.call_id))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
            match answer {
                Some(answer) => question.answer(&self.core, &answer).await,
                None => {
                    let note = "the MCP client gave no answer".to_string();
                    (question.decide(
                        &self.core,
                        ApprovalDecision::Deny,
                        ApprovalScope::Once,
                        note,
                    ))
                    .await;
                }
            }
        }
        self.follow(*parking.running, context).await
    }
}

fn agent_description(agent: &str) -> String {
    format!(
        "Hands a task to the wasmclaw agent '{agent}': it runs a whole turn of its own (its model, \
         its tools in sandboxed instances) and answers with its final reply. Each call is a new \
         conversation: give the whole task."
    )
}

fn agent_schema() -> serde_json::Map<String, serde_json::Value> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "description": "What the agent is to do, with everything it needs to know"
            }
        },
        "required": ["task"],
        "additionalProperties": false
    });
    match schema {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("the schema is an object"),
    }
}

fn complete(result: LoneResult) -> CallToolResponse {
    let content = vec![ContentBlock::text(result.content)];
    if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
    .into()
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
        if let Some(state) = &request.request_state {
            return self.resume(state, &request, &context).await;
        }
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        let served = (request.name.strip_prefix(AGENT_TOOL_PREFIX))
            .filter(|agent| self.settings.agents.iter().any(|a| a == agent));
        let running = match served {
            Some(agent) => {
                let Some(task) = arguments.get("task").and_then(|t| t.as_str()) else {
                    return Ok(complete(LoneResult {
                        content:
                            "error (invalid-input): give `task`, a string: what the agent is to do"
                                .into(),
                        is_error: true,
                    }));
                };
                let session = session_key(&Self::client_name(&context));
                running::agent_turn(&self.core, &session, agent, task.to_string())
            }
            None => running::tool(
                &self.core,
                &self.session(&context),
                self.agent_name(),
                &request.name,
                arguments.to_string(),
            ),
        };
        self.follow(running, &context).await
    }

    /// 2025-11-25: plugin changes go to the client as notifications on its
    /// session, from its `initialized` on.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut events = self.plugin_changes();
        let peer = context.peer;
        tokio::spawn(async move {
            while events.recv().await.is_some() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    /// 2026-07-28 has no session to notify: a client that wants to hear of
    /// plugin changes opens a `subscriptions/listen` stream for them.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut events = self.plugin_changes();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                event = events.recv() => {
                    let sent = match event {
                        Some(_) => context.sink().notify_tool_list_changed().await.is_ok(),
                        None => false,
                    };
                    if !sent {
                        return Ok(());
                    }
                }
            }
        }
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
