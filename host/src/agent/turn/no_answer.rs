//! The rule that a completed turn has an answer.
//!
//! A reply that would end the turn must have text. When it has none, or when
//! the turn's last call (which forbids tools with `tool_choice: none`) still
//! asks for tools (some servers ignore `tool_choice`), the turn publishes an
//! `llm_retry` (its text, if any, is void) and makes the call once more
//! without tools declared. A reply still without text ends the turn with an
//! `error` that says so: an empty answer is never a success.
//!
//! Without tools declared, a request may not hold tool calls and results in
//! the providers' own shapes (Anthropic refuses `tool_use` blocks without
//! tools), so the retry shows the turn's tool rounds to the model as text.

use super::model_call::Asked;
use super::{Failure, Turn};
use crate::hooks::HookSet;
use crate::llm::{ChatRequest, ChatResponse, Message, ToolCall};
use crate::protocol::{EventBody, LlmRetry, ToolCallSkipped, TurnErrorKind};

impl Turn {
    /// `reply` (from `model`, to `request`), or, when it is no answer, the
    /// reply to the same request without tools. The first reply's tool
    /// calls are skipped for `skip_reason`.
    pub(super) async fn insist_on_answer(
        &mut self,
        hooks: &HookSet,
        request: &ChatRequest,
        (reply, model): (ChatResponse, String),
        last: bool,
        skip_reason: &str,
    ) -> Result<Asked, Failure> {
        let Some(problem) = problem(&reply, last) else {
            return Ok(Asked::Reply {
                response: reply,
                model,
            });
        };
        // Offered no tools, the model asked anyway: the history keeps no
        // unanswered call.
        self.skip_calls(&reply.tool_calls, skip_reason);
        self.publish(EventBody::LlmRetry(LlmRetry {
            iteration: self.iterations,
            model: model.clone(),
            attempt: 1,
            error: format!("no answer: {problem}; asking once more without tools"),
            next_model: model,
            delay_ms: 0,
            discard_partial: !reply.text.is_empty(),
        }));
        let retry = hooks
            .before_llm(&self.hook_scope(), without_tools(request))
            .await?;
        let (mut reply, model) = match self.call(hooks, &retry).await? {
            Asked::Reply { response, model } => (response, model),
            dropped => return Ok(dropped),
        };
        self.skip_calls(&reply.tool_calls, NO_TOOLS_OFFERED);
        reply.tool_calls.clear();
        if reply.text.trim().is_empty() {
            return Err(Failure::error(TurnErrorKind::NoAnswer, failure(&problem)));
        }
        Ok(Asked::Reply {
            response: reply,
            model,
        })
    }

    /// Tool calls the turn will not run: one `tool_call_skipped` each.
    fn skip_calls(&self, calls: &[ToolCall], reason: &str) {
        for call in calls {
            self.publish(EventBody::ToolCallSkipped(ToolCallSkipped {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                reason: reason.to_string(),
            }));
        }
    }
}

/// The reason given for tool calls in a reply to a request without tools.
const NO_TOOLS_OFFERED: &str = "no tools were offered for this call";

/// Why `reply` cannot end the turn, if it cannot: `last` is the turn's last
/// allowed call.
fn problem(reply: &ChatResponse, last: bool) -> Option<String> {
    if last && !reply.tool_calls.is_empty() {
        let names: Vec<&str> = reply.tool_calls.iter().map(|c| c.name.as_str()).collect();
        return Some(format!(
            "it asked for tools ({}) on the turn's last call, which allows none",
            names.join(", ")
        ));
    }
    if reply.tool_calls.is_empty() && reply.text.trim().is_empty() {
        return Some("its reply was empty".to_string());
    }
    None
}

/// The reason of a turn whose retry without tools gave no text either.
fn failure(problem: &str) -> String {
    format!(
        "the model gave no answer: {problem}, and asked once more without tools, it gave no text either"
    )
}

/// `request` with no tools declared, and its tool rounds as text.
fn without_tools(request: &ChatRequest) -> ChatRequest {
    let messages: Vec<Message> = request
        .messages
        .iter()
        .map(|message| match message {
            Message::Assistant {
                content,
                tool_calls,
            } if !tool_calls.is_empty() => {
                let mut text = content.clone();
                for call in tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("[called {} with {}]", call.name, call.arguments));
                }
                Message::Assistant {
                    content: text,
                    tool_calls: Vec::new(),
                }
            }
            Message::Tool {
                name,
                content,
                is_error,
                ..
            } => {
                let outcome = if *is_error { "failed" } else { "returned" };
                Message::user(format!("[{name} {outcome}: {content}]"))
            }
            other => other.clone(),
        })
        .collect();
    ChatRequest {
        messages: messages.into(),
        tools: Default::default(),
        tool_choice: Default::default(),
        ..request.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolChoice;
    use crate::llm::{FinishReason, ToolDef, Usage};

    fn reply(text: &str, tools: &[&str]) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            tool_calls: tools
                .iter()
                .map(|name| ToolCall {
                    id: format!("id-{name}"),
                    name: name.to_string(),
                    arguments: "{}".into(),
                })
                .collect(),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        }
    }

    #[test]
    fn a_reply_without_text_or_with_tools_on_the_last_call_is_no_answer() {
        assert_eq!(problem(&reply("Hi.", &[]), true), None);
        assert_eq!(problem(&reply("", &["add"]), false), None);
        assert_eq!(
            problem(&reply(" \n", &[]), false).as_deref(),
            Some("its reply was empty")
        );
        assert_eq!(
            problem(&reply("Let me add.", &["add", "sub"]), true).as_deref(),
            Some("it asked for tools (add, sub) on the turn's last call, which allows none")
        );
    }

    #[test]
    fn the_retry_declares_no_tools_and_shows_tool_rounds_as_text() {
        let call = ToolCall {
            id: "c1".into(),
            name: "add".into(),
            arguments: r#"{"a":1,"b":2}"#.into(),
        };
        let request = ChatRequest {
            memo: None,
            messages: vec![
                Message::system("Be brief."),
                Message::user("1 + 2?"),
                Message::Assistant {
                    content: "Adding.".into(),
                    tool_calls: vec![call.clone()],
                },
                Message::Tool {
                    tool_call_id: "c1".into(),
                    name: "add".into(),
                    content: "3".into(),
                    is_error: false,
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call],
                },
                Message::Tool {
                    tool_call_id: "c1".into(),
                    name: "add".into(),
                    content: "error (timeout): too slow".into(),
                    is_error: true,
                },
            ]
            .into(),
            tools: std::sync::Arc::new(vec![ToolDef {
                name: "add".into(),
                description: "adds".into(),
                parameters: serde_json::json!({"type": "object"}),
            }]),
            tool_choice: ToolChoice::None,
            max_tokens: Some(100),
            model: Some("small".into()),
        };
        let retry = without_tools(&request);
        assert!(retry.tools.is_empty());
        assert_eq!(retry.tool_choice, ToolChoice::Auto);
        assert_eq!(
            (retry.max_tokens, retry.model.as_deref()),
            (Some(100), Some("small"))
        );
        let assistant = |content: &str| Message::Assistant {
            content: content.into(),
            tool_calls: vec![],
        };
        assert_eq!(
            retry.messages[..],
            [
                Message::system("Be brief."),
                Message::user("1 + 2?"),
                assistant("Adding.\n[called add with {\"a\":1,\"b\":2}]"),
                Message::user("[add returned: 3]"),
                assistant("[called add with {\"a\":1,\"b\":2}]"),
                Message::user("[add failed: error (timeout): too slow]"),
            ]
        );
    }
}
