//! The example hook plugins in `plugins/`, with the grants files they ship
//! with, in real turns: the tool policy, the secret redactor, the audit log
//! and the prompt context.

use std::sync::Arc;

use serde_json::{Value, json};
use wasmclaw::agent::Agent;
use wasmclaw::bus::Subscription;
use wasmclaw::plugin::{ErrorKind, HookPoint};
use wasmclaw::protocol::{EventBody, HookDecision, HookVerdict, ToolCallEnd, TurnStatus};
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent, drain, openai, tool_outputs};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, example_src};

/// Adds example plugin `name` with its shipped grants file.
fn example(dir: &PluginDir, name: &str) {
    dir.add(name);
    let grants = std::fs::read_to_string(example_src(name).join(format!("{name}.toml"))).unwrap();
    dir.grants(name, &grants);
}

async fn agent_over(dir: &PluginDir, fake: &FakeModel) -> (Arc<Agent>, Subscription) {
    let plugins = dir.load().await;
    for status in &plugins.catalog().plugins {
        if let wasmclaw::plugin::PluginStatus::Failed { name, error, .. } = status {
            panic!("{name} did not load: {error}");
        }
    }
    agent(
        plugins,
        vec![openai(fake, "fake-gpt", false)],
        Store::open_in_memory().unwrap(),
    )
}

/// A `tool_call_end`: ok, output, error kind.
type ToolEnd = (bool, String, Option<ErrorKind>);

/// Each `tool_call_end`, by call id (calls run in parallel and end in any
/// order).
fn tool_ends(sub: &mut Subscription) -> Vec<ToolEnd> {
    let mut ends: Vec<(String, ToolEnd)> = drain(sub)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd {
                call_id,
                ok,
                output,
                error_kind,
                ..
            }) => Some((call_id.clone(), (*ok, output.clone(), *error_kind))),
            _ => None,
        })
        .collect();
    ends.sort_by(|a, b| a.0.cmp(&b.0));
    ends.into_iter().map(|(_, end)| end).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_policy_denies_what_its_rules_name() {
    let dir = PluginDir::new();
    let workspace = dir.scratch("workspace");
    std::fs::write(workspace.join(".env"), "TOKEN=abc").unwrap();
    std::fs::write(workspace.join("notes.txt"), "hello").unwrap();
    example(&dir, "files");
    example(&dir, "tool_policy");
    let fake = FakeModel::start([
        Reply::ToolCalls {
            text: String::new(),
            calls: vec![
                call("c1", "read_file", json!({"path": ".env"})),
                call("c2", "read_file", json!({"path": "notes.txt"})),
                call("c3", "read_file", json!({"path": "config/.env"})),
            ],
        },
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "read them").await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    let denied = "error (denied): denied by hook 'tool_policy': the agent may not touch .env files";
    let ends = tool_ends(&mut sub);
    assert_eq!(ends[0], (false, denied.into(), Some(ErrorKind::Denied)));
    assert!(ends[1].0 && ends[1].1.contains("hello"), "{:?}", ends[1]);
    assert_eq!(ends[2], (false, denied.into(), Some(ErrorKind::Denied)));
}

fn call(id: &str, name: &str, arguments: Value) -> wasmclaw_tests::fake_model::ToolCallReply {
    wasmclaw_tests::fake_model::ToolCallReply {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_secret_redactor_hides_keys_in_results_before_the_model_reads_them() {
    let dir = PluginDir::new();
    dir.add("echo");
    example(&dir, "secret_redactor");
    let leaky = "aws AKIAIOSFODNN7EXAMPLE, password: hunter2hunter2, github ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({ "text": leaky })),
        Reply::tool("c2", "echo", json!({ "text": "nothing to hide" })),
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    agent.run_turn("s", "echo").await;
    let events = drain(&mut sub);
    let outputs = tool_outputs(&events);
    assert_eq!(
        outputs,
        [
            "aws [REDACTED:aws_access_key_id], password: [REDACTED:secret_value], github [REDACTED:github_token]",
            "nothing to hide"
        ]
    );
    // One decision, for the call that had something to hide.
    let decisions: Vec<&EventBody> = events
        .iter()
        .filter(|e| e.body.kind().as_str() == "hook_decision")
        .map(|e| &e.body)
        .collect();
    assert_eq!(
        decisions,
        [&EventBody::HookDecision(HookDecision {
            hook: "secret_redactor".into(),
            point: HookPoint::AfterTool,
            decision: HookVerdict::Replace,
            call_id: Some("c1".into()),
            tool: Some("echo".into()),
            reason: None,
            arguments: None,
        })]
    );
    // The tool result the model read is the redacted one.
    let messages = fake.requests()[1].body["messages"].clone();
    let result = messages
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .clone();
    assert_eq!(result, json!(outputs[0]));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_log_writes_every_event_but_deltas_as_json_lines() {
    let dir = PluginDir::new();
    let audit = dir.scratch("audit");
    dir.add("echo");
    example(&dir, "audit_log");
    let fake = FakeModel::start([
        Reply::tool("c1", "add", json!({"a": 1, "b": 2})),
        Reply::text("3"),
    ])
    .await;
    // Streamed, so there are llm_delta events to leave out.
    let plugins = dir.load().await;
    let (agent, mut sub) = agent(
        plugins,
        vec![openai(&fake, "fake-gpt", true)],
        Store::open_in_memory().unwrap(),
    );
    agent.run_turn("s", "add").await;
    let expected: Vec<Value> = drain(&mut sub)
        .iter()
        .filter(|e| e.body.kind().as_str() != "llm_delta")
        .map(|e| serde_json::to_value(&**e).unwrap())
        .collect();
    assert!(expected.len() >= 8);
    let lines = || -> Vec<Value> {
        std::fs::read_to_string(audit.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    agent.close_observers().await;
    assert_eq!(lines(), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_context_tells_the_model_the_date_and_the_operators_notes() {
    let dir = PluginDir::new();
    example(&dir, "prompt_context");
    dir.grants(
        "prompt_context",
        "[config]\nnotes = \"The user's team works in Lisbon.\"\n",
    );
    let fake = FakeModel::start([Reply::text("ok")]).await;
    let plugins = dir.load().await;
    let (agent, _sub) = agent(
        plugins,
        vec![openai(&fake, "fake-gpt", false)],
        Store::open_in_memory().unwrap(),
    );
    agent.run_turn("s", "what day is it?").await;
    let messages = fake.requests()[0].body["messages"].clone();
    let added = messages[0]["content"].as_str().unwrap().to_string();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "what day is it?"})
    );
    // `Current date and time: YYYY-MM-DD HH:MM UTC.` and the notes.
    let (first, notes) = added.split_once('\n').unwrap();
    assert_eq!(notes, "The user's team works in Lisbon.");
    let today = humantime::format_rfc3339(std::time::SystemTime::now()).to_string();
    assert!(
        first.starts_with(&format!("Current date and time: {} ", &today[..10]))
            && first.ends_with(" UTC."),
        "{first}"
    );
}
