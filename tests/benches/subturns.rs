//! The SubTurn benchmark: `cargo bench -p wasmclaw-tests --bench subturns`
//! (or `make bench`). Prints a table and writes `target/bench/subturns.json`.
//!
//! - Spawn and delivery: a turn whose model calls `subagent` once (the child
//!   answers at once) against the same turn calling a plugin tool instead,
//!   with the scripted model, in process, so model time is nil. The
//!   difference is what a SubTurn costs the host: its control, its turn
//!   (events, its record in the store) and the delivery of its answer. The
//!   latency is the `subagent` call's own duration.
//! - A tree: one root turn whose model starts 10 children, each of which
//!   starts 10, each of which starts 9: 1,010 SubTurns, 3 deep, against a
//!   fake model over HTTP in a child process that waits 20 ms before each
//!   reply. Wall time, host CPU, peak RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmclaw::agent::subturn::SubTurnLimits;
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::{Delivery, EventBus, Filter, Received};
use wasmclaw::llm::{Chain, Provider, ProviderConfig, ProviderKind, RetryPolicy};
use wasmclaw::protocol::{EventBody, SubturnEnd, ToolCallEnd, TurnStatus};
use wasmclaw::store::{EventLog, Store};
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, fake_model_child, micros, ms, percentile, print_and_save, proc_status_kb,
    process_cpu, serve_fake_model, us,
};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder, ToolCallReply};

const WARMUP: usize = 100;
const TURNS: usize = 1000;
/// Children per level of the tree: 10 + 10 × 10 + 100 × 9 = 1,010.
const FAN_OUT: [usize; 3] = [10, 10, 9];
const MODEL_DELAY: Duration = Duration::from_millis(20);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == FAKE_MODEL_FLAG) {
        let options = Options {
            responder: Some(Responder::new(respond)),
            ..Options::default()
        };
        return serve_fake_model(2, options, [], FakeModel::openai_base_url);
    }
    // Hundreds of children wait for the model at once, a socket each.
    rlimit::increase_nofile_limit(u64::MAX).expect("raising the open-file limit");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = rt.block_on(async {
        let mut rows = spawn_overhead().await;
        rows.extend(tree().await);
        rows
    });
    print_and_save("subturns", &rows);
}

/// The scripted model: `delegate` calls `subagent`, `plain` calls a plugin.
const SCRIPT: &str = r#"{
  "turns": [
    {"when": "delegate", "replies": [
      {"tool_calls": [{"name": "subagent", "arguments": {"task": "child task"}}]},
      {"text": "ok"}]},
    {"when": "child task", "replies": [{"text": "done"}]},
    {"when": "plain", "replies": [
      {"tool_calls": [{"name": "echo", "arguments": {"text": "done"}}]},
      {"text": "ok"}]}
  ]
}"#;

/// An agent over the echo plugin, its store on disk with the event log
/// writing, as in production.
async fn agent(
    dir: &PluginDir,
    candidate: ProviderConfig,
    config: AgentConfig,
) -> (Arc<Agent>, EventLog) {
    let store = Store::open(&dir.scratch("home").join("sessions.db")).unwrap();
    let bus = EventBus::new(store.last_seq().unwrap());
    let log = EventLog::spawn(store.clone(), bus.subscribe_all_lossless());
    let chain = Chain::new(
        vec![Provider::new(candidate, wasmclaw::llm::http_client()).unwrap()],
        RetryPolicy::default(),
    );
    let agent = Agent::new(dir.load().await, Arc::new(chain), bus, store, config);
    (Arc::new(agent), log)
}

async fn spawn_overhead() -> Vec<Row> {
    let dir = PluginDir::new();
    dir.add("echo");
    let script = dir.scratch("script").join("model.json");
    std::fs::write(&script, SCRIPT).unwrap();
    let candidate =
        ProviderConfig::parse(&format!("scripted:{}", script.display()), |_| None).unwrap();
    let (agent, log) = agent(&dir, candidate, AgentConfig::default()).await;
    let mut events = agent.bus().subscribe(Filter::default(), Delivery::Lossless);

    // CPU per turn of each kind, and the subagent calls' durations.
    let mut cpu = Vec::new();
    let mut latencies = Vec::new();
    for (kind, input) in [
        ("plain", "plain"),
        ("delegate", "delegate"),
        ("plain", "plain"),
        ("delegate", "delegate"),
    ] {
        for _ in 0..WARMUP {
            agent.run_turn("warm", input).await;
        }
        log.flush(agent.bus().last_seq()).await;
        while events.try_recv().is_some() {}
        let before = process_cpu();
        for i in 0..TURNS {
            let outcome = agent.run_turn(&format!("{kind}-{i}"), input).await;
            assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
        }
        log.flush(agent.bus().last_seq()).await;
        cpu.push((kind, (process_cpu() - before) / TURNS as u32));
        while let Some(received) = events.try_recv() {
            if let Received::Event(event) = received
                && let EventBody::ToolCallEnd(ToolCallEnd {
                    tool, duration_ms, ..
                }) = &event.body
                && tool == "subagent"
            {
                latencies.push(Duration::from_secs_f64(duration_ms / 1000.0));
            }
        }
    }
    // The second run of each kind, the first having warmed caches.
    let plain = cpu[2].1;
    let delegate = cpu[3].1;
    latencies.sort();
    let overhead = delegate.saturating_sub(plain);
    vec![
        (
            "turn with one plugin tool call, scripted model: host CPU".into(),
            us(plain),
            micros(plain),
        ),
        (
            "turn with one subagent call instead, scripted model: host CPU".into(),
            us(delegate),
            micros(delegate),
        ),
        (
            "one SubTurn spawn + its turn + delivery: extra host CPU".into(),
            us(overhead),
            micros(overhead),
        ),
        (
            "subagent call, spawn to answer delivered: median".into(),
            us(percentile(&latencies, 50)),
            micros(percentile(&latencies, 50)),
        ),
        (
            "subagent call, spawn to answer delivered: p99".into(),
            us(percentile(&latencies, 99)),
            micros(percentile(&latencies, 99)),
        ),
    ]
}

