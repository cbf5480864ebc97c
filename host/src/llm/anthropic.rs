//! Anthropic Messages (`POST {base_url}/v1/messages`), streamed or not.
//!
//! The neutral conversation is translated to the API's shape: the leading
//! system message(s) become `system`; tool calls become `tool_use` blocks;
//! consecutive tool results become one user message of `tool_result`
//! blocks; consecutive messages of one role are merged, since the API
//! requires user and assistant to alternate.
//!
//! A streamed `error` event is read in Anthropic's shape (`{"type": "error",
//! "error": {...}}`) and in llama.cpp's (`{"error": {...}}`, no `type`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::body::{Fragments, object_for, to_json};
use super::client::Endpoint;
use super::http::{Exchange, Flow, WireError, error_envelope, error_event, is_json, snippet};
use super::limits::CallLimits;
use super::memo::{MemoRef, WireMemo, body_with};
use super::types::{
    ChatRequest, ChatResponse, DeltaSink, FinishReason, Message, ToolCall, ToolChoice, ToolDef,
    Usage, valid_arguments,
};
use super::{HttpClient, LlmError, LlmErrorKind, ProviderConfig};

pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

pub struct Anthropic {
    name: String,
    config: ProviderConfig,
    client: HttpClient,
    /// `POST {base_url}/v1/messages`.
    endpoint: Endpoint,
    /// The serialized system prompts and tool lists of its requests.
    fragments: Fragments,
}

impl Anthropic {
    pub fn new(config: ProviderConfig, client: HttpClient) -> Anthropic {
        Anthropic {
            name: config.name(),
            endpoint: Endpoint::new(&config.base_url, "/v1/messages"),
            config,
            client,
            fragments: Fragments::default(),
        }
    }

    /// `anthropic:MODEL`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let Some(key) = &self.config.api_key else {
            let message = match &self.config.api_key_env {
                Some(var) => format!("{var} is not set"),
                None => "no API key: the provider names no api_key_env".to_string(),
            };
            return Err(LlmError::new(&self.name, LlmErrorKind::Config, message));
        };
        let exchange = Exchange::new(&self.name, self.config.timeout, self.config.limits);
        let builder = (self.endpoint.post(&self.client))
            .map_err(|e| LlmError::new(&self.name, LlmErrorKind::Config, e))?
            .header("x-api-key", key)
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .headers(self.config.headers.clone())
            .body(request_body(&self.config, request, &self.fragments));
        let response = (exchange.send(builder).await)
            .map_err(|e| e.with_key_hint(true, self.config.api_key_env.as_deref()))?;
        let mut acc = Accumulator::new(&self.name, self.config.limits);
        if self.config.stream && !is_json(&response) {
            let mut events = exchange.events(response);
            while let Some(event) = events.next().await? {
                if acc.on_event(&event.event, &event.data, &mut *on_delta)? == Flow::Done {
                    break;
                }
            }
        } else {
            acc.on_reply(exchange.read_json(response).await?)?;
            if self.config.stream && !acc.text.is_empty() {
                on_delta(&acc.text); // the server ignored `stream: true`
            }
        }
        acc.finish()
    }
}

/// The wire format's name in a [`WireMemo`].
const FORMAT: &str = "anthropic";

/// The request body, written straight to bytes; the system prompt (the
/// leading system messages) and the tool list are serialized once, in
/// `fragments`, and the turns that a memo of the conversation holds (see
/// `llm/memo.rs`) are copied from it.
pub fn request_body(
    config: &ProviderConfig,
    request: &ChatRequest,
    fragments: &Fragments,
) -> Vec<u8> {
    let leading = (request.messages.iter())
        .take_while(|m| matches!(m, Message::System { .. }))
        .count();
    let memo = MemoRef::of(request.memo.as_ref(), &request.messages, leading);
    body_with(memo, |memo| body(config, request, fragments, leading, memo))
}

