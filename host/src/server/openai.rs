//! `POST /v1/chat/completions`, OpenAI-compatible: the "model" is the agent
//! with its tools, so any OpenAI client can talk to it. `GET /v1/models`
//! lists the named agents (and `wasmclaw`, the default agent); a request's
//! `model` names the agent that answers it.
//!
//! Each request is a turn of a new session `openai-<id>` (named in the
//! `x-wasmclaw-session` response header, so its events and turns can be read
//! like any other session's). The request's messages before the last become
//! that session's history ([`crate::protocol::Op::ImportHistory`], recorded
//! as an `imported` turn); the last must be
//! the user's, and it starts the turn. The agent's tools are its plugins:
//! client-side `tools` are refused, as are tool messages.
//!
//! Not streamed, the answer is the turn's final answer. Streamed
//! (`"stream": true`), the content is the text the model wrote in every
//! iteration: what the model said before calling tools, then the final
//! answer; with `stream_options.include_usage`, a last chunk carries the
//! usage. Each model reply's text is held back until the reply is known
//! good and then sent as it came, so the text of an attempt that failed and
//! was tried again (`llm_retry` with `discard_partial`) never reaches the
//! client, which could not take it back. A completed turn's `finish_reason`
//! is `stop`, also when it reached its iteration limit (its answer is
//! complete). A turn that fails ends the stream with an `error`
//! chunk (or, not streamed, a 502 with `x-should-retry: false`, so OpenAI's
//! SDKs do not run it again). A client that goes away stops its turn.

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::sessions::turn_end;
use super::{Api, ApiError};
use crate::bus::Filter;
use crate::core::{Events, StopOnDrop};
use crate::llm::{Message, Usage};
use crate::protocol::{Accepted, EventBody, LlmDelta, LlmRetry, Op, TurnEnd, TurnStatus};

/// The model name of the default agent, and the one answered when the
/// request names none.
pub const MODEL: &str = "wasmclaw";

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<InMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub n: Option<u32>,
    /// Sampling options and the like: the agent's configuration decides
    /// them, so they are accepted and not used.
    #[serde(flatten)]
    pub _ignored: Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize)]
pub struct InMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
}

