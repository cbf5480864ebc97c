//! The isolation benchmark: `cargo bench -p wasmclaw-tests --bench isolation`
//! (or `make bench`). Prints a table and writes `target/bench/isolation.json`.
//!
//! Whether guest code slows the host down for everyone else:
//!
//! - The turn of an idle session (two model calls and one call of the echo
//!   plugin's `add`) while 0, 2 and 64 calls of the hostile plugin's `spin`
//!   (a guest that loops until its deadline, restarted as soon as it ends)
//!   are in flight, and the ratio to the idle figure.
//! - The same turn with no observer, and with an `on-event` hook that
//!   computes for 40 ms on every event (it never sleeps).
//!
//! The host runs on a multi-thread runtime with a worker per core, as
//! `serve` does; the fake model runs in a child process and answers at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::EventBus;
use wasmclaw::llm::{Chain, Provider, ProviderKind, RetryPolicy};
use wasmclaw::store::Store;
use wasmclaw_tests::agents::candidate;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, add_then_answer, fake_model_child, micros, millis, ms, percentile,
    print_and_save, serve_fake_model,
};
use wasmclaw_tests::fake_model::FakeModel;
use wasmclaw_tests::{PluginDir, ctx};

/// Looping calls in flight, and how many turns are measured with them
/// (fewer where each turn may take seconds on a host that starves).
const LOOPS: [(usize, usize); 3] = [(0, 300), (2, 40), (64, 20)];
const WARMUP: usize = 5;
const OBSERVED_TURNS: usize = 100;

fn main() {
    if std::env::args().any(|a| a == FAKE_MODEL_FLAG) {
        return serve_fake_model(
            1,
            add_then_answer(Duration::ZERO),
            [],
            FakeModel::openai_base_url,
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows: Vec<Row> = Vec::new();
    rt.block_on(async {
        let mut idle = Duration::ZERO;
        for (loops, turns) in LOOPS {
            let wall = with_loops(loops, turns).await;
            let median = percentile(&wall, 50);
            if loops == 0 {
                idle = median;
            }
            rows.push((
                format!("idle session's turn, {loops} looping calls in flight: wall median"),
                ms(median),
                millis(median),
            ));
            rows.push((
                format!("idle session's turn, {loops} looping calls in flight: wall p99"),
                ms(percentile(&wall, 99)),
                millis(percentile(&wall, 99)),
            ));
            if loops > 0 {
                let ratio = median.as_secs_f64() / idle.as_secs_f64();
                rows.push((
                    format!("  {loops} looping calls: median / idle median"),
                    format!("{ratio:.2}x"),
                    serde_json::json!(ratio),
                ));
            }
        }
        let none = observed(None).await;
        let busy = observed(Some(
            "on_event = { action = \"loop\", ms = 40 }\n[hooks]\ntimeout_ms = 1000\n",
        ))
        .await;
        for (label, wall) in [
            ("turn, no observer", &none),
            ("turn, observer computing 40 ms per event", &busy),
        ] {
            rows.push((
                format!("{label}: wall median"),
                ms(percentile(wall, 50)),
                millis(percentile(wall, 50)),
            ));
            rows.push((
                format!("{label}: wall p99"),
                ms(percentile(wall, 99)),
                millis(percentile(wall, 99)),
            ));
        }
        let ratio = percentile(&busy, 50).as_secs_f64() / percentile(&none, 50).as_secs_f64();
        rows.push((
            "  busy observer: median / no observer median".into(),
            format!("{ratio:.2}x"),
            serde_json::json!(ratio),
        ));
        // Kept for the file: the same figures in microseconds.
        rows.push((
            "idle session's turn, no loops, no observer: wall median (µs)".into(),
            format!("{:.0} µs", idle.as_secs_f64() * 1e6),
            micros(idle),
        ));
    });
    print_and_save("isolation", &rows);
}

/// An agent over the echo plugin, the hostile plugin (calls of up to a
/// minute) and the hook plugins given, talking to a fake model child.
async fn agent_over(dir: &PluginDir, base: String) -> Arc<Agent> {
    let chain = Chain::new(
        vec![
            Provider::new(
                candidate(ProviderKind::OpenAi, base, "bench", true),
                wasmclaw::llm::http_client(),
            )
            .unwrap(),
        ],
        RetryPolicy::default(),
    );
    Arc::new(Agent::new(
        dir.load().await,
        Arc::new(chain),
        EventBus::new(0),
        Store::open_in_memory().unwrap(),
        AgentConfig::default(),
    ))
}

/// Sorted wall times of `n` turns, each of a session of its own, after
/// [`WARMUP`] turns.
async fn turns(agent: &Arc<Agent>, n: usize) -> Vec<Duration> {
    let mut wall = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let started = Instant::now();
        let outcome = agent.run_turn(&format!("s{i}"), "What is 40 + 2?").await;
        assert_eq!(
            outcome.answer.as_deref(),
            Some("The sum is 42."),
            "{outcome:?}"
        );
        if i >= WARMUP {
            wall.push(started.elapsed());
        }
    }
    wall.sort();
    wall
}

/// Turns of an idle session while `loops` calls of `spin` are in flight.
async fn with_loops(loops: usize, n: usize) -> Vec<Duration> {
    let (mut child, base) = fake_model_child();
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("hostile");
    dir.grants("hostile", "[limits]\ntimeout_ms = 60000\n");
    let agent = agent_over(&dir, base).await;
    let spinners: Vec<_> = (0..loops)
        .map(|_| {
            let plugins = agent.plugins().clone();
            // A new call as soon as one ends, until aborted (which drops the
            // call in flight).
            tokio::spawn(async move {
                loop {
                    let _ = plugins.call(&ctx(), "spin", "{}").await;
                }
            })
        })
        .collect();
    let wall = turns(&agent, n).await;
    for spinner in spinners {
        spinner.abort();
        let _ = spinner.await;
    }
    drop(child.stdin.take());
    child.wait().unwrap();
    wall
}

/// Turns with an `on-event` hook doing `behaviour` (TOML lines after its
/// subscription to every event), or none.
async fn observed(behaviour: Option<&str>) -> Vec<Duration> {
    let (mut child, base) = fake_model_child();
    let dir = PluginDir::new();
    dir.add("echo");
    if let Some(behaviour) = behaviour {
        dir.add_as("hooktest", "observer");
        dir.grants(
            "observer",
            &format!(
                "[config]\nsubscriptions = [{{ point = \"on-event\", priority = 0 }}]\n{behaviour}"
            ),
        );
    }
    let agent = agent_over(&dir, base).await;
    let wall = turns(&agent, OBSERVED_TURNS).await;
    agent.close_observers().await;
    drop(child.stdin.take());
    child.wait().unwrap();
    wall
}
