//! What the session store keeps across a crash, and that the histories the
//! host keeps in memory are always what the store holds.
//!
//! - `kill -9` of `wasmclaw serve` or `wasmclaw run` while a turn's tool call
//!   is blocked (the hostile fixture's `wait_gate`): after a restart the
//!   session's history is exactly what it was before that turn (no half of
//!   it), the turn is not recorded, and the session takes new turns.
//! - A session's history served from memory (import, turns that complete,
//!   fail or are stopped, the session let go and read again) is, after every
//!   step, byte for byte what a fresh connection reads from the file.

use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::{AgentConfig, TurnOutcome};
use wasmclaw::core::Core;
use wasmclaw::llm::Message;
use wasmclaw::protocol::{Accepted, InterruptMode, Op, Target, TurnStatus};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{core_with, drain, openai, until};
use wasmclaw_tests::fake_model::{FakeModel, Gate, Reply};
use wasmclaw_tests::gate::{ToolGates, gate_calls};
use wasmclaw_tests::serve_bin::{ServeChild, serve_command, succeeded, wasmclaw_command};

const LIMIT: Duration = Duration::from_secs(30);

/// A plugin directory with the hostile fixture, its gates granted.
fn gated_plugins(gates: &ToolGates) -> PluginDir {
    let dir = PluginDir::new();
    dir.add("hostile");
    dir.grants(
        "hostile",
        &format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants()),
    );
    dir
}