/// `GET /v1/models`: `wasmclaw` (the default agent), then every named agent.
pub async fn models(State(api): State<Api>) -> Json<Value> {
    let profiles = api.core().profiles();
    let data: Vec<Value> = (std::iter::once(MODEL).chain(profiles.names()))
        .map(|id| json!({ "id": id, "object": "model", "created": 0, "owned_by": "wasmclaw" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

/// The agent a request's `model` names: None for the default one.
fn agent_named(api: &Api, model: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(model) = model.filter(|m| *m != MODEL) else {
        return Ok(None);
    };
    let profiles = api.core().profiles();
    if profiles.get(model).is_some() {
        return Ok(Some(model.to_string()));
    }
    let known: Vec<&str> = std::iter::once(MODEL).chain(profiles.names()).collect();
    Err(ApiError::new(
        StatusCode::NOT_FOUND,
        "model_not_found",
        format!(
            "the model `{model}` does not exist: the models are this host's agents ({})",
            known.join(", ")
        ),
    ))
}

pub async fn completions(
    State(api): State<Api>,
    body: Result<Json<CompletionRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body?;
    let (history, input) = conversation(&request)?;
    let agent = agent_named(&api, request.model.as_deref())?;
    let core = api.core();
    // Refused before the history is imported, so nothing is left behind.
    core.refuse_if_closed()?;
    let model = request.model.clone().unwrap_or_else(|| MODEL.to_string());
    let session = format!("openai-{}", uuid::Uuid::now_v7().simple());
    if !history.is_empty() {
        let import = Op::ImportHistory {
            session: session.clone(),
            messages: history,
        };
        core.submit(import).await?;
    }
    // Streamed, every event of the turn is read (subscribed before the
    // submit, like the watch on its end).
    let filter = Filter {
        session: Some(session.clone()),
        ..Default::default()
    };
    let events = request.stream.then(|| core.subscribe(filter, None));
    let op = Op::UserMessage {
        session: session.clone(),
        content: input,
        agent,
    };
    let (Accepted::Started { turn_id }, Some(mut watch)) = core.submit_watched(op).await? else {
        unreachable!("a new session starts its turn at once");
    };
    let mut guard = StopOnDrop::new(core, &turn_id);
    let reply = Reply {
        id: format!("chatcmpl-{turn_id}"),
        model,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    let mut response = if request.stream {
        let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
        let (tx, mut rx) = mpsc::channel(64);
        let events = events.expect("subscribed for a stream");
        tokio::spawn(stream(events, guard, reply, include_usage, tx));
        let chunks = futures_util::stream::poll_fn(move |cx| {
            rx.poll_recv(cx).map(|c| c.map(Ok::<_, Infallible>))
        });
        Sse::new(chunks)
            .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
            .into_response()
    } else {
        let ended = turn_end(&api, &mut watch).await?;
        guard.disarm();
        if ended.status == TurnStatus::Completed {
            let answer = ended.answer.unwrap_or_default();
            Json(reply.completion(answer, ended.usage)).into_response()
        } else {
            // OpenAI's SDKs retry a 5xx (twice by default), which would run
            // the turn, tools and all, again: they obey this header.
            let mut response = failed(ended.status, &ended.reason).into_response();
            response.headers_mut().insert(
                HeaderName::from_static("x-should-retry"),
                HeaderValue::from_static("false"),
            );
            response
        }
    };
    response.headers_mut().insert(
        HeaderName::from_static("x-wasmclaw-session"),
        HeaderValue::from_str(&session).expect("a session key is a valid header value"),
    );
    Ok(response)
}

fn failed(status: TurnStatus, reason: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "turn_failed",
        format!("the agent's turn ended {}: {reason}", status.as_str()),
    )
}

/// The request's messages as a history and the user's last message.
fn conversation(request: &CompletionRequest) -> Result<(Vec<Message>, String), ApiError> {
    if request.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::bad_request(
            "`tools`: client-side tools are not supported; the agent uses its own plugins",
        ));
    }
    if request.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("`n`: only 1 choice is supported"));
    }
    let mut messages = Vec::with_capacity(request.messages.len());
    for (i, m) in request.messages.iter().enumerate() {
        let content = text(&m.content).map_err(|expected| {
            ApiError::bad_request(format!("messages[{i}].content: {expected}"))
        })?;
        let message = match m.role.as_str() {
            "system" | "developer" => Message::system(content),
            "user" => Message::user(content),
            "assistant" if m.tool_calls.as_ref().is_none_or(Vec::is_empty) => Message::Assistant {
                content,
                tool_calls: Vec::new(),
            },
            "assistant" => {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}].tool_calls: client-side tool calls are not supported; the agent runs its own tools"
                )));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}].role: expected system, developer, user or assistant, got {other:?}"
                )));
            }
        };
        messages.push(message);
    }
    match messages.pop() {
        Some(Message::User { content }) if !content.trim().is_empty() => Ok((messages, content)),
        _ => Err(ApiError::bad_request(
            "`messages`: the last message must be the user's, with text",
        )),
    }
}

/// A message's content: a string, null, or text parts.
fn text(content: &Value) -> Result<String, &'static str> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(s))) => text.push_str(s),
                    _ => {
                        return Err(
                            "expected a string or text parts ({\"type\": \"text\", \"text\": ...}); other parts are not supported",
                        );
                    }
                }
            }
            Ok(text)
        }
        _ => Err("expected a string or an array of text parts"),
    }
}

/// What every chunk and completion repeats.
struct Reply {
    id: String,
    model: String,
    created: u64,
}

