//! Long sessions for the compaction tests and benchmark: a fake model that
//! plays a session with large tool outputs against a small context window,
//! and an agent set up for it.
//!
//! The model's script, from the request:
//! - a summarizing call (the compaction prompt): `summary: ` and every
//!   `fact-N` the transcript mentions;
//! - after a tool result: another call as the user message asks (`rounds
//!   N`: N rounds of calls in the turn, each as `big` says), else `done: `
//!   and the result's first 24 bytes;
//! - a last user message `call TOOL {json}`: that tool call;
//! - a last user message with `big N`: an `echo` call whose text is N
//!   bytes, starting with the message's `fact-N` words;
//! - anything else: `ok`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::AgentConfig;
use wasmclaw::agent::context::{ContextConfig, DEFAULT_PROMPT};
use wasmclaw::bus::Subscription;
use wasmclaw::core::Core;
use wasmclaw::llm::ProviderConfig;
use wasmclaw::protocol::{EventBody, Op};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;

use crate::PluginDir;
use crate::agents::{core_with, openai, tool_outputs, until};
use crate::fake_model::{
    FakeModel, Options, Reply, Responder, Served, ToolCallReply, Window, after_tool_result,
};

/// `pairs` exchanges of a user message of about `bytes` bytes (naming
/// `fact-{tag}{k}`) and a short answer: history to import.
pub fn exchanges(tag: &str, pairs: usize, bytes: usize) -> Vec<wasmclaw::llm::Message> {
    use wasmclaw::llm::Message;
    let mut messages = Vec::new();
    for k in 1..=pairs {
        let mut text = format!("fact-{tag}{k}");
        while text.len() < bytes {
            text.push(' ');
            text.push_str(FILLER);
        }
        messages.push(Message::user(text));
        messages.push(Message::assistant(format!("noted {k}")));
    }
    messages
}

/// Words of filler for tool outputs: prose, as a tool that reads files gives.
const FILLER: &str = "The quick brown fox jumps over the lazy dog while the session goes on. ";

