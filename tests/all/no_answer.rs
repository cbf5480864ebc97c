//! A completed turn has an answer: a reply without text, or tool calls on
//! the turn's last call (a server that ignores `tool_choice: none`), is
//! asked once more without tools; still no text ends the turn `error`, and
//! `wasmclaw run` exits 1. Both wire formats.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::AgentConfig;
use wasmclaw::llm::{Message, ProviderConfig, ToolCall};
use wasmclaw::protocol::{Event, EventBody, LlmRetry, TurnStatus};
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent_with, anthropic, drain, kinds, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(30);

fn candidate(wire: &str, fake: &FakeModel) -> ProviderConfig {
    match wire {
        "openai" => openai(fake, "m", true),
        _ => anthropic(fake, "m", true),
    }
}

/// The `llm_retry` errors and discard flags.
fn retries(events: &[Arc<Event>]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::LlmRetry(LlmRetry {
                error,
                discard_partial,
                ..
            }) => Some((error.clone(), *discard_partial)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_on_the_last_call_are_asked_again_without_tools() {
    for wire in ["openai", "anthropic"] {
        let dir = PluginDir::new();
        dir.add("echo");
        let again = || Reply::tool("x1", "echo", json!({"text": "again"}));
        let fake = FakeModel::start([again(), again(), Reply::text("Done: again.")]).await;
        let config = AgentConfig {
            max_iterations: 2,
            ..AgentConfig::default()
        };
        let store = Store::open_in_memory().unwrap();
        let (agent, mut sub) = agent_with(
            dir.load().await,
            vec![candidate(wire, &fake)],
            store,
            config,
        );
        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "echo again"))
            .await
            .unwrap();
        assert_eq!(
            (outcome.status, outcome.reason.as_str(), outcome.iterations),
            (TurnStatus::Completed, "max_iterations", 2),
            "{wire}"
        );
        assert_eq!(outcome.answer.as_deref(), Some("Done: again."), "{wire}");
        let events = drain(&mut sub);
        assert_eq!(
            kinds(&events),
            [
                "turn_begin",
                "llm_request",
                "llm_response",
                "tool_call_begin",
                "tool_call_end",
                "llm_request",
                "llm_response",
                "tool_call_skipped",
                "llm_retry",
                "llm_request",
                "llm_delta",
                "llm_response",
                "turn_end"
            ],
            "{wire}"
        );
        assert_eq!(
            retries(&events),
            [(
                "no answer: it asked for tools (echo) on the turn's last call, which allows none; asking once more without tools".to_string(),
                false
            )],
            "{wire}"
        );
        // The retry declares no tools; the tool round is shown as text.
        let requests = fake.requests();
        assert_eq!(requests.len(), 3, "{wire}");
        let (second, third) = (&requests[1].body, &requests[2].body);
        assert!(second["tools"].is_array(), "{wire}");
        assert_eq!(third.get("tools"), None, "{wire}: {third}");
        assert_eq!(third.get("tool_choice"), None, "{wire}: {third}");
        let shown = third["messages"].to_string();
        assert!(
            shown.contains(r#"[called echo with {\"text\":\"again\"}]"#)
                && shown.contains("[echo returned: again]"),
            "{wire}: {shown}"
        );
        assert!(
            !shown.contains("tool_use") && !shown.contains(r#""role":"tool""#),
            "{wire}: {shown}"
        );
        // The history keeps the tool round and the answer, not the call
        // that was never run.
        let call = ToolCall {
            id: "x1".into(),
            name: "echo".into(),
            arguments: r#"{"text":"again"}"#.into(),
        };
        assert_eq!(
            agent.store().history("s").await.unwrap(),
            [
                Message::user("echo again"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call]
                },
                Message::Tool {
                    tool_call_id: "x1".into(),
                    name: "echo".into(),
                    content: "again".into(),
                    is_error: false
                },
                Message::Assistant {
                    content: "Done: again.".into(),
                    tool_calls: vec![]
                },
            ],
            "{wire}"
        );
    }
}

const NO_ANSWER: &str = "the model gave no answer: its reply was empty, and asked once more without tools, it gave no text either";

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_reply_twice_ends_the_turn_with_an_error() {
    // OpenAI: a stream of only `[DONE]`; Anthropic: a message without
    // content blocks.
    for wire in ["openai", "anthropic"] {
        let dir = PluginDir::new();
        dir.add("echo");
        let fake = FakeModel::start([Reply::OnlyDone, Reply::OnlyDone]).await;
        let store = Store::open_in_memory().unwrap();
        let (agent, mut sub) = agent_with(
            dir.load().await,
            vec![candidate(wire, &fake)],
            store,
            AgentConfig::default(),
        );
        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "say something"))
            .await
            .unwrap();
        assert_eq!(
            (outcome.status, outcome.reason.as_str(), outcome.answer),
            (TurnStatus::Error, NO_ANSWER, None),
            "{wire}"
        );
        let events = drain(&mut sub);
        assert_eq!(
            kinds(&events),
            [
                "turn_begin",
                "llm_request",
                "llm_response",
                "llm_retry",
                "llm_request",
                "llm_response",
                "turn_end"
            ],
            "{wire}"
        );
        assert_eq!(
            retries(&events),
            [(
                "no answer: its reply was empty; asking once more without tools".to_string(),
                false
            )],
            "{wire}"
        );
        let requests = fake.requests();
        assert_eq!(requests.len(), 2, "{wire}");
        assert!(requests[0].body["tools"].is_array(), "{wire}");
        assert_eq!(requests[1].body.get("tools"), None, "{wire}");
        assert_eq!(agent.store().history("s").await.unwrap(), [], "{wire}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn run_exits_1_on_an_empty_answer() {
    let fake = FakeModel::start([Reply::OnlyDone, Reply::OnlyDone]).await;
    let dir = PluginDir::new();
    let url = fake.openai_base_url();
    let output = tokio::process::Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", dir.scratch("home"))
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .args(["--plugins", dir.path().to_str().unwrap()])
        .args(["run", "--model", "openai:m", "--base-url", &url, "-m", "hi"])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(LIMIT, output).await.unwrap().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(
        (output.status.code(), stdout.as_ref(), stderr.as_ref()),
        (
            Some(1),
            "",
            format!("error: the turn ended error: {NO_ANSWER}\n").as_str()
        )
    );
    let bodies: Vec<Value> = fake.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 2);
}
