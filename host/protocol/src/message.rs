//! A conversation as a session keeps it: [`Message`]s and the [`ToolCall`]s
//! an assistant message carries. The history a front end imports
//! ([`crate::Op::ImportHistory`]) is made of these, and the host stores and
//! sends exactly these.

use serde::{Deserialize, Serialize};

/// One message of a conversation, as kept in a session's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the call with the same id.
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl Message {
    pub fn user(content: impl Into<String>) -> Message {
        Message::User {
            content: content.into(),
        }
    }

    pub fn system(content: impl Into<String>) -> Message {
        Message::System {
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message::Assistant {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model wrote them: a JSON object's text,
    /// or whatever the model produced (checked before the tool runs).
    pub arguments: String,
}

#[cfg(test)]
mod tests {
    use crate::Op;

    #[test]
    fn an_import_carries_the_messages_as_the_history_keeps_them() {
        let op: Op = serde_json::from_value(serde_json::json!({
            "type": "import_history", "session": "s",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "c1", "name": "add", "arguments": "{}"}]},
                {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "3"},
            ],
        }))
        .unwrap();
        let Op::ImportHistory { session, messages } = &op else {
            panic!("{op:?}");
        };
        assert_eq!(session, "s");
        assert_eq!(messages.len(), 3);
        let back = serde_json::to_value(&op).unwrap();
        assert_eq!(back["messages"][2]["tool_call_id"], "c1");
        assert!(back["messages"][2].get("is_error").is_none());
    }
}
