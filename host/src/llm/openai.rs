//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`),
//! streamed or not: OpenAI itself and the many servers that copy its format
//! (llama.cpp, vLLM, Ollama, LM Studio, OpenRouter, …).
//!
//! The stream parser is lenient where those servers differ: tool-call
//! chunks without `index` (assembled by `id`), a name repeated in every
//! chunk, `finish_reason` `stop` on a reply with tool calls, a stream that
//! ends without `[DONE]`, an `error` event (llama.cpp).
//!
//! Tool-call arguments that are not a JSON object (a reply cut short, a
//! model's mistake) are sent back as `{}`: servers refuse a history that
//! carries them (llama.cpp answers HTTP 500), which would break the session
//! for good.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body::{Fragments, object_for, to_json};
use super::client::Endpoint;
use super::http::{Exchange, Flow, WireError, error_event, is_json, snippet};
use super::limits::CallLimits;
use super::memo::{MemoRef, WireMemo, body_with};
use super::types::{
    ChatRequest, ChatResponse, DeltaSink, FinishReason, Message, ToolCall, ToolChoice, ToolDef,
    Usage, valid_arguments,
};
use super::{HttpClient, LlmError, LlmErrorKind, ProviderConfig};

pub struct OpenAi {
    name: String,
    config: ProviderConfig,
    client: HttpClient,
    /// `POST {base_url}/chat/completions`.
    endpoint: Endpoint,
    /// The serialized system prompts and tool lists of its requests.
    fragments: Fragments,
}

impl OpenAi {
    pub fn new(config: ProviderConfig, client: HttpClient) -> OpenAi {
        OpenAi {
            name: config.name(),
            endpoint: Endpoint::new(&config.base_url, "/chat/completions"),
            config,
            client,
            fragments: Fragments::default(),
        }
    }

    /// `openai:MODEL`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let exchange = Exchange::new(&self.name, self.config.timeout, self.config.limits);
        let mut builder = (self.endpoint.post(&self.client))
            .map_err(|e| LlmError::new(&self.name, LlmErrorKind::Config, e))?
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .headers(self.config.headers.clone())
            .body(request_body(&self.config, request, &self.fragments));
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = (exchange.send(builder).await).map_err(|e| {
            let key_sent = self.config.api_key.is_some();
            e.with_key_hint(key_sent, self.config.api_key_env.as_deref())
        })?;
        let mut acc = Accumulator::new(&self.name, self.config.limits);
        if self.config.stream && !is_json(&response) {
            let mut events = exchange.events(response);
            while let Some(event) = events.next().await? {
                if acc.on_event(&event.event, &event.data, &mut *on_delta)? == Flow::Done {
                    break;
                }
            }
        } else {
            let reply: Completion = exchange.read_json(response).await?;
            acc.on_completion(reply)?;
            if self.config.stream && !acc.text.is_empty() {
                on_delta(&acc.text); // the server ignored `stream: true`
            }
        }
        acc.finish()
    }
}

/// The wire format's name in a [`WireMemo`](super::memo::WireMemo).
const FORMAT: &str = "openai";

/// The request body, written straight to bytes; the system prompt (a first
/// system message) and the tool list are serialized once, in `fragments`,
/// and the messages that a memo of the conversation holds (see
/// `llm/memo.rs`) are copied from it.
pub fn request_body(
    config: &ProviderConfig,
    request: &ChatRequest,
    fragments: &Fragments,
) -> Vec<u8> {
    let from = match request.messages.first() {
        Some(Message::System { .. }) => 1,
        _ => 0,
    };
    let memo = MemoRef::of(request.memo.as_ref(), &request.messages, from);
    body_with(memo, |memo| body(config, request, fragments, memo))
}

