//! What an idle session costs in memory: `cargo bench -p wasmclaw-tests
//! --bench idle_sessions` (or `make bench`). Prints a table and writes
//! `target/bench/idle_sessions.json`.
//!
//! 10,000 sessions each run one turn (a scripted model that answers at
//! once; the session store on disk, as in production) and go idle. Measured
//! with a counting allocator, so the figures are the heap the host holds,
//! not the process's RSS (which keeps what the allocator once used):
//!
//! - heap per idle session while the sessions are still in memory;
//! - heap per idle session once the scheduler has let them go after
//!   `session_idle` (target: under 1 KB): what a host that has served many
//!   sessions keeps for each.
//!
//! A first round of the same size warms the allocator, the store's caches
//! and the scheduler's tables, so what is measured is growth.
//! SQLite's own page cache (bounded by its settings) is outside the count.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::llm::{Chain, Provider, ProviderConfig, RetryPolicy};
use wasmclaw::protocol::{Accepted, Op};
use wasmclaw::scheduler::{Scheduler, SchedulerConfig};
use wasmclaw::store::{EventLog, Store};
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::bench::{Row, print_and_save};
use wasmclaw_tests::heap::Counted;

#[global_allocator]
static HEAP: Counted = Counted::new();

const SESSIONS: usize = 10_000;
/// Turns submitted before waiting for the sessions to go idle.
const BATCH: usize = 500;
/// Long enough to measure the sessions idle in memory, short enough to wait.
const LET_GO_AFTER: Duration = Duration::from_secs(8);

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = rt.block_on(bench());
    print_and_save("idle_sessions", &rows);
}

async fn bench() -> Vec<Row> {
    let dir = PluginDir::new();
    let script = dir.scratch("script").join("ok.json");
    std::fs::write(&script, r#"{"turns": [{"replies": [{"text": "ok"}]}]}"#).unwrap();
    let config = ProviderConfig::parse(&format!("scripted:{}", script.display()), |_| None)
        .expect("the script");
    let provider = Provider::new(config, wasmclaw::llm::http_client()).unwrap();
    let store = Store::open(&dir.scratch("home").join("sessions.db")).unwrap();
    let bus = wasmclaw::bus::EventBus::new(store.last_seq().unwrap());
    let log = EventLog::spawn(store.clone(), bus.subscribe_all_lossless());
    let agent = Arc::new(Agent::new(
        dir.load().await,
        Arc::new(Chain::new(vec![provider], RetryPolicy::default())),
        bus,
        store,
        AgentConfig::default(),
    ));
    let scheduler = Scheduler::new(
        agent.clone(),
        SchedulerConfig {
            session_idle: LET_GO_AFTER,
            ..SchedulerConfig::default()
        },
    );

    run(&scheduler, &log, "warmup").await;
    until_let_go(&scheduler).await;
    let before = HEAP.held();
    let started = Instant::now();
    run(&scheduler, &log, "measured").await;
    let idle_in_memory = HEAP.held();
    let in_memory = scheduler.sessions_in_memory();
    assert!(
        started.elapsed() < LET_GO_AFTER,
        "the run took longer than the idle time; the figure of sessions in memory would be wrong"
    );
    until_let_go(&scheduler).await;
    let let_go = HEAP.held();

    let per = |bytes: i64| bytes as f64 / SESSIONS as f64;
    vec![
        (
            "sessions, one turn each".into(),
            SESSIONS.to_string(),
            json!(SESSIONS),
        ),
        (
            format!("heap per idle session in memory ({in_memory} sessions held)"),
            format!("{:.0} B", per(idle_in_memory - before)),
            json!(per(idle_in_memory - before)),
        ),
        (
            "heap per idle session after the idle time (all let go)".into(),
            format!("{:.0} B", per(let_go - before)),
            json!(per(let_go - before)),
        ),
    ]
}

/// Runs one turn on each of `SESSIONS` new sessions, `BATCH` at a time, and
/// waits until their events are in the store.
async fn run(scheduler: &Scheduler, log: &EventLog, prefix: &str) {
    for batch in 0..SESSIONS / BATCH {
        for i in batch * BATCH..(batch + 1) * BATCH {
            let op = Op::UserMessage {
                session: format!("{prefix}-{i}"),
                content: "hi".into(),
                agent: None,
            };
            match scheduler.submit(op) {
                Ok(Accepted::Started { .. }) => {}
                other => panic!("session {prefix}-{i}: {other:?}"),
            }
        }
        scheduler.until_all_idle().await;
    }
    log.flush(scheduler.agent().bus().last_seq()).await;
}

/// Waits until the scheduler has let go of every idle session; panics after
/// 30 s more than the idle time.
async fn until_let_go(scheduler: &Scheduler) {
    let deadline = Instant::now() + LET_GO_AFTER + Duration::from_secs(30);
    while scheduler.sessions_in_memory() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} sessions still in memory",
            scheduler.sessions_in_memory()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
