//! Hooks and sizes: a hook is shown what its memory budget can hold, so a
//! session with large tool results keeps working with the example hooks;
//! and what a hook puts in place of a tool's result is held to the tool's
//! own output limit.

use std::sync::Arc;

use serde_json::{Value, json};
use wasmclaw::agent::Agent;
use wasmclaw::bus::Subscription;
use wasmclaw::plugin::ErrorKind;
use wasmclaw::protocol::{Event, EventBody, HookEffect, HookError, ToolCallEnd, TurnStatus};
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent, drain, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply, ToolCallReply};
use wasmclaw_tests::{PluginDir, example_src};

/// The largest read of the example `files` tool.
const MIB: usize = 1 << 20;

/// Adds example plugin `name` with its shipped grants file.
/// Adds an example plugin with its own grants, but with hook time limits of
/// 10 s: these tests are about what a hook's memory budget lets it be shown,
/// and must not fail on a machine too busy to meet the examples' 250 ms.
fn example(dir: &PluginDir, name: &str) {
    dir.add(name);
    let grants = std::fs::read_to_string(example_src(name).join(format!("{name}.toml"))).unwrap();
    let grants = grants.replace("\ntimeout_ms = 250", "\ntimeout_ms = 10000");
    dir.grants(name, &grants);
}

async fn agent_over(dir: &PluginDir, fake: &FakeModel) -> (Arc<Agent>, Subscription) {
    let plugins = dir.load().await;
    for status in &plugins.catalog().plugins {
        if let wasmclaw::plugin::PluginStatus::Failed { name, error, .. } = status {
            panic!("{name} did not load: {error}");
        }
    }
    // Some replies here carry a call with arguments of 2 MiB, past the
    // default bound of a reply's arguments.
    let mut candidate = openai(fake, "fake-gpt", false);
    candidate.limits.max_arguments = 8 * MIB;
    agent(plugins, vec![candidate], Store::open_in_memory().unwrap())
}

/// A text file of exactly `len` bytes of 64-byte lines of double quotes
/// (each takes two bytes inside a JSON request: the worst case of the
/// escaping a JSON-heavy file gets), ending with `tail`.
fn text_file(len: usize, tail: &str) -> String {
    let line = format!("{}\n", "\"".repeat(63));
    let mut text = line.repeat((len - tail.len()) / 64);
    text.push_str(&"y".repeat(len - tail.len() - text.len()));
    text.push_str(tail);
    assert_eq!(text.len(), len);
    text
}

fn read(id: &str, path: &str) -> ToolCallReply {
    ToolCallReply {
        id: id.into(),
        name: "read_file".into(),
        arguments: json!({"path": path, "limit": MIB}),
    }
}

fn hook_errors(events: &[Arc<Event>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::HookError(HookError { hook, error, .. }) => Some(format!("{hook}: {error}")),
            _ => None,
        })
        .collect()
}

