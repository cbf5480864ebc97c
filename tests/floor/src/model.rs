//! The floor's model client: the request written from the held messages
//! and the tools' definitions serialized once, sent by reqwest, and the
//! answer's SSE stream parsed chunk by chunk (OpenAI's chat completions).

use axum::http::header;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::text;

/// As many tools as `serve` offers the model with the echo plugin loaded.
pub const TOOLS: usize = 9;

pub struct Model {
    pub name: String,
    url: String,
    client: reqwest::Client,
    /// The tools' definitions, serialized once.
    tools: Box<RawValue>,
}

/// What the model answered.
#[derive(Default)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<Call>,
    pub usage: Usage,
}

/// Tokens, as the model counts them.
#[derive(Deserialize, Default, Clone, Copy)]
pub struct Usage {
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

impl Usage {
    /// As an event's body names it.
    pub fn json(&self) -> Value {
        json!({"input_tokens": self.prompt_tokens, "output_tokens": self.completion_tokens})
    }
}

/// A tool call the model asked for.
#[derive(Default, Clone, Serialize, Deserialize)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl Model {
    pub fn new(base_url: &str, name: String) -> Model {
        Model {
            name,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            client: reqwest::Client::builder().build().expect("an HTTP client"),
            tools: tools(),
        }
    }

    /// The request's JSON, written straight from the held messages (a
    /// `json!` value would parse each of them again).
    pub fn request(&self, messages: &[Box<RawValue>]) -> Vec<u8> {
        #[derive(Serialize)]
        struct Request<'a> {
            model: &'a str,
            stream: bool,
            stream_options: StreamOptions,
            tools: &'a RawValue,
            messages: &'a [Box<RawValue>],
        }
        #[derive(Serialize)]
        struct StreamOptions {
            include_usage: bool,
        }
        serde_json::to_vec(&Request {
            model: &self.name,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: &self.tools,
            messages,
        })
        .expect("a request is JSON")
    }

    /// Sends `body` and reads the answer's stream.
    pub async fn call(&self, body: Vec<u8>) -> Result<Reply, String> {
        let mut response = self
            .client
            .post(&self.url)
            .header(header::CONTENT_TYPE, "application/json")
            .bearer_auth("none")
            .body(body)
            .send()
            .await
            .map_err(text)?
            .error_for_status()
            .map_err(text)?;
        let mut reply = Reply::default();
        let mut buffer = Vec::new();
        while let Some(bytes) = response.chunk().await.map_err(text)? {
            buffer.extend_from_slice(&bytes);
            let mut start = 0;
            while let Some(end) = memchr::memchr(b'\n', &buffer[start..]) {
                let line = &buffer[start..start + end];
                start += end + 1;
                let Some(data) = line.strip_prefix(b"data: ") else {
                    continue;
                };
                if data == b"[DONE]" {
                    return Ok(reply);
                }
                let chunk: Chunk = serde_json::from_slice(data).map_err(text)?;
                for choice in chunk.choices {
                    reply.add(choice.delta);
                }
                if let Some(usage) = chunk.usage {
                    reply.usage = usage;
                }
            }
            buffer.drain(..start);
        }
        Err("the stream ended without [DONE]".into())
    }
}

impl Reply {
    fn add(&mut self, delta: Delta) {
        self.text
            .push_str(delta.content.as_deref().unwrap_or_default());
        for call in delta.tool_calls {
            if call.index >= self.calls.len() {
                self.calls.resize(call.index + 1, Call::default());
            }
            let to = &mut self.calls[call.index];
            to.id.push_str(call.id.as_deref().unwrap_or_default());
            if let Some(function) = call.function {
                to.name
                    .push_str(function.name.as_deref().unwrap_or_default());
                to.arguments
                    .push_str(function.arguments.as_deref().unwrap_or_default());
            }
        }
    }
}

/// A message as the request carries it, and as the messages table keeps
/// it (the host's own form, which differs for tool calls and results).
pub struct Message {
    pub wire: Box<RawValue>,
    pub stored: String,
}

impl Message {
    pub fn user(content: &str) -> Message {
        Message::same(&json!({"role": "user", "content": content}))
    }

    pub fn assistant(reply: &Reply) -> Message {
        if reply.calls.is_empty() {
            return Message::same(&json!({"role": "assistant", "content": reply.text}));
        }
        Message {
            wire: calls_wire(&reply.calls),
            stored: json!({"role": "assistant", "content": reply.text, "tool_calls": reply.calls})
                .to_string(),
        }
    }

    pub fn tool(call: &Call, content: &str) -> Message {
        Message {
            wire: raw(&json!({"role": "tool", "tool_call_id": call.id, "content": content})),
            stored: json!({"role": "tool", "tool_call_id": call.id, "name": call.name,
                           "content": content})
            .to_string(),
        }
    }

    /// A message whose two forms are one.
    fn same(value: &Value) -> Message {
        let wire = raw(value);
        let stored = wire.get().to_string();
        Message { wire, stored }
    }

    /// The request's form of a message as the table keeps it.
    pub fn wire_of(stored: &str) -> Result<Box<RawValue>, String> {
        /// The fields of the host's form that differ from the request's.
        #[derive(Deserialize)]
        struct Stored {
            role: String,
            #[serde(default)]
            content: String,
            #[serde(default)]
            tool_calls: Vec<Call>,
            #[serde(default)]
            tool_call_id: String,
        }
        let message: Stored = serde_json::from_str(stored).map_err(text)?;
        Ok(match message.role.as_str() {
            "assistant" if !message.tool_calls.is_empty() => calls_wire(&message.tool_calls),
            "tool" => raw(
                &json!({"role": "tool", "tool_call_id": message.tool_call_id,
                                  "content": message.content}),
            ),
            _ => RawValue::from_string(stored.to_string()).map_err(text)?,
        })
    }
}

/// An assistant message asking for `calls`, as the request carries it.
fn calls_wire(calls: &[Call]) -> Box<RawValue> {
    let calls: Vec<Value> = (calls.iter())
        .map(|c| {
            json!({"id": c.id, "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    raw(&json!({"role": "assistant", "tool_calls": calls}))
}

/// [`TOOLS`] definitions the size of the echo plugin's.
fn tools() -> Box<RawValue> {
    let tools: Vec<Value> = (0..TOOLS)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": "Adds two integers and returns their sum as a decimal string.",
                "parameters": {"type": "object", "properties": {
                    "a": {"type": "integer", "description": "The first addend."},
                    "b": {"type": "integer", "description": "The second addend."}},
                    "required": ["a", "b"]}}})
        })
        .collect();
    raw(&tools)
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Delta,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallDelta>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: usize,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

fn raw(value: &impl Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("JSON")
}
