//! A fake LLM provider: a real HTTP server on 127.0.0.1 that answers with
//! scripted replies, in place of OpenAI or Anthropic.
//!
//! The wire format follows the request path: `POST /v1/chat/completions` is
//! OpenAI Chat Completions, `POST /v1/messages` is Anthropic Messages. Both
//! stream (server-sent events) when the request body has `"stream": true`.
//! Replies are consumed one per request, in order, whatever the format; every
//! request is recorded so tests can inspect what the client sent; one whose
//! body is not JSON gets a 400 and uses no reply.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

mod shapes;

/// One tool call of a scripted reply.
#[derive(Clone, Debug)]
pub struct ToolCallReply {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A gate a [`Reply::Gated`] waits at until the test opens it.
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    /// A closed gate.
    fn default() -> Self {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }
}

impl Gate {
    /// Lets every reply waiting at this gate, and every later one, through.
    pub fn open(&self) {
        self.0.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    async fn passed(&self) {
        let _ = self.0.acquire().await;
    }
}

/// A scripted reply to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A final answer.
    Text(String),
    /// Tool calls (optionally with text before them).
    ToolCalls {
        text: String,
        calls: Vec<ToolCallReply>,
    },
    /// An HTTP error with the wire format's error JSON body, and a
    /// `retry-after` header (seconds) when given.
    Status {
        code: u16,
        message: String,
        retry_after: Option<u32>,
    },
    /// Streamed: headers and the first part of a text reply, then the
    /// connection is cut. Not streamed: a 200 whose JSON body is truncated
    /// half-way, then the connection is cut.
    CutMidStream,
    /// Streamed: a `data:` line whose payload is not JSON, followed by more
    /// valid events. Not streamed: a 200 with body `{not json`.
    Malformed,
    /// Waits (before sending anything), then answers with the inner reply.
    Delay(Duration, Box<Reply>),
    /// Waits (before sending anything) until the test opens the gate, then
    /// answers with the inner reply: an order a test sets, not a race.
    Gated(Gate, Box<Reply>),
    /// One tool call whose arguments are sent as this text, JSON or not
    /// (Anthropic, not streamed: parsed, `{}` when they do not parse). When
    /// `cut`, the reply ends at the output token limit (`finish_reason:
    /// "length"`, `stop_reason: "max_tokens"`).
    RawToolCall {
        id: String,
        name: String,
        arguments: String,
        cut: bool,
    },
    /// As llama.cpp fails mid-stream: the start of a text reply, then an
    /// error event (OpenAI: an `error: {...}` line; Anthropic: `event:
    /// error` with `{"error": {...}}`, no top-level `type`), code 500. Not
    /// streamed: HTTP 500 with that body.
    LlamaCppError { message: String },
    /// Streamed: the inner reply (text or tool calls) with a `data:` line
    /// with nothing after it before each event. Not streamed: the inner
    /// reply.
    BlankData(Box<Reply>),
    /// Streamed: the reply starts, then an event that carries nothing
    /// (OpenAI: a chunk with an empty delta; Anthropic: `ping`) every
    /// `every`, for ever (also when a whole reply was asked for).
    KeepAlive { every: Duration },
    /// Streamed: headers and the first part of a text reply (as
    /// [`Reply::CutMidStream`]), then nothing more, with the connection
    /// held open. Not streamed: nothing at all, the connection held open.
    HangMidStream,
    /// Streamed: the first two thirds of this text reply (as
    /// [`Reply::CutMidStream`] sends its part), then a wait until the test
    /// opens the gate, then the rest. Not streamed: the gate, then the
    /// whole reply.
    PauseMidStream(Gate, String),
    /// OpenAI streamed: a stream of only `data: [DONE]`. Otherwise: an empty
    /// text reply.
    OnlyDone,
    /// An HTTP error with exactly this JSON body, whatever the format: a
    /// provider's own error shape (OpenAI's `context_length_exceeded`,
    /// Anthropic's "prompt is too long").
    ErrorBody { code: u16, body: Value },
    /// Streamed: the start of a text reply, then the wire format's error
    /// event with this error type (Anthropic: `event: error` with `{"type":
    /// "error", "error": {"type", "message"}}`, as its `overloaded_error`
    /// comes; OpenAI: a chunk `{"error": {"type", "message", "code":
    /// null}}`). Not streamed: HTTP `status` with that error body.
    StreamError {
        status: u16,
        error_type: String,
        message: String,
    },
}

