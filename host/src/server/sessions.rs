//! The session routes: messages, steering, interrupts, policy, and what a
//! session holds.
//!
//! - `POST /v1/sessions/{key}/messages` `{"content": "..."}` answers
//!   `{"turn_id", "disposition": "started"|"steered"|"queued"}` (and
//!   `position` when queued). With `?wait=true` it answers when the turn
//!   named by `turn_id` ends, adding `status`, `reason` and `answer`. The
//!   body may name the `agent` the message is for (a session keeps the
//!   first it is given). A `content` that starts with `/` is a chat
//!   command when the session's agent takes commands (see
//!   [`crate::commands`]): it answers `{"command", "reply", "ok"}` (and
//!   `new_session` for `/new`) and starts no turn; `//` sends a literal
//!   `/`.
//! - `POST /v1/sessions/{key}/steer`: the same, but the message steers the
//!   running turn whatever the session's policy.
//! - `POST /v1/sessions/{key}/interrupt` `{"mode": "graceful"|"hard"}`,
//!   optionally with the `turn_id` it is meant for: the running turn of the
//!   session or one of its running SubTurns (interrupting a SubTurn leaves
//!   its parent running).
//! - `POST /v1/sessions/{key}/policy` `{"policy": "steer"|"follow_up"}`.
//! - `GET /v1/sessions/{key}`: the history, the recorded turns as a tree,
//!   and the live tree of the running turn; `GET /v1/sessions`: every
//!   recorded session.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Api, ApiError};
use crate::agent::TurnOutcome;
use crate::commands::{Commands, Handled};
use crate::core::TurnWatch;
use crate::protocol::{Accepted, InterruptMode, Op, Policy, Target, TurnStatus};
use crate::scheduler::LiveTurn;
use crate::store::forest;

/// Longest session key accepted.
pub const MAX_KEY_LEN: usize = 128;

/// A session key from the path: 1 to 128 of `A-Z a-z 0-9 - _ . : @`.
pub struct SessionKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for SessionKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(key) = Path::<String>::from_request_parts(parts, state).await?;
        check_key(&key)?;
        Ok(SessionKey(key))
    }
}

pub fn check_key(key: &str) -> Result<(), ApiError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.:@".contains(c);
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.chars().all(allowed) {
        return Err(ApiError::bad_request(format!(
            "session key {key:?}: expected 1 to {MAX_KEY_LEN} characters of A-Z a-z 0-9 - _ . : @"
        )));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    pub content: String,
    /// The named agent the message is for (`/messages` only): a session
    /// with none chosen runs it from now on; one that runs another refuses
    /// the message.
    #[serde(default)]
    pub agent: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    #[serde(default)]
    pub wait: bool,
}

/// The answer to a message.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct MessageAnswer {
    pub turn_id: String,
    /// `started`, `steered` or `queued`.
    pub disposition: String,
    /// Where a queued message waits (1 is next).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// With `wait=true`: how the turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TurnStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// A message or a steer request, as the two routes take it.
pub struct MessageRequest {
    session: String,
    content: String,
    agent: Option<String>,
    wait: bool,
}

impl<S: Send + Sync> FromRequest<S> for MessageRequest {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let SessionKey(session) = SessionKey::from_request_parts(&mut parts, state).await?;
        let Query(query) = Query::<WaitQuery>::from_request_parts(&mut parts, state).await?;
        let request = Request::from_parts(parts, body);
        let Json(body) = Json::<MessageBody>::from_request(request, state).await?;
        if body.content.trim().is_empty() {
            return Err(ApiError::bad_request("`content` is empty"));
        }
        Ok(MessageRequest {
            session,
            content: body.content,
            agent: body.agent.filter(|a| !a.trim().is_empty()),
            wait: query.wait,
        })
    }
}

/// The answer to a message that was a chat command.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct CommandAnswer {
    pub command: String,
    pub reply: String,
    /// False when it did not do what it was asked (`reply` says why).
    pub ok: bool,
    /// `/new`: the key of the fresh session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_session: Option<String>,
}

pub async fn message(State(api): State<Api>, m: MessageRequest) -> Result<Response, ApiError> {
    let new_key = || format!("s-{}", uuid::Uuid::now_v7().simple());
    let content = match Commands::new(api.core())
        .handle(&m.session, &m.content, new_key)
        .await
    {
        Handled::Message(content) => content,
        Handled::Command(outcome) => {
            let answer = CommandAnswer {
                command: outcome.command,
                reply: outcome.reply,
                ok: !outcome.failed,
                new_session: outcome.new_session,
            };
            return Ok(Json(answer).into_response());
        }
    };
    let op = Op::UserMessage {
        session: m.session.clone(),
        content,
        agent: m.agent,
    };
    Ok(submit(&api, op, m.wait).await?.into_response())
}

pub async fn steer(
    State(api): State<Api>,
    m: MessageRequest,
) -> Result<Json<MessageAnswer>, ApiError> {
    if m.agent.is_some() {
        return Err(ApiError::bad_request(
            "`agent` is for `/messages`: steering goes to the turn that runs, whatever its agent",
        ));
    }
    let op = Op::Steer {
        session: m.session.clone(),
        content: m.content,
    };
    submit(&api, op, m.wait).await
}