/// [`request_body`], with the memo of the messages after the `leading`
/// system messages.
fn body(
    config: &ProviderConfig,
    request: &ChatRequest,
    fragments: &Fragments,
    leading: usize,
    memo: Option<(&WireMemo, usize)>,
) -> Vec<u8> {
    let system = match &request.messages[..leading] {
        [] => None,
        [Message::System { content }] => Some(fragments.prompt(content, |p| to_json(&p))),
        several => {
            let texts: Vec<&str> = (several.iter())
                .filter_map(|m| match m {
                    Message::System { content } => Some(content.as_str()),
                    _ => None,
                })
                .collect();
            Some(fragments.prompt(&texts.join("\n\n"), |p| to_json(&p)))
        }
    };
    let tools = fragments.tool_list(&request.tools, WireTool::of);
    let mut body = object_for(system.as_deref(), tools.as_deref(), request.messages.len());
    body.field("model", &request.model.as_deref().unwrap_or(&config.model));
    body.field(
        "max_tokens",
        &request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
    );
    let rest = &request.messages[leading..];
    match memo {
        // A turn is final once the next has begun: the last may grow.
        Some((memo, skip)) => body.array_with(
            "messages",
            None,
            Some(|out: &mut Vec<u8>| memo.write(FORMAT, skip, rest, out, turns, false)),
        ),
        None => body.array(
            "messages",
            None,
            turns(rest).into_iter().map(|(_, turn)| turn),
        ),
    }
    if let Some(system) = &system {
        body.raw("system", system);
    }
    if let Some(tools) = &tools {
        body.raw("tools", tools);
        body.raw(
            "tool_choice",
            match request.tool_choice {
                ToolChoice::Auto => r#"{"type":"auto"}"#,
                ToolChoice::Required => r#"{"type":"any"}"#,
                ToolChoice::None => r#"{"type":"none"}"#,
            },
        );
    }
    if config.stream {
        body.field("stream", &true);
    }
    body.finish()
}

/// One message of the API's alternating user and assistant messages.
#[derive(Serialize)]
struct WireTurn<'a> {
    role: &'static str,
    content: Content<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    /// A lone text block is sent as plain text.
    Text(&'a str),
    Blocks(Vec<WireBlock<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

impl<'a> WireTool<'a> {
    fn of(tool: &'a ToolDef) -> WireTool<'a> {
        WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.parameters,
        }
    }
}

/// A tool call's arguments as the `input` object: `{}` when they are not
/// one.
fn input(arguments: &str) -> &RawValue {
    let empty = || serde_json::from_str::<&RawValue>("{}").expect("{} is JSON");
    serde_json::from_str::<&RawValue>(valid_arguments(arguments)).unwrap_or_else(|_| empty())
}

/// The conversation after the system prompt as alternating messages: tool
/// calls become `tool_use` blocks, consecutive tool results one user
/// message of `tool_result` blocks, consecutive messages of one role are
/// merged, and a later system message becomes user text. Each with how
/// many of `messages` it and those before stand for: up to where the next
/// begins (a message with nothing to send goes with the one before).
fn turns(messages: &[Message]) -> Vec<(usize, WireTurn<'_>)> {
    let mut turns: Vec<(usize, &'static str, Vec<WireBlock<'_>>)> = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        let (role, blocks) = match message {
            Message::System { content } | Message::User { content } => {
                ("user", text_block(content))
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let calls = tool_calls.iter().map(|call| WireBlock::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: input(&call.arguments),
                });
                (
                    "assistant",
                    text_block(content).into_iter().chain(calls).collect(),
                )
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![WireBlock::ToolResult {
                    tool_use_id: tool_call_id,
                    content,
                    is_error: *is_error,
                }],
            ),
        };
        match turns.last_mut() {
            _ if blocks.is_empty() => {}
            Some((_, last, merged)) if *last == role => merged.extend(blocks),
            _ => turns.push((at, role, blocks)),
        }
    }
    // Where each turn's messages end: where the next one's begin.
    let ends: Vec<usize> = (turns.iter().skip(1).map(|(start, ..)| *start))
        .chain([messages.len()])
        .collect();
    (turns.into_iter().zip(ends))
        .map(|((_, role, mut blocks), end)| {
            let content = match blocks.as_slice() {
                [WireBlock::Text { text }] => Content::Text(text),
                _ => Content::Blocks(std::mem::take(&mut blocks)),
            };
            (end, WireTurn { role, content })
        })
        .collect()
}

