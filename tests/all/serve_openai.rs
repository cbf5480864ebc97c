//! The official OpenAI Python SDK against `wasmclaw serve`'s
//! OpenAI-compatible API. `tests/python/openai_client.py`, run with the
//! virtualenv `make pyenv` makes, lists the models, asks a completion with a
//! history (not streamed) and one streamed, is refused twice, and sees a
//! turn fail (which it must not retry); it prints what the SDK saw as JSON,
//! checked here value by value. Behind the API the agent calls the echo
//! plugin's `add` for real before it answers.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::llm::{Message, ToolCall, Usage};
use wasmclaw::protocol::TurnStatus;
use wasmclaw::store::TurnRecord;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::openai;
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, ToolCallReply};
use wasmclaw_tests::server::{Setup, TOKEN, TestServer};

/// The whole client run: a hang fails the test.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs the client script `tests/python/NAME` against `server`: the JSON
/// object it printed.
async fn run_client(server: &TestServer, name: &str) -> Value {
    let args = [server.at("/v1"), TOKEN.to_string()];
    wasmclaw_tests::python::run_script(name, &args, LIMIT).await
}

fn add(id: &str, a: u32, b: u32) -> ToolCallReply {
    ToolCallReply {
        id: id.into(),
        name: "add".into(),
        arguments: json!({ "a": a, "b": b }),
    }
}

fn assistant(content: &str, tool_calls: Vec<ToolCall>) -> Message {
    Message::Assistant {
        content: content.into(),
        tool_calls,
    }
}

fn add_call(id: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "add".into(),
        arguments: arguments.into(),
    }
}

fn tool_result(id: &str, content: &str) -> Message {
    Message::Tool {
        tool_call_id: id.into(),
        name: "add".into(),
        content: content.into(),
        is_error: false,
    }
}

