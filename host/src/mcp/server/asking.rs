//! Approvals of served calls: a call that waits for approval is put to the
//! MCP client's user as an elicitation, where the client supports it.
//!
//! - On 2025-11-25 the server sends `elicitation/create` while the call
//!   runs ([`Ask::Elicit`]).
//! - On 2026-07-28 a server may not send requests of its own: the
//!   `tools/call` answers `input_required` with the question, the call
//!   waits parked in [`Parked`], and the client's next `tools/call` brings
//!   the answer and the `requestState` that names it ([`Ask::Rounds`]).
//! - A client without elicitation is not asked: `[mcp.server] approve`
//!   decides, and by default the call is denied, saying why.
//!
//! Accepting allows the call (with `scope = "session"`, every call of that
//! tool in the conversation); declining or cancelling denies it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};

use super::running::Running;
use crate::config::mcp::McpApprove;
use crate::core::Core;
use crate::protocol::{ApprovalDecision, ApprovalRequested, ApprovalScope, Event, Op};

/// How a waiting call is decided for this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    Elicit,
    Rounds,
    /// Not asked: decided so, with this note.
    Decide(ApprovalDecision, &'static str),
}

pub(super) fn how(context: &RequestContext<RoleServer>, approve: McpApprove) -> Ask {
    match approve {
        McpApprove::Allow => Ask::Decide(
            ApprovalDecision::Allow,
            "allowed by [mcp.server] approve = \"allow\"",
        ),
        McpApprove::Deny => Ask::Decide(
            ApprovalDecision::Deny,
            "denied by [mcp.server] approve = \"deny\"",
        ),
        McpApprove::Ask => {
            let elicits = (context.client_capabilities()).is_some_and(|c| {
                c.elicitation
                    .is_some_and(|e| e.form.is_some() || e.url.is_none())
            });
            if !elicits {
                Ask::Decide(
                    ApprovalDecision::Deny,
                    "the MCP client cannot be asked (it offers no elicitation); \
                     [mcp.server] approve = \"allow\" or \"deny\" decides without asking",
                )
            } else if (context.protocol_version())
                .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
            {
                Ask::Rounds
            } else {
                Ask::Elicit
            }
        }
    }
}

/// The call waiting, as the approvals API names it.
#[derive(Debug, Clone)]
pub(super) struct Question {
    pub session: String,
    pub turn_id: Option<String>,
    pub call_id: String,
}

impl Question {
    /// The question of `event`, an `approval_requested`.
    pub fn of(event: &Event) -> Option<(Question, &ApprovalRequested)> {
        let crate::protocol::EventBody::ApprovalRequested(request) = &event.body else {
            return None;
        };
        let question = Question {
            session: event.session.clone()?,
            turn_id: event.turn_id.clone(),
            call_id: request.call_id.clone(),
        };
        Some((question, request))
    }

    /// Decides the call; a decision that comes too late (the wait ended)
    /// is dropped.
    pub async fn decide(
        &self,
        core: &Core,
        decision: ApprovalDecision,
        scope: ApprovalScope,
        note: String,
    ) {
        let op = Op::Approve {
            session: self.session.clone(),
            call_id: self.call_id.clone(),
            turn_id: self.turn_id.clone(),
            decision,
            scope,
            note: Some(note),
        };
        if let Err(refused) = core.submit(op).await {
            tracing::debug!(call = %self.call_id, "an MCP client's approval came too late: {refused}");
        }
    }

    /// Decides the call by the client's `answer`.
    pub async fn answer(&self, core: &Core, answer: &ElicitResult) {
        let (decision, scope, note) = decision(answer);
        self.decide(core, decision, scope, note.to_string()).await;
    }
}

/// What the client's user is asked about `request`.
pub(super) fn elicitation(request: &ApprovalRequested) -> ElicitRequestParams {
    let arguments = serde_json::from_str::<serde_json::Value>(&request.arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| request.arguments.clone());
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "scope": {
                "type": "string",
                "title": "Allow for",
                "description": "once: this call only; session: every call of this tool in this conversation",
                "enum": ["once", "session"],
                "default": "once"
            }
        }
    });
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Allow the tool call `{}`? It asks because of: {}.\n{arguments}\nAccept to allow it, decline to deny it.",
            request.tool, request.asked_by
        ),
        requested_schema: serde_json::from_value::<ElicitationSchema>(schema)
            .expect("the approval question's schema is a valid elicitation schema"),
    }
}

/// The decision an answer gives.
pub(super) fn decision(answer: &ElicitResult) -> (ApprovalDecision, ApprovalScope, &'static str) {
    match answer.action {
        ElicitationAction::Accept => {
            let scope = answer
                .content
                .as_ref()
                .and_then(|c| c.get("scope"))
                .and_then(|s| s.as_str());
            match scope {
                Some("session") => (
                    ApprovalDecision::Allow,
                    ApprovalScope::Session,
                    "allowed by the MCP client's user for the conversation",
                ),
                _ => (
                    ApprovalDecision::Allow,
                    ApprovalScope::Once,
                    "allowed by the MCP client's user",
                ),
            }
        }
        ElicitationAction::Decline => (
            ApprovalDecision::Deny,
            ApprovalScope::Once,
            "declined by the MCP client's user",
        ),
        ElicitationAction::Cancel => (
            ApprovalDecision::Deny,
            ApprovalScope::Once,
            "cancelled by the MCP client's user",
        ),
        _ => (
            ApprovalDecision::Deny,
            ApprovalScope::Once,
            "the MCP client answered neither accept nor decline",
        ),
    }
}

/// How long a call waits parked for the client to come back.
const PARK_FOR: Duration = Duration::from_secs(15 * 60);
/// Calls parked at most at once.
const PARK_MAX: usize = 1024;

/// Calls that wait for a 2026-07-28 client's answers, by the
/// `requestState` handed to it (a random UUID: it names a call, and only
/// the client it was given to knows it).
#[derive(Default)]
pub struct Parked(Mutex<HashMap<String, Parking>>);

pub(super) struct Parking {
    pub running: Box<Running>,
    pub asked: Vec<Question>,
    until: Instant,
}

impl Parked {
    /// Parks `running` until the answers to `asked` come; gives it back
    /// when too many calls wait already.
    pub(super) fn park(
        &self,
        running: Box<Running>,
        asked: Vec<Question>,
    ) -> Result<String, Box<Running>> {
        let mut parked = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // A call whose client never came back is dropped (stopped).
        parked.retain(|_, p| p.until > now);
        if parked.len() >= PARK_MAX {
            return Err(running);
        }
        let state = uuid::Uuid::new_v4().simple().to_string();
        let parking = Parking {
            running,
            asked,
            until: now + PARK_FOR,
        };
        parked.insert(state.clone(), parking);
        Ok(state)
    }

    pub(super) fn take(&self, state: &str) -> Option<Parking> {
        let mut parked = self.0.lock().unwrap_or_else(|e| e.into_inner());
        parked.remove(state).filter(|p| p.until > Instant::now())
    }
}
