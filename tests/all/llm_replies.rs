//! Replies that cannot be used as they are: tool calls cut at the token
//! limit or with arguments that are not a JSON object, replies past their
//! bounds, tool-call chunks identified by `id` only. Each in both wire
//! formats, streamed and not.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::llm::{Message, ProviderConfig};
use wasmclaw::protocol::{Event, EventBody, ToolCallEnd, ToolCallSkipped, TurnStatus};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent, anthropic, drain, kinds, openai, streamed_text};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, ToolCallReply};

const LIMIT: Duration = Duration::from_secs(30);

/// Every (format, streamed) case.
const CASES: [(&str, bool); 4] = [
    ("openai", true),
    ("anthropic", true),
    ("openai", false),
    ("anthropic", false),
];

fn candidate(wire: &str, fake: &FakeModel, stream: bool) -> ProviderConfig {
    match wire {
        "openai" => openai(fake, "m", stream),
        _ => anthropic(fake, "m", stream),
    }
}

/// The tool calls of the assistant messages of a request, as (id, the
/// arguments as sent: OpenAI's text, Anthropic's `input` as text).
fn sent_calls(body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    let openai = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| {
            let arguments = c["function"]["arguments"].as_str().unwrap();
            (c["id"].as_str().unwrap().to_string(), arguments.to_string())
        });
    let anthropic = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            (
                b["id"].as_str().unwrap().to_string(),
                b["input"].to_string(),
            )
        });
    openai.chain(anthropic).collect()
}

/// The tool results of a request, as (call id, content).
fn sent_results(body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    let openai = (messages.iter()).filter(|m| m["role"] == "tool").map(|m| {
        let content = m["content"].as_str().unwrap().to_string();
        (m["tool_call_id"].as_str().unwrap().to_string(), content)
    });
    let anthropic = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let content = b["content"].as_str().unwrap().to_string();
            (b["tool_use_id"].as_str().unwrap().to_string(), content)
        });
    openai.chain(anthropic).collect()
}

