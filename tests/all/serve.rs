//! `wasmclaw serve`, the HTTP API, with a real HTTP client: messages,
//! steering, interrupts, sessions, the SSE event stream and its resumption,
//! plugins, health, metrics, bad input, and shutdown. The agent behind it
//! runs real plugins against the fake model's HTTP server.

use std::process::Stdio;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use wasmclaw::bus::Scope;
use wasmclaw::protocol::{Event, EventBody, LlmDelta};
use wasmclaw::server::ServerConfig;
use wasmclaw_tests::fake_model::{FakeModel, Gate, Options, Reply, Responder, fake_model};
use wasmclaw_tests::server::{Setup, TOKEN, TestServer};
use wasmclaw_tests::{PluginDir, agents, eventually, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(30);

/// The answer every test model gives: one `add` call, then `answer to X`.
fn add_then_answer(last_user: &str, after_tool: bool) -> Reply {
    if after_tool {
        Reply::text(format!("answer to {last_user}"))
    } else {
        Reply::tool("c1", "add", json!({"a": 40, "b": 2}))
    }
}

/// The API over the echo plugin and `fake`.
async fn server(fake: &FakeModel, setup: Setup) -> (TestServer, PluginDir) {
    let dir = PluginDir::new();
    dir.add("echo");
    let plugins = dir.load().await;
    let candidates = vec![agents::openai(fake, "m", true)];
    (TestServer::start(plugins, candidates, setup).await, dir)
}

async fn post(server: &TestServer, path: &str, body: Value) -> (StatusCode, Value) {
    send_post(server.client(), server.at(path), body).await
}

/// [`post`] in a task of its own: for a request that waits (`?wait=true`)
/// while the test goes on.
fn post_in_task(
    server: &TestServer,
    path: &str,
    body: Value,
) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    tokio::spawn(send_post(server.client(), server.at(path), body))
}

