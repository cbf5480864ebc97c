//! Context that lasts: sessions longer than the model's window, against a
//! fake model that counts every request's tokens and answers one over its
//! window as the real provider does (`tests/support/long_session.rs` plays
//! the model's side).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::context::{estimate_all, estimate_tools};
use wasmclaw::commands::{Commands, Handled};
use wasmclaw::llm::Message;
use wasmclaw::protocol::{
    Accepted, CompactionEnd, EventBody, InterruptMode, LlmRequest, Op, Target, TurnErrorKind,
    TurnStatus,
};
use wasmclaw::store::{Store, summary_message};
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{anthropic, drain, kinds, openai, until};
use wasmclaw_tests::fake_model::{FakeModel, Gate, Options, Reply, Responder, Served, Window};
use wasmclaw_tests::long_session::{
    self, config, core, core_of, exchanges, facts, is_summarizing, message, tool_output_in_a_turn,
};
use wasmclaw_tests::server::{Setup, TestServer};

const LIMIT: Duration = Duration::from_secs(120);

/// The `compaction_end` events among `events`.
fn compaction_ends(events: &[Arc<wasmclaw::protocol::Event>]) -> Vec<CompactionEnd> {
    (events.iter())
        .filter_map(|e| match &e.body {
            EventBody::CompactionEnd(end) => Some(end.clone()),
            _ => None,
        })
        .collect()
}