/// The history and the ids of the recorded turns of session `key`.
async fn session(server: &ServeChild, key: &str) -> (Value, Vec<String>) {
    let shown = (server.get(&server.client(), &format!("/v1/sessions/{key}"))).await;
    let turns = shown["turns"]
        .as_array()
        .unwrap_or_else(|| panic!("{shown}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    (shown["history"].clone(), turns)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_of_serve_mid_turn_leaves_the_history_as_it_was_before_the_turn() {
    // The killed turn asks for nothing after its tool call.
    let fake = FakeModel::start([Reply::text("first answer"), gate_calls(&[("c1", "g1")])]).await;
    let gates = ToolGates::new();
    let dir = gated_plugins(&gates);
    let home = dir.scratch("home");
    let start = || serve_command(&home, &dir.path(), &fake.openai_base_url());

    let server = ServeChild::start(start()).await;
    let client = server.client();
    let first = server.ask(&client, "s", "one").await;
    assert_eq!(first["answer"], "first answer", "{first}");
    let (before, turns_before) = session(&server, "s").await;
    assert_eq!(before.as_array().unwrap().len(), 2, "{before}");

    // The second turn's tool call blocks; the host is killed meanwhile.
    let started = (server.post(
        &client,
        "/v1/sessions/s/messages",
        json!({"content": "two"}),
    ))
    .await;
    assert_eq!(started["disposition"], "started", "{started}");
    gates.wait_started("g1", LIMIT).await;
    server.kill_9().await;

    let server = ServeChild::start(start()).await;
    let (after, turns_after) = session(&server, "s").await;
    assert_eq!(
        serde_json::to_string(&after).unwrap(),
        serde_json::to_string(&before).unwrap(),
        "the history is exactly what it was before the killed turn"
    );
    assert_eq!(turns_after, turns_before, "the killed turn is not recorded");

    // The session goes on from there.
    fake.push(Reply::text("third answer"));
    let third = server.ask(&server.client(), "s", "three").await;
    assert_eq!(third["answer"], "third answer", "{third}");
    let (history, turns) = session(&server, "s").await;
    let mut expected = before.as_array().unwrap().clone();
    expected.extend([
        json!({"role": "user", "content": "three"}),
        json!({"role": "assistant", "content": "third answer"}),
    ]);
    assert_eq!(history, Value::Array(expected));
    assert_eq!(turns.len(), 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_of_run_mid_turn_leaves_the_history_as_it_was_before_the_turn() {
    // The killed turn asks for nothing after its tool call.
    let fake = FakeModel::start([Reply::text("first answer"), gate_calls(&[("c1", "g1")])]).await;
    let gates = ToolGates::new();
    let dir = gated_plugins(&gates);
    let home = dir.scratch("home");
    let run = |message: &str| {
        let mut command = wasmclaw_command(&home, &dir.path());
        command
            .args(["run", "--session", "s", "--model", "openai:m"])
            .args(["--base-url", &fake.openai_base_url(), "-m", message])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    };
    let out = succeeded(run("one").spawn().unwrap()).await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first answer\n");

    let mut killed = run("two").spawn().unwrap();
    gates.wait_started("g1", LIMIT).await;
    killed.kill().await.unwrap();

    // What the store holds, as `serve` on the same home shows it.
    let server =
        ServeChild::start(serve_command(&home, &dir.path(), &fake.openai_base_url())).await;
    let (history, turns) = session(&server, "s").await;
    assert_eq!(
        history,
        json!([
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "first answer"},
        ])
    );
    assert_eq!(turns.len(), 1, "only the first turn is recorded");
    server.stop().await;
}

/// The history of `key` as a fresh connection reads it from `path`: the
/// stored JSON of each message, in order.
async fn on_disk(path: &std::path::Path, key: &str) -> String {
    let store = Store::open(path).unwrap();
    serde_json::to_string(&store.history(key).await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_history_served_from_memory_is_always_what_the_store_holds() {
    let fake = FakeModel::start([]).await;
    let gates = ToolGates::new();
    let dir = gated_plugins(&gates);
    let path = dir.scratch("home").join("sessions.db");
    let schedule = SchedulerConfig {
        session_idle: Duration::from_millis(300),
        ..SchedulerConfig::default()
    };
    let (core, _events) = core_with(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Store::open(&path).unwrap(),
        AgentConfig::default(),
        schedule,
    );
    let in_step = async |step: &str| {
        let served = serde_json::to_string(&core.history("s").await.unwrap()).unwrap();
        assert_eq!(served, on_disk(&path, "s").await, "after {step}");
        served
    };
    let turn = async |content: &str| {
        let op = Op::UserMessage {
            session: "s".into(),
            content: content.into(),
            agent: None,
        };
        let (_, outcome) = tokio::time::timeout(LIMIT, core.run(op))
            .await
            .unwrap()
            .unwrap();
        outcome.unwrap()
    };

    let imported = vec![
        wasmclaw::llm::Message::user("imported question"),
        wasmclaw::llm::Message::assistant("imported answer"),
    ];
    let op = Op::ImportHistory {
        session: "s".into(),
        messages: imported,
    };
    assert!(matches!(
        core.submit(op).await,
        Ok(Accepted::Imported { messages: 2, .. })
    ));
    in_step("the import").await;

    fake.push(Reply::text("plain answer"));
    assert_eq!(turn("a question").await.status, TurnStatus::Completed);
    in_step("a completed turn").await;

    fake.push(Reply::tool("c1", "sleep", json!({"ms": 1})));
    fake.push(Reply::text("after a tool"));
    assert_eq!(turn("use a tool").await.status, TurnStatus::Completed);
    in_step("a turn with a tool call").await;

    // Failed: the model answers 500 until the chain gives up.
    let failed = turn("this one fails").await;
    assert_eq!(failed.status, TurnStatus::Error, "{failed:?}");
    in_step("a failed turn").await;

    // Stopped while its tool call waits at a gate.
    fake.push(gate_calls(&[("c2", "held")]));
    let held = gates.wait_started("held", LIMIT);
    let stopped = interrupted(&core, "this one is stopped", InterruptMode::Hard, held).await;
    assert_eq!(stopped.status, TurnStatus::Aborted);
    let before_let_go = in_step("a stopped turn").await;

    // Let go, then read again from the store, then in memory again.
    tokio::time::timeout(LIMIT, async {
        while core.sessions_in_memory() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the idle session is let go");
    assert_eq!(in_step("the session was let go").await, before_let_go);
    fake.push(Reply::text("after the reload"));
    assert_eq!(turn("once more").await.status, TurnStatus::Completed);
    let last = in_step("a turn after the reload").await;
    let history: Vec<wasmclaw::llm::Message> = serde_json::from_str(&last).unwrap();
    assert_eq!(history.len(), 2 + 2 + 4 + 2, "{last}");
}

/// A turn of session `s` with `content`, interrupted with `mode` once
/// `ready` is done: how it ended.
async fn interrupted(
    core: &Core,
    content: &str,
    mode: InterruptMode,
    ready: impl Future,
) -> TurnOutcome {
    let op = Op::UserMessage {
        session: "s".into(),
        content: content.into(),
        agent: None,
    };
    let (Accepted::Started { turn_id }, Some(mut watch)) = core.submit_watched(op).await.unwrap()
    else {
        panic!("the turn starts");
    };
    ready.await;
    let target = Target::Turn(turn_id);
    core.submit(Op::Interrupt { target, mode }).await.unwrap();
    tokio::time::timeout(LIMIT, watch.ended())
        .await
        .unwrap()
        .unwrap()
}

/// A turn borrows its session's history from the store's memory and gives
/// it back (see `store/history.rs`); one that ends without its answer (it
/// failed, was stopped, or was wound down) gives it back too, so the next
/// turn does not read it from the table.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_that_ends_without_its_answer_leaves_the_history_in_memory() {
    let fake = FakeModel::start([]).await;
    let gates = ToolGates::new();
    let dir = gated_plugins(&gates);
    let path = dir.scratch("home").join("sessions.db");
    let config = AgentConfig {
        wind_down_idle: Duration::from_millis(200),
        ..AgentConfig::default()
    };
    let (core, mut events) = core_with(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        Store::open(&path).unwrap(),
        config,
        SchedulerConfig::default(),
    );
    let op = |content: &str| Op::UserMessage {
        session: "s".into(),
        content: content.into(),
        agent: None,
    };
    let run = async |content: &str| {
        let (_, outcome) = tokio::time::timeout(LIMIT, core.run(op(content)))
            .await
            .unwrap()
            .unwrap();
        outcome.unwrap()
    };
    // Served from memory: a change made behind the store's back (which the
    // home's lock rules out in use) does not show.
    let in_memory = async |after: &str| {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let first = "SELECT json FROM messages WHERE session = 's' AND idx = 0";
        let first: String = conn.query_row(first, [], |row| row.get(0)).unwrap();
        let set = "UPDATE messages SET json = ?1 WHERE session = 's' AND idx = 0";
        conn.execute(set, [r#"{"role":"user","content":"changed"}"#])
            .unwrap();
        let served = core.history("s").await.unwrap();
        conn.execute(set, [&first]).unwrap();
        assert_eq!(
            served[0],
            Message::user("first"),
            "after {after}, the history was read from the table"
        );
    };

    fake.push(Reply::text("first answer"));
    assert_eq!(run("first").await.status, TurnStatus::Completed);
    in_memory("a completed turn").await;

    // Failed: the model answers 500 until the chain gives up.
    let failed = run("this one fails").await;
    assert_eq!(failed.status, TurnStatus::Error, "{failed:?}");
    in_memory("a failed turn").await;

    // Stopped while its tool call waits at a gate.
    fake.push(gate_calls(&[("c1", "held")]));
    let held = gates.wait_started("held", LIMIT);
    let stopped = interrupted(&core, "this one is stopped", InterruptMode::Hard, held).await;
    assert_eq!(stopped.status, TurnStatus::Aborted);
    in_memory("a stopped turn").await;

    // Wound down: a graceful interrupt while the reply pauses mid-stream;
    // the turn ends with the text streamed so far.
    let pause = Gate::default();
    let text = "an answer the user cuts short";
    fake.push(Reply::PauseMidStream(pause.clone(), text.into()));
    drain(&mut events);
    let streaming = until(&mut events, LIMIT, |e| {
        e.body.kind().as_str() == "llm_delta"
    });
    let wound = interrupted(
        &core,
        "this one is wound down",
        InterruptMode::Graceful,
        streaming,
    )
    .await;
    assert_eq!(
        (wound.status, wound.reason.as_str()),
        (TurnStatus::Completed, "interrupted")
    );
    in_memory("a turn wound down").await;
    pause.open();
}