/// Submits a message; with `wait`, answers when its turn has ended.
async fn submit(api: &Api, op: Op, wait: bool) -> Result<Json<MessageAnswer>, ApiError> {
    let (accepted, watch) = match wait {
        true => api.core().submit_watched(op).await?,
        false => (api.core().submit(op).await?, None),
    };
    let mut answer = match accepted {
        Accepted::Started { turn_id } => answer(turn_id, "started", None),
        Accepted::Steered { turn_id } => answer(turn_id, "steered", None),
        Accepted::Queued { turn_id, position } => answer(turn_id, "queued", Some(position)),
        other => unreachable!("a message is not answered with {other:?}"),
    };
    if let Some(mut watch) = watch {
        let ended = turn_end(api, &mut watch).await?;
        answer.status = Some(ended.status);
        answer.reason = Some(ended.reason);
        answer.answer = ended.answer;
    }
    Ok(Json(answer))
}

fn answer(turn_id: String, disposition: &str, position: Option<usize>) -> MessageAnswer {
    MessageAnswer {
        turn_id,
        disposition: disposition.to_string(),
        position,
        status: None,
        reason: None,
        answer: None,
    }
}

/// Waits for the end of the watched turn (every turn id handed out gets
/// one, even a queued turn dropped before it ran), or for the host to stop.
pub(super) async fn turn_end(api: &Api, watch: &mut TurnWatch) -> Result<TurnOutcome, ApiError> {
    let ended = tokio::select! {
        // The turn's end, if published before the host stopped, wins.
        biased;
        ended = watch.ended() => ended,
        _ = api.inner.stopped.cancelled() => None,
    };
    ended.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the host stopped before the turn ended",
        )
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterruptBody {
    pub mode: InterruptMode,
    /// The turn the interrupt is meant for; refused if another runs.
    #[serde(default)]
    pub turn_id: Option<String>,
}

pub async fn interrupt(
    State(api): State<Api>,
    SessionKey(session): SessionKey,
    body: Result<Json<InterruptBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body?;
    let target = match body.turn_id {
        Some(id) => {
            // The session's running turn, or any SubTurn of its tree.
            let running = api
                .core()
                .live(&session)
                .and_then(|live| live.active)
                .is_some_and(|active| in_tree(&active, &id));
            if !running {
                return Err(ApiError::new(
                    axum::http::StatusCode::CONFLICT,
                    "no_active_turn",
                    format!("turn '{id}' is not running on session '{session}'"),
                ));
            }
            Target::Turn(id)
        }
        None => Target::Session(session),
    };
    let op = Op::Interrupt {
        target,
        mode: body.mode,
    };
    match api.core().submit(op).await? {
        Accepted::Interrupted { turn_id, discarded } => Ok(Json(json!({
            "turn_id": turn_id,
            "mode": body.mode,
            "discarded": discarded,
        }))),
        other => unreachable!("an interrupt is not answered with {other:?}"),
    }
}

/// Whether `id` is `turn` or one of its running descendants.
fn in_tree(turn: &LiveTurn, id: &str) -> bool {
    turn.turn_id == id || turn.children.iter().any(|child| in_tree(child, id))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBody {
    pub policy: Policy,
}

pub async fn policy(
    State(api): State<Api>,
    SessionKey(session): SessionKey,
    body: Result<Json<PolicyBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body?;
    let policy = body.policy;
    api.core().submit(Op::SetPolicy { session, policy }).await?;
    Ok(Json(json!({ "policy": policy })))
}

/// `POST /v1/sessions/{key}/compact`: the session's older history
/// summarized now ([`Op::Compact`]); answers what was summarized and kept.
pub async fn compact(
    State(api): State<Api>,
    SessionKey(session): SessionKey,
) -> Result<Json<Value>, ApiError> {
    match api.core().submit(Op::Compact { session }).await? {
        Accepted::Compacted {
            summarized,
            kept,
            tokens_before,
            tokens_after,
        } => Ok(Json(json!({
            "summarized": summarized,
            "kept": kept,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
        }))),
        other => unreachable!("a compaction is not answered with {other:?}"),
    }
}

/// `GET /v1/sessions/{key}`.
pub async fn show(
    State(api): State<Api>,
    SessionKey(key): SessionKey,
) -> Result<Json<Value>, ApiError> {
    let core = api.core();
    let history = core.history(&key).await.map_err(ApiError::internal)?;
    let turns = core.turns(&key).await.map_err(ApiError::internal)?;
    let live = core.live(&key);
    if history.is_empty() && turns.is_empty() && live.is_none() {
        return Err(ApiError::not_found_msg(format!(
            "no session '{key}': it has no history, no recorded turn and nothing running"
        )));
    }
    let live = live.unwrap_or_default();
    let queued: Vec<Value> = live
        .queued
        .iter()
        .map(|(turn_id, content)| json!({ "turn_id": turn_id, "content": content }))
        .collect();
    Ok(Json(json!({
        "key": key,
        "busy": live.busy,
        "policy": live.policy,
        "agent": core.session_agent(&key),
        "model": live.settings.model,
        "active": live.active,
        "queued": queued,
        "history": history,
        "turns": forest(&turns),
    })))
}

/// `GET /v1/sessions`: every recorded session, most recent first.
pub async fn list(State(api): State<Api>) -> Result<Json<Value>, ApiError> {
    let sessions = api.core().sessions().await.map_err(ApiError::internal)?;
    Ok(Json(json!({ "sessions": sessions })))
}