/// A text block, or none for empty text (the API rejects empty blocks).
fn text_block(text: &str) -> Vec<WireBlock<'_>> {
    match text {
        "" => Vec::new(),
        text => vec![WireBlock::Text { text }],
    }
}

// The reply's wire shapes: unknown fields, events and block types are
// ignored.

/// A non-streamed reply.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Reply {
    content: Option<Vec<Block>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: Option<String>,
    },
    ToolUse {
        id: Option<String>,
        name: Option<String>,
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

/// One streamed event (the `type` of its data, not its SSE `event:` name).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        #[serde(default)]
        message: Reply,
    },
    ContentBlockStart {
        #[serde(default)]
        index: usize,
        content_block: Block,
    },
    ContentBlockDelta {
        #[serde(default)]
        index: usize,
        delta: BlockDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: Reply,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: WireError,
    },
    /// `ping`, `content_block_stop`, and whatever comes next.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: Option<String>,
    },
    InputJsonDelta {
        partial_json: Option<String>,
    },
    #[serde(other)]
    Other,
}

/// Token counts so far; each event may update some of them.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    fn update(&mut self, newer: WireUsage) {
        self.input_tokens = newer.input_tokens.or(self.input_tokens);
        self.output_tokens = newer.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = newer
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = newer
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }

    /// Input counts cached tokens too: all of them were in the prompt.
    fn total(self) -> Usage {
        let input = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        Usage {
            input_tokens: input.into_iter().flatten().sum(),
            output_tokens: self.output_tokens.unwrap_or(0),
        }
    }
}

/// Assembles a reply from streamed events (or from a whole reply).
pub struct Accumulator {
    candidate: String,
    limits: CallLimits,
    text: String,
    /// Tool calls by block index; arguments as streamed.
    calls: BTreeMap<usize, ToolCall>,
    /// The bytes of every call's arguments, name and id so far.
    arguments_len: usize,
    stop_reason: Option<String>,
    usage: WireUsage,
    done: bool,
}

impl Accumulator {
    pub fn new(candidate: &str, limits: CallLimits) -> Accumulator {
        Accumulator {
            candidate: candidate.to_string(),
            limits,
            text: String::new(),
            calls: BTreeMap::new(),
            arguments_len: 0,
            stop_reason: None,
            usage: WireUsage::default(),
            done: false,
        }
    }