/// The text of the last user message of an OpenAI or Anthropic request.
pub fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let user = messages.iter().rev().find(|m| {
        m["role"] == "user"
            && (m["content"].is_string()
                || (m["content"].as_array()).is_some_and(|b| b.iter().any(|b| b["type"] == "text")))
    });
    let Some(user) = user else {
        return String::new();
    };
    match &user["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => (blocks.iter())
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether `body` is a summarizing call (its system prompt is the default
/// compaction prompt).
pub fn is_summarizing(body: &Value) -> bool {
    let prompt_start = &DEFAULT_PROMPT[..40];
    let system = body["system"].as_str().map(str::to_string).or_else(|| {
        (body["messages"][0]["role"] == "system").then(|| {
            body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    });
    system.is_some_and(|s| s.starts_with(prompt_start))
}

/// The `fact-N` words of `text`, in order, each once.
pub fn facts(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        if word.starts_with("fact-") && !found.iter().any(|f| f == word) {
            found.push(word.to_string());
        }
    }
    found
}

/// The script's reply to `body` (see the module's doc); `ids` numbers the
/// tool calls.
pub fn reply(body: &Value, ids: &AtomicU64) -> Reply {
    if is_summarizing(body) {
        let transcript = last_user_text(body);
        return Reply::text(format!("summary: {}", facts(&transcript).join(" ")));
    }
    let user = last_user_text(body);
    let id = format!("call_{}", ids.fetch_add(1, Ordering::Relaxed));
    if after_tool_result(body) {
        let wanted = number_after(&user, "rounds").unwrap_or(1);
        if rounds_done(body) < wanted {
            return big_call(&user, &id);
        }
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        let result = match &last["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => (blocks.iter().rev())
                .find_map(|b| match &b["content"] {
                    Value::String(s) => Some(s.clone()),
                    Value::Array(inner) => inner[0]["text"].as_str().map(String::from),
                    _ => None,
                })
                .unwrap_or_default(),
            _ => String::new(),
        };
        let start: String = result.chars().take(24).collect();
        return Reply::text(format!("done: {start}"));
    }
    if let Some(rest) = user.strip_prefix("call ") {
        let (tool, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
        return Reply::ToolCalls {
            text: String::new(),
            calls: vec![ToolCallReply {
                id,
                name: tool.to_string(),
                arguments: serde_json::from_str(args).expect("call TOOL {json}"),
            }],
        };
    }
    if number_after(&user, "big").is_some() {
        return big_call(&user, &id);
    }
    Reply::text("ok")
}

/// The number after the word `word` in `text`.
fn number_after(text: &str, word: &str) -> Option<usize> {
    (text.split_whitespace())
        .skip_while(|w| *w != word)
        .nth(1)
        .and_then(|n| n.parse().ok())
}

/// The tool results after the last user text of `body`: the rounds of
/// calls of the turn so far.
fn rounds_done(body: &Value) -> usize {
    let messages = body["messages"].as_array().unwrap();
    let is_text = |m: &Value| {
        m["role"] == "user"
            && (m["content"].is_string()
                || (m["content"].as_array()).is_some_and(|b| b.iter().any(|b| b["type"] == "text")))
    };
    let start = messages.iter().rposition(is_text).unwrap_or(0);
    (messages[start..].iter())
        .filter(|m| {
            m["role"] == "tool"
                || (m["content"].as_array())
                    .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result"))
        })
        .count()
}

/// The `echo` call `big N` asks for: N bytes of text that start with the
/// message's facts.
fn big_call(user: &str, id: &str) -> Reply {
    let n = number_after(user, "big").unwrap_or(100);
    let mut text = facts(user).join(" ");
    while text.len() < n {
        text.push(' ');
        text.push_str(FILLER);
    }
    text.truncate(n);
    Reply::tool(id, "echo", json!({ "text": text }))
}

/// A fake model that plays the script, with `window` (answered as
/// `served` errs when a request is over it).
pub async fn model(window: Option<u64>, served: Served) -> FakeModel {
    let ids = Arc::new(AtomicU64::new(1));
    let options = Options {
        responder: Some(Responder::new(move |body| reply(body, &ids))),
        window: window.map(|tokens| Window {
            tokens,
            answers_as: served,
        }),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

/// An agent that knows its model's `window` (None: it learns it from the
/// provider's error), keeps one user turn verbatim, asks for 200 output
/// tokens.
pub fn config(window: Option<u64>) -> AgentConfig {
    AgentConfig {
        max_tokens: Some(200),
        context: ContextConfig {
            window,
            keep_user_turns: 1,
            ..ContextConfig::default()
        },
        ..AgentConfig::default()
    }
}

/// A core over the `echo` plugin and `fake` (OpenAI format, streamed),
/// with its store and a lossless subscription.
pub async fn core(
    dir: &PluginDir,
    fake: &FakeModel,
    config: AgentConfig,
) -> (Core, Subscription, Store) {
    core_of(
        dir,
        vec![openai(fake, "m", true)],
        config,
        Store::open_in_memory().unwrap(),
    )
    .await
}

/// [`core`] over `candidates` and `store`.
pub async fn core_of(
    dir: &PluginDir,
    candidates: Vec<ProviderConfig>,
    config: AgentConfig,
    store: Store,
) -> (Core, Subscription, Store) {
    dir.add("echo");
    let schedule = SchedulerConfig::default();
    let (core, events) = core_with(
        dir.load().await,
        candidates,
        store.clone(),
        config,
        schedule,
    );
    (core, events, store)
}

/// A user message for `session`.
pub fn message(session: &str, content: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: None,
    }
}

/// Runs one turn of `session` whose model calls `tool` with `args`, and
/// returns the tool's output: how a test asks a built-in (`history_search`)
/// what the session holds.
pub async fn tool_output_in_a_turn(
    core: &Core,
    events: &mut Subscription,
    session: &str,
    tool: &str,
    args: Value,
    limit: Duration,
) -> String {
    let (_, outcome) = core
        .run(message(session, &format!("call {tool} {args}")))
        .await
        .unwrap();
    let turn_id = outcome.expect("a turn ran").turn_id;
    let seen = until(events, limit, |e| {
        e.turn_id.as_deref() == Some(&turn_id) && matches!(e.body, EventBody::TurnEnd(_))
    })
    .await;
    let seen: Vec<_> = (seen.into_iter())
        .filter(|e| e.turn_id.as_deref() == Some(&turn_id))
        .collect();
    let mut outputs = tool_outputs(&seen);
    assert_eq!(outputs.len(), 1, "one call of {tool}");
    outputs.remove(0)
}
