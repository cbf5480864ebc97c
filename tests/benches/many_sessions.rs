//! Many sessions through the HTTP API: `cargo bench -p wasmclaw-tests
//! --bench many_sessions` (or `make bench`). Prints a table and writes
//! `target/bench/many_sessions.json`.
//!
//! 10,000 sessions, one message each (`POST /v1/sessions/{key}/messages?
//! wait=true`, 250 a second): a two-iteration turn with one tool call (the
//! echo plugin's `add`) against a fake model that waits 50 ms before each
//! reply. The server runs in this process as `wasmclaw serve` runs it (the
//! API, the scheduler, the agent and its plugin, the session store on disk
//! with the event log writing every event); the fake model and the clients
//! run in child processes, so the server's CPU and heap are its own.
//! Measured:
//!
//! - the server's CPU per turn (everything it does for a message); target
//!   0.2 ms;
//! - nothing lost (asserted): every turn completed with the answer, and the
//!   store holds each session's four messages, its turn and its events;
//! - the heap (a counting allocator): per session still in memory at the
//!   round's end, and per session once the scheduler has let them all go
//!   (target: under 1 KB).
//!
//! A first round of the same size warms the allocator, the store and the
//! tables, so what is measured is growth.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;
use wasmclaw::llm::ProviderKind;
use wasmclaw::protocol::EventKind;
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, add_then_answer, fake_model_child, micros, millis, ms, percentile,
    print_and_save, process_cpu, serve_fake_model, us,
};
use wasmclaw_tests::fake_model::FakeModel;
use wasmclaw_tests::heap::Counted;
use wasmclaw_tests::server::{Setup, TestServer, client_builder};
use wasmclaw_tests::{PluginDir, agents};

#[global_allocator]
static HEAP: Counted = Counted::new();

const SESSIONS: usize = 10_000;
/// Messages a second.
const RATE: f64 = 250.0;
const MODEL_DELAY: Duration = Duration::from_millis(50);
/// Idle sessions are let go after this (short, so the bench can wait for it).
const LET_GO_AFTER: Duration = Duration::from_secs(5);
/// How long a round may take before the bench gives up.
const LIMIT: Duration = Duration::from_secs(300);

/// The flag the bench binary is started with to run the clients instead:
/// `--clients URL PREFIX`.
const CLIENTS_FLAG: &str = "--clients";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == FAKE_MODEL_FLAG) {
        return serve_fake_model(
            2,
            add_then_answer(MODEL_DELAY),
            [],
            FakeModel::openai_base_url,
        );
    }
    if let Some(at) = args.iter().position(|a| a == CLIENTS_FLAG) {
        // The load: a worker thread per core.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let report = rt.block_on(clients(&args[at + 1], &args[at + 2]));
        #[allow(clippy::print_stdout)]
        {
            println!("{}", serde_json::to_string(&report).unwrap());
        }
        return;
    }
    // The server: the runtime `wasmclaw` runs on, with as many worker threads.
    wasmclaw::cli::async_runtime().unwrap().block_on(bench());
}

async fn bench() {
    let (mut model, base) = fake_model_child();
    let dir = PluginDir::new();
    dir.add("echo");
    let candidate = agents::candidate(ProviderKind::OpenAi, base, "bench", true);
    let setup = Setup {
        scheduler: SchedulerConfig {
            session_idle: LET_GO_AFTER,
            ..SchedulerConfig::default()
        },
        ..Setup::default()
    };
    let server = TestServer::start(dir.load().await, vec![candidate], setup).await;

    round(&server, "warm-up").await;
    until_let_go(&server).await;
    let before = HEAP.held();
    let cpu_before = process_cpu();
    let started = Instant::now();
    let report = round(&server, "s").await;
    let wall = started.elapsed();
    let cpu = process_cpu() - cpu_before;
    let in_memory = HEAP.held();
    let held = server.core.sessions_in_memory();
    until_let_go(&server).await;
    let let_go = HEAP.held();
    let lost = lost(&server, "s").await;
    server.stop().await;
    drop(model.stdin.take());
    model.wait().unwrap();

    let mut latencies: Vec<Duration> = report
        .latencies_us
        .iter()
        .map(|&us| Duration::from_micros(us))
        .collect();
    latencies.sort();
    let per_turn = cpu / SESSIONS as u32;
    let per = |bytes: i64| bytes as f64 / SESSIONS as f64;
    let held_each = (in_memory - before) as f64 / held.max(1) as f64;
    let rows: Vec<Row> = vec![
        (
            format!("sessions, one message each ({RATE}/s, 1 tool call, model 50 ms)"),
            SESSIONS.to_string(),
            json!(SESSIONS),
        ),
        (
            "server CPU per turn (API, scheduler, turn, plugin, store, events)".into(),
            us(per_turn),
            micros(per_turn),
        ),
        (
            "server CPU, share of one core".into(),
            format!("{:.0} %", cpu.as_secs_f64() / wall.as_secs_f64() * 100.0),
            json!(cpu.as_secs_f64() / wall.as_secs_f64()),
        ),
        (
            "POST to answer, p50 (100 ms of it the model's)".into(),
            ms(percentile(&latencies, 50)),
            millis(percentile(&latencies, 50)),
        ),
        (
            "POST to answer, p99".into(),
            ms(percentile(&latencies, 99)),
            millis(percentile(&latencies, 99)),
        ),
        (
            "turns completed with the answer".into(),
            format!("{} of {SESSIONS}", report.completed),
            json!(report.completed),
        ),
        (
            "sessions missing messages, turns or events in the store".into(),
            lost.len().to_string(),
            json!(lost.len()),
        ),
        (
            // Sessions idle for longer were let go during the round, each
            // leaving a few bytes (the row below): the growth is divided
            // among the sessions still held.
            format!("heap per session still in memory ({held} of {SESSIONS} held at the end)"),
            format!("{:.0} B", held_each),
            json!(held_each),
        ),
        (
            "heap per idle session once let go".into(),
            format!("{:.0} B", per(let_go - before)),
            json!(per(let_go - before)),
        ),
    ];
    // The table first, then whether anything was lost.
    print_and_save("many_sessions", &rows);
    assert_eq!(report.completed, SESSIONS, "{:?}", report.failures);
    assert!(lost.is_empty(), "{:?}", &lost[..lost.len().min(5)]);
}