    /// Takes one SSE event by its name and data; [`Flow::Done`] after
    /// `message_stop`.
    pub fn on_event(
        &mut self,
        event: &str,
        data: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<Flow, LlmError> {
        if event == "error" {
            return Err(error_event(&self.candidate, data));
        }
        self.on_data(data, on_delta)
    }

    /// Takes one SSE `data:` payload; [`Flow::Done`] after `message_stop`.
    pub fn on_data(&mut self, data: &str, on_delta: DeltaSink<'_>) -> Result<Flow, LlmError> {
        let event: Event = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(e) => {
                // An error without Anthropic's `type` (llama.cpp's shape).
                if let Some(error) = error_envelope(&self.candidate, data) {
                    return Err(error);
                }
                let message = format!(
                    "a stream event is not the expected JSON ({e}): {}",
                    snippet(data.trim(), 80)
                );
                return Err(LlmError::new(
                    &self.candidate,
                    LlmErrorKind::Protocol,
                    message,
                ));
            }
        };
        match event {
            Event::MessageStart { message } => self.usage.update(message.usage.unwrap_or_default()),
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.on_block(index, content_block, on_delta)?,
            Event::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text: Some(text) } if !text.is_empty() => {
                    self.push_text(&text, on_delta)?;
                }
                BlockDelta::InputJsonDelta {
                    partial_json: Some(json),
                } => {
                    if let Some(call) = self.calls.get_mut(&index) {
                        self.arguments_len += json.len();
                        (self.limits).check_arguments(&self.candidate, self.arguments_len)?;
                        call.arguments.push_str(&json);
                    }
                }
                _ => {}
            },
            Event::MessageDelta { delta, usage } => {
                self.stop_reason = delta.stop_reason.or(self.stop_reason.take());
                self.usage.update(usage.unwrap_or_default());
            }
            Event::MessageStop => {
                self.done = true;
                return Ok(Flow::Done);
            }
            Event::Error { error } => return Err(error.into_error(&self.candidate)),
            Event::Other => {}
        }
        Ok(Flow::More)
    }

    /// Adds text, checked against the bound before it is published.
    fn push_text(&mut self, text: &str, on_delta: DeltaSink<'_>) -> Result<(), LlmError> {
        (self.limits).check_text(&self.candidate, self.text.len() + text.len())?;
        on_delta(text);
        self.text.push_str(text);
        Ok(())
    }

    fn on_block(
        &mut self,
        index: usize,
        block: Block,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), LlmError> {
        match block {
            Block::Text { text: Some(text) } if !text.is_empty() => {
                self.push_text(&text, on_delta)?;
            }
            Block::ToolUse { id, name, input } => {
                // The input is streamed as `input_json_delta`s; a start
                // that already carries it (a whole reply) counts too.
                let arguments = match input {
                    Some(Value::Object(map)) if !map.is_empty() => Value::Object(map).to_string(),
                    _ => String::new(),
                };
                let call = ToolCall {
                    id: id.unwrap_or_default(),
                    name: name.unwrap_or_default(),
                    arguments,
                };
                // Names and ids count toward the arguments' bound: a server
                // that starts endless calls with long ones is bounded too.
                self.arguments_len += call.arguments.len() + call.name.len() + call.id.len();
                (self.limits).check_arguments(&self.candidate, self.arguments_len)?;
                if !self.calls.contains_key(&index) {
                    (self.limits).check_tool_calls(&self.candidate, self.calls.len() + 1)?;
                }
                self.calls.insert(index, call);
            }
            _ => {}
        }
        Ok(())
    }

    /// Takes a whole (non-streamed) reply.
    fn on_reply(&mut self, reply: Reply) -> Result<(), LlmError> {
        if let Some(error) = reply.error {
            return Err(error.into_error(&self.candidate));
        }
        let Some(content) = reply.content else {
            return Err(LlmError::new(
                &self.candidate,
                LlmErrorKind::Protocol,
                "the reply has no content",
            ));
        };
        for (index, block) in content.into_iter().enumerate() {
            self.on_block(index, block, &mut |_: &str| {})?;
        }
        self.stop_reason = reply.stop_reason;
        self.usage.update(reply.usage.unwrap_or_default());
        self.done = true;
        Ok(())
    }

    /// The assembled reply; an error if the stream ended early.
    pub fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done {
            let message = "the stream ended before the reply was complete";
            return Err(LlmError::cut(&self.candidate, message));
        }
        let tool_calls: Vec<ToolCall> = (self.calls.into_values())
            .map(|mut call| {
                if call.arguments.trim().is_empty() {
                    call.arguments = "{}".into();
                }
                call
            })
            .collect();
        let finish_reason = match self.stop_reason.as_deref() {
            None | Some("end_turn" | "stop_sequence") if !tool_calls.is_empty() => {
                FinishReason::ToolCalls
            }
            None | Some("end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens") => FinishReason::Length,
            Some("refusal") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
        };
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            finish_reason,
            usage: self.usage.total(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::llm::ProviderKind;
    use serde_json::json;

    /// The body `request` gets, as JSON.
    fn body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&request_body(config, request, &Fragments::default())).unwrap()
    }

    fn config(stream: bool) -> ProviderConfig {
        ProviderConfig {
            kind: ProviderKind::Anthropic,
            model: "claude-test".into(),
            base_url: "http://localhost:1".into(),
            api_key: Some("k".into()),
            api_key_env: Some(crate::llm::ANTHROPIC_API_KEY_VAR.into()),
            headers: Default::default(),
            stream,
            timeout: Duration::from_secs(5),
            limits: CallLimits::default(),
        }
    }

    /// The body of `conversation` sent with `memo` (its prompt first), and
    /// checked to be the body sent without.
    fn sent_with(
        memo: &Arc<WireMemo>,
        fragments: &Fragments,
        conversation: &Arc<Vec<Message>>,
    ) -> Value {
        let request = ChatRequest {
            messages: conversation.clone(),
            memo: Some(MemoRef {
                memo: memo.clone(),
                messages: conversation.clone(),
                from: 1,
            }),
            ..ChatRequest::default()
        };
        let body: Value =
            serde_json::from_slice(&request_body(&config(true), &request, fragments)).unwrap();
        let whole = ChatRequest {
            memo: None,
            ..request
        };
        assert_eq!(body, self::body(&config(true), &whole));
        body
    }

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: arguments.into(),
        }
    }

    fn result(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "read".into(),
            content: content.into(),
            is_error,
        }
    }

    /// Feeds `data:` payloads until one says done; returns the reply (or
    /// error) and the streamed text.
    fn feed(payloads: &[&str]) -> (Result<ChatResponse, LlmError>, Vec<String>) {
        let mut deltas = Vec::new();
        let mut acc = Accumulator::new("anthropic:claude-test", CallLimits::default());
        let mut sink = |text: &str| deltas.push(text.to_string());
        for data in payloads {
            match acc.on_data(data, &mut sink) {
                Ok(Flow::More) => {}
                Ok(Flow::Done) => break,
                Err(e) => return (Err(e), deltas),
            }
        }
        (acc.finish(), deltas)
    }

    #[test]
    fn a_conversations_memo_keeps_whole_turns_and_a_turn_that_grows_is_sent_grown() {
        let fragments = Fragments::default();
        let memo = Arc::<WireMemo>::default();
        let sent = |conversation: &Arc<Vec<Message>>| {
            sent_with(&memo, &fragments, conversation)["messages"].clone()
        };
        let mut conversation = Arc::new(vec![
            Message::system("be brief"),
            Message::user("read a and b"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("t1", r#"{"path":"a"}"#), call("t2", r#"{"path":"b"}"#)],
            },
            result("t1", "A", false),
        ]);
        // The last turn (one tool result) is not kept: the next result
        // joins it, and a user message after them too.
        assert_eq!(sent(&conversation).as_array().unwrap().len(), 3);
        let kept = memo.bytes();
        Arc::make_mut(&mut conversation).push(result("t2", "B", true));
        let grown = sent(&conversation);
        assert_eq!(grown[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(
            memo.bytes(),
            kept,
            "the turn that may still grow is not kept"
        );
        Arc::make_mut(&mut conversation).push(Message::user("and now?"));
        let grown = sent(&conversation);
        assert_eq!(grown[2]["content"].as_array().unwrap().len(), 3);
        // An answer begins a turn: the user's before it is final, kept.
        Arc::make_mut(&mut conversation).push(Message::assistant("done"));
        assert_eq!(sent(&conversation).as_array().unwrap().len(), 4);
        assert!(memo.bytes() > kept);
        Arc::make_mut(&mut conversation).push(Message::user("thanks"));
        assert_eq!(sent(&conversation)[4]["content"], "thanks");
    }

    #[test]
    fn a_compacted_conversations_memo_starts_after_the_summary() {
        let fragments = Fragments::default();
        let memo = Arc::<WireMemo>::default();
        // The prompt, then the history: a summary (sent in `system`), ...
        let mut conversation = Arc::new(vec![
            Message::system("be brief"),
            Message::system("Summary: the user asked for a and b."),
            Message::user("and c?"),
            Message::assistant("c is 3"),
            Message::user("thanks"),
        ]);
        let sent = |conversation: &Arc<Vec<Message>>| sent_with(&memo, &fragments, conversation);
        let body = sent(&conversation);
        assert_eq!(
            body["system"],
            "be brief\n\nSummary: the user asked for a and b."
        );
        let kept = memo.bytes();
        assert!(kept > 0, "the turns before the last are kept");
        Arc::make_mut(&mut conversation).push(Message::assistant("you're welcome"));
        Arc::make_mut(&mut conversation).push(Message::user("bye"));
        assert_eq!(sent(&conversation)["messages"][4]["content"], "bye");
        assert!(memo.bytes() > kept);
        // A history given back with its first three messages only (a turn
        // failed): cut to what stands for them, the summary counted.
        memo.truncate(3);
        let kept: usize = memo.bytes();
        conversation = Arc::new(conversation[..4].to_vec());
        let messages = sent(&conversation)["messages"].clone();
        assert_eq!(messages.as_array().unwrap().len(), 2);
        assert_eq!(messages[1]["content"], "c is 3");
        assert!(memo.bytes() >= kept);
    }

    #[test]
    fn request_body_merges_tool_results_into_one_user_message() {
        let request = ChatRequest {
            memo: None,
            messages: vec![
                Message::system("be brief"),
                Message::system("use tools"),
                Message::user("read a and b"),
                Message::Assistant {
                    content: "Reading.".into(),
                    tool_calls: vec![call("t1", r#"{"path":"a"}"#), call("t2", "not json")],
                },
                result("t1", "A", false),
                result("t2", "no such file", true),
                Message::user("thanks"),
            ]
            .into(),
            tools: std::sync::Arc::new(vec![ToolDef {
                name: "read".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object"}),
            }]),
            tool_choice: ToolChoice::Required,
            max_tokens: None,
            model: None,
        };
        let body = body(&config(true), &request);
        assert_eq!(
            body,
            json!({
                "model": "claude-test",
                "max_tokens": 4096,
                "system": "be brief\n\nuse tools",
                "messages": [
                    {"role": "user", "content": "read a and b"},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Reading."},
                        {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                        {"type": "tool_use", "id": "t2", "name": "read", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "no such file", "is_error": true},
                        {"type": "text", "text": "thanks"},
                    ]},
                ],
                "tools": [{"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"},
                "stream": true,
            })
        );
    }

    #[test]
    fn request_body_without_tools_or_system() {
        let request = ChatRequest {
            messages: vec![
                Message::user("one"),
                Message::user("two"),
                Message::Assistant {
                    content: "ok".into(),
                    tool_calls: vec![call("t1", "{}")],
                },
            ]
            .into(),
            tool_choice: ToolChoice::None,
            max_tokens: Some(10),
            ..ChatRequest::default()
        };
        let body = body(&config(false), &request);
        assert_eq!(
            body,
            json!({
                "model": "claude-test",
                "max_tokens": 10,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "ok"},
                        {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
                    ]},
                ],
            })
        );
    }

    #[test]
    fn a_body_with_cached_parts_is_the_body_without_them() {
        let fragments = Fragments::default();
        let tools = std::sync::Arc::new(vec![ToolDef {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]);
        let mut request = ChatRequest {
            messages: vec![
                Message::system("a long prompt"),
                Message::user("read a"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call("t1", " {\"path\": \"a\"} ")],
                },
                result("t1", "A", false),
            ]
            .into(),
            tools: tools.clone(),
            ..ChatRequest::default()
        };
        for round in 0..3 {
            let cached: Value =
                serde_json::from_slice(&request_body(&config(true), &request, &fragments)).unwrap();
            assert_eq!(cached, body(&config(true), &request), "round {round}");
            assert_eq!(
                cached["messages"][1]["content"][0]["input"],
                json!({"path": "a"})
            );
            // The next call: the same list and prompt, then other ones.
            Arc::make_mut(&mut request.messages).push(Message::user(format!("more {round}")));
            if round == 1 {
                Arc::make_mut(&mut request.messages).insert(0, Message::system("and another"));
                request.tools = Arc::new(vec![]);
            }
        }
    }

    #[test]
    fn stream_assembles_text_and_tool_input() {
        let (reply, deltas) = feed(&[
            r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c","stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"look."}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_2","name":"now","input":{}}}"#,
            r#"{"type":"content_block_stop","index":3}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":10}}"#,
            r#"{"type":"message_delta","delta":{},"usage":{"output_tokens":42}}"#,
            r#"{"type":"some_future_event","x":1}"#,
            r#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{}}"#,
        ]);
        let reply = reply.unwrap();
        assert_eq!(deltas, ["Let me ", "look."]);
        assert_eq!(reply.text, "Let me look.");
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall {
                    id: "toolu_1".into(),
                    name: "read".into(),
                    arguments: r#"{"path": "a.txt"}"#.into()
                },
                ToolCall {
                    id: "toolu_2".into(),
                    name: "now".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 25,
                output_tokens: 42
            }
        );
    }

    #[test]
    fn stop_reasons_are_mapped() {
        for (said, expected) in [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("max_tokens", FinishReason::Length),
            ("refusal", FinishReason::ContentFilter),
            ("pause_turn", FinishReason::Other("pause_turn".into())),
        ] {
            let delta = format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"{said}"}},"usage":{{"output_tokens":1}}}}"#
            );
            let (reply, _) = feed(&[&delta, r#"{"type":"message_stop"}"#]);
            assert_eq!(reply.unwrap().finish_reason, expected, "{said}");
        }
    }

    #[test]
    fn error_events_are_classified() {
        let (reply, _) = feed(&[
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        let error = reply.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Overloaded);
        assert!(error.message.contains("Overloaded"), "{}", error.message);
        let (reply, _) =
            feed(&[r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#]);
        assert_eq!(reply.unwrap_err().kind, LlmErrorKind::Refused);
    }

    #[test]
    fn llama_cpp_error_events_are_read_too() {
        let llama = r#"{"error":{"code":500,"message":"the slot is busy","type":"server_error"}}"#;
        let mut acc = Accumulator::new("anthropic:c", CallLimits::default());
        for (event, data) in [("error", llama), ("message", llama)] {
            let error = acc.on_event(event, data, &mut |_: &str| {}).unwrap_err();
            assert_eq!(error.kind, LlmErrorKind::Overloaded, "{event}");
            assert_eq!(
                error.message, "the server reported an error: server_error: the slot is busy",
                "{event}"
            );
        }
        let error = acc
            .on_event("error", "upstream died", &mut |_: &str| {})
            .unwrap_err();
        assert_eq!(
            (error.kind, error.message.as_str()),
            (
                LlmErrorKind::Overloaded,
                "the server reported an error: upstream died"
            )
        );
    }

    #[test]
    fn text_and_arguments_past_their_bounds_end_the_reply() {
        let limits = CallLimits {
            max_text: 3,
            max_arguments: 3,
            ..CallLimits::default()
        };
        let mut acc = Accumulator::new("anthropic:c", limits);
        let error = acc
            .on_data(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"four"}}"#,
                &mut |_: &str| panic!("nothing past the bound is published"),
            )
            .unwrap_err();
        assert_eq!(
            error.message,
            "the reply's text passed its bound of 3 bytes (--max-reply-text)"
        );
        let mut acc = Accumulator::new("anthropic:c", limits);
        acc.on_data(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            &mut |_: &str| {},
        )
        .unwrap();
        let error = acc
            .on_data(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#,
                &mut |_: &str| {},
            )
            .unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::TooLarge);
    }

    #[test]
    fn tool_call_names_ids_and_count_are_bounded() {
        let limits = CallLimits {
            max_arguments: 10,
            max_tool_calls: 2,
            ..CallLimits::default()
        };
        let start = |index: usize, id: &str, name: &str| {
            format!(
                r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"{id}","name":"{name}","input":{{}}}}}}"#
            )
        };
        let arguments_bound = (
            LlmErrorKind::TooLarge,
            "the reply's tool-call arguments passed their bound of 10 bytes (--max-reply-arguments)",
        );
        // A long name, or a long id, with no arguments at all.
        let mut acc = Accumulator::new("anthropic:c", limits);
        let error = acc
            .on_data(&start(0, "t", "nnnnnnnnnn"), &mut |_: &str| {})
            .unwrap_err();
        assert_eq!((error.kind, error.message.as_str()), arguments_bound);
        let mut acc = Accumulator::new("anthropic:c", limits);
        let error = acc
            .on_data(&start(0, "iiiiiiiiii", "f"), &mut |_: &str| {})
            .unwrap_err();
        assert_eq!((error.kind, error.message.as_str()), arguments_bound);
        // Each new block index starts a call: the third is past the bound.
        let mut acc = Accumulator::new("anthropic:c", limits);
        acc.on_data(&start(0, "a", "f"), &mut |_: &str| {}).unwrap();
        acc.on_data(&start(1, "b", "f"), &mut |_: &str| {}).unwrap();
        let error = acc
            .on_data(&start(2, "c", "f"), &mut |_: &str| {})
            .unwrap_err();
        assert_eq!(
            (error.kind, error.message.as_str()),
            (
                LlmErrorKind::TooLarge,
                "the reply's tool calls passed their bound of 2 calls"
            )
        );
    }

    #[test]
    fn malformed_or_truncated_streams_fail() {
        let (reply, _) = feed(&[
            r#"{"type":"message_start","message":{}}"#,
            "data that is not json",
        ]);
        let error = reply.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Protocol);
        assert!(
            error.message.contains("data that is not json"),
            "{}",
            error.message
        );

        let (reply, deltas) = feed(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}"#,
        ]);
        let error = reply.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Network);
        assert_eq!(
            error.message,
            "the stream ended before the reply was complete"
        );
        assert_eq!(deltas, ["Hi"]);
    }

    #[test]
    fn a_whole_reply_is_parsed() {
        let reply: Reply = serde_json::from_str(
            r#"{"id":"m","type":"message","role":"assistant","model":"c",
                "content":[{"type":"text","text":"Reading."},
                           {"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a"}},
                           {"type":"tool_use","id":"toolu_2","name":"now","input":{}}],
                "stop_reason":"tool_use","stop_sequence":null,
                "usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":3}}"#,
        )
        .unwrap();
        let mut acc = Accumulator::new("anthropic:claude-test", CallLimits::default());
        acc.on_reply(reply).unwrap();
        let reply = acc.finish().unwrap();
        assert_eq!(reply.text, "Reading.");
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall {
                    id: "toolu_1".into(),
                    name: "read".into(),
                    arguments: r#"{"path":"a"}"#.into()
                },
                ToolCall {
                    id: "toolu_2".into(),
                    name: "now".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 15,
                output_tokens: 3
            }
        );
    }

    #[tokio::test]
    async fn a_missing_key_fails_before_sending() {
        // The built-in provider's variable; one a configuration names; none.
        for (var, message) in [
            (Some("ANTHROPIC_API_KEY"), "ANTHROPIC_API_KEY is not set"),
            (Some("LOCAL_KEY"), "LOCAL_KEY is not set"),
            (None, "no API key: the provider names no api_key_env"),
        ] {
            let provider = Anthropic::new(
                ProviderConfig {
                    api_key: None,
                    api_key_env: var.map(String::from),
                    ..config(true)
                },
                HttpClient::default(),
            );
            let error = provider
                .chat(&ChatRequest::default(), &mut |_: &str| {})
                .await
                .unwrap_err();
            assert_eq!(error.kind, LlmErrorKind::Config);
            assert_eq!(error.message, message);
            assert_eq!(error.candidate, "anthropic:claude-test");
        }
    }
}