/// A turn's (status, reason, iterations, usage).
fn summary(turn: &TurnRecord) -> (TurnStatus, &str, u32, Usage) {
    (
        turn.status,
        turn.reason.as_str(),
        turn.iterations,
        turn.usage,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_python_sdk_streamed_and_not() {
    let dir = PluginDir::new();
    dir.add("echo");
    // Every model reply reports 7 tokens in, 3 out: a turn of two model
    // calls used 14 and 6.
    let options = Options {
        input_tokens: 7,
        output_tokens: 3,
        ..Options::default()
    };
    let replies = [
        // Not streamed: a tool call without text, then the answer.
        Reply::ToolCalls {
            text: String::new(),
            calls: vec![add("call_1", 40, 2)],
        },
        Reply::text("40 + 2 = 42."),
        // Streamed: text before the tool call, then the answer.
        Reply::ToolCalls {
            text: "Let me check.".into(),
            calls: vec![add("call_2", 2, 3)],
        },
        Reply::text("2 + 3 = 5."),
        // The model refuses the request: the turn fails at once.
        Reply::Status {
            code: 400,
            message: "no, thanks".into(),
            retry_after: None,
        },
    ];
    let fake = FakeModel::start_with(options, replies).await;
    let candidates = vec![openai(&fake, "model", true)];
    let server = TestServer::start(dir.load().await, candidates, Setup::default()).await;

    let mut seen = run_client(&server, "openai_client.py").await;
    let sdk = seen.as_object_mut().unwrap().remove("sdk").unwrap();
    // The fake model streams each text in thirds; the answer after the
    // tool round is set apart by a blank line.
    let deltas = seen["stream"].as_object_mut().unwrap().remove("deltas");
    assert_joined(
        &deltas.unwrap(),
        &["Let ", "me c", "heck.", "\n\n2 +", " 3 ", "= 5."],
    );

    // Each completion was a turn of a session of its own (and the failed
    // one was not sent again); the one with a history has the imported turn
    // first.
    let core = &server.core;
    let sessions = core.sessions().await.unwrap();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    let mut by_input = HashMap::new();
    for session in &sessions {
        assert!(session.key.starts_with("openai-"), "{}", session.key);
        let turns = core.turns(&session.key).await.unwrap();
        let history = core.history(&session.key).await.unwrap();
        by_input.insert(turns.last().unwrap().input.clone(), (turns, history));
    }
    let mut session = |input: &str| by_input.remove(input).expect(input);
    let (asked_turns, asked_history) = session("What is 40 + 2?");
    let (streamed_turns, streamed_history) = session("What is 2 + 3?");
    let (failed_turns, failed_history) = session("Fail, please.");
    assert_eq!(
        (asked_turns.len(), streamed_turns.len(), failed_turns.len()),
        (2, 1, 1)
    );
    let usage = Usage {
        input_tokens: 14,
        output_tokens: 6,
    };
    assert_eq!(
        summary(&asked_turns[0]),
        (TurnStatus::Completed, "imported", 0, Usage::default())
    );
    assert_eq!(asked_turns[0].input, "(imported history)");
    for turn in [&asked_turns[1], &streamed_turns[0]] {
        assert_eq!(
            summary(turn),
            (TurnStatus::Completed, "final_answer", 2, usage)
        );
    }
    let refused = "openai:model: HTTP 400 Bad Request: no, thanks";
    assert_eq!(
        (failed_turns[0].status, failed_turns[0].reason.as_str()),
        (TurnStatus::Error, refused)
    );
    assert!(failed_history.is_empty());

    let usage = json!({ "prompt_tokens": 14, "completion_tokens": 6, "total_tokens": 20 });
    let expected = json!({
        "models": [["wasmclaw", "wasmclaw"], ["default", "wasmclaw"]],
        "completion": {
            "id": format!("chatcmpl-{}", asked_turns[1].id),
            "object": "chat.completion",
            "model": "wasmclaw",
            "choices": 1,
            "role": "assistant",
            "content": "40 + 2 = 42.",
            "finish_reason": "stop",
            "usage": usage,
        },
        "stream": {
            "ids": [format!("chatcmpl-{}", streamed_turns[0].id)],
            "roles": ["assistant"],
            "text": "Let me check.\n\n2 + 3 = 5.",
            "finish_reasons": ["stop"],
            "usage": usage,
        },
        "bad_request": {
            "class": "BadRequestError",
            "status": 400,
            "type": "invalid_request",
            "message": "`tools`: client-side tools are not supported; the agent uses its own plugins",
        },
        "unauthorized": {
            "class": "AuthenticationError",
            "status": 401,
            "type": "unauthorized",
            "message": "the bearer token is not this server's",
        },
        "failed": {
            "class": "InternalServerError",
            "status": 502,
            "type": "turn_failed",
            "message": format!("the agent's turn ended error: {refused}"),
        },
    });
    assert_eq!(seen, expected, "what openai {sdk} saw");

    // The history the SDK sent, then the turn: the plugin's sums are real.
    assert_eq!(
        asked_history,
        [
            Message::system("You add numbers."),
            Message::user("I will ask you a sum."),
            assistant("Go ahead.", vec![]),
            Message::user("What is 40 + 2?"),
            assistant("", vec![add_call("call_1", r#"{"a":40,"b":2}"#)]),
            tool_result("call_1", "42"),
            assistant("40 + 2 = 42.", vec![]),
        ]
    );
    assert_eq!(
        streamed_history,
        [
            Message::user("What is 2 + 3?"),
            assistant(
                "Let me check.",
                vec![add_call("call_2", r#"{"a":2,"b":3}"#)]
            ),
            tool_result("call_2", "5"),
            assistant("2 + 3 = 5.", vec![]),
        ]
    );

    // The model was shown the imported history; the refused requests never
    // reached it, and the failed turn asked it once.
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    let shown: Vec<(&str, &str)> = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        [
            ("system", "You add numbers."),
            ("user", "I will ask you a sum."),
            ("assistant", "Go ahead."),
            ("user", "What is 40 + 2?"),
        ]
    );
    assert_eq!(requests[2].body["messages"].as_array().unwrap().len(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retried_stream_sends_the_answer_once_and_a_turn_at_its_limit_stops() {
    let dir = PluginDir::new();
    dir.add("echo");
    let fox = "The quick brown fox jumps over the lazy dog.";
    let replies = [
        // Cut after two thirds of "This reply is cut off before it ends.",
        // then retried.
        Reply::CutMidStream,
        Reply::text(fox),
        // Two turns of two iterations each: a tool round, then the answer
        // on the last allowed call.
        Reply::tool("call_1", "add", json!({ "a": 2, "b": 3 })),
        Reply::text("5."),
        Reply::tool("call_2", "add", json!({ "a": 3, "b": 4 })),
        Reply::text("7."),
    ];
    let fake = FakeModel::start(replies).await;
    let setup = Setup {
        agent: wasmclaw::agent::AgentConfig {
            max_iterations: 2,
            ..Default::default()
        },
        ..Setup::default()
    };
    let server = TestServer::start(dir.load().await, vec![openai(&fake, "m", true)], setup).await;
    let mut seen = run_client(&server, "openai_stream.py").await;
    // The failed attempt's text never reached the client: the reply's text
    // is held until it is known good, then sent as it came.
    let retried = seen["retried"].as_object_mut().unwrap().remove("deltas");
    assert_joined(
        &retried.unwrap(),
        &["The quick brow", "n fox jumps ove", "r the lazy dog."],
    );
    let limit = seen["limit_streamed"]
        .as_object_mut()
        .unwrap()
        .remove("deltas");
    assert_joined(&limit.unwrap(), &["7", "."]);
    let expected = json!({
        "retried": { "text": fox, "finish_reasons": ["stop"] },
        // A complete answer, though the turn used its last iteration.
        "limit": { "content": "5.", "finish_reason": "stop" },
        "limit_streamed": { "text": "7.", "finish_reasons": ["stop"] },
    });
    assert_eq!(seen, expected);
    assert_eq!(fake.requests().len(), 6);
    server.stop().await;
}

/// Asserts that the client's `deltas` are the model's `fragments`, in order,
/// consecutive ones joined: the turn publishes at most one delta every
/// 50 ms, so how many join depends on the machine's pace, never the text or
/// its order.
fn assert_joined(deltas: &Value, fragments: &[&str]) {
    let deltas: Vec<&str> = deltas
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    let mut rest = fragments.iter();
    for delta in &deltas {
        let mut joined = String::new();
        while joined.len() < delta.len() {
            joined.push_str(rest.next().unwrap_or_else(|| panic!("{deltas:?}")));
        }
        assert_eq!(&joined, delta, "{deltas:?} are not {fragments:?} joined");
    }
    assert_eq!(rest.next(), None, "{deltas:?} left fragments out");
}