impl Reply {
    pub fn text(s: impl Into<String>) -> Reply {
        Reply::Text(s.into())
    }

    /// One tool call, no text.
    pub fn tool(id: &str, name: &str, args: Value) -> Reply {
        Reply::ToolCalls {
            text: String::new(),
            calls: vec![ToolCallReply {
                id: id.into(),
                name: name.into(),
                arguments: args,
            }],
        }
    }
}

/// Makes the reply to a request from its body, once the scripted replies are
/// used up (for tests with many concurrent turns, where the order of
/// requests is not known).
#[derive(Clone)]
pub struct Responder(pub Arc<dyn Fn(&Value) -> Reply + Send + Sync>);

impl Responder {
    pub fn new(f: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Responder {
        Responder(Arc::new(f))
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder")
    }
}

/// (role, content) of each message of an OpenAI request body.
pub fn roles_and_texts(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Whether a request's messages end with a tool result (OpenAI or Anthropic
/// shape): the model is being asked to go on after a tool call.
pub fn after_tool_result(body: &Value) -> bool {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else {
        return false;
    };
    last["role"] == "tool"
        || last["content"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
}

/// A fake model that answers every request with `respond(last user text,
/// whether the request ends with a tool result)`, for tests with many turns
/// whose requests come in no known order.
pub async fn fake_model(
    respond: impl Fn(&str, bool) -> Reply + Send + Sync + 'static,
) -> FakeModel {
    let responder = Responder::new(move |body: &Value| {
        let last_user = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .next_back()
            .unwrap_or_default();
        respond(last_user, after_tool_result(body))
    });
    let options = Options {
        responder: Some(responder),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

#[derive(Clone, Debug)]
pub struct Options {
    /// OpenAI streaming: repeat the function name (and id) in every tool-call
    /// chunk, as some servers do.
    pub repeat_tool_name: bool,
    /// Usage reported per reply.
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Answers when no scripted reply is left (else: HTTP 500).
    pub responder: Option<Responder>,
    /// OpenAI streaming: tool-call chunks carry the call's `id` and no
    /// `index`, as some servers send them.
    pub omit_tool_index: bool,
    /// As llama.cpp: a request whose history has tool-call arguments that
    /// are not valid JSON gets HTTP 500 "Failed to parse tool call
    /// arguments as JSON" (and uses no reply).
    pub reject_invalid_arguments: bool,
    /// A context window: the server counts each request's tokens (see
    /// [`count_tokens`]), reports them as its usage, and answers a request
    /// over the window as that provider does (and uses no reply).
    pub window: Option<Window>,
    /// The pieces a streamed reply's text is sent in, a chunk each (as a
    /// model streams a token or a few a chunk); tool-call arguments are
    /// sent in three.
    pub text_pieces: usize,
}

/// A fake model's context window, and whose error answers a request over it.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub tokens: u64,
    pub answers_as: Served,
}

/// The server whose overflow error a [`Window`] answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    OpenAi,
    Anthropic,
    LlamaCpp,
    Vllm,
}

/// The tokens of a request as the fake model counts them: two tokens per
/// seven bytes of every text (messages, system prompt, tools), and four per
/// message. Denser than the host's quarter-of-the-bytes estimate, as real
/// tokenizers are on code and JSON.
pub fn count_tokens(request: &Value) -> u64 {
    fn text_bytes(value: &Value) -> u64 {
        match value {
            Value::String(s) => s.len() as u64,
            Value::Array(items) => items.iter().map(text_bytes).sum(),
            Value::Object(map) => map.values().map(text_bytes).sum(),
            _ => 0,
        }
    }
    let messages = request["messages"].as_array().map_or(0, |m| m.len() as u64);
    let bytes = text_bytes(&request["messages"])
        + text_bytes(&request["system"])
        + text_bytes(&request["tools"]);
    (bytes * 2).div_ceil(7) + 4 * messages
}

/// The body of `served`'s answer to a request of `tokens` over `window`.
fn overflow_body(served: Served, tokens: u64, window: u64) -> Value {
    match served {
        Served::OpenAi => json!({"error": {
            "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }}),
        Served::Anthropic => json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": format!("prompt is too long: {tokens} tokens > {window} maximum"),
        }}),
        Served::LlamaCpp => json!({"error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": window,
        }}),
        Served::Vllm => json!({
            "object": "error",
            "message": format!("This model's maximum context length is {window} tokens. However, you requested {tokens} tokens ({tokens} in the messages, 0 in the completion). Please reduce the length of the messages or completion."),
            "type": "BadRequestError",
            "param": null,
            "code": 400,
        }),
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            repeat_tool_name: false,
            input_tokens: 10,
            output_tokens: 5,
            responder: None,
            omit_tool_index: false,
            reject_invalid_arguments: false,
            window: None,
            text_pieces: 3,
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    /// The parsed body (a JSON string of the raw text when it is not JSON).
    pub body: Value,
    pub at: Instant,
}

impl Recorded {
    /// The value of header `name` (lower-case), if the request carried it.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Shared {
    options: Options,
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    next_id: AtomicU64,
    /// Requests answered with the overflow error of [`Options::window`].
    overflows: AtomicU64,
    /// The most tokens a request within the window had.
    largest: AtomicU64,
}

/// The server; it stops accepting connections when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> FakeModel {
        Self::start_with(Options::default(), replies).await
    }

    pub async fn start_with(
        options: Options,
        replies: impl IntoIterator<Item = Reply>,
    ) -> FakeModel {
        let shared = Arc::new(Shared {
            options,
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            overflows: AtomicU64::new(0),
            largest: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            // Requests that carry MiB-sized tool results, as real APIs take.
            .layer(DefaultBodyLimit::max(64 << 20))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeModel {
            addr,
            shared,
            server,
        }
    }

    /// Appends a reply to the queue.
    pub fn push(&self, reply: Reply) {
        self.shared.replies.lock().unwrap().push_back(reply);
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT` (the client posts `{base}/v1/messages`).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Replies not yet used.
    /// The last user message of each request, in order.
    pub fn user_messages(&self) -> Vec<String> {
        (self.requests().iter())
            .map(|r| {
                let messages = roles_and_texts(&r.body);
                let user = messages.iter().rev().find(|(role, _)| role == "user");
                user.map(|(_, text)| text.clone()).unwrap_or_default()
            })
            .collect()
    }

    /// Requests answered with the overflow error of [`Options::window`].
    pub fn overflows(&self) -> u64 {
        self.shared.overflows.load(Ordering::SeqCst)
    }

    /// The most tokens ([`count_tokens`]) of a request within the window.
    pub fn largest_request(&self) -> u64 {
        self.shared.largest.load(Ordering::SeqCst)
    }

    pub fn remaining(&self) -> usize {
        self.shared.replies.lock().unwrap().len()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[derive(Clone, Copy)]
enum Format {
    OpenAi,
    Anthropic,
}

/// What a reply needs from the request and the options.
struct Ctx {
    format: Format,
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
    text_pieces: usize,
    repeat_tool_name: bool,
    omit_tool_index: bool,
    input_tokens: u32,
    output_tokens: u32,
}

async fn openai(state: State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    handle(state, Format::OpenAi, headers, body).await
}

async fn anthropic(state: State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    handle(state, Format::Anthropic, headers, body).await
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    format: Format,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    shared.requests.lock().unwrap().push(Recorded {
        path: match format {
            Format::OpenAi => "/v1/chat/completions".into(),
            Format::Anthropic => "/v1/messages".into(),
        },
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: match &parsed {
            Ok(v) => v.clone(),
            Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
        },
        at: Instant::now(),
    });
    let request = match parsed {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                format,
                400,
                &format!("fake model: request body is not JSON: {e}"),
                None,
            );
        }
    };
    if shared.options.reject_invalid_arguments
        && let Some(response) = shapes::reject_invalid_arguments(format, &request)
    {
        return response;
    }
    let mut input_tokens = shared.options.input_tokens;
    if let Some(window) = shared.options.window {
        let tokens = count_tokens(&request);
        if tokens > window.tokens {
            shared.overflows.fetch_add(1, Ordering::SeqCst);
            let body = overflow_body(window.answers_as, tokens, window.tokens);
            return (StatusCode::BAD_REQUEST, Json(body)).into_response();
        }
        shared.largest.fetch_max(tokens, Ordering::SeqCst);
        input_tokens = tokens as u32;
    }
    let scripted = shared.replies.lock().unwrap().pop_front();
    let responder = shared.options.responder.as_ref();
    let Some(mut reply) = scripted.or_else(|| responder.map(|r| (r.0)(&request))) else {
        return error_response(format, 500, "fake model: no scripted reply left", None);
    };
    let reply = loop {
        reply = match reply {
            Reply::Delay(wait, inner) => {
                tokio::time::sleep(wait).await;
                *inner
            }
            Reply::Gated(gate, inner) => {
                gate.passed().await;
                *inner
            }
            other => break other,
        };
    };
    let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let ctx = Ctx {
        format,
        id: match format {
            Format::OpenAi => format!("chatcmpl-{n}"),
            Format::Anthropic => format!("msg_{n}"),
        },
        model: request["model"].as_str().unwrap_or("fake-model").to_owned(),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        include_usage: request["stream_options"]["include_usage"] == json!(true),
        text_pieces: shared.options.text_pieces,
        repeat_tool_name: shared.options.repeat_tool_name,
        omit_tool_index: shared.options.omit_tool_index,
        input_tokens,
        output_tokens: shared.options.output_tokens,
    };
    let stream = request["stream"] == json!(true);
    match reply {
        Reply::Text(text) => answer(&ctx, stream, &text, &[]),
        Reply::ToolCalls { text, calls } => answer(&ctx, stream, &text, &calls),
        Reply::Status {
            code,
            message,
            retry_after,
        } => error_response(format, code, &message, retry_after),
        Reply::CutMidStream => cut(&ctx, stream),
        Reply::Malformed => malformed(&ctx, stream),
        Reply::HangMidStream => hang(&ctx, stream),
        Reply::PauseMidStream(gate, text) => pause(&ctx, stream, gate, &text).await,
        Reply::OnlyDone => match (ctx.format, stream) {
            (Format::OpenAi, true) => sse_response(vec!["data: [DONE]\n\n".into()], false),
            _ => answer(&ctx, stream, "", &[]),
        },
        Reply::Delay(..) | Reply::Gated(..) => unreachable!("waits are unwrapped above"),
        Reply::RawToolCall {
            id,
            name,
            arguments,
            cut,
        } => shapes::raw_tool_call(&ctx, stream, &id, &name, &arguments, cut),
        Reply::LlamaCppError { message } => shapes::llama_cpp_error(&ctx, stream, &message),
        Reply::BlankData(inner) => shapes::blank_data(&ctx, stream, *inner),
        Reply::KeepAlive { every } => shapes::keep_alive(&ctx, every),
        Reply::ErrorBody { code, body } => {
            let status = StatusCode::from_u16(code).expect("a valid HTTP status");
            (status, Json(body)).into_response()
        }
        Reply::StreamError {
            status,
            error_type,
            message,
        } => shapes::stream_error(&ctx, stream, status, &error_type, &message),
    }
}

/// A complete reply, streamed or not.
fn answer(ctx: &Ctx, stream: bool, text: &str, calls: &[ToolCallReply]) -> Response {
    if stream {
        sse_response(events(ctx, text, calls), false)
    } else {
        Json(body(ctx, text, calls)).into_response()
    }
}

fn body(ctx: &Ctx, text: &str, calls: &[ToolCallReply]) -> Value {
    match ctx.format {
        Format::OpenAi => openai_body(ctx, text, calls),
        Format::Anthropic => anthropic_body(ctx, text, calls),
    }
}

fn events(ctx: &Ctx, text: &str, calls: &[ToolCallReply]) -> Vec<String> {
    match ctx.format {
        Format::OpenAi => openai_events(ctx, text, calls),
        Format::Anthropic => anthropic_events(ctx, text, calls),
    }
}

/// The first part of a text reply, then the connection is cut.
fn cut(ctx: &Ctx, stream: bool) -> Response {
    let text = "This reply is cut off before it ends.";
    if stream {
        // OpenAI: role chunk and two deltas; Anthropic: message_start, ping,
        // content_block_start and two deltas.
        let mut events = events(ctx, text, &[]);
        events.truncate(first_part(ctx));
        return sse_response(events, true);
    }
    let body = body(ctx, text, &[]).to_string();
    let half = body[..body.floor_char_boundary(body.len() / 2)].to_owned();
    let mut response = body_response(vec![half], true);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    headers.insert(header::CONTENT_LENGTH, body.len().into());
    response
}

/// The events of a streamed reply that come before it is cut (or paused).
fn first_part(ctx: &Ctx) -> usize {
    match ctx.format {
        Format::OpenAi => 3,
        Format::Anthropic => 5,
    }
}

/// The first part of a streamed text reply, the gate, then the rest.
async fn pause(ctx: &Ctx, stream: bool, gate: Gate, text: &str) -> Response {
    if !stream {
        gate.passed().await;
        return answer(ctx, false, text, &[]);
    }
    let mut first = events(ctx, text, &[]);
    let rest = first.split_off(first_part(ctx));
    let first = futures_util::stream::iter(first);
    let rest = futures_util::stream::once(async move {
        gate.passed().await;
        futures_util::stream::iter(rest)
    })
    .flatten();
    let parts = first
        .chain(rest)
        .map(|p| Ok::<_, std::io::Error>(Bytes::from(p)));
    let mut response = Response::new(Body::from_stream(parts));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, "text/event-stream".parse().unwrap());
    headers.insert(header::CACHE_CONTROL, "no-cache".parse().unwrap());
    response
}

/// The first part of a streamed text reply (nothing, not streamed), then
/// the connection is held open with nothing more.
fn hang(ctx: &Ctx, stream: bool) -> Response {
    let mut events = if stream {
        events(ctx, "This reply is cut off before it ends.", &[])
    } else {
        Vec::new()
    };
    events.truncate(first_part(ctx));
    let parts = futures_util::stream::iter(events.into_iter().map(|p| Ok(Bytes::from(p))))
        .chain(futures_util::stream::pending::<Result<Bytes, std::io::Error>>());
    let mut response = Response::new(Body::from_stream(parts));
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type.parse().unwrap());
    response
}

/// A payload that is not JSON, then a valid reply.
fn malformed(ctx: &Ctx, stream: bool) -> Response {
    if !stream {
        return ([(header::CONTENT_TYPE, "application/json")], "{not json").into_response();
    }
    let bad = match ctx.format {
        Format::OpenAi => "data: {\"choices\":[{\"delta\":\n\n",
        Format::Anthropic => {
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":\n\n"
        }
    };
    let mut events = events(ctx, "Fine after a bad line.", &[]);
    events.insert(1, bad.to_owned());
    sse_response(events, false)
}

fn openai_body(ctx: &Ctx, text: &str, calls: &[ToolCallReply]) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { text.into() },
        "refusal": null,
    });
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
            .collect();
        message["tool_calls"] = calls.into();
    }
    json!({
        "id": ctx.id,
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(ctx, calls)}],
        "usage": openai_usage(ctx),
    })
}

fn openai_usage(ctx: &Ctx) -> Value {
    json!({
        "prompt_tokens": ctx.input_tokens,
        "completion_tokens": ctx.output_tokens,
        "total_tokens": ctx.input_tokens + ctx.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
    })
}

fn finish_reason(ctx: &Ctx, calls: &[ToolCallReply]) -> &'static str {
    match (ctx.format, calls.is_empty()) {
        (Format::OpenAi, true) => "stop",
        (Format::OpenAi, false) => "tool_calls",
        (Format::Anthropic, true) => "end_turn",
        (Format::Anthropic, false) => "tool_use",
    }
}

fn openai_events(ctx: &Ctx, text: &str, calls: &[ToolCallReply]) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": ctx.id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "obfuscation": "x",
        })
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in fragments(text, ctx.text_pieces) {
        chunks.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (i, call) in calls.iter().enumerate() {
        let start = chunks.len();
        let head = json!({"index": i, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}});
        chunks.push(chunk(json!({"tool_calls": [head]}), Value::Null));
        for piece in fragments(&call.arguments.to_string(), 3) {
            let part = if ctx.repeat_tool_name {
                json!({"index": i, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": piece}})
            } else {
                json!({"index": i, "function": {"arguments": piece}})
            };
            chunks.push(chunk(json!({"tool_calls": [part]}), Value::Null));
        }
        if ctx.omit_tool_index {
            shapes::by_id_only(&mut chunks[start..], &call.id);
        }
    }
    chunks.push(chunk(json!({}), finish_reason(ctx, calls).into()));
    if ctx.include_usage {
        // As the real API does: `usage: null` on every chunk, then a last
        // chunk with no choices and the usage.
        chunks.iter_mut().for_each(|c| c["usage"] = Value::Null);
        let mut last = chunk(json!({}), Value::Null);
        last["choices"] = json!([]);
        last["usage"] = openai_usage(ctx);
        chunks.push(last);
    }
    let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    events.push("data: [DONE]\n\n".into());
    events
}

fn anthropic_body(ctx: &Ctx, text: &str, calls: &[ToolCallReply]) -> Value {
    json!({
        "id": ctx.id,
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": anthropic_blocks(text, calls),
        "stop_reason": finish_reason(ctx, calls),
        "stop_sequence": null,
        "usage": {
            "input_tokens": ctx.input_tokens,
            "output_tokens": ctx.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    })
}

fn anthropic_blocks(text: &str, calls: &[ToolCallReply]) -> Vec<Value> {
    let text = (!text.is_empty()).then(|| json!({"type": "text", "text": text}));
    let calls = calls
        .iter()
        .map(|c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
    text.into_iter().chain(calls).collect()
}

fn anthropic_events(ctx: &Ctx, text: &str, calls: &[ToolCallReply]) -> Vec<String> {
    let event = |data: Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    };
    let mut message = anthropic_body(ctx, text, calls);
    message["content"] = json!([]);
    message["stop_reason"] = Value::Null;
    message["usage"]["output_tokens"] = 1.into();
    let mut events = vec![
        event(json!({"type": "message_start", "message": message})),
        event(json!({"type": "ping"})),
    ];
    for (index, block) in anthropic_blocks(text, calls).into_iter().enumerate() {
        let (start, deltas) = if block["type"] == "text" {
            let deltas: Vec<Value> = fragments(text, ctx.text_pieces)
                .into_iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect();
            (json!({"type": "text", "text": ""}), deltas)
        } else {
            let deltas = fragments(&block["input"].to_string(), 3)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect();
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                deltas,
            )
        };
        events.push(event(
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            events.push(event(
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(event(json!({"type": "content_block_stop", "index": index})));
    }
    events.push(event(json!({
        "type": "message_delta",
        "delta": {"stop_reason": finish_reason(ctx, calls), "stop_sequence": null},
        "usage": {"output_tokens": ctx.output_tokens},
    })));
    events.push(event(json!({"type": "message_stop"})));
    events
}

/// The wire format's error body, with `retry-after` when given.
fn error_response(format: Format, code: u16, message: &str, retry_after: Option<u32>) -> Response {
    let body = match format {
        Format::OpenAi => {
            let (kind, code) = match code {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                404 => ("invalid_request_error", json!("model_not_found")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500.. => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Format::Anthropic => {
            let kind = match code {
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500.. => "api_error",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    };
    let status = StatusCode::from_u16(code).expect("a valid HTTP status");
    let mut response = (status, Json(body)).into_response();
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, secs.into());
    }
    response
}

fn sse_response(events: Vec<String>, cut: bool) -> Response {
    let mut response = body_response(events, cut);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, "text/event-stream".parse().unwrap());
    headers.insert(header::CACHE_CONTROL, "no-cache".parse().unwrap());
    response
}

/// Sends `parts` one frame each; when `cut`, paced 20 ms apart so they reach
/// the client, and then the body fails, which makes the server drop the
/// connection.
fn body_response(parts: Vec<String>, cut: bool) -> Response {
    let end = cut.then(|| Err(std::io::Error::other("fake model: connection cut")));
    let items = parts.into_iter().map(|p| Ok(Bytes::from(p))).chain(end);
    let stream = futures_util::stream::iter(items).then(move |item| async move {
        if cut {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        item
    });
    Response::new(Body::from_stream(stream))
}

/// `s` split at character boundaries into `n` pieces (fewer when shorter).
fn fragments(s: &str, n: usize) -> Vec<String> {
    let n = n.max(1);
    let chars: Vec<char> = s.chars().collect();
    let bounds: Vec<usize> = (0..=n).map(|i| i * chars.len() / n).collect();
    bounds
        .windows(2)
        .filter(|w| w[0] < w[1])
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Posts `body` over raw HTTP/1.1; returns the status, the head and the
    /// de-chunked body.
    async fn post(model: &FakeModel, path: &str, body: &str) -> (u16, String, String) {
        let mut tcp = tokio::net::TcpStream::connect(model.addr).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            model.addr,
            body.len()
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut raw = String::new();
        tcp.read_to_string(&mut raw).await.unwrap();
        let (head, mut rest) = raw.split_once("\r\n\r\n").unwrap();
        let status = head[9..12].parse().unwrap();
        if !head.to_lowercase().contains("transfer-encoding: chunked") {
            return (status, head.to_lowercase(), rest.to_owned());
        }
        let mut body = String::new();
        loop {
            let (size, after) = rest.split_once("\r\n").unwrap();
            let size = usize::from_str_radix(size, 16).unwrap();
            if size == 0 {
                break;
            }
            body.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
        (status, head.to_lowercase(), body)
    }

    #[tokio::test]
    async fn openai_stream_tool_call_joins_fragments_and_ends_with_done() {
        let args = json!({"path": "notes/today.md", "limit": 20});
        let model = FakeModel::start([Reply::tool("call_1", "read_file", args.clone())]).await;
        let request = r#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#;
        let (status, head, body) = post(&model, "/v1/chat/completions", request).await;
        assert_eq!(status, 200);
        assert!(head.contains("content-type: text/event-stream"));
        let data: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        assert_eq!(data.last(), Some(&"[DONE]"));
        let chunks: Vec<Value> = data[..data.len() - 1]
            .iter()
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let calls: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
            .collect();
        assert_eq!(calls[0]["function"]["name"], "read_file");
        assert_eq!(calls[0]["id"], "call_1");
        let fragments: Vec<&str> = calls[1..]
            .iter()
            .map(|c| c["function"]["arguments"].as_str().unwrap())
            .collect();
        assert!(fragments.len() >= 3);
        assert_eq!(fragments.concat(), args.to_string());
        assert_eq!(
            chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
            "tool_calls"
        );
        assert_eq!(chunks[chunks.len() - 1]["usage"]["total_tokens"], 15);
        assert_eq!(model.remaining(), 0);
        assert_eq!(model.requests()[0].body["model"], "m");
    }

    #[tokio::test]
    async fn anthropic_stream_has_events_in_order() {
        let reply = Reply::ToolCalls {
            text: "Let me look.".into(),
            calls: vec![ToolCallReply {
                id: "toolu_1".into(),
                name: "search".into(),
                arguments: json!({"q": "rust"}),
            }],
        };
        let model = FakeModel::start([reply]).await;
        let (status, _, body) =
            post(&model, "/v1/messages", r#"{"model":"c","stream":true}"#).await;
        assert_eq!(status, 200);
        let mut names: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        names.dedup();
        let expected = [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ];
        assert_eq!(names, expected);
        let partial: String = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .filter_map(|e| e["delta"]["partial_json"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&partial).unwrap(),
            json!({"q": "rust"})
        );
        assert!(body.contains(r#""stop_reason":"tool_use""#));
    }

    #[tokio::test]
    async fn status_gives_code_error_body_and_retry_after() {
        let status = |message: &str| Reply::Status {
            code: 429,
            message: message.into(),
            retry_after: Some(7),
        };
        let model = FakeModel::start([status("slow down")]).await;
        model.push(status("easy"));
        let (code, head, body) = post(&model, "/v1/chat/completions", "{}").await;
        assert_eq!(code, 429);
        assert!(head.contains("retry-after: 7"));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["message"], "slow down");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        let (code, head, body) = post(&model, "/v1/messages", "{}").await;
        assert_eq!(code, 429);
        assert!(head.contains("retry-after: 7"));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["message"], "easy");
    }

    #[tokio::test]
    async fn exhausted_queue_and_bad_json_are_errors() {
        let model = FakeModel::start([]).await;
        let (code, _, body) = post(&model, "/v1/chat/completions", "{}").await;
        assert_eq!(code, 500);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body["error"]["message"],
            "fake model: no scripted reply left"
        );
        let (code, _, _) = post(&model, "/v1/messages", "{oops").await;
        assert_eq!(code, 400);
        let requests = model.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[1].path, "/v1/messages");
        assert!(
            requests[1]
                .headers
                .contains(&("connection".into(), "close".into()))
        );
    }

    /// Sends `body` with keep-alive, so only a cut connection ends the read.
    async fn post_keep_alive(model: &FakeModel, body: &str) -> String {
        let mut tcp = tokio::net::TcpStream::connect(model.addr).await.unwrap();
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        let read = tcp.read_to_end(&mut raw);
        tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("the connection was not cut")
            .unwrap();
        String::from_utf8(raw).unwrap()
    }

    #[tokio::test]
    async fn cut_replies_end_the_connection_early() {
        let model = FakeModel::start([Reply::CutMidStream, Reply::CutMidStream]).await;
        let raw = post_keep_alive(&model, r#"{"stream":true}"#).await;
        assert!(raw.contains(r#""content":"This reply"#), "{raw}");
        assert!(!raw.contains("[DONE]") && !raw.ends_with("0\r\n\r\n"));
        let raw = post_keep_alive(&model, "{}").await;
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            head.starts_with("HTTP/1.1 200") && body.len() < length,
            "{raw}"
        );
    }
}
