//! The provider-neutral shape of a chat: messages, tool calls, a request and
//! a reply. Each provider translates these to and from its wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use wasmclaw_protocol::{FinishReason, Usage};

/// The conversation's messages are wire types: a front end imports a
/// history of them ([`crate::protocol::Op::ImportHistory`]).
pub use wasmclaw_protocol::{Message, ToolCall};

/// What the host adds to [`ToolCall`], which is a wire type (serde only).
pub trait ForHistory {
    /// The call as the history keeps it: its arguments as sent when they
    /// are a JSON object, else `{}` (see [`valid_arguments`]).
    fn for_history(&self) -> ToolCall;
}

impl ForHistory for ToolCall {
    fn for_history(&self) -> ToolCall {
        ToolCall {
            arguments: valid_arguments(&self.arguments).to_string(),
            ..self.clone()
        }
    }
}

/// `arguments` when they are a JSON object's text, else `{}`: what a
/// history may carry and a request may send back. Both APIs require an
/// object (Anthropic's `input`; servers of the OpenAI format, such as
/// llama.cpp, refuse a history whose arguments do not parse), and `{}`
/// claims nothing the model did not say; the tool's result tells the model
/// what was wrong with what it sent.
pub fn valid_arguments(arguments: &str) -> &str {
    let is_object = arguments.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok();
    if is_object { arguments } else { "{}" }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// Whether the model may, must or must not call tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
}

/// One call to a model.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The conversation; a leading `System` message is the system prompt.
    /// Shared with the turn's conversation it was made from: a request is
    /// not a copy of the history.
    pub messages: std::sync::Arc<Vec<Message>>,
    /// Shared: the same list is offered on every call until the plugins
    /// change.
    pub tools: std::sync::Arc<Vec<ToolDef>>,
    pub tool_choice: ToolChoice,
    /// Most tokens in the reply; providers that require a value use 4096.
    pub max_tokens: Option<u32>,
    /// Another model of the same provider than the candidate's own (a
    /// SubTurn's).
    pub model: Option<String>,
    /// The JSON of the conversation's messages kept from earlier calls,
    /// used if `messages` is the list it stands for (see `llm/memo.rs`).
    pub memo: Option<super::memo::MemoRef>,
}

/// The model's whole reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
}

/// Receives text as it streams in; called zero or more times per request.
pub type DeltaSink<'a> = &'a mut (dyn FnMut(&str) + Send);
