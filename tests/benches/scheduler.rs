//! The scheduler benchmark: `cargo bench -p wasmclaw-tests --bench scheduler`
//! (or `make bench`). Prints a table and writes `target/bench/scheduler.json`.
//!
//! 1,000 sessions, each running a two-iteration turn with one tool call (the
//! `echo` plugin's `add`), submitted at once to the
//! [`Scheduler`](wasmclaw::scheduler::Scheduler), against a fake model that
//! waits 50 ms before each reply. Measured:
//!
//! - wall time, from the first submit until every session is idle (target:
//!   at most twice the pure model time of 2 × 50 ms), with every turn
//!   running at once and with the default cap of 256 parallel turns;
//! - host CPU per turn (the plugin's run time, ~30 µs, included);
//! - peak RSS, and memory per idle session (RSS growth over 1,000 more
//!   sessions that ran and went idle; target at most 50 KB).
//!
//! The host runs as in production: the session store on disk, the event log
//! writing every event to it. The fake model runs in a child process, so its
//! CPU is not the host's; it is shown on a row of its own, since both
//! processes share the machine's cores.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::{Delivery, EventBus, Filter, Received};
use wasmclaw::llm::{Chain, Provider, ProviderConfig, ProviderKind, RetryPolicy};
use wasmclaw::protocol::{Accepted, EventBody, Op, TurnEnd, TurnStatus};
use wasmclaw::scheduler::{DEFAULT_MAX_PARALLEL, Scheduler, SchedulerConfig};
use wasmclaw::store::{EventLog, Store};
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, add_then_answer, cpu_of, fake_model_child, micros, millis, ms,
    print_and_save, proc_status_kb, process_cpu, serve_fake_model, us,
};
use wasmclaw_tests::fake_model::FakeModel;

const SESSIONS: usize = 1000;
const WARMUP: usize = 200;
/// How long the fake model waits before each reply.
const MODEL_DELAY: Duration = Duration::from_millis(50);
/// Every turn at once.
const ALL_AT_ONCE: usize = 1024;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == FAKE_MODEL_FLAG) {
        // The child: answers every request after 50 ms, with a call of
        // `add` or, after the tool result, the answer.
        let options = add_then_answer(MODEL_DELAY);
        return serve_fake_model(2, options, [], FakeModel::openai_base_url);
    }
    // A socket per running turn, in this process and in the fake model's
    // (which inherits the limit): more than a 1,024 soft limit allows.
    rlimit::increase_nofile_limit(u64::MAX).expect("raising the open-file limit");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = rt.block_on(bench());
    print_and_save("scheduler", &rows);
}

async fn bench() -> Vec<Row> {
    let (mut child, base) = fake_model_child();

    let dir = PluginDir::new();
    dir.add("echo");
    let db = dir.scratch("home").join("sessions.db");
    let store = Store::open(&db).unwrap();
    let bus = EventBus::new(store.last_seq().unwrap());
    let log = EventLog::spawn(store.clone(), bus.subscribe_all_lossless());
    let chain = Chain::new(
        vec![Provider::new(candidate(base), wasmclaw::llm::http_client()).unwrap()],
        RetryPolicy::default(),
    );
    let agent = Arc::new(Agent::new(
        dir.load().await,
        Arc::new(chain),
        bus,
        store,
        AgentConfig::default(),
    ));
    let all_at_once = Scheduler::new(
        agent.clone(),
        SchedulerConfig {
            max_parallel: ALL_AT_ONCE,
            ..Default::default()
        },
    );
    let capped = Scheduler::new(agent.clone(), SchedulerConfig::default());

    let rss_at_start = proc_status_kb("VmRSS");
    let model_pid = child.id();
    run(&all_at_once, &log, model_pid, "warmup", WARMUP).await;
    let wide = run(&all_at_once, &log, model_pid, "wide", SESSIONS).await;
    // Every session so far is idle; the next 1,000 are new.
    let rss_before = proc_status_kb("VmRSS");
    let db_before = db_bytes(&db);
    let narrow = run(&capped, &log, model_pid, "capped", SESSIONS).await;
    let rss_after = proc_status_kb("VmRSS");
    let db_after = db_bytes(&db);
    let peak = proc_status_kb("VmHWM");

    drop(child.stdin.take());
    child.wait().unwrap();

    let model_time = MODEL_DELAY * 2;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows: Vec<Row> = vec![
        (
            "CPU cores (the host and the fake model share them)".into(),
            cores.to_string(),
            json!(cores),
        ),
        (
            "pure model time per turn (2 calls × 50 ms)".into(),
            ms(model_time),
            millis(model_time),
        ),
        (
            "target wall time for 1,000 sessions at once (2 × model time)".into(),
            ms(model_time * 2),
            millis(model_time * 2),
        ),
    ];
    for (label, figures) in [
        (
            format!("1,000 sessions, all at once (max_parallel {ALL_AT_ONCE})"),
            &wide,
        ),
        (
            format!("1,000 sessions, default cap (max_parallel {DEFAULT_MAX_PARALLEL})"),
            &narrow,
        ),
    ] {
        rows.push((
            format!("{label}: wall, first submit to all idle"),
            ms(figures.wall),
            millis(figures.wall),
        ));
        rows.push((
            format!("{label}: submitting the 1,000 messages"),
            ms(figures.submit),
            millis(figures.submit),
        ));
        rows.push((
            format!("{label}: host CPU per turn (plugin's ~30 µs included)"),
            us(figures.cpu_per_turn),
            micros(figures.cpu_per_turn),
        ));
        rows.push((
            format!("{label}: fake model CPU per turn (child process)"),
            us(figures.model_cpu_per_turn),
            micros(figures.model_cpu_per_turn),
        ));
    }
    rows.push((
        "RSS before the first turn (plugins loaded)".into(),
        format!("{:.1} MB", rss_at_start as f64 / 1024.0),
        json!(rss_at_start),
    ));
    rows.push((
        "peak RSS (VmHWM)".into(),
        format!("{:.1} MB", peak as f64 / 1024.0),
        json!(peak),
    ));
    let per_session = (rss_after as f64 - rss_before as f64) / SESSIONS as f64;
    rows.push((
        "memory per idle session (RSS growth over 1,000 more sessions)".into(),
        format!("{per_session:.1} KB"),
        json!(per_session),
    ));
    let db_per_session = (db_after as f64 - db_before as f64) / 1024.0 / SESSIONS as f64;
    rows.push((
        "session store growth per session (SQLite file + WAL)".into(),
        format!("{db_per_session:.1} KB"),
        json!(db_per_session),
    ));
    rows
}