/// [`request_body`], with the memo of the messages after the system prompt.
fn body(
    config: &ProviderConfig,
    request: &ChatRequest,
    fragments: &Fragments,
    memo: Option<(&WireMemo, usize)>,
) -> Vec<u8> {
    let (system, rest) = match request.messages.split_first() {
        Some((Message::System { content }, rest)) => {
            let system = fragments.prompt(content, |prompt| {
                to_json(&Wire::of(&Message::System {
                    content: prompt.to_string(),
                }))
            });
            (Some(system), rest)
        }
        _ => (None, &request.messages[..]),
    };
    let tools = fragments.tool_list(&request.tools, WireTool::of);
    let mut body = object_for(system.as_deref(), tools.as_deref(), request.messages.len());
    body.field("model", &request.model.as_deref().unwrap_or(&config.model));
    match memo {
        Some((memo, skip)) => {
            let messages = (!rest.is_empty()).then_some(|out: &mut Vec<u8>| {
                memo.write(FORMAT, skip, rest, out, memo_items, true)
            });
            body.array_with("messages", system.as_deref(), messages);
        }
        None => body.array("messages", system.as_deref(), rest.iter().map(Wire::of)),
    }
    if let Some(tools) = &tools {
        body.raw("tools", tools);
        body.field(
            "tool_choice",
            &match request.tool_choice {
                ToolChoice::Auto => "auto",
                ToolChoice::Required => "required",
                ToolChoice::None => "none",
            },
        );
    }
    if let Some(max) = request.max_tokens {
        body.field("max_tokens", &max);
    }
    if config.stream {
        body.field("stream", &true);
        body.raw("stream_options", r#"{"include_usage":true}"#);
    }
    body.finish()
}

/// The items a memo keeps of `messages`: one a message, each final.
fn memo_items(messages: &[Message]) -> Vec<(usize, Wire<'_>)> {
    (messages.iter().enumerate())
        .map(|(i, message)| (i + 1, Wire::of(message)))
        .collect()
}

/// A message as the API takes it.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Wire<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` beside tool calls when there is no text.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> WireTool<'a> {
    fn of(tool: &'a ToolDef) -> WireTool<'a> {
        WireTool {
            r#type: "function",
            function: WireToolFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }
    }
}

impl<'a> Wire<'a> {
    fn of(message: &'a Message) -> Wire<'a> {
        match message {
            Message::System { content } => Wire::System { content },
            Message::User { content } => Wire::User { content },
            Message::Assistant {
                content,
                tool_calls,
            } => Wire::Assistant {
                content: (tool_calls.is_empty() || !content.is_empty()).then_some(content),
                tool_calls: (tool_calls.iter())
                    .map(|call| WireCall {
                        id: &call.id,
                        r#type: "function",
                        function: WireFunction {
                            name: &call.name,
                            arguments: valid_arguments(&call.arguments),
                        },
                    })
                    .collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Wire::Tool {
                tool_call_id,
                content,
            },
        }
    }
}

// The reply's wire shapes. Everything is optional: servers differ, and send
// `null` for what they leave out.

/// A non-streamed reply.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Completion {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    /// Streamed replies carry `delta`, whole ones `message`; same shape.
    delta: Option<Delta>,
    message: Option<Delta>,
    finish_reason: Option<String>,
}

/// One streamed chunk.
type Chunk = Completion;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
    /// The legacy single function call.
    function_call: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ToolCallDelta {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// Assembles a reply from streamed chunks (or from a whole reply).
pub struct Accumulator {
    candidate: String,
    limits: CallLimits,
    text: String,
    /// Tool calls in the order they first appeared.
    calls: Vec<Slot>,
    /// The bytes of every call's arguments, name and id so far.
    arguments_len: usize,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

/// One tool call being assembled, and the `index` the server gave it.
struct Slot {
    index: Option<usize>,
    call: ToolCall,
}

impl Accumulator {
    pub fn new(candidate: &str, limits: CallLimits) -> Accumulator {
        Accumulator {
            candidate: candidate.to_string(),
            limits,
            text: String::new(),
            calls: Vec::new(),
            arguments_len: 0,
            finish_reason: None,
            usage: Usage::default(),
            done: false,
        }
    }

    /// Takes one SSE event: an `error` event fails the reply, anything else
    /// is a `data:` payload.
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

    /// Takes one SSE `data:` payload; [`Flow::Done`] after `[DONE]`.
    pub fn on_data(&mut self, data: &str, on_delta: DeltaSink<'_>) -> Result<Flow, LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            let message = format!(
                "a stream chunk is not the expected JSON ({e}): {}",
                snippet(data, 80)
            );
            LlmError::new(&self.candidate, LlmErrorKind::Protocol, message)
        })?;
        if let Some(choice) = self.take_reply(chunk)? {
            let delta = choice.delta.or(choice.message);
            let content = delta.as_ref().and_then(|d| d.content.as_deref());
            if let Some(content) = content.filter(|c| !c.is_empty()) {
                // Checked before it is published: past the bound, nothing
                // more of the reply goes out.
                (self.limits).check_text(&self.candidate, self.text.len() + content.len())?;
                on_delta(content);
            }
            self.on_choice(delta, choice.finish_reason, false)?;
        }
        Ok(Flow::More)
    }

    /// Takes a whole (non-streamed) reply.
    fn on_completion(&mut self, reply: Completion) -> Result<(), LlmError> {
        let Some(choice) = self.take_reply(reply)? else {
            return Err(LlmError::new(
                &self.candidate,
                LlmErrorKind::Protocol,
                "the reply has no choices",
            ));
        };
        self.on_choice(choice.message.or(choice.delta), choice.finish_reason, true)?;
        self.done = true;
        Ok(())
    }

    /// The reply's usage and first choice, or the error it reports.
    fn take_reply(&mut self, reply: Completion) -> Result<Option<Choice>, LlmError> {
        if let Some(error) = reply.error {
            return Err(error.into_error(&self.candidate));
        }
        if let Some(usage) = reply.usage {
            self.usage.input_tokens = usage.prompt_tokens.unwrap_or(self.usage.input_tokens);
            self.usage.output_tokens = usage.completion_tokens.unwrap_or(self.usage.output_tokens);
        }
        Ok(reply.choices.unwrap_or_default().into_iter().next())
    }

    /// `whole`: the calls are complete and in order, with or without `index`.
    fn on_choice(
        &mut self,
        delta: Option<Delta>,
        finish_reason: Option<String>,
        whole: bool,
    ) -> Result<(), LlmError> {
        if let Some(reason) = finish_reason.filter(|r| !r.is_empty()) {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = delta else { return Ok(()) };
        if let Some(content) = delta.content {
            (self.limits).check_text(&self.candidate, self.text.len() + content.len())?;
            self.text.push_str(&content);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            let index = if whole { Some(position) } else { call.index };
            self.on_tool_call(index, call.id, call.function.unwrap_or_default())?;
        }
        if let Some(function) = delta.function_call {
            self.on_tool_call(Some(0), None, function)?;
        }
        Ok(())
    }

    /// Adds a tool-call delta to its call: the call with its `index` when it
    /// has one, else the call with its `id`; a delta with neither continues
    /// the latest call, and one with a new id starts a call (unless the
    /// latest call has no id yet: the id is its own, arriving late). An
    /// index already used by a call with another id starts a call too (some
    /// servers number every call 0).
    fn on_tool_call(
        &mut self,
        index: Option<usize>,
        id: Option<String>,
        function: FunctionDelta,
    ) -> Result<(), LlmError> {
        let id = id.filter(|id| !id.is_empty());
        let by_id = |calls: &[Slot], id: &str| calls.iter().position(|s| s.call.id == id);
        let found = match (index, &id) {
            (Some(index), id) => (self.calls.iter())
                .rposition(|s| s.index == Some(index))
                .filter(|&at| {
                    let own = &self.calls[at].call.id;
                    id.as_ref().is_none_or(|id| own.is_empty() || own == id)
                }),
            (None, Some(id)) => by_id(&self.calls, id).or_else(|| {
                let last = self.calls.len().checked_sub(1)?;
                self.calls[last].call.id.is_empty().then_some(last)
            }),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let at = match found {
            Some(at) => at,
            None => {
                (self.limits).check_tool_calls(&self.candidate, self.calls.len() + 1)?;
                self.calls.push(Slot {
                    index,
                    call: ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    },
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at].call;
        // Names and ids count toward the arguments' bound: a server that
        // sends endless ones is bounded too.
        if let Some(id) = id.filter(|_| call.id.is_empty()) {
            self.arguments_len += id.len();
            (self.limits).check_arguments(&self.candidate, self.arguments_len)?;
            call.id = id;
        }
        // Some servers repeat the whole name in every chunk.
        if let Some(name) = function.name.filter(|n| !n.is_empty() && *n != call.name) {
            self.arguments_len += name.len();
            (self.limits).check_arguments(&self.candidate, self.arguments_len)?;
            call.name.push_str(&name);
        }
        if let Some(arguments) = function.arguments {
            self.arguments_len += arguments.len();
            (self.limits).check_arguments(&self.candidate, self.arguments_len)?;
            call.arguments.push_str(&arguments);
        }
        Ok(())
    }

    /// The assembled reply. A stream that ended without `[DONE]` is accepted
    /// only if it had a finish reason.
    pub fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done && self.finish_reason.is_none() {
            let message = "the stream ended before the reply was complete";
            return Err(LlmError::cut(&self.candidate, message));
        }
        let mut calls = self.calls;
        // In the order asked: by index when the server gave every call one,
        // else as they first appeared.
        if calls.iter().all(|s| s.index.is_some()) {
            calls.sort_by_key(|s| s.index);
        }
        let tool_calls: Vec<ToolCall> = (calls.into_iter().enumerate())
            .map(|(position, Slot { mut call, .. })| {
                if call.id.is_empty() {
                    call.id = format!("call_{position}");
                }
                if call.arguments.trim().is_empty() {
                    call.arguments = "{}".into();
                }
                call
            })
            .collect();
        let said = (self.finish_reason).map(|r| match r.as_str() {
            "function_call" => FinishReason::ToolCalls,
            _ => FinishReason::from(r),
        });
        // Some servers say `stop` on a reply with tool calls.
        let finish_reason = match said {
            None | Some(FinishReason::Stop) if !tool_calls.is_empty() => FinishReason::ToolCalls,
            None => FinishReason::Stop,
            Some(reason) => reason,
        };
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ProviderKind;
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Duration;

    /// The body `request` gets, as JSON.
    fn body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&request_body(config, request, &Fragments::default())).unwrap()
    }

    fn config(stream: bool) -> ProviderConfig {
        ProviderConfig {
            kind: ProviderKind::OpenAi,
            model: "gpt-test".into(),
            base_url: "http://localhost:1/v1".into(),
            api_key: None,
            api_key_env: None,
            headers: Default::default(),
            stream,
            timeout: Duration::from_secs(5),
            limits: CallLimits::default(),
        }
    }

    /// Feeds `data:` payloads until one says done; returns the reply (or
    /// error) and the streamed text.
    fn feed(payloads: &[&str]) -> (Result<ChatResponse, LlmError>, Vec<String>) {
        let mut deltas = Vec::new();
        let mut acc = Accumulator::new("openai:gpt-test", CallLimits::default());
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
    fn request_body_sends_null_content_with_tool_calls() {
        let request = ChatRequest {
            memo: None,
            messages: vec![
                Message::system("be brief"),
                Message::user("weather?"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "weather".into(),
                        arguments: r#"{"city":"Oslo"}"#.into(),
                    }],
                },
                Message::Tool {
                    tool_call_id: "call_1".into(),
                    name: "weather".into(),
                    content: "no such city".into(),
                    is_error: true,
                },
            ]
            .into(),
            tools: std::sync::Arc::new(vec![ToolDef {
                name: "weather".into(),
                description: "Current weather".into(),
                parameters: json!({"type": "object"}),
            }]),
            tool_choice: ToolChoice::Required,
            max_tokens: Some(100),
            model: None,
        };
        let body = body(&config(true), &request);
        assert_eq!(
            body,
            json!({
                "model": "gpt-test",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "no such city"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "weather", "description": "Current weather", "parameters": {"type": "object"}}}],
                "tool_choice": "required",
                "max_tokens": 100,
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn request_body_leaves_out_what_is_unset() {
        let request = ChatRequest {
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![],
                },
            ]
            .into(),
            tool_choice: ToolChoice::None,
            ..ChatRequest::default()
        };
        let body = body(&config(false), &request);
        assert_eq!(
            body,
            json!({"model": "gpt-test", "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": ""},
            ]})
        );
    }

    #[test]
    fn a_body_with_cached_parts_is_the_body_without_them() {
        let fragments = Fragments::default();
        let tools = Arc::new(vec![ToolDef {
            name: "weather".into(),
            description: "Current weather".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }]);
        let mut request = ChatRequest {
            messages: vec![Message::system("a long prompt"), Message::user("weather?")].into(),
            tools: tools.clone(),
            ..ChatRequest::default()
        };
        for round in 0..4 {
            let cached: Value =
                serde_json::from_slice(&request_body(&config(true), &request, &fragments)).unwrap();
            assert_eq!(cached, body(&config(true), &request), "round {round}");
            // The next call: the same list and prompt with more messages and
            // another tool choice, then another prompt, then no tools.
            Arc::make_mut(&mut request.messages)
                .push(Message::assistant(format!("answer {round}")));
            request.tool_choice = ToolChoice::None;
            match round {
                1 => Arc::make_mut(&mut request.messages)[0] = Message::system("another prompt"),
                2 => request.tools = Arc::new(vec![]),
                _ => {}
            }
        }
    }

    #[test]
    fn a_conversations_memo_serves_its_own_list_and_never_a_changed_copy() {
        let fragments = Fragments::default();
        let memo = Arc::<WireMemo>::default();
        let mut conversation: Arc<Vec<Message>> =
            Arc::new(vec![Message::system("be brief"), Message::user("read a")]);
        let request = |messages: &Arc<Vec<Message>>, of: &Arc<Vec<Message>>| ChatRequest {
            messages: messages.clone(),
            memo: Some(MemoRef {
                memo: memo.clone(),
                messages: of.clone(),
                from: 1,
            }),
            ..ChatRequest::default()
        };
        let sent = |request: &ChatRequest| -> Value {
            serde_json::from_slice(&request_body(&config(true), request, &fragments)).unwrap()
        };
        let messages_of = |body: Value| body["messages"].clone();

        // The conversation's own list, as it grows: the memo keeps each
        // message after the prompt.
        let first = sent(&request(&conversation, &conversation));
        assert_eq!(
            first,
            body(&config(true), &request(&conversation, &conversation))
        );
        let one = memo.bytes();
        assert!(one > 0);
        Arc::make_mut(&mut conversation).push(Message::assistant("a says hi"));
        let grown = sent(&request(&conversation, &conversation));
        assert_eq!(messages_of(grown)[2]["content"], "a says hi");
        assert!(memo.bytes() > one);

        // A copy of it changed on the way (a result cut to the window, a
        // hook's rewrite) is sent as it is, not as the memo has it.
        let mut cut = (*conversation).clone();
        cut[1] = Message::user("read a (cut)");
        let cut = Arc::new(cut);
        let sent_cut = messages_of(sent(&request(&cut, &conversation)));
        assert_eq!(sent_cut[1]["content"], "read a (cut)");
        // And the memo still has the conversation's.
        let again = messages_of(sent(&request(&conversation, &conversation)));
        assert_eq!(again[1]["content"], "read a");
    }

    #[test]
    fn stream_assembles_text_tool_calls_and_usage() {
        let (reply, deltas) = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content":"check."}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"time","arguments":"{\"tz\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"UTC\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}"#,
            "[DONE]",
            r#"{"choices":[{"delta":{"content":"after done"}}]}"#,
        ]);
        let reply = reply.unwrap();
        assert_eq!(deltas, ["Let me ", "check."]);
        assert_eq!(reply.text, "Let me check.");
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall {
                    id: "call_a".into(),
                    name: "weather".into(),
                    arguments: r#"{"city":"Oslo"}"#.into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "time".into(),
                    arguments: r#"{"tz":"UTC"}"#.into()
                },
            ]
        );
        assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 34
            }
        );
    }

    #[test]
    fn repeated_names_and_missing_index_are_tolerated() {
        let (reply, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"weather","arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"weather","arguments":"ty\":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null,"content":null},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        let reply = reply.unwrap();
        assert_eq!(
            reply.tool_calls,
            [ToolCall {
                id: "c1".into(),
                name: "weather".into(),
                arguments: r#"{"city":1}"#.into()
            }]
        );
        // "stop" with tool calls means tool calls.
        assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn calls_are_assembled_by_index_else_by_id_in_the_order_asked() {
        let (reply, _) = feed(&[
            // By id only, interleaved; a late id; a chunk with neither.
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"z","function":{"name":"f","arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"g","arguments":"{\"y\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"z","function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let calls: Vec<(String, String, String)> = (reply.unwrap().tool_calls.into_iter())
            .map(|c| (c.id, c.name, c.arguments))
            .collect();
        let expected = [("z", "f", r#"{"x":1}"#), ("a", "g", r#"{"y":2}"#)]
            .map(|(i, n, a)| (i.to_string(), n.to_string(), a.to_string()));
        assert_eq!(calls, expected);

        // An id that comes after the call began is the call's own.
        let (reply, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"h","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"late","function":{"arguments":"}"}}]}}]}"#,
            "[DONE]",
        ]);
        let calls: Vec<(String, String, String)> = (reply.unwrap().tool_calls.into_iter())
            .map(|c| (c.id, c.name, c.arguments))
            .collect();
        assert_eq!(calls, [("late".into(), "h".into(), "{}".into())]);

        // Every call numbered 0, told apart by id.
        let (reply, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"g","arguments":"{\"q\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            "[DONE]",
        ]);
        let calls: Vec<(String, String)> = (reply.unwrap().tool_calls.into_iter())
            .map(|c| (c.id, c.arguments))
            .collect();
        assert_eq!(
            calls,
            [("b".into(), "{}".into()), ("a".into(), r#"{"q":1}"#.into())]
        );
    }

    #[test]
    fn error_events_and_bounds_end_the_reply() {
        let mut acc = Accumulator::new("openai:m", CallLimits::default());
        let error = acc
            .on_event(
                "error",
                r#"{"code":500,"message":"boom","type":"server_error"}"#,
                &mut |_: &str| {},
            )
            .unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Overloaded);
        assert_eq!(
            error.message,
            "the server reported an error: server_error: boom"
        );

        let limits = CallLimits {
            max_text: 5,
            max_arguments: 4,
            ..CallLimits::default()
        };
        let mut published = String::new();
        let mut acc = Accumulator::new("openai:m", limits);
        let mut sink = |t: &str| published.push_str(t);
        acc.on_data(r#"{"choices":[{"delta":{"content":"12345"}}]}"#, &mut sink)
            .unwrap();
        let error = acc
            .on_data(r#"{"choices":[{"delta":{"content":"6"}}]}"#, &mut sink)
            .unwrap_err();
        assert_eq!(
            (error.kind, error.message.as_str()),
            (
                LlmErrorKind::TooLarge,
                "the reply's text passed its bound of 5 bytes (--max-reply-text)"
            )
        );
        assert_eq!(published, "12345");
        let mut acc = Accumulator::new("openai:m", limits);
        let error = acc
            .on_data(
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}"#,
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
        let call = |id: &str, name: &str| {
            format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"id":"{id}","function":{{"name":"{name}"}}}}]}}}}]}}"#
            )
        };
        let arguments_bound = (
            LlmErrorKind::TooLarge,
            "the reply's tool-call arguments passed their bound of 10 bytes (--max-reply-arguments)",
        );
        // A long name, or a long id, with no arguments at all.
        let mut acc = Accumulator::new("openai:m", limits);
        let error = acc
            .on_data(&call("a", "nnnnnnnnnnn"), &mut |_: &str| {})
            .unwrap_err();
        assert_eq!((error.kind, error.message.as_str()), arguments_bound);
        let mut acc = Accumulator::new("openai:m", limits);
        let error = acc
            .on_data(&call("iiiiiiiiiii", "f"), &mut |_: &str| {})
            .unwrap_err();
        assert_eq!((error.kind, error.message.as_str()), arguments_bound);
        // Each new id starts a call: the third is past the bound.
        let mut acc = Accumulator::new("openai:m", limits);
        acc.on_data(&call("a", "f"), &mut |_: &str| {}).unwrap();
        acc.on_data(&call("b", "f"), &mut |_: &str| {}).unwrap();
        let error = acc.on_data(&call("c", "f"), &mut |_: &str| {}).unwrap_err();
        assert_eq!(
            (error.kind, error.message.as_str()),
            (
                LlmErrorKind::TooLarge,
                "the reply's tool calls passed their bound of 2 calls"
            )
        );
    }

    #[test]
    fn arguments_that_are_not_a_json_object_are_sent_back_as_an_empty_object() {
        let call = |id: &str, arguments: &str| ToolCall {
            id: id.into(),
            name: "f".into(),
            arguments: arguments.into(),
        };
        let request = ChatRequest {
            messages: vec![Message::Assistant {
                content: String::new(),
                tool_calls: vec![
                    call("ok", r#"{"a": 1}"#),
                    call("cut", r#"{"a"#),
                    call("text", "6 * 7"),
                    call("array", "[1]"),
                ],
            }]
            .into(),
            ..ChatRequest::default()
        };
        let body = body(&config(false), &request);
        let sent: Vec<&str> = (body["messages"][0]["tool_calls"].as_array().unwrap().iter())
            .map(|c| c["function"]["arguments"].as_str().unwrap())
            .collect();
        assert_eq!(sent, [r#"{"a": 1}"#, "{}", "{}", "{}"]);
    }

    #[test]
    fn a_call_without_id_or_arguments_gets_defaults() {
        let (reply, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"now"}}]},"finish_reason":"function_call"}]}"#,
            "[DONE]",
        ]);
        let reply = reply.unwrap();
        assert_eq!(
            reply.tool_calls,
            [ToolCall {
                id: "call_0".into(),
                name: "now".into(),
                arguments: "{}".into()
            }]
        );
        assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn finish_reasons_are_mapped() {
        for (said, expected) in [
            ("stop", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("eos", FinishReason::Other("eos".into())),
        ] {
            let chunk = format!(
                r#"{{"choices":[{{"delta":{{"content":"x"}},"finish_reason":"{said}"}}]}}"#
            );
            let (reply, _) = feed(&[&chunk, "[DONE]"]);
            assert_eq!(reply.unwrap().finish_reason, expected, "{said}");
        }
    }

    #[test]
    fn malformed_json_is_a_protocol_error() {
        let (reply, _) = feed(&[
            r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
            "{not json at all",
        ]);
        let error = reply.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Protocol);
        assert!(
            error.message.contains("{not json at all"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_stream_that_ends_early_is_a_network_error() {
        let (reply, deltas) = feed(&[r#"{"choices":[{"delta":{"content":"Hel"}}]}"#]);
        let error = reply.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Network);
        assert_eq!(
            error.message,
            "the stream ended before the reply was complete"
        );
        assert_eq!(deltas, ["Hel"]);
        // Without [DONE] but with a finish reason: accepted.
        let (reply, _) =
            feed(&[r#"{"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#]);
        assert_eq!(reply.unwrap().text, "Hi");
    }

    #[test]
    fn an_error_inside_the_stream_is_reported() {
        let (reply, _) = feed(&[
            r#"{"error":{"message":"Server overloaded","type":"server_error","code":null}}"#,
        ]);
        let error = reply.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Overloaded);
        assert!(
            error.message.contains("Server overloaded"),
            "{}",
            error.message
        );
        let (reply, _) =
            feed(&[r#"{"error":{"message":"context too long","type":"invalid_request_error"}}"#]);
        let refused = reply.unwrap_err();
        assert_eq!(refused.kind, LlmErrorKind::Refused);
        assert!(!refused.is_retryable());
    }

    #[test]
    fn a_whole_reply_is_parsed() {
        let reply: Completion = serde_json::from_str(
            r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,
                "tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},
                              {"id":"b","type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]},
                "finish_reason":"tool_calls"}],
                "usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        )
        .unwrap();
        let mut acc = Accumulator::new("openai:gpt-test", CallLimits::default());
        acc.on_completion(reply).unwrap();
        let reply = acc.finish().unwrap();
        assert_eq!(reply.text, "");
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[1].name, "g");
        assert_eq!(reply.tool_calls[1].arguments, r#"{"x":1}"#);
        assert_eq!(reply.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 5,
                output_tokens: 7
            }
        );

        let mut acc = Accumulator::new("openai:gpt-test", CallLimits::default());
        let empty: Completion = serde_json::from_str(r#"{"choices":[]}"#).unwrap();
        assert_eq!(
            acc.on_completion(empty).unwrap_err().kind,
            LlmErrorKind::Protocol
        );
    }
}