async fn import(core: &wasmclaw::core::Core, session: &str, messages: Vec<Message>) {
    let op = Op::ImportHistory {
        session: session.into(),
        messages,
    };
    assert!(matches!(
        core.submit(op).await,
        Ok(Accepted::Imported { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_turns_with_large_tool_outputs_stay_within_a_4000_token_window() {
    let fake = long_session::model(Some(4000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let file = dir.scratch("store").join("sessions.db");
    let store = Store::open(&file).unwrap();
    let candidates = vec![openai(&fake, "m", true)];
    let (core, mut events, store) = core_of(&dir, candidates, config(Some(4000)), store).await;
    let mut compactions = 0;
    for turn in 1..=300 {
        let input = format!("turn {turn}: big 1500 fact-{turn}");
        let (_, outcome) = tokio::time::timeout(LIMIT, core.run(message("long", &input)))
            .await
            .expect("the turn ends in time")
            .unwrap();
        let outcome = outcome.unwrap();
        assert_eq!(
            (outcome.status, outcome.reason.as_str()),
            (TurnStatus::Completed, "final_answer"),
            "turn {turn}"
        );
        let ends = compaction_ends(&drain(&mut events));
        assert!(
            ends.iter()
                .all(|e| e.error.is_none() && e.reason == "threshold")
        );
        compactions += ends.len();
    }
    // Never a request over the window: the fake model answered none with
    // its overflow error.
    assert_eq!(fake.overflows(), 0);
    assert!(fake.largest_request() <= 4000, "{}", fake.largest_request());
    // Every original message is in the store, whole.
    let originals = store.original_messages("long").await.unwrap();
    assert_eq!(originals.len(), 300 * 4);
    let Message::Tool { content, .. } = &originals[2 * 4 + 2] else {
        panic!("turn 3's tool result: {:?}", originals[10]);
    };
    assert!(content.starts_with("fact-3 The quick brown fox") && content.len() == 1500);
    // The summaries are there, and the history reads as the latest one
    // and the messages after it, from memory as from the file.
    let records = store.compactions("long").await.unwrap();
    assert_eq!(records.len(), compactions);
    assert!(compactions >= 100, "{compactions} compactions");
    assert!(records.windows(2).all(|w| w[0].upto_idx < w[1].upto_idx));
    let latest = records.last().unwrap();
    let view = store.history_view("long").await.unwrap();
    assert_eq!(view.messages[0], summary_message(&latest.summary));
    assert_eq!(
        &view.messages[1..],
        &originals[latest.upto_idx as usize + 1..]
    );
    let reopened = Store::open(&file)
        .unwrap()
        .history_view("long")
        .await
        .unwrap();
    assert_eq!(reopened, view);
    // Each summary carries the facts of the one before it.
    let kept = facts(&latest.summary);
    assert!(kept.contains(&"fact-3".to_string()), "{kept:?}");
    // At turn 301, `history_search` finds turn 3's fact in its stored
    // messages: the user's, the call's, its result and the answer.
    let args = json!({"query": "fact-3"});
    let found =
        tool_output_in_a_turn(&core, &mut events, "long", "history_search", args, LIMIT).await;
    assert!(
        found.starts_with("4 earlier messages match \"fact-3\", best first:\n"),
        "{found}"
    );
    let mut idxs: Vec<&str> = (found.lines())
        .filter_map(|l| l.strip_prefix("- message "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    idxs.sort();
    assert_eq!(idxs, ["10", "11", "8", "9"], "{found}");
    let Message::Tool { tool_call_id, .. } = &originals[10] else {
        unreachable!()
    };
    assert!(
        found.contains(&format!(
            "- message 10 (result of echo (call_id {tool_call_id}), 1500 bytes): [fact-3] The quick"
        )),
        "{found}"
    );
    // And reads it whole.
    let args = json!({"message": 10});
    let read =
        tool_output_in_a_turn(&core, &mut events, "long", "history_search", args, LIMIT).await;
    assert_eq!(
        read,
        format!(
            "message 10 (result of echo, call_id {tool_call_id}), bytes 0..1500 of 1500:\n{content}"
        )
    );
}

/// A session of six long exchanges (about 3,450 tokens as the fake model
/// counts) and a model whose window the agent does not know.
async fn overflow_through(served: Served) {
    let fake = long_session::model(Some(3000), served).await;
    let dir = PluginDir::new();
    let candidate = match served {
        Served::Anthropic => anthropic(&fake, "m", true),
        _ => openai(&fake, "m", true),
    };
    let store = Store::open_in_memory().unwrap();
    let (core, mut events, store) = core_of(&dir, vec![candidate], config(None), store).await;
    import(&core, "s", exchanges("", 6, 2000)).await;
    let (_, outcome) = core.run(message("s", "and now?")).await.unwrap();
    let outcome = outcome.unwrap();
    assert_eq!(
        (outcome.status, outcome.answer.as_deref()),
        (TurnStatus::Completed, Some("ok")),
        "{served:?}: {}",
        outcome.reason
    );
    let seen = drain(&mut events);
    assert_eq!(
        kinds(&seen),
        [
            "turn_begin",
            "llm_request",
            "compaction_begin",
            "compaction_end",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end"
        ],
        "{served:?}"
    );
    let ends = compaction_ends(&seen);
    assert_eq!(
        (
            ends[0].reason.as_str(),
            ends[0].summarized,
            ends[0].kept,
            &ends[0].error
        ),
        ("overflow", 10, 3, &None),
        "{served:?}"
    );
    // The window the provider named is the one the retry was fitted to.
    let windows: Vec<Option<u64>> = (seen.iter())
        .filter_map(|e| match &e.body {
            EventBody::LlmRequest(LlmRequest { window, .. }) => Some(*window),
            _ => None,
        })
        .collect();
    assert_eq!(windows, [None, Some(3000)], "{served:?}");
    assert_eq!(fake.overflows(), 1, "{served:?}");
    let records = store.compactions("s").await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].upto_idx, 9);
    assert_eq!(
        records[0].summary,
        "summary: fact-1 fact-2 fact-3 fact-4 fact-5"
    );
    assert_eq!(store.original_messages("s").await.unwrap().len(), 14);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overflow_error_of_each_provider_compacts_and_retries() {
    for served in [
        Served::OpenAi,
        Served::Anthropic,
        Served::LlamaCpp,
        Served::Vllm,
    ] {
        overflow_through(served).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn when_compaction_is_not_enough_the_largest_older_tool_result_is_left_out() {
    let fake = long_session::model(Some(6800), Served::OpenAi).await;
    let dir = PluginDir::new();
    // No result is cut for its own length here.
    let mut config = config(None);
    config.context.tool_result_fraction = 1.0;
    let (core, mut events, store) = core(&dir, &fake, config).await;
    for turn in 1..=2 {
        let input = format!("big 6000 fact-{turn}");
        let (_, outcome) = core.run(message("s", &input)).await.unwrap();
        let outcome = outcome.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    }
    assert!(compaction_ends(&drain(&mut events)).is_empty());
    assert_eq!(fake.overflows(), 1);
    // The retry of turn 2's last call: turn 1's result (of the older round)
    // is a marker; turn 2's own, which the model is answering, is whole.
    let requests = fake.requests();
    let retry = &requests.last().unwrap().body;
    let results: Vec<&str> = (retry["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[0],
        "[left out of this request: tool call call_1 (echo), 6000 bytes; history_search {\"call_id\": \"call_1\"} reads it]"
    );
    assert!(
        results[1].starts_with("fact-2 ") && results[1].len() == 6000,
        "{}",
        results[1].len()
    );
    // The history keeps both whole.
    let history = store.history("s").await.unwrap();
    let whole: Vec<usize> = (history.iter())
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.len()),
            _ => None,
        })
        .collect();
    assert_eq!(whole, [6000, 6000]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_too_long_even_shortened_fails_saying_its_size_and_the_window() {
    let fake = long_session::model(Some(300), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, _events, store) = core(&dir, &fake, config(None)).await;
    let input = format!("hello {}", "words and more words ".repeat(100));
    let (_, outcome) = core.run(message("s", &input)).await.unwrap();
    let outcome = outcome.unwrap();
    assert_eq!(outcome.status, TurnStatus::Error);
    assert_eq!(outcome.error_kind, Some(TurnErrorKind::ContextTooLong));
    let size = wasmclaw_tests::fake_model::count_tokens(&fake.requests()[1].body);
    assert_eq!(
        outcome.reason,
        format!(
            "the request was {size} tokens, more than the model takes (its context window of 300 tokens), \
             even after compacting the history and leaving out the largest tool results; the provider said: \
             openai:m: HTTP 400 Bad Request: This model's maximum context length is 300 tokens. However, your messages \
             resulted in {size} tokens. Please reduce the length of the messages."
        )
    );
    // Tried once, then shortened once.
    assert_eq!(fake.overflows(), 2);
    assert!(store.history("s").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_turn_compacts_older_history_between_its_tool_rounds() {
    let fake = long_session::model(Some(4000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, mut events, store) = core(&dir, &fake, config(Some(4000))).await;
    import(&core, "s", exchanges("", 3, 1500)).await;
    let (_, outcome) = (core.run(message("s", "rounds 3 big 1500 fact-now")).await).unwrap();
    let outcome = outcome.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    let seen = drain(&mut events);
    let k = kinds(&seen);
    let at = k
        .iter()
        .position(|k| *k == "compaction_begin")
        .expect("a compaction");
    // After a round's results, before the next call.
    assert_eq!(
        &k[at - 2..at + 3],
        [
            "tool_call_begin",
            "tool_call_end",
            "compaction_begin",
            "compaction_end",
            "llm_request"
        ]
    );
    let ends = compaction_ends(&seen);
    assert_eq!(ends.len(), 1);
    assert_eq!(
        (ends[0].summarized, ends[0].reason.as_str()),
        (4, "threshold")
    );
    assert!(ends[0].tokens_after < ends[0].tokens_before);
    // The summarizing call saw older history only, never this turn's.
    let summarizing: Vec<Value> = (fake.requests().into_iter())
        .map(|r| r.body)
        .filter(is_summarizing)
        .collect();
    assert_eq!(summarizing.len(), 1);
    let transcript = long_session::last_user_text(&summarizing[0]);
    assert_eq!(facts(&transcript), ["fact-1", "fact-2"]);
    // Stored: the record up to the second exchange; the history reads as
    // the summary, the third exchange and the whole turn.
    let records = store.compactions("s").await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].upto_idx, 3);
    let history = store.history("s").await.unwrap();
    assert_eq!(history[0], summary_message("summary: fact-1 fact-2"));
    assert_eq!(history.len(), 1 + 2 + 1 + 3 * 2 + 1);
    assert_eq!(history[3], Message::user("rounds 3 big 1500 fact-now"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_interrupt_during_compaction_leaves_the_history_as_it_was() {
    let gate = Gate::default();
    let held = gate.clone();
    let ids = Arc::new(AtomicU64::new(1));
    let options = Options {
        responder: Some(Responder::new(move |body| {
            let reply = long_session::reply(body, &ids);
            if is_summarizing(body) {
                Reply::Gated(held.clone(), Box::new(reply))
            } else {
                reply
            }
        })),
        window: Some(Window {
            tokens: 4000,
            answers_as: Served::OpenAi,
        }),
        ..Options::default()
    };
    let fake = FakeModel::start_with(options, []).await;
    let dir = PluginDir::new();
    let (core, mut events, store) = core(&dir, &fake, config(Some(4000))).await;
    let imported = exchanges("", 8, 1500);
    import(&core, "s", imported.clone()).await;
    let accepted = core.submit(message("s", "go on")).await.unwrap();
    let Accepted::Started { turn_id } = accepted else {
        panic!("{accepted:?}")
    };
    until(&mut events, LIMIT, |e| {
        matches!(e.body, EventBody::CompactionBegin(_))
    })
    .await;
    let stop = Op::Interrupt {
        target: Target::Session("s".into()),
        mode: InterruptMode::Hard,
    };
    core.submit(stop).await.unwrap();
    let outcome = tokio::time::timeout(LIMIT, core.wait_turn(&turn_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.status, TurnStatus::Aborted);
    // Nothing written: no record, the history and the messages as imported.
    assert!(store.compactions("s").await.unwrap().is_empty());
    assert_eq!(store.history("s").await.unwrap(), imported);
    assert_eq!(store.original_messages("s").await.unwrap(), imported);
    let seen = drain(&mut events);
    assert!(compaction_ends(&seen).is_empty());
    // The next turn compacts.
    gate.open();
    let (_, outcome) = core.run(message("s", "again")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    assert_eq!(store.compactions("s").await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_sessions_compact_at_once_each_its_own_history() {
    let fake = long_session::model(Some(4000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, _events, store) = core(&dir, &fake, config(Some(4000))).await;
    for i in 0..50 {
        import(
            &core,
            &format!("s{i}"),
            exchanges(&format!("s{i}x"), 8, 1500),
        )
        .await;
    }
    let turns = (0..50).map(|i| {
        let core = core.clone();
        async move { core.run(message(&format!("s{i}"), "go on")).await }
    });
    let outcomes = tokio::time::timeout(LIMIT, futures_util::future::join_all(turns))
        .await
        .expect("every turn ends in time");
    for outcome in outcomes {
        let outcome = outcome.unwrap().1.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    }
    for i in 0..50 {
        let session = format!("s{i}");
        let records = store.compactions(&session).await.unwrap();
        assert_eq!(records.len(), 1, "{session}");
        let expected: Vec<String> = (1..=7).map(|k| format!("fact-s{i}x{k}")).collect();
        assert_eq!(facts(&records[0].summary), expected, "{session}");
        let history = store.history(&session).await.unwrap();
        assert_eq!(history[0], summary_message(&records[0].summary));
        assert_eq!(history.len(), 1 + 2 + 2);
    }
    assert_eq!(fake.overflows(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subturn_compacts_its_own_conversation_in_memory() {
    let fake = long_session::model(Some(4000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, mut events, store) = core(&dir, &fake, config(Some(4000))).await;
    let task = json!({"task": "rounds 6 big 1500 fact-child"});
    let (_, outcome) = (core
        .run(message("s", &format!("call subagent {task}")))
        .await)
        .unwrap();
    let outcome = outcome.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    let parent = outcome.turn_id;
    let seen = drain(&mut events);
    let child_ends: Vec<&CompactionEnd> = (seen.iter())
        .filter(|e| e.parent_turn_id.as_deref() == Some(&parent))
        .filter_map(|e| match &e.body {
            EventBody::CompactionEnd(end) => Some(end),
            _ => None,
        })
        .collect();
    assert!(!child_ends.is_empty());
    assert!(
        child_ends
            .iter()
            .all(|e| e.reason == "threshold" && e.error.is_none())
    );
    // Every compaction was the child's; none is stored for the session.
    assert_eq!(compaction_ends(&seen).len(), child_ends.len());
    assert!(store.compactions("s").await.unwrap().is_empty());
    assert_eq!(fake.overflows(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn compact_on_demand_by_command_op_and_http() {
    let fake = long_session::model(None, Served::OpenAi).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let server = TestServer::start(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Setup {
            agent: config(Some(100_000)),
            ..Setup::default()
        },
    )
    .await;
    let core = &server.core;
    for session in ["a", "b", "c"] {
        import(core, session, exchanges(session, 3, 400)).await;
    }
    // The command.
    let handled = Commands::new(core)
        .handle("a", "/compact", || "x".into())
        .await;
    let Handled::Command(outcome) = handled else {
        panic!("{handled:?}")
    };
    assert!(!outcome.failed, "{}", outcome.reply);
    // As a turn counts them: the history and the tools on offer.
    let tools = estimate_tools(&core.agent_tools("default").unwrap());
    let history = exchanges("a", 3, 400);
    let before = estimate_all(&history) + tools;
    let summary = summary_message("summary: fact-a1 fact-a2");
    let after = estimate_all(&[summary]) + estimate_all(&history[4..]) + tools;
    assert_eq!(
        outcome.reply,
        format!("4 messages summarized, 2 kept; about {before} tokens before, {after} after")
    );
    // The Op.
    let answer = core
        .submit(Op::Compact {
            session: "b".into(),
        })
        .await;
    assert!(
        matches!(
            answer,
            Ok(Accepted::Compacted {
                summarized: 4,
                kept: 2,
                ..
            })
        ),
        "{answer:?}"
    );
    // HTTP.
    let client = server.client();
    let response = client
        .post(server.at("/v1/sessions/c/compact"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["summarized"].as_u64(), body["kept"].as_u64()),
        (Some(4), Some(2))
    );
    for session in ["a", "b", "c"] {
        let records = server.agent.store().compactions(session).await.unwrap();
        assert_eq!(records.len(), 1, "{session}");
        assert_eq!(
            records[0].summary,
            format!("summary: fact-{session}1 fact-{session}2")
        );
    }
    // Again at once: only the last exchange is left, which stays.
    let response = client
        .post(server.at("/v1/sessions/c/compact"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "session 'c' has nothing to compact: its history (3 messages) is within its last 1 user turns"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_result_past_its_share_of_the_window_goes_to_the_model_cut_and_stays_whole() {
    let fake = long_session::model(Some(100_000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, mut events, store) = core(&dir, &fake, config(Some(6000))).await;
    let (_, outcome) = core.run(message("s", "big 9000 fact-1")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    let requests = fake.requests();
    let sent: Vec<String> = (requests[1].body["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sent.len(), 1);
    let cut = &sent[0];
    assert!(cut.starts_with("fact-1 The quick"), "{cut}");
    assert!(
        cut.contains(
            "bytes left out here to fit the model's context window; \
             read the whole result with history_search {\"call_id\": \"call_1\"} ...]"
        ),
        "{cut}"
    );
    // A quarter of the usable window (about 1,200 tokens) and the marker.
    assert!(cut.len() < 5500, "{}", cut.len());
    // The history and the event log have all of it.
    let history = store.history("s").await.unwrap();
    assert!(matches!(&history[2], Message::Tool { content, .. } if content.len() == 9000));
    let outputs = wasmclaw_tests::agents::tool_outputs(&drain(&mut events));
    assert_eq!(outputs.iter().map(String::len).collect::<Vec<_>>(), [9000]);
}
