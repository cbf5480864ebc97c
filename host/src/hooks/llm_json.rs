//! A model request and response as hooks see them, and reading back what a
//! hook replaced them with.
//!
//! The request: `{"model", "messages", "tools": [names], "tool_choice",
//! "max_tokens"}`; the response: `{"text", "tool_calls", "finish_reason"}`.
//! Messages and tool calls have the shape of the session history. A
//! replacement must keep `messages`, `tools` and `tool_choice` (or `text`
//! and `tool_calls`); `model`, `max_tokens` and `finish_reason` left out stay
//! as they were. A replacement may drop tools, never add one: a hook cannot
//! offer the model a tool the turn does not have.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::llm::types::ToolChoice;
use crate::llm::{ChatRequest, ChatResponse, FinishReason, Message, ToolCall};

#[derive(Serialize)]
struct RequestView<'a> {
    model: &'a Option<String>,
    messages: &'a [Message],
    tools: Vec<&'a str>,
    tool_choice: ToolChoice,
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
struct ResponseView<'a> {
    text: &'a str,
    tool_calls: &'a [ToolCall],
    finish_reason: &'a FinishReason,
}

pub fn request_json(request: &ChatRequest) -> String {
    serde_json::to_string(&RequestView {
        model: &request.model,
        messages: &request.messages,
        tools: request.tools.iter().map(|t| t.name.as_str()).collect(),
        tool_choice: request.tool_choice,
        max_tokens: request.max_tokens,
    })
    .expect("a request serializes")
}

pub fn response_json(response: &ChatResponse) -> String {
    serde_json::to_string(&ResponseView {
        text: &response.text,
        tool_calls: &response.tool_calls,
        finish_reason: &response.finish_reason,
    })
    .expect("a response serializes")
}

/// Why a hook's replacement was refused: it names the field and what was
/// expected.
#[derive(Debug, thiserror::Error)]
pub enum BadReplacement {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("expected a JSON object")]
    NotAnObject,
    #[error("{field}: {problem}")]
    Field { field: String, problem: String },
}

