//! Model servers that fail: each fault with its exact outcome.

use std::time::Duration;

use serde_json::json;
use wasmclaw::agent::TurnOutcome;
use wasmclaw::llm::ProviderConfig;
use wasmclaw::protocol::{EventBody, LlmRetry, TurnEnd, TurnErrorKind, TurnStatus};
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
        "openai:m: HTTP 401 Unauthorized: Incorrect API key provided (the key sent is the one in OPENAI_API_KEY: check it)"
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

/// What a failed turn's reason must be: exactly this, or (where it carries
/// the operating system's or the HTTP library's words) this start and end.
enum Reason {
    Is(&'static str),
    Around(&'static str, &'static str),
}

/// One way a provider fails, and the turn it ends.
struct Fault {
    name: &'static str,
    wire: &'static str,
    stream: bool,
    replies: Vec<Reply>,
    setup: fn(&mut ProviderConfig),
    kind: TurnErrorKind,
    reason: Reason,
}

/// `reply` for each of the three tries `quick_retries` makes.
/// A context overflow is tried again once, shortened (see the
/// compaction tests).
fn twice(reply: Reply) -> Vec<Reply> {
    vec![reply; 2]
}

fn thrice(reply: Reply) -> Vec<Reply> {
    vec![reply; 3]
}

fn as_is(_: &mut ProviderConfig) {}

/// The `turn_end` of a turn with no plugins against `candidates`, checked
/// against the outcome the turn returned.
async fn failed_turn(dir: &PluginDir, candidates: Vec<ProviderConfig>) -> TurnEnd {
    let (agent, mut sub) = agent(
        dir.load().await,
        candidates,
        Store::open_in_memory().unwrap(),
    );
    let outcome = tokio::time::timeout(Duration::from_secs(30), agent.run_turn("s", "hello"))
        .await
        .unwrap();
    let ends: Vec<TurnEnd> = drain(&mut sub)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TurnEnd(end) => Some(end.clone()),
            _ => None,
        })
        .collect();
    let [end] = ends.as_slice() else {
        panic!("one turn_end, not {ends:?}");
    };
    assert_eq!(
        (end.status, &end.reason, end.error_kind),
        (outcome.status, &outcome.reason, outcome.error_kind)
    );
    end.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_provider_failure_ends_the_turn_with_its_error_kind() {
    let faults = [
        Fault {
            name: "401",
            wire: "openai",
            stream: true,
            replies: vec![status(401, "Incorrect API key provided")],
            setup: as_is,
            kind: TurnErrorKind::Auth,
            reason: Reason::Is(
                "openai:m: HTTP 401 Unauthorized: Incorrect API key provided (the key sent is the one in OPENAI_API_KEY: check it)",
            ),
        },
        Fault {
            name: "403",
            wire: "anthropic",
            stream: true,
            replies: vec![status(403, "Your API key may not use this model.")],
            setup: as_is,
            kind: TurnErrorKind::Auth,
            reason: Reason::Is(
                "anthropic:m: HTTP 403 Forbidden: Your API key may not use this model.",
            ),
        },
        Fault {
            name: "429, no tries left",
            wire: "openai",
            stream: true,
            replies: thrice(status(429, "slow down")),
            setup: as_is,
            kind: TurnErrorKind::RateLimited,
            reason: Reason::Is(
                "openai:m: HTTP 429 Too Many Requests: slow down (after 3 attempts)",
            ),
        },
        Fault {
            name: "529",
            wire: "anthropic",
            stream: false,
            replies: thrice(status(529, "Overloaded")),
            setup: as_is,
            kind: TurnErrorKind::Overloaded,
            reason: Reason::Is("anthropic:m: HTTP 529: Overloaded (after 3 attempts)"),
        },
        Fault {
            name: "503",
            wire: "openai",
            stream: false,
            replies: thrice(status(503, "busy")),
            setup: as_is,
            kind: TurnErrorKind::Overloaded,
            reason: Reason::Is("openai:m: HTTP 503 Service Unavailable: busy (after 3 attempts)"),
        },
        Fault {
            name: "an overloaded_error event",
            wire: "anthropic",
            stream: true,
            replies: thrice(Reply::StreamError {
                status: 529,
                error_type: "overloaded_error".into(),
                message: "Overloaded".into(),
            }),
            setup: as_is,
            kind: TurnErrorKind::Overloaded,
            reason: Reason::Is(
                "anthropic:m: the server reported an error: overloaded_error: Overloaded (after 3 attempts)",
            ),
        },
        Fault {
            name: "OpenAI's context_length_exceeded",
            wire: "openai",
            stream: true,
            replies: twice(Reply::ErrorBody {
                code: 400,
                body: json!({"error": {
                    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }}),
            }),
            setup: as_is,
            kind: TurnErrorKind::ContextTooLong,
            reason: Reason::Is(
                "the request was 130412 tokens, more than the model takes (its context window of 128000 tokens), \
                 even after compacting the history and leaving out the largest tool results; the provider said: \
                 openai:m: HTTP 400 Bad Request: This model's maximum context length is 128000 tokens. \
                 However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
            ),
        },
        Fault {
            name: "OpenAI's code alone",
            wire: "openai",
            stream: false,
            replies: twice(Reply::ErrorBody {
                code: 400,
                body: json!({"error": {
                    "message": "Your input exceeds the context window of this model.",
                    "type": "invalid_request_error",
                    "param": "input",
                    "code": "context_length_exceeded",
                }}),
            }),
            setup: as_is,
            kind: TurnErrorKind::ContextTooLong,
            reason: Reason::Around(
                "the request was about ",
                " tokens (counted here), more than the model takes (its context window), even after compacting \
                 the history and leaving out the largest tool results; the provider said: openai:m: HTTP 400 Bad \
                 Request: Your input exceeds the context window of this model.",
            ),
        },
        Fault {
            name: "Anthropic's prompt is too long",
            wire: "anthropic",
            stream: true,
            replies: twice(Reply::ErrorBody {
                code: 400,
                body: json!({"type": "error", "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                }}),
            }),
            setup: as_is,
            kind: TurnErrorKind::ContextTooLong,
            reason: Reason::Is(
                "the request was 210000 tokens, more than the model takes (its context window of 200000 tokens), \
                 even after compacting the history and leaving out the largest tool results; the provider said: \
                 anthropic:m: HTTP 400 Bad Request: prompt is too long: 210000 tokens > 200000 maximum",
            ),
        },
        Fault {
            name: "413",
            wire: "anthropic",
            stream: true,
            replies: twice(status(
                413,
                "Request exceeds the maximum allowed number of bytes.",
            )),
            setup: as_is,
            kind: TurnErrorKind::ContextTooLong,
            reason: Reason::Around(
                "the request was about ",
                " tokens (counted here), more than the model takes (its context window), even after compacting \
                 the history and leaving out the largest tool results; the provider said: anthropic:m: HTTP 413 \
                 Payload Too Large: Request exceeds the maximum allowed number of bytes.",
            ),
        },
        Fault {
            name: "a context overflow refused in a stream",
            wire: "openai",
            stream: true,
            replies: twice(Reply::StreamError {
                status: 400,
                error_type: "invalid_request_error".into(),
                message: "This model's maximum context length is 8192 tokens.".into(),
            }),
            setup: as_is,
            kind: TurnErrorKind::ContextTooLong,
            reason: Reason::Around(
                "the request was about ",
                " tokens (counted here), more than the model takes (its context window of 8192 tokens), even \
                 after compacting the history and leaving out the largest tool results; the provider said: openai:m: \
                 the server reported an error: invalid_request_error: This model's maximum context length is 8192 tokens.",
            ),
        },
        Fault {
            name: "400",
            wire: "openai",
            stream: true,
            replies: vec![status(400, "Invalid value for 'tool_choice'")],
            setup: as_is,
            kind: TurnErrorKind::BadRequest,
            reason: Reason::Is("openai:m: HTTP 400 Bad Request: Invalid value for 'tool_choice'"),
        },
        Fault {
            name: "a request refused in a stream",
            wire: "anthropic",
            stream: true,
            replies: vec![Reply::StreamError {
                status: 400,
                error_type: "invalid_request_error".into(),
                message: "messages: roles must alternate".into(),
            }],
            setup: as_is,
            kind: TurnErrorKind::BadRequest,
            reason: Reason::Is(
                "anthropic:m: the server reported an error: invalid_request_error: messages: roles must alternate",
            ),
        },
        Fault {
            name: "a closed port",
            wire: "openai",
            stream: true,
            replies: vec![],
            setup: |c| {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                c.base_url = format!("http://{}/v1", listener.local_addr().unwrap());
            },
            kind: TurnErrorKind::Network,
            reason: Reason::Around(
                "openai:m: could not reach the server: error sending request for url (http://127.0.0.1:",
                "Connection refused (os error 111) (after 3 attempts)",
            ),
        },
        Fault {
            name: "no response in time",
            wire: "openai",
            stream: true,
            replies: thrice(Reply::Delay(
                Duration::from_secs(3),
                Box::new(Reply::text("late")),
            )),
            setup: |c| c.timeout = Duration::from_millis(200),
            kind: TurnErrorKind::Timeout,
            reason: Reason::Is("openai:m: no response within 200 ms (after 3 attempts)"),
        },
        Fault {
            name: "a stream cut mid-way",
            wire: "openai",
            stream: true,
            replies: thrice(Reply::CutMidStream),
            setup: as_is,
            kind: TurnErrorKind::CutStream,
            reason: Reason::Around(
                "openai:m: the connection was cut mid-stream: ",
                " (after 3 attempts)",
            ),
        },
        Fault {
            name: "a body cut mid-way",
            wire: "anthropic",
            stream: false,
            replies: thrice(Reply::CutMidStream),
            setup: as_is,
            kind: TurnErrorKind::CutStream,
            reason: Reason::Around(
                "anthropic:m: the connection was cut mid-reply: ",
                " (after 3 attempts)",
            ),
        },
        Fault {
            name: "500",
            wire: "openai",
            stream: true,
            replies: thrice(status(500, "boom")),
            setup: as_is,
            kind: TurnErrorKind::Provider,
            reason: Reason::Is("openai:m: HTTP 500 Internal Server Error: boom (after 3 attempts)"),
        },
        Fault {
            name: "a malformed body",
            wire: "openai",
            stream: false,
            replies: thrice(Reply::Malformed),
            setup: as_is,
            kind: TurnErrorKind::Provider,
            reason: Reason::Is(
                "openai:m: the reply is not the expected JSON (key must be a string at line 1 column 2): {not json (after 3 attempts)",
            ),
        },
        Fault {
            name: "a server error event",
            wire: "openai",
            stream: true,
            replies: thrice(Reply::LlamaCppError {
                message: "the slot is busy".into(),
            }),
            setup: as_is,
            kind: TurnErrorKind::Provider,
            reason: Reason::Is(
                "openai:m: the server reported an error: server_error: the slot is busy (after 3 attempts)",
            ),
        },
        Fault {
            name: "a reply past its bound",
            wire: "anthropic",
            stream: true,
            replies: vec![Reply::text("far more than sixteen bytes of text")],
            setup: |c| c.limits.max_text = 16,
            kind: TurnErrorKind::ReplyTooLarge,
            reason: Reason::Is(
                "anthropic:m: the reply's text passed its bound of 16 bytes (--max-reply-text)",
            ),
        },
        Fault {
            name: "no key",
            wire: "anthropic",
            stream: true,
            replies: vec![],
            setup: |c| c.api_key = None,
            kind: TurnErrorKind::Config,
            reason: Reason::Is("anthropic:m: ANTHROPIC_API_KEY is not set"),
        },
    ];
    let dir = PluginDir::new();
    for fault in faults {
        let name = fault.name;
        let fake = FakeModel::start(fault.replies).await;
        let mut candidate = candidate(fault.wire, &fake, fault.stream);
        (fault.setup)(&mut candidate);
        let end = failed_turn(&dir, vec![candidate]).await;
        assert_eq!(
            (end.status, end.error_kind),
            (TurnStatus::Error, Some(fault.kind)),
            "{name}: {}",
            end.reason
        );
        match fault.reason {
            Reason::Is(reason) => assert_eq!(end.reason, reason, "{name}"),
            Reason::Around(start, end_) => assert!(
                end.reason.starts_with(start) && end.reason.ends_with(end_),
                "{name}: {}",
                end.reason
            ),
        }
        assert_eq!(fake.remaining(), 0, "{name}: every reply was asked for");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn when_every_candidate_failed_the_kind_is_the_last_ones() {
    let first = FakeModel::start(thrice(status(500, "boom"))).await;
    let second = FakeModel::start(thrice(status(429, "slow down"))).await;
    let end = failed_turn(
        &PluginDir::new(),
        vec![openai(&first, "a", true), anthropic(&second, "b", true)],
    )
    .await;
    assert_eq!(
        (end.status, end.error_kind, end.reason.as_str()),
        (
            TurnStatus::Error,
            Some(TurnErrorKind::RateLimited),
            "every model candidate failed: openai:a: HTTP 500 Internal Server Error: boom (after 3 attempts); \
             anthropic:b: HTTP 429 Too Many Requests: slow down (after 3 attempts)"
        )
    );
    // A final error ends the call at once: its class, not the earlier one's.
    let first = FakeModel::start(thrice(status(503, "busy"))).await;
    let second = FakeModel::start([status(401, "bad key")]).await;
    let end = failed_turn(
        &PluginDir::new(),
        vec![openai(&first, "a", true), openai(&second, "b", true)],
    )
    .await;
    assert_eq!(
        (end.error_kind, end.reason.as_str()),
        (
            Some(TurnErrorKind::Auth),
            "openai:b: HTTP 401 Unauthorized: bad key (the key sent is the one in OPENAI_API_KEY: check it)"
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn turns_the_host_ends_have_their_error_kind_too() {
    // A before-llm hook that denies.
    let dir = PluginDir::new();
    dir.add_as("hooktest", "gate");
    dir.grants(
        "gate",
        "[hooks]\ntimeout_ms = 10000\n\n[config]\nsubscriptions = [{ point = \"before-llm\", priority = 0 }]\nbefore_llm = { action = \"deny\", reason = \"no model today\" }\n",
    );
    let fake = FakeModel::start([Reply::text("never asked")]).await;
    let end = failed_turn(&dir, vec![openai(&fake, "m", true)]).await;
    assert_eq!(
        (end.status, end.error_kind, end.reason.as_str()),
        (
            TurnStatus::Error,
            Some(TurnErrorKind::Hook),
            "hook 'gate' denied the model request: no model today"
        )
    );
    assert!(fake.requests().is_empty());

    // No answer, even asked once more without tools.
    let fake = FakeModel::start([Reply::text(""), Reply::text("")]).await;
    let end = failed_turn(&PluginDir::new(), vec![openai(&fake, "m", true)]).await;
    assert_eq!(
        (end.status, end.error_kind, end.reason.as_str()),
        (
            TurnStatus::Error,
            Some(TurnErrorKind::NoAnswer),
            "the model gave no answer: its reply was empty, and asked once more without tools, it gave no text either"
        )
    );

    // The same refused call, again and again.
    let fake = FakeModel::start(thrice(Reply::tool("c1", "nope", json!({})))).await;
    let end = failed_turn(&PluginDir::new(), vec![openai(&fake, "m", true)]).await;
    assert_eq!(
        (end.status, end.error_kind),
        (TurnStatus::Error, Some(TurnErrorKind::RepeatedRefusal)),
        "{}",
        end.reason
    );
    assert!(
        end.reason
            .starts_with("the model made the same refused call 3 times (the limit is 3): nope {} was refused with: "),
        "{}",
        end.reason
    );
}
