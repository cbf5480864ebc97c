//! A model that plays replies from a JSON file: the offline demo's model,
//! and a way to try plugins and hooks end to end without an API key.
//!
//! ```json
//! {
//!   "turns": [
//!     {
//!       "when": "plants",
//!       "replies": [
//!         { "text": "Let me write that down.",
//!           "tool_calls": [{ "name": "write_file",
//!                            "arguments": { "path": "todo.md", "content": "- water the plants" } }] },
//!         { "text": "Saved: {{tool:write_file}}" }
//!       ]
//!     },
//!     { "replies": [{ "text": "I only know the demo script." }] }
//!   ]
//! }
//! ```
//!
//! For each request the model takes the last user message, picks the first
//! turn whose `when` occurs in it (ignoring case; a turn without `when`
//! matches anything), and plays reply N, where N counts the assistant
//! messages since that user message. `{{tool:NAME}}` in a reply's text is
//! replaced by the latest result of tool NAME. Text is streamed word by
//! word. Token usage is estimated at four characters a token.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::types::{ChatRequest, ChatResponse, DeltaSink, FinishReason, Message, ToolCall, Usage};
use super::{LlmError, LlmErrorKind, ProviderConfig};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    turns: Vec<ScriptTurn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptTurn {
    #[serde(default)]
    when: Option<String>,
    replies: Vec<ScriptReply>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptReply {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A model script that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("reading the model script {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "the model script {} is not valid: {error}; expected {{\"turns\": [{{\"when\": \"...\", \"replies\": [{{\"text\": \"...\", \"tool_calls\": [{{\"name\": \"...\", \"arguments\": {{}}}}]}}]}}]}}",
        path.display()
    )]
    Invalid {
        path: PathBuf,
        error: serde_json::Error,
    },
}

pub struct Scripted {
    name: String,
    script: Script,
}

impl Scripted {
    /// Reads the script named by `config.model`; the error names the file
    /// and what is wrong with it.
    pub fn load(config: &ProviderConfig) -> Result<Scripted, ScriptError> {
        let path = Path::new(&config.model);
        let text = std::fs::read_to_string(path).map_err(|error| ScriptError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        let script: Script = serde_json::from_str(&text).map_err(|error| ScriptError::Invalid {
            path: path.to_path_buf(),
            error,
        })?;
        Ok(Scripted {
            name: config.name(),
            script,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let last_user = request
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
            .ok_or_else(|| self.error("the request has no user message".into()))?;
        let Message::User { content: said } = &request.messages[last_user] else {
            unreachable!()
        };
        let since = &request.messages[last_user + 1..];
        let turn = self
            .script
            .turns
            .iter()
            .find(|t| {
                t.when
                    .as_ref()
                    .is_none_or(|w| said.to_lowercase().contains(&w.to_lowercase()))
            })
            .ok_or_else(|| {
                self.error(format!(
                    "no turn of the script matches the message {said:?}"
                ))
            })?;
        let index = since
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let reply = turn.replies.get(index).ok_or_else(|| {
            self.error(format!(
                "the script has {} replies for {said:?}; reply {} was asked for",
                turn.replies.len(),
                index + 1
            ))
        })?;

        let text = fill_in(&reply.text, since);
        let mut words = text.split_inclusive(' ').peekable();
        while let Some(word) = words.next() {
            on_delta(word);
            if words.peek().is_some() {
                tokio::task::yield_now().await;
            }
        }
        let tool_calls: Vec<ToolCall> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(n, call)| ToolCall {
                id: format!("call_{}_{}", index + 1, n + 1),
                name: call.name.clone(),
                arguments: call.arguments.to_string(),
            })
            .collect();
        let prompt_chars: usize = request
            .messages
            .iter()
            .map(|m| serde_json::to_string(m).map_or(0, |s| s.len()))
            .sum();
        let reply_chars = text.len()
            + tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.len())
                .sum::<usize>();
        Ok(ChatResponse {
            finish_reason: if tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            text,
            tool_calls,
            usage: Usage {
                input_tokens: prompt_chars.div_ceil(4) as u64,
                output_tokens: reply_chars.div_ceil(4) as u64,
            },
        })
    }

    fn error(&self, message: String) -> LlmError {
        LlmError::new(&self.name, LlmErrorKind::Config, message)
    }
}

/// Replaces each `{{tool:NAME}}` with the latest result of tool NAME in
/// `messages`; unknown names are left as they are.
fn fill_in(text: &str, messages: &[Message]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{tool:") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let name = &rest[start + 7..start + len];
        let result = messages.iter().rev().find_map(|m| match m {
            Message::Tool {
                name: n, content, ..
            } if n == name => Some(content.as_str()),
            _ => None,
        });
        out.push_str(&rest[..start]);
        out.push_str(result.unwrap_or(&rest[start..start + len + 2]));
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tool_result(name: &str, content: &str) -> Message {
        Message::Tool {
            tool_call_id: "c".into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
        }
    }

    #[test]
    fn fills_in_the_latest_result_of_a_tool() {
        let messages = [
            tool_result("calc", "1"),
            tool_result("calc", "42"),
            tool_result("other", "x"),
        ];
        assert_eq!(
            fill_in("= {{tool:calc}}, {{tool:nope}} {{tool:", &messages),
            "= 42, {{tool:nope}} {{tool:"
        );
    }

    #[tokio::test]
    async fn plays_the_reply_for_the_matching_turn_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.json");
        std::fs::write(
            &path,
            r#"{"turns":[{"when":"Sum","replies":[{"tool_calls":[{"name":"calc","arguments":{"e":"1+1"}}]},{"text":"It is {{tool:calc}}."}]},{"replies":[{"text":"Hello there"}]}]}"#,
        )
        .unwrap();
        let config =
            ProviderConfig::parse(&format!("scripted:{}", path.display()), |_| None).unwrap();
        let model = Scripted::load(&config).unwrap();
        let mut streamed = String::new();
        let mut request = ChatRequest {
            messages: vec![Message::user("what is the sum?")].into(),
            ..Default::default()
        };
        let first = model
            .chat(&request, &mut |t| streamed.push_str(t))
            .await
            .unwrap();
        assert_eq!(first.tool_calls[0].name, "calc");
        assert_eq!(first.tool_calls[0].arguments, r#"{"e":"1+1"}"#);
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        Arc::make_mut(&mut request.messages).push(Message::Assistant {
            content: String::new(),
            tool_calls: first.tool_calls,
        });
        Arc::make_mut(&mut request.messages).push(tool_result("calc", "2"));
        let second = model
            .chat(&request, &mut |t| streamed.push_str(t))
            .await
            .unwrap();
        assert_eq!(second.text, "It is 2.");
        assert_eq!(streamed, "It is 2.");
        Arc::make_mut(&mut request.messages).push(Message::user("hi"));
        assert_eq!(
            model.chat(&request, &mut |_| {}).await.unwrap().text,
            "Hello there"
        );
        Arc::make_mut(&mut request.messages).push(Message::Assistant {
            content: "Hello there".into(),
            tool_calls: vec![],
        });
        let error = model.chat(&request, &mut |_| {}).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "scripted:{}: the script has 1 replies for \"hi\"; reply 2 was asked for",
                path.display()
            )
        );
    }
}