async fn send_post(client: reqwest::Client, url: String, body: Value) -> (StatusCode, Value) {
    let response = client.post(url).json(&body).send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

async fn get(server: &TestServer, path: &str) -> (StatusCode, Value) {
    let response = server.client().get(server.at(path)).send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

fn error(kind: &str, message: &str) -> Value {
    json!({ "error": { "type": kind, "message": message } })
}

/// An open event stream: each item is (id, the data parsed as an event).
type Events = std::pin::Pin<Box<dyn Stream<Item = (u64, Event, String)> + Send>>;

async fn subscribe(server: &TestServer, key: &str, last_event_id: Option<u64>) -> Events {
    let mut request = server
        .client()
        .get(server.at(&format!("/v1/sessions/{key}/events")));
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    Box::pin(response.bytes_stream().eventsource().map(|item| {
        let sse = item.expect("a well-formed SSE stream");
        let event: Event = serde_json::from_str(&sse.data).expect("each data is an event");
        (sse.id.parse().expect("each id is a seq"), event, sse.data)
    }))
}

/// Reads `stream` until the `turn_end` of `turn_id` (inclusive).
async fn until_turn_end(stream: &mut Events, turn_id: &str) -> Vec<(u64, Event, String)> {
    let mut seen = Vec::new();
    loop {
        let item = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("the turn ends within the limit")
            .expect("the stream stays open");
        let end = matches!(item.1.body, EventBody::TurnEnd(_))
            && item.1.turn_id.as_deref() == Some(turn_id);
        seen.push(item);
        if end {
            return seen;
        }
    }
}

/// Every stored event of `key`, once the event log has caught up.
async fn stored(server: &TestServer, key: &str) -> Vec<Event> {
    tokio::time::timeout(LIMIT, server.core.flush_events())
        .await
        .expect("the event log catches up");
    let filter = wasmclaw::bus::Filter {
        session: Some(key.to_string()),
        ..Default::default()
    };
    let mut events = server.core.subscribe(filter, Some(0));
    let mut stored = Vec::new();
    while let Some(event) = events.try_next().await {
        stored.push((*event).clone());
    }
    stored
}

#[tokio::test(flavor = "multi_thread")]
async fn messages_start_steer_or_queue_turns_and_wait_returns_the_answer() {
    // The first reply to "slow" waits at a gate, so the session stays busy
    // until the test has steered it and queued a message behind it.
    let gate = Gate::default();
    let held = gate.clone();
    let fake = fake_model(move |last_user, after_tool| {
        let reply = add_then_answer(last_user, after_tool);
        if last_user == "slow" && !after_tool {
            Reply::Gated(held.clone(), Box::new(reply))
        } else {
            reply
        }
    })
    .await;
    let (server, _dir) = server(&fake, Setup::default()).await;

    let (status, answer) = post(
        &server,
        "/v1/sessions/w/messages?wait=true",
        json!({"content": "hello"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let turn_id = answer["turn_id"].as_str().unwrap().to_string();
    assert_eq!(
        answer,
        json!({
            "turn_id": turn_id,
            "disposition": "started",
            "status": "completed",
            "reason": "final_answer",
            "answer": "answer to hello",
        })
    );

    let (_, started) = post(
        &server,
        "/v1/sessions/b/messages",
        json!({"content": "slow"}),
    )
    .await;
    let running = started["turn_id"].as_str().unwrap().to_string();
    assert_eq!(
        started,
        json!({"turn_id": running, "disposition": "started"})
    );
    // Steering is taken in before each model call: the steer waits until
    // the first call is at the gate, or that call would ask about it.
    assert!(eventually(LIMIT, || fake.requests().len() == 3).await);
    let (_, steered) = post(&server, "/v1/sessions/b/steer", json!({"content": "also"})).await;
    assert_eq!(
        steered,
        json!({"turn_id": running, "disposition": "steered"})
    );
    let (status, policy) = post(
        &server,
        "/v1/sessions/b/policy",
        json!({"policy": "follow_up"}),
    )
    .await;
    assert_eq!(
        (status, policy),
        (StatusCode::OK, json!({"policy": "follow_up"}))
    );
    let waiter = post_in_task(
        &server,
        "/v1/sessions/b/messages?wait=true",
        json!({"content": "later"}),
    );
    let core = server.core.clone();
    let behind = || core.live("b").is_some_and(|live| live.queued.len() == 1);
    assert!(eventually(LIMIT, behind).await, "\"later\" is queued");
    gate.open();
    let (_, queued) = tokio::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
    let later = queued["turn_id"].as_str().unwrap().to_string();
    assert_ne!(later, running);
    assert_eq!(
        queued,
        json!({
            "turn_id": later,
            "disposition": "queued",
            "position": 1,
            "status": "completed",
            "reason": "final_answer",
            "answer": "answer to later",
        })
    );
    // The steering went into the first turn; the queued message ran as the
    // turn it was promised.
    let (_, session) = get(&server, "/v1/sessions/b").await;
    let turns: Vec<(&str, &str)> = session["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t["input"].as_str().unwrap()))
        .collect();
    assert_eq!(
        turns,
        [(running.as_str(), "slow"), (later.as_str(), "later")]
    );
    let users: Vec<&str> = session["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["slow", "also", "later"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_event_stream_resumes_after_a_dropped_connection_losing_nothing() {
    let fake = fake_model(add_then_answer).await;
    let (server, _dir) = server(&fake, Setup::default()).await;

    let mut stream = subscribe(&server, "r", None).await;
    let (_, first) = post(
        &server,
        "/v1/sessions/r/messages",
        json!({"content": "one"}),
    )
    .await;
    let first = first["turn_id"].as_str().unwrap().to_string();
    let mut seen = until_turn_end(&mut stream, &first).await;
    // The connection drops in the middle of the next turn...
    let second = post_in_task(
        &server,
        "/v1/sessions/r/messages?wait=true",
        json!({"content": "two"}),
    );
    let next = tokio::time::timeout(LIMIT, stream.next()).await.unwrap();
    seen.push(next.unwrap());
    drop(stream);
    // ...which, and a third, go on without the client. The third is sent
    // once the second has ended, so it is a turn of its own, not steering.
    let (_, second) = tokio::time::timeout(LIMIT, second).await.unwrap().unwrap();
    let second = second["turn_id"].as_str().unwrap().to_string();
    let (_, third) = post(
        &server,
        "/v1/sessions/r/messages?wait=true",
        json!({"content": "three"}),
    )
    .await;
    let third = third["turn_id"].as_str().unwrap().to_string();
    assert!(third != second);
    // Reconnecting with the last id seen replays the rest, then goes live.
    let last = seen.last().unwrap().0;
    let mut resumed = subscribe(&server, "r", Some(last)).await;
    seen.extend(until_turn_end(&mut resumed, &third).await);
    let (_, fourth) = post(
        &server,
        "/v1/sessions/r/messages",
        json!({"content": "four"}),
    )
    .await;
    let fourth = fourth["turn_id"].as_str().unwrap().to_string();
    seen.extend(until_turn_end(&mut resumed, &fourth).await);

    // Exactly the stored events of the session, in order, each once, each
    // `data` exactly as `wasmclaw run --events` prints the event.
    let stored = stored(&server, "r").await;
    let ids: Vec<u64> = seen.iter().map(|(id, _, _)| *id).collect();
    let expected: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(ids, expected);
    for ((id, event, data), original) in seen.iter().zip(&stored) {
        assert_eq!(*id, event.seq);
        assert_eq!(*data, serde_json::to_string(original).unwrap());
    }
    let ends = seen
        .iter()
        .filter(|(_, e, _)| e.body.kind().as_str() == "turn_end")
        .count();
    assert_eq!(ends, 4);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_falls_behind_is_refilled_from_the_event_log() {
    let fake = fake_model(add_then_answer).await;
    let mut setup = Setup::default();
    setup.server.sse_buffer = 8;
    let (server, _dir) = server(&fake, setup).await;
    let mut stream = subscribe(&server, "slow", None).await;
    // 20 MB of events while the client reads nothing: more than the socket
    // buffers hold, so the client's queue overflows.
    let bus = server.agent.bus();
    let scope = Scope {
        session: Some("slow".into()),
        turn_id: Some("t".into()),
        parent_turn_id: None,
    };
    let text = "x".repeat(1000);
    let first = bus.last_seq() + 1;
    for _ in 0..20_000 {
        bus.publish(
            &scope,
            EventBody::LlmDelta(LlmDelta {
                iteration: 1,
                text: text.clone(),
            }),
        );
    }
    let last = bus.last_seq();
    assert!(bus.dropped_total() > 0, "the client's queue overflowed");
    let mut ids = Vec::new();
    while ids.last() != Some(&last) {
        let (id, _, _) = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("every event arrives")
            .unwrap();
        ids.push(id);
    }
    assert_eq!(ids, (first..=last).collect::<Vec<u64>>());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupts_name_the_session_or_the_turn() {
    // Every reply waits at a gate that stays closed: the turn runs until the
    // hard interrupt drops its model call.
    let gate = Gate::default();
    let fake = fake_model(move |last_user, after_tool| {
        let reply = add_then_answer(last_user, after_tool);
        Reply::Gated(gate.clone(), Box::new(reply))
    })
    .await;
    let (server, _dir) = server(&fake, Setup::default()).await;
    let (_, started) = post(&server, "/v1/sessions/i/messages", json!({"content": "go"})).await;
    let turn_id = started["turn_id"].as_str().unwrap().to_string();
    // A follow-up waits behind the turn, and its sender waits for its end.
    post(
        &server,
        "/v1/sessions/i/policy",
        json!({"policy": "follow_up"}),
    )
    .await;
    let waiter = post_in_task(
        &server,
        "/v1/sessions/i/messages?wait=true",
        json!({"content": "next"}),
    );
    assert!(
        eventually(LIMIT, || {
            server.core.live("i").is_some_and(|l| l.queued.len() == 1)
        })
        .await
    );
    let queued = server.core.live("i").unwrap().queued[0].0.clone();

    let (status, body) = post(
        &server,
        "/v1/sessions/i/interrupt",
        json!({"mode": "hard", "turn_id": "not-this-one"}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        error(
            "no_active_turn",
            "turn 'not-this-one' is not running on session 'i'"
        )
    );
    let (status, body) = post(
        &server,
        "/v1/sessions/i/interrupt",
        json!({"mode": "hard", "turn_id": turn_id}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"turn_id": turn_id, "mode": "hard", "discarded": ["next"]})
    );
    // The dropped follow-up's turn is answered as not run.
    let (_, answer) = tokio::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
    assert_eq!(
        answer,
        json!({
            "turn_id": queued, "disposition": "queued", "position": 1, "status": "aborted",
            "reason": format!("not run: a hard interrupt of turn {turn_id} discarded it"),
        })
    );
    let core = server.core.clone();
    tokio::time::timeout(LIMIT, core.until_idle("i"))
        .await
        .unwrap();
    let (status, body) = post(
        &server,
        "/v1/sessions/i/interrupt",
        json!({"mode": "graceful"}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        error("no_active_turn", "no active turn on session 'i'")
    );
    let (_, session) = get(&server, "/v1/sessions/i").await;
    assert_eq!(session["turns"][0]["status"], "aborted");
    assert_eq!(session["history"], json!([]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_shows_its_history_recorded_tree_and_live_tree() {
    // The parent asks a sub-agent; the child's reply waits at a gate, so the
    // live tree can be read while it runs.
    let gate = Gate::default();
    let held = gate.clone();
    let fake = fake_model(move |last_user, after_tool| match (last_user, after_tool) {
        ("research", false) => Reply::tool(
            "s1",
            "subagent",
            json!({"task": "dig", "label": "digger", "tools": []}),
        ),
        ("dig", _) => Reply::Gated(held.clone(), Box::new(Reply::text("dug"))),
        (_, true) => Reply::text("done"),
        _ => Reply::text("?"),
    })
    .await;
    let (server, _dir) = server(&fake, Setup::default()).await;
    let (_, started) = post(
        &server,
        "/v1/sessions/t/messages",
        json!({"content": "research"}),
    )
    .await;
    let root = started["turn_id"].as_str().unwrap().to_string();
    let live = poll(async || {
        let (_, session) = get(&server, "/v1/sessions/t").await;
        let live = session["active"].clone();
        match live["children"].as_array().is_some_and(|c| !c.is_empty()) {
            true => Ok(live),
            false => Err(format!("the child is not in the live tree: {live}")),
        }
    })
    .await;
    let child = live["children"][0]["turn_id"].as_str().unwrap().to_string();
    assert_eq!(
        live,
        json!({
            "turn_id": root, "depth": 0, "critical": false, "phase": "running",
            "children": [{
                "turn_id": child, "depth": 1, "critical": false, "phase": "running",
                "children": []
            }]
        })
    );
    gate.open();
    tokio::time::timeout(LIMIT, server.core.until_idle("t"))
        .await
        .unwrap();
    let (status, session) = get(&server, "/v1/sessions/t").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(session["busy"], false);
    assert_eq!(session["active"], Value::Null);
    let tree: Vec<(&str, &str, usize)> = session["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap(),
                t["status"].as_str().unwrap(),
                t["children"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(tree, [(root.as_str(), "completed", 1)]);
    assert_eq!(session["turns"][0]["children"][0]["id"], child.as_str());
    assert_eq!(session["turns"][0]["children"][0]["input"], "dig");
    let roles: Vec<&str> = session["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(session["history"][2]["content"], "dug");

    let (_, list) = get(&server, "/v1/sessions").await;
    assert_eq!(list["sessions"][0]["key"], "t");
    assert_eq!(list["sessions"][0]["turns"], 2);
    let (status, body) = get(&server, "/v1/sessions/nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        error(
            "not_found",
            "no session 'nobody': it has no history, no recorded turn and nothing running"
        )
    );
    server.stop().await;
}

/// Asks `probe` every 20 ms until it answers `Ok`; panics with its last
/// `Err` after LIMIT.
async fn poll<T>(mut probe: impl AsyncFnMut() -> Result<T, String>) -> T {
    let end = tokio::time::Instant::now() + LIMIT;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(why) if tokio::time::Instant::now() >= end => panic!("{why}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_health_and_metrics() {
    let fake = fake_model(add_then_answer).await;
    let (server, _dir) = server(&fake, Setup::default()).await;
    // Health needs no token.
    let health: Value = reqwest::get(server.at("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");

    let (status, plugins) = get(&server, "/v1/plugins").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(plugins["plugins"][0]["name"], "echo");
    assert_eq!(plugins["plugins"][0]["status"], "ok");

    post(
        &server,
        "/v1/sessions/m/messages?wait=true",
        json!({"content": "count"}),
    )
    .await;
    let expected = [
        "wasmclaw_turns_total{kind=\"turn\",status=\"completed\"} 1",
        "wasmclaw_tool_calls_total{tool=\"add\",outcome=\"ok\"} 1",
        "wasmclaw_llm_responses_total{model=\"openai:m\"} 2",
        "wasmclaw_llm_tokens_total{direction=\"input\"} 20",
        "wasmclaw_turns_running 0",
        "wasmclaw_sessions_busy 0",
        "wasmclaw_events_dropped_total 0",
    ];
    let text = poll(async || {
        let response = server
            .client()
            .get(server.at("/metrics"))
            .send()
            .await
            .unwrap();
        let kind = response.headers()["content-type"].to_str().unwrap();
        assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
        let text = response.text().await.unwrap();
        match expected.iter().all(|line| text.lines().any(|l| l == *line)) {
            true => Ok(text),
            false => Err(format!("metrics:\n{text}")),
        }
    })
    .await;
    assert!(
        text.contains("wasmclaw_turn_duration_seconds_count{kind=\"turn\",status=\"completed\"} 1")
    );
    assert!(text.ends_with("# EOF\n"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_a_json_error_and_the_server_goes_on() {
    let fake = fake_model(add_then_answer).await;
    let setup = Setup {
        server: ServerConfig {
            max_body_bytes: 1024,
            ..ServerConfig::new(TOKEN.into())
        },
        ..Setup::default()
    };
    let (server, _dir) = server(&fake, setup).await;
    let http = reqwest::Client::new();
    let client = server.client();
    let messages = server.at("/v1/sessions/s/messages");
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode, Value)> = vec![
        (
            "no token",
            http.get(server.at("/v1/plugins")),
            StatusCode::UNAUTHORIZED,
            error(
                "unauthorized",
                "this API needs `Authorization: Bearer TOKEN` (the token `wasmclaw serve` printed, or --token / WASMCLAW_API_TOKEN)",
            ),
        ),
        (
            "a wrong token",
            http.get(server.at("/v1/sessions/s"))
                .bearer_auth("test-token-0123456788"),
            StatusCode::UNAUTHORIZED,
            error("unauthorized", "the bearer token is not this server's"),
        ),
        (
            "malformed JSON",
            client
                .post(&messages)
                .header("content-type", "application/json")
                .body("{\"content\": "),
            StatusCode::BAD_REQUEST,
            error(
                "invalid_request",
                "the body is not valid JSON: content: EOF while parsing a value at line 1 column 12",
            ),
        ),
        (
            "an unknown field",
            client.post(&messages).json(&json!({"text": "hi"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            error(
                "invalid_request",
                "the body is not what this route takes: text: unknown field `text`, expected `content` or `agent` at line 1 column 7",
            ),
        ),
        (
            "a wrong type",
            client.post(&messages).json(&json!({"content": 7})),
            StatusCode::UNPROCESSABLE_ENTITY,
            error(
                "invalid_request",
                "the body is not what this route takes: content: invalid type: integer `7`, expected a string at line 1 column 12",
            ),
        ),
        (
            "not JSON",
            client.post(&messages).body("content=hi"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            error(
                "invalid_request",
                "the body must be JSON, sent with `content-type: application/json`",
            ),
        ),
        (
            "an oversized body",
            client
                .post(&messages)
                .json(&json!({"content": "x".repeat(2000)})),
            StatusCode::PAYLOAD_TOO_LARGE,
            error("too_large", "the body is larger than this server accepts"),
        ),
        (
            "empty content",
            client.post(&messages).json(&json!({"content": "  "})),
            StatusCode::BAD_REQUEST,
            error("invalid_request", "`content` is empty"),
        ),
        (
            "a bad session key",
            client
                .post(server.at("/v1/sessions/a%20b/messages"))
                .json(&json!({"content": "hi"})),
            StatusCode::BAD_REQUEST,
            error(
                "invalid_request",
                "session key \"a b\": expected 1 to 128 characters of A-Z a-z 0-9 - _ . : @",
            ),
        ),
        (
            "a bad query",
            client
                .post(format!("{messages}?wait=maybe"))
                .json(&json!({"content": "hi"})),
            StatusCode::BAD_REQUEST,
            error(
                "invalid_request",
                "the query string is not what this route takes: wait: provided string was not `true` or `false`",
            ),
        ),
        (
            "an unknown interrupt mode",
            client
                .post(server.at("/v1/sessions/s/interrupt"))
                .json(&json!({"mode": "soft"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            error(
                "invalid_request",
                "the body is not what this route takes: mode: unknown variant `soft`, expected `graceful` or `hard` at line 1 column 14",
            ),
        ),
        (
            "a bad Last-Event-ID",
            client
                .get(server.at("/v1/sessions/s/events"))
                .header("last-event-id", "yesterday"),
            StatusCode::BAD_REQUEST,
            error(
                "invalid_request",
                "Last-Event-ID \"yesterday\": expected the seq of an event (a whole number)",
            ),
        ),
        (
            "a wrong method",
            client.delete(&messages),
            StatusCode::METHOD_NOT_ALLOWED,
            error(
                "method_not_allowed",
                "/v1/sessions/s/messages does not take DELETE",
            ),
        ),
        (
            "an unknown route",
            client.get(server.at("/v2/everything")),
            StatusCode::NOT_FOUND,
            error("not_found", "no route for GET /v2/everything"),
        ),
    ];
    for (what, request, status, body) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "{what}");
        let got: Value = response.json().await.unwrap();
        assert_eq!(got, body, "{what}");
    }
    // Nothing of that reached the scheduler, and the server still works.
    assert!(server.core.live("s").is_none());
    let (status, answer) = post(
        &server,
        "/v1/sessions/s/messages?wait=true",
        json!({"content": "still there?"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["answer"], "answer to still there?");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_winds_running_turns_down_and_flushes_every_event() {
    // The first reply waits at a gate, so the turn is running at shutdown
    // until the test has seen the refusals; the last call, which may not
    // use tools, answers at once.
    let gate = Gate::default();
    let held = gate.clone();
    let responder = Responder::new(move |body: &Value| {
        if body["tool_choice"] == "none" {
            Reply::text("wrapped up")
        } else {
            let call = Reply::tool("c1", "add", json!({"a": 1, "b": 2}));
            Reply::Gated(held.clone(), Box::new(call))
        }
    });
    let options = Options {
        responder: Some(responder),
        ..Options::default()
    };
    let fake = FakeModel::start_with(options, []).await;
    // A grace as long as the test's limit: on a loaded machine the wind-down
    // (a tool call and a last model call) must not be cut for time.
    let setup = Setup {
        server: ServerConfig {
            shutdown_grace: LIMIT,
            ..ServerConfig::new(TOKEN.into())
        },
        ..Setup::default()
    };
    let (server, _dir) = server(&fake, setup).await;
    let mut stream = subscribe(&server, "d", None).await;
    let waiter = post_in_task(
        &server,
        "/v1/sessions/d/messages?wait=true",
        json!({"content": "work"}),
    );
    let (_, begin, _) = tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(begin.body.kind().as_str(), "turn_begin");
    let turn_id = begin.turn_id.clone().unwrap();
    // The turn's model call is at the gate: on a loaded machine, a shutdown
    // before the call starts would make the turn's last call at once, and
    // the server would be gone before the refusals below are asked for.
    assert!(eventually(LIMIT, || fake.requests().len() == 1).await);
    let api = server.api.clone();
    let bus = server.agent.bus().clone();
    let store = server.agent.store().clone();
    let client = server.client();
    let messages = server.at("/v1/sessions/other/messages");
    let stopping = tokio::spawn(server.stop());
    assert!(eventually(LIMIT, || api.core().is_closed()).await);
    // While winding down: new messages are refused, the health says so.
    let refused = client
        .post(&messages)
        .json(&json!({"content": "too late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        error(
            "shutting_down",
            "the host is shutting down and takes no new messages"
        )
    );
    gate.open();
    stopping.await.unwrap();

    let (status, answer) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        answer,
        json!({
            "turn_id": turn_id, "disposition": "started", "status": "completed",
            "reason": "interrupted", "answer": "wrapped up",
        })
    );
    // The stream saw the turn to its end, then closed.
    let mut rest = Vec::new();
    while let Some((_, event, _)) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        rest.push(event.body.kind().as_str());
    }
    assert!(rest.contains(&"interrupt_received"), "{rest:?}");
    assert_eq!(rest.last(), Some(&"turn_end"));
    // Every event was written before the server stopped.
    assert_eq!(store.last_seq().unwrap(), bus.last_seq());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_binary_makes_a_token_once_serves_with_it_and_stops_on_sigterm() {
    let fake = fake_model(add_then_answer).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    let start = |token: Option<&str>| {
        let mut command = tokio::process::Command::new(wasmclaw_bin());
        command
            .env("WASMCLAW_HOME", &home)
            .env("RUST_LOG", "error")
            .env_remove("WASMCLAW_MODEL")
            .env_remove("WASMCLAW_API_TOKEN")
            .args(["--plugins", dir.path().to_str().unwrap(), "serve"])
            .args(["--listen", "127.0.0.1:0", "--model", "openai:m"])
            .args(["--base-url", &fake.openai_base_url()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(token) = token {
            command.env("WASMCLAW_API_TOKEN", token);
        }
        command.spawn().unwrap()
    };
    // Reads stdout up to the "serving" line: (address, lines before it).
    async fn serving(child: &mut tokio::process::Child) -> (String, Vec<String>) {
        let mut lines = BufReader::new(child.stdout.as_mut().unwrap()).lines();
        let mut before = Vec::new();
        loop {
            let line = tokio::time::timeout(LIMIT, lines.next_line())
                .await
                .unwrap()
                .unwrap()
                .expect("the server says where it serves");
            if let Some(url) = line.strip_prefix("wasmclaw serving on ") {
                return (url.to_string(), before);
            }
            before.push(line);
        }
    }
    async fn ask(url: &str, token: &str) -> Value {
        reqwest::Client::new()
            .post(format!("{url}/v1/sessions/b/messages?wait=true"))
            .bearer_auth(token)
            .json(&json!({"content": "binary"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
    async fn sigterm(mut child: tokio::process::Child) -> String {
        let pid = child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(LIMIT, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}");
        let mut err = String::new();
        tokio::io::AsyncReadExt::read_to_string(child.stderr.as_mut().unwrap(), &mut err)
            .await
            .unwrap();
        err
    }

    // First start: a token is made, kept for the owner, and printed.
    let mut first = start(None);
    let (url, before) = serving(&mut first).await;
    let token_file = home.join("api-token");
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(
        before,
        [format!(
            "API token (kept in {}): {token}",
            token_file.display()
        )]
    );
    assert_eq!(ask(&url, &token).await["answer"], "answer to binary");
    let err = sigterm(first).await;
    assert!(err.contains("shutting down"), "{err}");

    // Later starts use the kept token and print nothing of it; the
    // environment's token wins over it.
    let mut second = start(None);
    let (url, before) = serving(&mut second).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(ask(&url, &token).await["answer"], "answer to binary");
    sigterm(second).await;
    let mut third = start(Some("from-the-environment"));
    let (url, _) = serving(&mut third).await;
    let refused = ask(&url, &token).await;
    assert_eq!(refused["error"]["type"], "unauthorized");
    assert_eq!(
        ask(&url, "from-the-environment").await["answer"],
        "answer to binary"
    );
    sigterm(third).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_takes_a_host_name_or_a_bare_port() {
    let fake = fake_model(add_then_answer).await;
    let dir = PluginDir::new();
    for (i, listen) in ["localhost:0", "0"].into_iter().enumerate() {
        let home = dir.scratch(&format!("home{i}"));
        let mut child = tokio::process::Command::new(wasmclaw_bin())
            .env("WASMCLAW_HOME", &home)
            .env("RUST_LOG", "error")
            .env("WASMCLAW_API_TOKEN", TOKEN)
            .args(["--plugins", dir.path().to_str().unwrap(), "serve"])
            .args(["--listen", listen, "--model", "openai:m"])
            .args(["--base-url", &fake.openai_base_url()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.as_mut().unwrap()).lines();
        let line = tokio::time::timeout(LIMIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("the server says where it serves");
        let url = line.strip_prefix("wasmclaw serving on ").expect(&line);
        let port = url.strip_prefix("http://127.0.0.1:").expect(url);
        assert!(port.parse::<u16>().unwrap() > 0, "{listen}: {url}");
        let health = reqwest::get(format!("{url}/healthz")).await.unwrap();
        assert_eq!(health.status(), StatusCode::OK, "{listen}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_logs_each_plugin_loaded_failed_and_removed_at_the_default_level() {
    let fake = fake_model(add_then_answer).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    let mut child = tokio::process::Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", &home)
        .env("WASMCLAW_API_TOKEN", "t")
        .env_remove("RUST_LOG")
        .args(["--plugins", dir.path().to_str().unwrap(), "serve"])
        .args(["--listen", "127.0.0.1:0", "--model", "openai:m"])
        .args(["--base-url", &fake.openai_base_url()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut wait_for = async |text: &str| {
        tokio::time::timeout(LIMIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains(text) {
                    return;
                }
            }
            panic!("stderr ended before {text:?}");
        })
        .await
        .unwrap_or_else(|_| panic!("no {text:?} on stderr"))
    };
    wait_for("plugin echo loaded (0.2.0; tools: echo, context, add, fail, log, count)").await;
    let junk = dir.write("junk.wasm", b"junk");
    wait_for(&format!(
        "plugin {} not loaded: not a WebAssembly file",
        junk.display()
    ))
    .await;
    std::fs::remove_file(dir.path().join("echo.wasm")).unwrap();
    wait_for("plugin echo removed").await;
}