/// What one run measured.
struct Figures {
    wall: Duration,
    submit: Duration,
    cpu_per_turn: Duration,
    model_cpu_per_turn: Duration,
}

/// Submits a message to `n` new sessions named `{prefix}-{i}` and waits
/// until all are idle and the event log has written every event; panics
/// unless every turn completed.
async fn run(
    scheduler: &Scheduler,
    log: &EventLog,
    model_pid: u32,
    prefix: &str,
    n: usize,
) -> Figures {
    let bus = scheduler.agent().bus();
    let mut events = bus.subscribe(Filter::default(), Delivery::Lossless);
    let mut tally = Tally::default();
    let cpu_before = process_cpu();
    let model_cpu_before = cpu_of(model_pid);
    let started = Instant::now();
    for i in 0..n {
        let session = format!("{prefix}-{i}");
        let op = Op::UserMessage {
            session: session.clone(),
            content: "add 40 and 2".into(),
            agent: None,
        };
        match scheduler.submit(op) {
            Ok(Accepted::Started { .. }) => {}
            other => panic!("session {session}: {other:?}"),
        }
    }
    let submit = started.elapsed();
    let idle = scheduler.until_all_idle();
    tokio::pin!(idle);
    loop {
        tokio::select! {
            () = &mut idle => break,
            Some(received) = events.recv() => tally.add(received),
        }
    }
    let wall = started.elapsed();
    while let Some(received) = events.try_recv() {
        tally.add(received);
    }
    log.flush(bus.last_seq()).await;
    let cpu = process_cpu() - cpu_before;
    let model_cpu = cpu_of(model_pid) - model_cpu_before;
    tally.check(prefix, n);
    Figures {
        wall,
        submit,
        cpu_per_turn: cpu / n as u32,
        model_cpu_per_turn: model_cpu / n as u32,
    }
}

/// The `turn_end` events of a run.
#[derive(Default)]
struct Tally {
    completed: usize,
    errors: usize,
    other: usize,
    first_error: Option<String>,
}

impl Tally {
    fn add(&mut self, received: Received) {
        let Received::Event(event) = received else {
            panic!("a lossless subscription dropped events: {received:?}");
        };
        let EventBody::TurnEnd(TurnEnd { status, reason, .. }) = &event.body else {
            return;
        };
        match status {
            TurnStatus::Completed => self.completed += 1,
            TurnStatus::Error => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| reason.clone());
            }
            _ => self.other += 1,
        }
    }

    fn check(&self, run: &str, n: usize) {
        assert!(
            self.completed >= n && self.errors == 0 && self.other == 0,
            "run {run}: {} of {n} turns completed, {} failed, {} ended otherwise; first error: {}",
            self.completed,
            self.errors,
            self.other,
            self.first_error.as_deref().unwrap_or("none"),
        );
    }
}

/// The size of the session store's database file and its write-ahead log.
fn db_bytes(db: &Path) -> u64 {
    let wal = db.with_extension("db-wal");
    [db, wal.as_path()]
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum()
}

fn candidate(base: String) -> ProviderConfig {
    ProviderConfig {
        kind: ProviderKind::OpenAi,
        model: "bench".into(),
        base_url: base,
        api_key: Some("k".into()),
        api_key_env: None,
        headers: Default::default(),
        stream: true,
        timeout: Duration::from_secs(10),
        limits: Default::default(),
    }
}
