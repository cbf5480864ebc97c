//! Model servers that fail: each fault with its exact outcome.

use std::time::Duration;

use wasmclaw::agent::TurnOutcome;
use wasmclaw::llm::ProviderConfig;
use wasmclaw::protocol::{EventBody, LlmRetry, TurnStatus};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent, anthropic, drain, kinds, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply};

/// Runs one turn with no plugins against `candidates`; the outcome and the
/// `llm_retry` events as (model, attempt, error, next model, discard).
async fn turn(
    candidates: Vec<ProviderConfig>,
) -> (
    TurnOutcome,
    Vec<(String, u32, String, String, bool)>,
    Vec<&'static str>,
) {
    let dir = PluginDir::new();
    let (agent, mut sub) = agent(
        dir.load().await,
        candidates,
        Store::open_in_memory().unwrap(),
    );
    let outcome = tokio::time::timeout(Duration::from_secs(30), agent.run_turn("s", "hello"))
        .await
        .unwrap();
    let events = drain(&mut sub);
    let retries = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::LlmRetry(LlmRetry {
                model,
                attempt,
                error,
                next_model,
                discard_partial,
                ..
            }) => Some((
                model.clone(),
                *attempt,
                error.clone(),
                next_model.clone(),
                *discard_partial,
            )),
            _ => None,
        })
        .collect();
    (outcome, retries, kinds(&events))
}