fn tool_outputs(events: &[Arc<Event>]) -> Vec<(bool, String, Option<ErrorKind>)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd {
                ok,
                output,
                error_kind,
                ..
            }) => Some((*ok, output.clone(), *error_kind)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_one_mib_results_do_not_brick_a_session_with_prompt_context() {
    let dir = PluginDir::new();
    let workspace = dir.scratch("workspace");
    let a = text_file(MIB, "end of a\n");
    let b = text_file(MIB, "end of b\n");
    std::fs::write(workspace.join("a.txt"), &a).unwrap();
    std::fs::write(workspace.join("b.txt"), &b).unwrap();
    example(&dir, "files");
    example(&dir, "prompt_context");
    let fake = FakeModel::start([
        Reply::tool("c1", "read_file", json!({"path": "a.txt", "limit": MIB})),
        Reply::ToolCalls {
            text: String::new(),
            calls: vec![read("c2", "b.txt")],
        },
        Reply::text("read both"),
        Reply::text("second"),
        Reply::text("third"),
    ])
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    for (input, answer) in [
        ("read", "read both"),
        ("again", "second"),
        ("more", "third"),
    ] {
        let outcome = agent.run_turn("s", input).await;
        let events = drain(&mut sub);
        assert_eq!(hook_errors(&events), Vec::<String>::new(), "turn {input:?}");
        assert_eq!(
            (outcome.status, outcome.answer.as_deref()),
            (TurnStatus::Completed, Some(answer)),
            "{}",
            outcome.reason
        );
    }
    // Every request of every turn had the date, and the two results whole:
    // the hook was shown them cut, and what it did not change came back.
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    for (i, request) in requests.iter().enumerate() {
        let messages = request.body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system", "request {i}");
        let date = messages[0]["content"].as_str().unwrap();
        assert!(date.starts_with("Current date and time: "), "{date}");
        let results: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        let expected: &[&str] = match i {
            0 => &[],
            1 => &[&a],
            _ => &[&a, &b],
        };
        assert_eq!(results, expected, "request {i}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_secret_redactor_redacts_the_end_of_the_largest_read() {
    let dir = PluginDir::new();
    let workspace = dir.scratch("workspace");
    let text = text_file(MIB, "key AKIAIOSFODNN7EXAMPLE\n");
    std::fs::write(workspace.join("big.txt"), &text).unwrap();
    example(&dir, "files");
    example(&dir, "secret_redactor");
    let fake = FakeModel::start([
        Reply::tool("c1", "read_file", json!({"path": "big.txt", "limit": MIB})),
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "read").await;
    assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    let events = drain(&mut sub);
    assert_eq!(hook_errors(&events), Vec::<String>::new());
    let expected = text.replace("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws_access_key_id]");
    assert_eq!(tool_outputs(&events), [(true, expected, None)]);
}

/// Adds a copy of the hook fixture as `name`, with these grants.
fn hook(dir: &PluginDir, name: &str, grants: &str) {
    dir.add_as("hooktest", name);
    dir.grants(name, grants);
}

/// `echo` with an output limit of 16 KiB, and a hook that puts 20 KiB in
/// place of its result at `point`, with `action`.
async fn oversized_by_hook(point: &str, action: &str) -> Vec<Arc<Event>> {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.grants("echo", "[limits]\noutput_kib = 16\n");
    let key = point.replace('-', "_");
    let big = "z".repeat(20 << 10);
    hook(
        &dir,
        "big",
        &format!(
            "[config]\nsubscriptions = [{{ point = \"{point}\" }}]\n{key} = {{ action = \"{action}\", text = \"{big}\" }}\n"
        ),
    );
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({"text": "hi"})),
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "echo").await;
    assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    // What the model was sent is what the call ended with.
    let events = drain(&mut sub);
    let sent: Value = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .clone();
    assert_eq!(sent, json!(tool_outputs(&events)[0].1));
    events
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_answer_over_the_tools_output_limit_is_an_error() {
    let events = oversized_by_hook("before-tool", "answer").await;
    assert_eq!(
        tool_outputs(&events),
        [(
            false,
            "error (internal): hook 'big' answered in place of tool 'echo' with 20 KiB, over the tool's output limit of 16 KiB".to_string(),
            Some(ErrorKind::Internal)
        )]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_replacement_over_the_tools_output_limit_is_an_error() {
    let events = oversized_by_hook("after-tool", "replace").await;
    assert_eq!(
        tool_outputs(&events),
        [(
            false,
            "error (internal): hook 'big' replaced the result of tool 'echo' with 20 KiB, over the tool's output limit of 16 KiB".to_string(),
            Some(ErrorKind::Internal)
        )]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_that_fails_closed_is_shown_a_tool_call_whole_or_not_at_all() {
    // A result of 2 MiB + 7 bytes, and an after-tool hook of 16 MiB (shown
    // at most 1 MiB) that fails closed: the result is withheld.
    let dir = PluginDir::new();
    dir.add("echo");
    dir.grants("echo", "[limits]\noutput_kib = 4096\n");
    hook(
        &dir,
        "guard",
        "[hooks]\nfail = \"closed\"\n[config]\nsubscriptions = [{ point = \"after-tool\" }]\n",
    );
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({"text": "a".repeat(2 * MIB)})),
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    agent.run_turn("s", "echo").await;
    let events = drain(&mut sub);
    let error = "it was not called: a hook that fails closed is shown a tool call whole or not at all, and this one's input is 4194319 bytes, more than the 1 MiB its memory budget of 16 MiB lets a hook be shown (one 16th); raise hooks.memory_mib in its grants";
    assert_eq!(hook_errors(&events), [format!("guard: {error}")]);
    let effects: Vec<HookEffect> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::HookError(HookError { effect, .. }) => Some(*effect),
            _ => None,
        })
        .collect();
    assert_eq!(effects, [HookEffect::Withheld]);
    assert_eq!(
        tool_outputs(&events),
        [(
            false,
            format!(
                "error (denied): hook 'guard' failed, and the result is withheld (the hook fails closed): {error}"
            ),
            Some(ErrorKind::Denied)
        )]
    );
}
