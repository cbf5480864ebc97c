//! The approval routes: the tool calls of a session that wait for a
//! person, and the decisions.
//!
//! - `GET /v1/sessions/{key}/approvals`: `{"approvals": [...]}`, each with
//!   `call_id`, `turn_id` (a SubTurn's for its calls), `tool`, the exact
//!   `arguments`, `asked_by` and `expires_at`.
//! - `POST /v1/sessions/{key}/approvals/{call_id}` `{"decision":
//!   "allow"|"deny", "scope": "once"|"session"|"always", "note": "..."}`:
//!   decides the call; `409 not_waiting` for a call that does not wait
//!   (decided already, timed out, stopped, or another session's).
//!
//! The events (`approval_requested`, `approval_decided`) are on the
//! session's event stream.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::sessions::{SessionKey, check_key};
use super::{Api, ApiError};
use crate::protocol::{Accepted, ApprovalDecision, ApprovalScope, Op};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    pub decision: ApprovalDecision,
    /// Needed only when two turns of the session wait with this call id.
    #[serde(default)]
    pub turn_id: Option<String>,
    #[serde(default)]
    pub scope: ApprovalScope,
    #[serde(default)]
    pub note: Option<String>,
}

/// `GET /v1/sessions/{key}/approvals`.
pub async fn list(State(api): State<Api>, SessionKey(session): SessionKey) -> Json<Value> {
    Json(json!({ "approvals": api.core().pending_approvals(&session) }))
}

/// `POST /v1/sessions/{key}/approvals/{call_id}`.
pub async fn decide(
    State(api): State<Api>,
    Path((session, call_id)): Path<(String, String)>,
    body: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    check_key(&session)?;
    let Json(body) = body?;
    let op = Op::Approve {
        session,
        call_id,
        turn_id: body.turn_id,
        decision: body.decision,
        scope: body.scope,
        note: body.note.filter(|n| !n.trim().is_empty()),
    };
    match api.core().submit(op).await? {
        Accepted::Decided { call_id } => Ok(Json(json!({
            "call_id": call_id,
            "decision": body.decision,
            "scope": body.scope,
        }))),
        other => unreachable!("an approval is not answered with {other:?}"),
    }
}
