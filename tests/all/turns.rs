//! Turns against a real HTTP server on 127.0.0.1 that speaks the OpenAI and
//! Anthropic wire formats, with real plugins.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::llm::ProviderConfig;
use wasmclaw::protocol::{
    Event, EventBody, LlmResponse, ToolCallBegin, ToolCallEnd, TurnEnd, TurnStatus,
};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent, anthropic, drain, kinds, openai, streamed_text};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, ToolCallReply};
use wasmclaw_tests::gate::{ToolGates, gate_args, gate_output};

const LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
}

fn candidate(wire: Wire, fake: &FakeModel, stream: bool) -> ProviderConfig {
    match wire {
        Wire::OpenAi => openai(fake, "fake-gpt", stream),
        Wire::Anthropic => anthropic(fake, "fake-claude", stream),
    }
}

/// The tool results the model was sent in a request, as (call id, content).
fn tool_results(wire: Wire, body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    match wire {
        Wire::OpenAi => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap().into(),
                    m["content"].as_str().unwrap().into(),
                )
            })
            .collect(),
        Wire::Anthropic => messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                (
                    b["tool_use_id"].as_str().unwrap().into(),
                    b["content"].as_str().unwrap().into(),
                )
            })
            .collect(),
    }
}

fn body_of<'a>(events: &'a [Arc<Event>], kind: &str) -> Vec<&'a EventBody> {
    events
        .iter()
        .filter(|e| e.body.kind().as_str() == kind)
        .map(|e| &e.body)
        .collect()
}