fn status(code: u16, message: &str) -> Reply {
    Reply::Status {
        code,
        message: message.into(),
        retry_after: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_is_retried_then_the_turn_completes() {
    let fake = FakeModel::start([
        Reply::Status {
            code: 429,
            message: "slow down".into(),
            retry_after: Some(0),
        },
        Reply::text("Hi!"),
    ])
    .await;
    let (outcome, retries, kinds) = turn(vec![openai(&fake, "m", true)]).await;
    assert_eq!(
        (outcome.status, outcome.answer.as_deref()),
        (TurnStatus::Completed, Some("Hi!"))
    );
    assert_eq!(
        retries,
        [(
            "openai:m".into(),
            1,
            "openai:m: HTTP 429 Too Many Requests: slow down".into(),
            "openai:m".into(),
            false
        )]
    );
    assert_eq!(
        kinds,
        [
            "turn_begin",
            "llm_request",
            "llm_retry",
            "llm_delta",
            "llm_response",
            "turn_end"
        ]
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn server_errors_from_every_candidate_end_the_turn_naming_each() {
    let first = FakeModel::start((0..3).map(|_| status(500, "boom"))).await;
    let second = FakeModel::start((0..3).map(|_| status(503, "overloaded"))).await;
    let (outcome, retries, _) = turn(vec![
        openai(&first, "a", true),
        anthropic(&second, "b", true),
    ])
    .await;
    assert_eq!(outcome.status, TurnStatus::Error);
    assert_eq!(
        outcome.reason,
        "every model candidate failed: openai:a: HTTP 500 Internal Server Error: boom (after 3 attempts); \
         anthropic:b: HTTP 503 Service Unavailable: overloaded (after 3 attempts)"
    );
    let steps: Vec<(&str, u32, &str)> = retries
        .iter()
        .map(|(m, a, _, n, _)| (m.as_str(), *a, n.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("openai:a", 1, "openai:a"),
            ("openai:a", 2, "openai:a"),
            ("openai:a", 3, "anthropic:b"),
            ("anthropic:b", 1, "anthropic:b"),
            ("anthropic:b", 2, "anthropic:b")
        ]
    );
    assert_eq!((first.requests().len(), second.requests().len()), (3, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_candidate_cools_down_and_the_next_answers() {
    let first = FakeModel::start((0..3).map(|_| status(502, "bad gateway"))).await;
    let second = FakeModel::start([Reply::text("from b"), Reply::text("b again")]).await;
    let dir = PluginDir::new();
    let (agent, _sub) = agent(
        dir.load().await,
        vec![openai(&first, "a", false), openai(&second, "b", false)],
        Store::open_in_memory().unwrap(),
    );
    let outcome = agent.run_turn("s", "one").await;
    assert_eq!(outcome.answer.as_deref(), Some("from b"));
    // The next turn goes straight to b: a is cooling down.
    let outcome = agent.run_turn("s", "two").await;
    assert_eq!(outcome.answer.as_deref(), Some("b again"));
    assert_eq!((first.requests().len(), second.requests().len()), (3, 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_cut_mid_way_is_retried_and_its_partial_text_discarded() {
    for (wire, stream) in [
        ("openai", true),
        ("anthropic", true),
        ("openai", false),
        ("anthropic", false),
    ] {
        let fake = FakeModel::start([Reply::CutMidStream, Reply::text("Whole answer.")]).await;
        let candidate = if wire == "openai" {
            openai(&fake, "m", stream)
        } else {
            anthropic(&fake, "m", stream)
        };
        let (outcome, retries, kinds) = turn(vec![candidate]).await;
        let case = format!("{wire}, streamed: {stream}");
        assert_eq!(outcome.answer.as_deref(), Some("Whole answer."), "{case}");
        assert_eq!(retries.len(), 1, "{case}: {retries:?}");
        let (_, attempt, error, _, discard) = &retries[0];
        assert_eq!((*attempt, *discard), (1, stream), "{case}");
        let cut = if stream {
            "the connection was cut mid-stream: "
        } else {
            "the connection was cut mid-reply: "
        };
        assert!(
            error.starts_with(&format!("{wire}:m: {cut}")),
            "{case}: {error}"
        );
        let expected: &[&str] = if stream {
            &[
                "turn_begin",
                "llm_request",
                "llm_delta",
                "llm_retry",
                "llm_delta",
                "llm_response",
                "turn_end",
            ]
        } else {
            &[
                "turn_begin",
                "llm_request",
                "llm_retry",
                "llm_response",
                "turn_end",
            ]
        };
        assert_eq!(kinds, expected, "{case}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_chunk_is_a_protocol_error_that_is_retried() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([Reply::Malformed, Reply::text("Fine now.")]).await;
        let candidate = if wire == "openai" {
            openai(&fake, "m", true)
        } else {
            anthropic(&fake, "m", true)
        };
        let (outcome, retries, _) = turn(vec![candidate]).await;
        assert_eq!(outcome.answer.as_deref(), Some("Fine now."), "{wire}");
        assert_eq!(retries.len(), 1, "{wire}: {retries:?}");
        let error = &retries[0].2;
        let (unit, chunk) = if wire == "openai" {
            ("chunk", r#"{"choices":[{"delta":"#)
        } else {
            (
                "event",
                r#"{"type":"content_block_delta","index":0,"delta":"#,
            )
        };
        assert!(
            error.starts_with(&format!(
                "{wire}:m: a stream {unit} is not the expected JSON (EOF while parsing"
            )),
            "{error}"
        );
        assert!(error.ends_with(&format!("): {chunk}")), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_slower_than_the_timeout_is_retried() {
    let fake = FakeModel::start([
        Reply::Delay(Duration::from_secs(3), Box::new(Reply::text("late"))),
        Reply::text("on time"),
    ])
    .await;
    let mut candidate = openai(&fake, "m", true);
    candidate.timeout = Duration::from_millis(300);
    let (outcome, retries, _) = turn(vec![candidate]).await;
    assert_eq!(outcome.answer.as_deref(), Some("on time"));
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0].2, "openai:m: no response within 300 ms");
}

#[tokio::test(flavor = "multi_thread")]
async fn unauthorized_ends_the_turn_at_once_naming_the_provider_and_status() {
    let fake = FakeModel::start([
        status(401, "Incorrect API key provided"),
        Reply::text("never"),
    ])
    .await;
    let backup = FakeModel::start([Reply::text("never either")]).await;
    let (outcome, retries, kinds) =
        turn(vec![openai(&fake, "m", true), openai(&backup, "n", true)]).await;
    assert_eq!(outcome.status, TurnStatus::Error);
    assert_eq!(
        outcome.reason,
        "openai:m: HTTP 401 Unauthorized: Incorrect API key provided"
    );
    assert!(retries.is_empty());
    assert_eq!(kinds, ["turn_begin", "llm_request", "turn_end"]);
    assert_eq!((fake.requests().len(), backup.requests().len()), (1, 0));
}

fn candidate(wire: &str, fake: &FakeModel, stream: bool) -> ProviderConfig {
    match wire {
        "openai" => openai(fake, "m", stream),
        _ => anthropic(fake, "m", stream),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_llama_cpp_error_event_surfaces_the_servers_message_and_is_retried() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([
            Reply::LlamaCppError {
                message: "the slot is busy".into(),
            },
            Reply::text("Fine now."),
        ])
        .await;
        let (outcome, retries, _) = turn(vec![candidate(wire, &fake, true)]).await;
        assert_eq!(outcome.answer.as_deref(), Some("Fine now."), "{wire}");
        assert_eq!(
            retries,
            [(
                format!("{wire}:m"),
                1,
                format!("{wire}:m: the server reported an error: server_error: the slot is busy"),
                format!("{wire}:m"),
                true
            )],
            "{wire}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blank_data_lines_are_ignored_in_both_formats() {
    for (wire, stream) in [("openai", true), ("anthropic", true)] {
        let fake = FakeModel::start([Reply::BlankData(Box::new(Reply::text(
            "Hello through the gaps.",
        )))])
        .await;
        let (outcome, retries, kinds) = turn(vec![candidate(wire, &fake, stream)]).await;
        assert_eq!(
            (outcome.status, outcome.answer.as_deref()),
            (TurnStatus::Completed, Some("Hello through the gaps.")),
            "{wire}: {outcome:?}"
        );
        assert!(retries.is_empty(), "{wire}: {retries:?}");
        assert_eq!(
            kinds,
            [
                "turn_begin",
                "llm_request",
                "llm_delta",
                "llm_response",
                "turn_end"
            ],
            "{wire}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_after_longer_than_the_backoff_cap_is_honoured_on_a_single_candidate() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([
            Reply::Status {
                code: 429,
                message: "slow down".into(),
                retry_after: Some(1),
            },
            Reply::text("Hi!"),
        ])
        .await;
        let (outcome, _, _) = turn(vec![candidate(wire, &fake, true)]).await;
        assert_eq!(outcome.answer.as_deref(), Some("Hi!"), "{wire}");
        let requests = fake.requests();
        // The backoff cap is 50 ms; the server asked for 1 s, under the
        // 5 s the policy allows.
        let waited = requests[1].at - requests[0].at;
        assert!(waited >= Duration::from_secs(1), "{wire}: {waited:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_after_past_the_maximum_fails_at_once_naming_the_wait() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([
            Reply::Status {
                code: 429,
                message: "slow down".into(),
                retry_after: Some(30),
            },
            Reply::text("never"),
        ])
        .await;
        let (outcome, retries, kinds) = turn(vec![candidate(wire, &fake, true)]).await;
        assert_eq!(outcome.status, TurnStatus::Error, "{wire}");
        assert_eq!(
            outcome.reason,
            format!(
                "{wire}:m: HTTP 429 Too Many Requests: slow down (the server asked to wait 30 s, \
                 longer than the longest wait allowed, 5 s (--max-retry-wait))"
            )
        );
        assert!(retries.is_empty(), "{wire}: {retries:?}");
        assert_eq!(kinds, ["turn_begin", "llm_request", "turn_end"], "{wire}");
        assert_eq!(fake.requests().len(), 1, "{wire}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_kept_alive_without_end_fails_at_the_call_deadline_and_is_retried() {
    for (wire, stream) in [
        ("openai", true),
        ("anthropic", true),
        ("openai", false),
        ("anthropic", false),
    ] {
        let case = format!("{wire}, streamed: {stream}");
        let fake = FakeModel::start([
            Reply::KeepAlive {
                every: Duration::from_millis(50),
            },
            Reply::text("Done at last."),
        ])
        .await;
        let mut candidate = candidate(wire, &fake, stream);
        // Each chunk comes well within the idle timeout; the deadline
        // ends the attempt.
        candidate.timeout = Duration::from_secs(10);
        candidate.limits.deadline = Duration::from_millis(500);
        let (outcome, retries, _) = turn(vec![candidate]).await;
        assert_eq!(outcome.answer.as_deref(), Some("Done at last."), "{case}");
        assert_eq!(
            retries,
            [(
                format!("{wire}:m"),
                1,
                format!(
                    "{wire}:m: the reply was not complete within the call's deadline of 500 ms (--llm-deadline)"
                ),
                format!("{wire}:m"),
                false
            )],
            "{case}"
        );
    }
}