impl Reply {
    fn completion(&self, answer: String, usage: Usage) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": answer },
                // A complete answer, whatever ended the turn (its last
                // call or its iteration limit).
                "finish_reason": "stop",
            }],
            "usage": usage_json(usage),
        })
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> SseEvent {
        let choice = json!({ "index": 0, "delta": delta, "finish_reason": finish_reason });
        self.chunk_of(json!({ "choices": [choice] }))
    }

    /// The last chunk of a stream that asked for the usage: no choices.
    fn usage_chunk(&self, usage: Usage) -> SseEvent {
        self.chunk_of(json!({ "choices": [], "usage": usage_json(usage) }))
    }

    /// A `chat.completion.chunk` with `fields` (an object) added.
    fn chunk_of(&self, fields: Value) -> SseEvent {
        let mut body = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        });
        if let (Some(body), Value::Object(fields)) = (body.as_object_mut(), fields) {
            body.extend(fields);
        }
        self.event(body)
    }

    fn event(&self, body: Value) -> SseEvent {
        SseEvent::default().data(body.to_string())
    }
}

/// The text of the model reply being streamed, held back until the reply
/// is known good: an OpenAI client appends every chunk and has no way to
/// take text back, so the text of an attempt that fails (and is tried
/// again) must never reach it. A reply is good once the turn goes on from
/// it (its tools start, the next model call begins) or ends with it.
#[derive(Default)]
struct HeldText {
    /// The reply's deltas, as they came.
    pieces: Vec<String>,
    /// Text of an earlier reply was sent.
    sent: bool,
}

impl HeldText {
    fn hold(&mut self, delta: &str) {
        self.pieces.push(delta.to_string());
    }

    fn held(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// The attempt failed: its text is void.
    fn discard(&mut self) {
        self.pieces.clear();
    }

    /// The reply's pieces, to send; text after a tool round is set apart
    /// from the text before by a blank line.
    fn release(&mut self) -> impl Iterator<Item = String> + use<> {
        let mut pieces = std::mem::take(&mut self.pieces);
        if let Some(first) = pieces.first_mut()
            && std::mem::replace(&mut self.sent, true)
        {
            first.insert_str(0, "\n\n");
        }
        pieces.into_iter()
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

/// Feeds a streamed completion from the turn's events.
async fn stream(
    mut events: Events,
    mut guard: StopOnDrop,
    reply: Reply,
    include_usage: bool,
    tx: mpsc::Sender<SseEvent>,
) {
    let turn_id = guard.turn_id().expect("armed").to_string();
    let mut chunks = vec![reply.chunk(json!({ "role": "assistant", "content": "" }), None)];
    let mut text = HeldText::default();
    loop {
        for chunk in chunks.drain(..) {
            if tx.send(chunk).await.is_err() {
                // The client went away: the guard stops the turn.
                return;
            }
        }
        let received = tokio::select! {
            received = events.recv() => received,
            _ = tx.closed() => return,
        };
        let Some(event) = received else {
            return;
        };
        if event.turn_id.as_deref() != Some(turn_id.as_str()) {
            continue;
        }
        match &event.body {
            EventBody::LlmDelta(LlmDelta { text: delta, .. }) if !delta.is_empty() => {
                text.hold(delta)
            }
            EventBody::LlmRetry(LlmRetry {
                discard_partial: true,
                ..
            }) => text.discard(),
            // The reply's text is good: the turn goes on from it.
            EventBody::LlmRequest(_) | EventBody::ToolCallBegin(_) => {
                chunks.extend(
                    text.release()
                        .map(|t| reply.chunk(json!({ "content": t }), None)),
                );
            }
            EventBody::TurnEnd(TurnEnd {
                status,
                reason,
                answer,
                usage,
                ..
            }) => {
                guard.disarm();
                if *status != TurnStatus::Completed {
                    let error = failed(*status, reason);
                    let body = json!({ "error": { "type": error.kind, "message": error.message } });
                    chunks.push(reply.event(body));
                } else {
                    // A provider that does not stream gave no deltas.
                    if let Some(answer) = answer.as_ref().filter(|a| !text.held() && !a.is_empty())
                    {
                        text.hold(answer);
                    }
                    chunks.extend(
                        text.release()
                            .map(|t| reply.chunk(json!({ "content": t }), None)),
                    );
                    chunks.push(reply.chunk(json!({}), Some("stop")));
                    if include_usage {
                        chunks.push(reply.usage_chunk(*usage));
                    }
                }
                chunks.push(SseEvent::default().data("[DONE]"));
                for chunk in chunks.drain(..) {
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
                return;
            }
            _ => {}
        }
    }
}