async fn two_iterations_with_one_tool_call(wire: Wire, stream: bool) {
    let dir = PluginDir::new();
    dir.add("echo");
    let fake = FakeModel::start([
        Reply::tool("call_1", "add", json!({"a": 40, "b": 2})),
        Reply::text("The sum is 42."),
    ])
    .await;
    let store = Store::open_in_memory().unwrap();
    let (agent, mut sub) = agent(
        dir.load().await,
        vec![candidate(wire, &fake, stream)],
        store.clone(),
    );

    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s1", "What is 40 + 2?"))
        .await
        .unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.answer.as_deref(), Some("The sum is 42."));
    assert_eq!(
        (
            outcome.iterations,
            outcome.usage.input_tokens,
            outcome.usage.output_tokens
        ),
        (2, 20, 10)
    );

    let events = drain(&mut sub);
    // The tool-call reply has no text, so only the answer streams.
    let mut expected = vec![
        "turn_begin",
        "llm_request",
        "llm_response",
        "tool_call_begin",
        "tool_call_end",
        "llm_request",
    ];
    expected.extend(stream.then_some("llm_delta"));
    expected.extend(["llm_response", "turn_end"]);
    assert_eq!(kinds(&events), expected, "{events:#?}");
    assert_eq!(
        streamed_text(&events, 2),
        if stream { "The sum is 42." } else { "" }
    );

    // Every event is of this turn, in seq order with no gap.
    let turn_id = Some(outcome.turn_id.clone());
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            (e.seq, e.session.as_deref(), &e.turn_id, &e.parent_turn_id),
            (events[0].seq + i as u64, Some("s1"), &turn_id, &None)
        );
    }
    match body_of(&events, "tool_call_end")[0] {
        EventBody::ToolCallEnd(ToolCallEnd {
            call_id,
            tool,
            ok,
            output,
            error_kind,
            ..
        }) => {
            assert_eq!(
                (
                    call_id.as_str(),
                    tool.as_str(),
                    *ok,
                    output.as_str(),
                    error_kind
                ),
                ("call_1", "add", true, "42", &None)
            );
        }
        _ => unreachable!(),
    }
    match body_of(&events, "llm_response")[0] {
        EventBody::LlmResponse(LlmResponse {
            tool_calls, model, ..
        }) => {
            assert_eq!(tool_calls.len(), 1);
            assert_eq!(
                (
                    tool_calls[0].name.as_str(),
                    serde_json::from_str::<Value>(&tool_calls[0].arguments).unwrap()
                ),
                ("add", json!({"a": 40, "b": 2}))
            );
            assert!(
                model.ends_with(":fake-gpt") || model.ends_with(":fake-claude"),
                "{model}"
            );
        }
        _ => unreachable!(),
    }
    match body_of(&events, "turn_end")[0] {
        EventBody::TurnEnd(TurnEnd {
            status,
            reason,
            iterations,
            ..
        }) => {
            assert_eq!(
                (*status, reason.as_str(), *iterations),
                (TurnStatus::Completed, "final_answer", 2)
            );
        }
        _ => unreachable!(),
    }

    // The model was shown the tool and then its result.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let tool_names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t.pointer("/function/name")
                .or(t.get("name"))
                .unwrap()
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        tool_names,
        // The plugin's tools, then the built-in ones.
        [
            "add",
            "context",
            "count",
            "echo",
            "fail",
            "log",
            "subagent",
            "spawn",
            "history_search"
        ]
    );
    assert_eq!(
        tool_results(wire, &requests[1].body),
        [("call_1".to_string(), "42".to_string())]
    );
    assert_eq!(
        requests[0].body["stream"].as_bool().unwrap_or(false),
        stream
    );

    // The history holds the whole turn.
    let history = store.history("s1").await.unwrap();
    assert_eq!(history.len(), 4, "{history:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_streamed_turn_has_the_exact_event_sequence() {
    two_iterations_with_one_tool_call(Wire::OpenAi, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_unstreamed_turn_has_the_exact_event_sequence() {
    two_iterations_with_one_tool_call(Wire::OpenAi, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_streamed_turn_has_the_exact_event_sequence() {
    two_iterations_with_one_tool_call(Wire::Anthropic, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_unstreamed_turn_has_the_exact_event_sequence() {
    two_iterations_with_one_tool_call(Wire::Anthropic, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_of_one_reply_run_concurrently_and_answer_in_the_order_asked() {
    let dir = PluginDir::new();
    let gates = ToolGates::new();
    dir.add("hostile");
    dir.grants("hostile", &gates.grants());
    let calls = vec![
        ToolCallReply {
            id: "first".into(),
            name: "wait_gate".into(),
            arguments: gate_args("first"),
        },
        ToolCallReply {
            id: "second".into(),
            name: "wait_gate".into(),
            arguments: gate_args("second"),
        },
    ];
    let fake = FakeModel::start([
        Reply::ToolCalls {
            text: String::new(),
            calls,
        },
        Reply::text("Both slept."),
    ])
    .await;
    let (agent, mut sub) = agent(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Store::open_in_memory().unwrap(),
    );

    // Both calls reach their gates while neither is open: they run at once.
    // The second is let go first; the answers still come in the order asked.
    let release = async {
        gates.wait_started("first", LIMIT).await;
        gates.wait_started("second", LIMIT).await;
        gates.open("second");
        gates.open("first");
    };
    let (outcome, ()) = tokio::time::timeout(LIMIT, async {
        tokio::join!(agent.run_turn("s", "sleep twice"), release)
    })
    .await
    .unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:?}");
    let events = drain(&mut sub);
    let tool_events: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallBegin(ToolCallBegin { call_id, .. }) => {
                Some(("begin", call_id.as_str()))
            }
            EventBody::ToolCallEnd(ToolCallEnd { call_id, .. }) => Some(("end", call_id.as_str())),
            _ => None,
        })
        .collect();
    // Both started, in the order asked, before either ended.
    assert_eq!(tool_events[..2], [("begin", "first"), ("begin", "second")]);
    let mut ends = tool_events[2..].to_vec();
    ends.sort();
    assert_eq!(ends, [("end", "first"), ("end", "second")]);
    // The model reads the results in the order it asked for them.
    assert_eq!(
        tool_results(Wire::OpenAi, &fake.requests()[1].body),
        [
            ("first".to_string(), gate_output("first")),
            ("second".to_string(), gate_output("second"))
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_errors_and_unknown_tools_go_back_to_the_model() {
    let dir = PluginDir::new();
    dir.add("echo");
    let calls = vec![
        ToolCallReply {
            id: "a".into(),
            name: "fail".into(),
            arguments: json!({"kind": "denied", "message": "no such account"}),
        },
        ToolCallReply {
            id: "b".into(),
            name: "teleport".into(),
            arguments: json!({}),
        },
        ToolCallReply {
            id: "c".into(),
            name: "add".into(),
            arguments: json!({"a": "one"}),
        },
        ToolCallReply {
            id: "d".into(),
            name: "echo".into(),
            arguments: json!({"text": "still here"}),
        },
    ];
    let fake = FakeModel::start([
        Reply::ToolCalls {
            text: "Trying.".into(),
            calls,
        },
        Reply::text("Done."),
    ])
    .await;
    let (agent, mut sub) = agent(
        dir.load().await,
        vec![anthropic(&fake, "m", true)],
        Store::open_in_memory().unwrap(),
    );

    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "go"))
        .await
        .unwrap();
    assert_eq!(
        (outcome.status, outcome.answer.as_deref()),
        (TurnStatus::Completed, Some("Done."))
    );
    let results = tool_results(Wire::Anthropic, &fake.requests()[1].body);
    let texts: Vec<&str> = results.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts[0], "error (denied): no such account");
    assert_eq!(
        texts[1],
        "error (not-found): unknown tool \"teleport\"; available tools: add, context, count, echo, fail, log"
    );
    assert!(
        texts[2].starts_with("error (invalid-input): "),
        "{}",
        texts[2]
    );
    assert!(
        texts[2].contains("\"one\" is not of type \"integer\""),
        "{}",
        texts[2]
    );
    assert_eq!(texts[3], "still here");
    let error_flags: Vec<bool> = fake.requests()[1].body["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["is_error"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(error_flags, [true, true, true, false]);
    // The calls run in parallel: they may end in any order.
    let mut oks: Vec<(String, bool)> = drain(&mut sub)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd { call_id, ok, .. }) => Some((call_id.clone(), *ok)),
            _ => None,
        })
        .collect();
    oks.sort();
    let expected = [("a", false), ("b", false), ("c", false), ("d", true)];
    assert_eq!(oks, expected.map(|(id, ok)| (id.to_string(), ok)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_at_its_iteration_limit_asks_for_an_answer_without_tools() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let dir = PluginDir::new();
        dir.add("echo");
        let again = || Reply::tool("x", "echo", json!({"text": "again"}));
        let fake = FakeModel::start([again(), again(), Reply::text("Stopping here.")]).await;
        let chain = wasmclaw::llm::Chain::new(
            vec![
                wasmclaw::llm::Provider::new(
                    candidate(wire, &fake, false),
                    wasmclaw::llm::http_client(),
                )
                .unwrap(),
            ],
            wasmclaw_tests::agents::quick_retries(),
        );
        let config = wasmclaw::agent::AgentConfig {
            max_iterations: 3,
            ..Default::default()
        };
        let bus = wasmclaw::bus::EventBus::new(0);
        let agent = Arc::new(wasmclaw::agent::Agent::new(
            dir.load().await,
            Arc::new(chain),
            bus,
            Store::open_in_memory().unwrap(),
            config,
        ));

        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "loop"))
            .await
            .unwrap();
        assert_eq!(
            (outcome.status, outcome.reason.as_str(), outcome.iterations),
            (TurnStatus::Completed, "max_iterations", 3),
            "{wire:?}"
        );
        assert_eq!(outcome.answer.as_deref(), Some("Stopping here."));
        // The tools stay declared (Anthropic refuses tool results without
        // them) but may not be called, and a note asks for the answer.
        let last = &fake.requests()[2].body;
        assert_eq!(
            last["tools"].as_array().map(Vec::len),
            Some(9),
            "{wire:?}: {last}"
        );
        let messages = last["messages"].as_array().unwrap();
        let note = match wire {
            Wire::OpenAi => {
                assert_eq!(last["tool_choice"], "none");
                let note = messages.last().unwrap();
                assert_eq!(note["role"], "system");
                note["content"].clone()
            }
            Wire::Anthropic => {
                assert_eq!(last["tool_choice"], json!({"type": "none"}));
                // Anthropic has no system turns: the note joins the user
                // message that carries the tool results.
                let blocks = messages.last().unwrap()["content"].as_array().unwrap();
                assert_eq!(blocks[0]["type"], "tool_result");
                blocks.last().unwrap()["text"].clone()
            }
        };
        assert!(
            note.as_str()
                .unwrap()
                .starts_with("You have used every tool call"),
            "{note}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_repeats_the_tool_name_in_every_chunk_still_gives_one_call() {
    let dir = PluginDir::new();
    dir.add("echo");
    let options = Options {
        repeat_tool_name: true,
        ..Options::default()
    };
    let fake = FakeModel::start_with(
        options,
        [
            Reply::tool(
                "call_9",
                "echo",
                json!({"text": "a longer text, split in fragments"}),
            ),
            Reply::text("Echoed."),
        ],
    )
    .await;
    let (agent, mut sub) = agent(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Store::open_in_memory().unwrap(),
    );
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "echo it"))
        .await
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Echoed."), "{outcome:?}");
    let calls: Vec<(String, String, String)> = drain(&mut sub)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd {
                call_id,
                tool,
                output,
                ..
            }) => Some((call_id.clone(), tool.clone(), output.clone())),
            _ => None,
        })
        .collect();
    let expected = ("call_9", "echo", "a longer text, split in fragments");
    assert_eq!(
        calls,
        [(expected.0.into(), expected.1.into(), expected.2.into())]
    );
}