/// One message to each of [`SESSIONS`] new sessions named `PREFIX-i`, sent
/// by the clients' process; its report.
async fn round(server: &TestServer, prefix: &str) -> Report {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([CLIENTS_FLAG, &server.url, prefix])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(LIMIT, child.stdout.take().unwrap().read_to_string(&mut out))
        .await
        .expect("the clients finish")
        .unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success(), "the clients exited with {status}");
    serde_json::from_str(&out).expect("the clients' report")
}

/// Waits until the scheduler has let go of every session.
async fn until_let_go(server: &TestServer) {
    let deadline = Instant::now() + LET_GO_AFTER + Duration::from_secs(60);
    while server.core.sessions_in_memory() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} sessions still in memory",
            server.core.sessions_in_memory()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The sessions `PREFIX-i` whose store lacks something: four messages, one
/// completed turn, and the same kinds of events as the first session, one
/// of them its `turn_end`.
async fn lost(server: &TestServer, prefix: &str) -> Vec<String> {
    let core = &server.core;
    let kinds = |events: Vec<wasmclaw::protocol::Event>| {
        events
            .into_iter()
            .map(|e| e.body.kind())
            .collect::<Vec<EventKind>>()
    };
    let store = server.agent.store().clone();
    let first = kinds(
        store
            .events(Some(&format!("{prefix}-0")), 0, 1000)
            .await
            .unwrap(),
    );
    let mut lost = Vec::new();
    for i in 0..SESSIONS {
        let key = format!("{prefix}-{i}");
        let history = core.history(&key).await.unwrap();
        let turns = core.turns(&key).await.unwrap();
        let events = kinds(store.events(Some(&key), 0, 1000).await.unwrap());
        let ends = events.iter().filter(|k| **k == EventKind::TurnEnd).count();
        if history.len() != 4
            || turns.len() != 1
            || turns[0].status != wasmclaw::protocol::TurnStatus::Completed
            || events != first
            || ends != 1
        {
            lost.push(format!(
                "{key}: {} messages, {} turns, events {events:?}",
                history.len(),
                turns.len()
            ));
        }
    }
    lost
}

/// What the clients' process measured.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Report {
    completed: usize,
    /// POST to answer, per message.
    latencies_us: Vec<u64>,
    /// The first answers that were not the expected one.
    failures: Vec<String>,
}

/// The clients' process: one message to each session `PREFIX-i`, at
/// [`RATE`] a second, each waiting for its turn's end.
async fn clients(url: &str, prefix: &str) -> Report {
    let client = client_builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let mut sent = JoinSet::new();
    for i in 0..SESSIONS {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / RATE)).await;
        let request = client
            .post(format!("{url}/v1/sessions/{prefix}-{i}/messages?wait=true"))
            .json(&json!({"content": "add 40 and 2"}));
        sent.spawn(async move {
            let t = Instant::now();
            let answer: serde_json::Value = match request.send().await {
                Ok(response) => response.json().await.unwrap_or_default(),
                Err(e) => json!({ "error": e.to_string() }),
            };
            (t.elapsed(), answer)
        });
    }
    let mut report = Report::default();
    while let Some(done) = sent.join_next().await {
        let (took, answer) = done.unwrap();
        if answer["status"] == "completed" && answer["answer"] == "The sum is 42." {
            report.completed += 1;
            report.latencies_us.push(took.as_micros() as u64);
        } else if report.failures.len() < 5 {
            report.failures.push(answer.to_string());
        }
    }
    report
}