impl BadReplacement {
    fn field(field: impl Into<String>, problem: impl Into<String>) -> BadReplacement {
        BadReplacement::Field {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// The request a hook's replacement describes; `before` is the one it
/// replaces.
pub fn request_from(json: &str, before: &ChatRequest) -> Result<ChatRequest, BadReplacement> {
    let mut doc = object(json)?;
    let messages: Vec<Message> = required(&mut doc, "messages")?;
    if messages.is_empty() {
        return Err(BadReplacement::field(
            "messages",
            "expected at least one message",
        ));
    }
    let names: Vec<String> = required(&mut doc, "tools")?;
    for name in &names {
        if !before.tools.iter().any(|t| &t.name == name) {
            return Err(BadReplacement::field(
                "tools",
                format!(
                    "{name:?} is not offered to this turn; a hook may remove tools, not add them"
                ),
            ));
        }
    }
    let tools = if names.len() == before.tools.len() {
        before.tools.clone()
    } else {
        Arc::new(
            before
                .tools
                .iter()
                .filter(|t| names.contains(&t.name))
                .cloned()
                .collect(),
        )
    };
    Ok(ChatRequest {
        messages: messages.into(),
        tools,
        tool_choice: required(&mut doc, "tool_choice")?,
        max_tokens: optional(&mut doc, "max_tokens")?.unwrap_or(before.max_tokens),
        model: optional(&mut doc, "model")?.unwrap_or_else(|| before.model.clone()),
        // The messages are the hook's: serialized whole.
        memo: None,
    })
}

/// The response a hook's replacement describes; the usage stays the
/// model's.
pub fn response_from(json: &str, before: &ChatResponse) -> Result<ChatResponse, BadReplacement> {
    let mut doc = object(json)?;
    let tool_calls: Vec<ToolCall> = required(&mut doc, "tool_calls")?;
    for (i, call) in tool_calls.iter().enumerate() {
        if call.id.is_empty() || call.name.is_empty() {
            return Err(BadReplacement::field(
                format!("tool_calls[{i}]"),
                "expected a non-empty id and name",
            ));
        }
        if tool_calls[..i].iter().any(|c| c.id == call.id) {
            return Err(BadReplacement::field(
                format!("tool_calls[{i}]"),
                format!("the id {:?} is used twice", call.id),
            ));
        }
    }
    Ok(ChatResponse {
        text: required(&mut doc, "text")?,
        tool_calls,
        finish_reason: optional(&mut doc, "finish_reason")?
            .unwrap_or_else(|| before.finish_reason.clone()),
        usage: before.usage,
    })
}

fn object(json: &str) -> Result<Map<String, Value>, BadReplacement> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(BadReplacement::NotAnObject),
        Err(e) => Err(BadReplacement::NotJson(e)),
    }
}

fn required<T: DeserializeOwned>(
    doc: &mut Map<String, Value>,
    field: &str,
) -> Result<T, BadReplacement> {
    let value = doc
        .remove(field)
        .ok_or_else(|| BadReplacement::field(field, "missing"))?;
    serde_json::from_value(value).map_err(|e| BadReplacement::field(field, e.to_string()))
}

/// `None` when the field is left out; `Some(value)` (which may be null)
/// when it is there.
fn optional<T: DeserializeOwned>(
    doc: &mut Map<String, Value>,
    field: &str,
) -> Result<Option<T>, BadReplacement> {
    doc.remove(field)
        .map(|value| {
            serde_json::from_value(value).map_err(|e| BadReplacement::field(field, e.to_string()))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolDef;

    fn request() -> ChatRequest {
        let tool = |name: &str| ToolDef {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        };
        ChatRequest {
            messages: vec![Message::system("be brief"), Message::user("hi")].into(),
            tools: Arc::new(vec![tool("add"), tool("read_file")]),
            max_tokens: Some(100),
            model: Some("m".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_request_round_trips_and_may_lose_tools_but_not_gain_them() {
        let before = request();
        let json = request_json(&before);
        assert_eq!(
            json,
            r#"{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"tools":["add","read_file"],"tool_choice":"auto","max_tokens":100}"#
        );
        let same = request_from(&json, &before).unwrap();
        assert_eq!(same.messages, before.messages);
        assert!(Arc::ptr_eq(&same.tools, &before.tools));

        let fewer = request_from(
            r#"{"messages":[{"role":"user","content":"x"}],"tools":["read_file"],"tool_choice":"none"}"#,
            &before,
        )
        .unwrap();
        assert_eq!(fewer.tools.len(), 1);
        assert_eq!(fewer.tools[0].name, "read_file");
        assert_eq!(fewer.tool_choice, ToolChoice::None);
        // Left out: unchanged.
        assert_eq!(
            (fewer.model.as_deref(), fewer.max_tokens),
            (Some("m"), Some(100))
        );

        let err = |json| request_from(json, &before).unwrap_err().to_string();
        assert_eq!(
            err(
                r#"{"messages":[{"role":"user","content":"x"}],"tools":["add","shell"],"tool_choice":"auto"}"#
            ),
            "tools: \"shell\" is not offered to this turn; a hook may remove tools, not add them"
        );
        assert_eq!(
            err(r#"{"tools":[],"tool_choice":"auto"}"#),
            "messages: missing"
        );
        assert!(
            err(r#"{"messages":[{"role":"robot"}],"tools":[],"tool_choice":"auto"}"#)
                .starts_with("messages: unknown variant `robot`"),
        );
        assert_eq!(err("[1]"), "expected a JSON object");
    }

    #[test]
    fn a_response_keeps_its_usage_and_checks_its_calls() {
        let before = ChatResponse {
            text: "hello".into(),
            tool_calls: vec![],
            finish_reason: FinishReason::Stop,
            usage: crate::llm::Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
        };
        let json = response_json(&before);
        assert_eq!(
            json,
            r#"{"text":"hello","tool_calls":[],"finish_reason":"stop"}"#
        );
        let after = response_from(r#"{"text":"bye","tool_calls":[]}"#, &before).unwrap();
        assert_eq!((after.text.as_str(), after.usage), ("bye", before.usage));
        assert_eq!(after.finish_reason, FinishReason::Stop);
        let twice = r#"{"text":"","tool_calls":[{"id":"a","name":"x","arguments":"{}"},{"id":"a","name":"y","arguments":"{}"}]}"#;
        assert_eq!(
            response_from(twice, &before).unwrap_err().to_string(),
            "tool_calls[1]: the id \"a\" is used twice"
        );
    }
}