fn skipped(events: &[Arc<Event>]) -> Vec<(String, String)> {
    (events.iter())
        .filter_map(|e| match &e.body {
            EventBody::ToolCallSkipped(ToolCallSkipped {
                call_id, reason, ..
            }) => Some((call_id.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

const CUT: &str = "the reply was cut at the output token limit before the call's arguments were complete; this call was not run";

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_cut_at_the_token_limit_is_not_run_and_the_model_is_told() {
    for (wire, stream) in CASES {
        let case = format!("{wire}, streamed: {stream}");
        let dir = PluginDir::new();
        dir.add("echo");
        let fake = FakeModel::start([
            Reply::RawToolCall {
                id: "call_1".into(),
                name: "add".into(),
                arguments: r#"{"a": 40, "#.into(),
                cut: true,
            },
            Reply::text("I was cut off."),
        ])
        .await;
        let store = Store::open_in_memory().unwrap();
        let (agent, mut sub) = agent(
            dir.load().await,
            vec![candidate(wire, &fake, stream)],
            store.clone(),
        );
        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "add"))
            .await
            .unwrap();
        assert_eq!(
            (outcome.status, outcome.answer.as_deref()),
            (TurnStatus::Completed, Some("I was cut off.")),
            "{case}: {outcome:?}"
        );
        let events = drain(&mut sub);
        let mut expected = vec![
            "turn_begin",
            "llm_request",
            "llm_response",
            "tool_call_skipped",
            "llm_request",
        ];
        expected.extend(stream.then_some("llm_delta"));
        expected.extend(["llm_response", "turn_end"]);
        assert_eq!(kinds(&events), expected, "{case}");
        assert_eq!(skipped(&events), [("call_1".into(), CUT.into())], "{case}");
        let second = &fake.requests()[1].body;
        assert_eq!(
            sent_results(second),
            [("call_1".into(), format!("skipped: {CUT}"))],
            "{case}"
        );
        // What the model sent is kept, and sent back, as `{}`.
        assert_eq!(
            sent_calls(second),
            [("call_1".into(), "{}".into())],
            "{case}"
        );
        let history = store.history("s").await.unwrap();
        match &history[1] {
            Message::Assistant { tool_calls, .. } => {
                assert_eq!(tool_calls[0].arguments, "{}", "{case}")
            }
            other => panic!("{case}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_cut_tool_call_the_next_turn_of_the_session_succeeds_on_a_llama_cpp_like_server() {
    // As llama.cpp: any request whose history has arguments that are not
    // valid JSON gets HTTP 500.
    let options = Options {
        reject_invalid_arguments: true,
        ..Options::default()
    };
    let fake = FakeModel::start_with(
        options,
        [
            Reply::RawToolCall {
                id: "call_1".into(),
                name: "add".into(),
                arguments: r#"{"a"#.into(),
                cut: true,
            },
            Reply::text("Cut off; say again?"),
            Reply::text("Second turn."),
        ],
    )
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let (agent, mut sub) = agent(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Store::open_in_memory().unwrap(),
    );
    for (input, answer) in [("one", "Cut off; say again?"), ("two", "Second turn.")] {
        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", input))
            .await
            .unwrap();
        assert_eq!(
            (outcome.status, outcome.answer.as_deref()),
            (TurnStatus::Completed, Some(answer)),
            "{outcome:?}"
        );
    }
    let events = drain(&mut sub);
    assert!(
        !kinds(&events).contains(&"llm_retry"),
        "{:?}",
        kinds(&events)
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        sent_calls(&requests[2].body),
        [("call_1".into(), "{}".into())]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_that_are_not_a_json_object_are_refused_quoted_and_kept_as_an_empty_object() {
    for (wire, stream) in CASES {
        let case = format!("{wire}, streamed: {stream}");
        let options = Options {
            reject_invalid_arguments: true,
            ..Options::default()
        };
        let fake = FakeModel::start_with(
            options,
            [
                Reply::RawToolCall {
                    id: "call_1".into(),
                    name: "add".into(),
                    arguments: "40 + 2".into(),
                    cut: false,
                },
                Reply::text("Let me fix that."),
            ],
        )
        .await;
        let dir = PluginDir::new();
        dir.add("echo");
        let (agent, mut sub) = agent(
            dir.load().await,
            vec![candidate(wire, &fake, stream)],
            Store::open_in_memory().unwrap(),
        );
        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "add"))
            .await
            .unwrap();
        assert_eq!(
            outcome.answer.as_deref(),
            Some("Let me fix that."),
            "{case}"
        );
        // Anthropic's whole replies carry `input` as JSON: the fake sends
        // `{}` for text that does not parse, which the tool takes as is.
        let whole_anthropic = wire == "anthropic" && !stream;
        let expected = if whole_anthropic {
            "error (invalid-input): invalid arguments for add: \"a\" is a required property; \"b\" is a required property; \
             expected {\"a\": integer, \"b\": integer} (required: a, b; no other properties)"
                .to_string()
        } else {
            "error (invalid-input): the arguments of tool 'add' must be one JSON object, and they \
             are not valid JSON (trailing characters at line 1 column 4); you sent: 40 + 2"
                .to_string()
        };
        let events = drain(&mut sub);
        let ends: Vec<(bool, String)> = (events.iter())
            .filter_map(|e| match &e.body {
                EventBody::ToolCallEnd(ToolCallEnd { ok, output, .. }) => {
                    Some((*ok, output.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(ends, [(false, expected.clone())], "{case}");
        let second = &fake.requests()[1].body;
        assert_eq!(
            sent_results(second),
            [("call_1".into(), expected)],
            "{case}"
        );
        assert_eq!(
            sent_calls(second),
            [("call_1".into(), "{}".into())],
            "{case}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_past_its_bound_ends_the_attempt_naming_the_bound_without_a_retry() {
    let big_text = Reply::text("x".repeat(5000));
    let big_arguments = Reply::tool("call_1", "add", json!({"a": "y".repeat(5000), "b": 1}));
    for (wire, stream) in CASES {
        for (reply, bound) in [
            (
                big_text.clone(),
                "text passed its bound of 1000 bytes (--max-reply-text)",
            ),
            (
                big_arguments.clone(),
                "tool-call arguments passed their bound of 1000 bytes (--max-reply-arguments)",
            ),
        ] {
            let case = format!("{wire}, streamed: {stream}, {bound}");
            let fake = FakeModel::start([reply, Reply::text("never")]).await;
            let mut candidate = candidate(wire, &fake, stream);
            candidate.limits.max_text = 1000;
            candidate.limits.max_arguments = 1000;
            let dir = PluginDir::new();
            let (agent, mut sub) = agent(
                dir.load().await,
                vec![candidate],
                Store::open_in_memory().unwrap(),
            );
            let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "hi"))
                .await
                .unwrap();
            assert_eq!(outcome.status, TurnStatus::Error, "{case}");
            assert_eq!(
                outcome.reason,
                format!("{wire}:m: the reply's {bound}"),
                "{case}"
            );
            let events = drain(&mut sub);
            assert_eq!(
                kinds(&events),
                ["turn_begin", "llm_request", "turn_end"],
                "{case}"
            );
            // Nothing past the bound was published (the first text delta
            // alone is past it).
            assert_eq!(streamed_text(&events, 1), "", "{case}");
            assert_eq!(fake.requests().len(), 1, "{case}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_identified_only_by_id_are_assembled_and_answered_in_the_order_asked() {
    let options = Options {
        omit_tool_index: true,
        ..Options::default()
    };
    let call = |id: &str, a: i64| ToolCallReply {
        id: id.into(),
        name: "add".into(),
        arguments: json!({"a": a, "b": 1}),
    };
    let fake = FakeModel::start_with(
        options,
        [
            Reply::ToolCalls {
                text: String::new(),
                calls: vec![call("call_z", 1), call("call_a", 2), call("call_m", 3)],
            },
            Reply::text("Done."),
        ],
    )
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let (agent, _sub) = agent(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Store::open_in_memory().unwrap(),
    );
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "add"))
        .await
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Done."), "{outcome:?}");
    let second = &fake.requests()[1].body;
    let ids: Vec<String> = sent_calls(second).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["call_z", "call_a", "call_m"]);
    assert_eq!(
        sent_results(second),
        [
            ("call_z".into(), "2".into()),
            ("call_a".into(), "3".into()),
            ("call_m".into(), "4".into())
        ]
    );
}