async fn tree() -> Vec<Row> {
    let (mut child, base) = fake_model_child();
    let dir = PluginDir::new();
    dir.add("echo");
    let config = AgentConfig {
        tool_concurrency: 16,
        subturns: SubTurnLimits {
            per_parent: 16,
            total: 2048,
            ..SubTurnLimits::default()
        },
        ..AgentConfig::default()
    };
    let candidate = ProviderConfig {
        kind: ProviderKind::OpenAi,
        model: "fake".into(),
        base_url: base,
        api_key: None,
        api_key_env: None,
        headers: Default::default(),
        stream: true,
        timeout: Duration::from_secs(60),
        limits: Default::default(),
    };
    let (agent, log) = agent(&dir, candidate, config).await;
    let mut events = agent.bus().subscribe(Filter::default(), Delivery::Lossless);
    // A small tree first, so connections and caches are warm.
    agent.run_turn("warm", "L2 warm").await;
    log.flush(agent.bus().last_seq()).await;
    while events.try_recv().is_some() {}

    let cpu_before = process_cpu();
    let started = Instant::now();
    let outcome = agent.run_turn("tree", "root").await;
    let wall = started.elapsed();
    log.flush(agent.bus().last_seq()).await;
    let cpu = process_cpu() - cpu_before;
    let peak_kb = proc_status_kb("VmHWM");
    assert_eq!(outcome.status, TurnStatus::Completed, "{}", outcome.reason);
    let mut spawned = 0;
    let mut completed = 0;
    while let Some(received) = events.try_recv() {
        let Received::Event(event) = received else {
            panic!("a lossless subscription dropped events");
        };
        match &event.body {
            EventBody::SubturnSpawn(_) => spawned += 1,
            EventBody::SubturnEnd(SubturnEnd {
                status: TurnStatus::Completed,
                ..
            }) => completed += 1,
            _ => {}
        }
    }
    let total: usize = FAN_OUT
        .iter()
        .scan(1, |n, k| {
            *n *= k;
            Some(*n)
        })
        .sum();
    assert_eq!(
        (spawned, completed),
        (total, total),
        "every SubTurn ran and completed"
    );
    drop(child.stdin.take());
    child.wait().unwrap();
    vec![
        (
            format!("tree of {total} SubTurns, 3 deep, model waits 20 ms a reply: wall"),
            ms(wall),
            json!(wall.as_secs_f64() * 1000.0),
        ),
        (
            "the same tree: host CPU per SubTurn".into(),
            us(cpu / total as u32),
            micros(cpu / total as u32),
        ),
        (
            "peak RSS (VmHWM)".into(),
            format!("{:.1} MB", peak_kb as f64 / 1024.0),
            json!(peak_kb),
        ),
    ]
}

/// The tree's model: a task at level N starts the next level's children;
/// once their answers are in, it answers.
fn respond(body: &Value) -> Reply {
    let messages = body["messages"].as_array().unwrap();
    if messages.last().unwrap()["role"] == "tool" {
        return Reply::Delay(MODEL_DELAY, Box::new(Reply::text("merged")));
    }
    let task = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let level = match task.split_whitespace().next() {
        Some("root") => 0,
        Some("L1") => 1,
        Some("L2") => 2,
        _ => 3,
    };
    let reply = match FAN_OUT.get(level) {
        Some(&n) => Reply::ToolCalls {
            text: String::new(),
            calls: (0..n)
                .map(|i| ToolCallReply {
                    id: format!("c{i}"),
                    name: "subagent".into(),
                    arguments: json!({"task": format!("L{} {task} {i}", level + 1)}),
                })
                .collect(),
        },
        None => Reply::text("leaf"),
    };
    Reply::Delay(MODEL_DELAY, Box::new(reply))
}
