//! The hook benchmark: `cargo bench -p wasmclaw-tests --bench hooks` (or
//! `make bench`). Prints a table and writes `target/bench/hooks.json`.
//!
//! - One `before-tool` hook call in a fresh instance (the `hooktest`
//!   fixture, saying `proceed`): the call alone, and through the chain.
//! - A two-iteration turn with one tool call, with no hooks and with five
//!   (one at each point, all saying `proceed`).
//! - The same turn with an `on-event` hook that takes 30 ms per event: its
//!   queue fills and drops, and turns do not wait for it.
//!
//! The fake model runs in a child process and answers at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::{EventBus, Scope};
use wasmclaw::hooks::{HookScope, ToolGate};
use wasmclaw::llm::{Chain, Provider, ProviderKind, RetryPolicy};
use wasmclaw::plugin::PluginStatus;
use wasmclaw::plugin::hook_call::HookInput;
use wasmclaw::store::Store;
use wasmclaw_tests::agents::candidate;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, add_then_answer, fake_model_child, micros, percentile, print_and_save,
    serve_fake_model, timed, us,
};
use wasmclaw_tests::fake_model::FakeModel;
use wasmclaw_tests::{PluginDir, ctx};

const CALLS: usize = 5000;
const TURNS: usize = 1000;
const WARMUP: usize = 100;

const ALL_POINTS: [&str; 5] = [
    "before-llm",
    "after-llm",
    "before-tool",
    "after-tool",
    "on-event",
];

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
        let (alone, chained) = one_hook_call().await;
        for (label, samples) in [
            ("one before-tool hook call, fresh instance", &alone),
            (
                "the same through the chain (HookSet::before_tool)",
                &chained,
            ),
        ] {
            rows.push((
                format!("{label}, median"),
                us(percentile(samples, 50)),
                micros(percentile(samples, 50)),
            ));
            rows.push((
                format!("{label}, p99"),
                us(percentile(samples, 99)),
                micros(percentile(samples, 99)),
            ));
        }

        let none = turns(&[]).await;
        let five = turns(&ALL_POINTS.map(|p| (p, ""))).await;
        let inline: Vec<(&str, &str)> = ALL_POINTS
            .iter()
            .filter(|p| **p != "on-event")
            .map(|p| (*p, ""))
            .collect();
        let four = turns(&inline).await;
        let slow = turns(&[(
            "on-event",
            "on_event = { action = \"sleep\", ms = 30 }\n[hooks]\ntimeout_ms = 1000\nqueue = 64\n",
        )])
        .await;
        for (label, t) in [
            ("turn (2 model calls, 1 tool call), no hooks", &none),
            (
                "the same turn with the four inline hooks, no observer",
                &four,
            ),
            ("the same turn with five hooks, one per point", &five),
            ("the same turn with a 30 ms-per-event observer", &slow),
        ] {
            rows.push((
                format!("{label}: wall median"),
                us(percentile(&t.wall, 50)),
                micros(percentile(&t.wall, 50)),
            ));
            rows.push((
                format!("{label}: wall p99"),
                us(percentile(&t.wall, 99)),
                micros(percentile(&t.wall, 99)),
            ));
        }
        // Per turn: before-llm and after-llm twice, before-tool and after-tool
        // once: six hook calls inline.
        for (label, t) in [
            ("four inline hooks: added per turn (6 hook calls)", &four),
            (
                "five hooks: added per turn (6 hook calls and the observer)",
                &five,
            ),
        ] {
            let added = percentile(&t.wall, 50).saturating_sub(percentile(&none.wall, 50));
            rows.push((
                format!("{label}, median difference"),
                us(added),
                micros(added),
            ));
        }
        rows.push((
            "slow observer: events dropped / delivered".into(),
            format!("{} / {}", slow.dropped, slow.delivered),
            serde_json::json!({"dropped": slow.dropped, "delivered": slow.delivered}),
        ));
    });
    print_and_save("hooks", &rows);
}

/// A hook fixture copy at `point` doing `behaviour` (TOML lines after the
/// subscription; empty: proceed).
fn add_hook(dir: &PluginDir, name: &str, point: &str, behaviour: &str) {
    dir.add_as("hooktest", name);
    dir.grants(
        name,
        &format!(
            "[config]\nsubscriptions = [{{ point = \"{point}\", priority = 0 }}]\n{behaviour}"
        ),
    );
}

/// Sorted durations of a `before-tool` hook call: alone, and as the chain.
async fn one_hook_call() -> (Vec<Duration>, Vec<Duration>) {
    let dir = PluginDir::new();
    add_hook(&dir, "gate", "before-tool", "");
    let plugins = dir.load().await;
    let catalog = plugins.catalog();
    let PluginStatus::Loaded(plugin) = &catalog.plugins[0] else {
        panic!("the hook did not load");
    };
    let ctx = ctx();
    let arguments = r#"{"a":40,"b":2}"#.to_string();
    let call = async || {
        let input = HookInput::BeforeTool {
            tool: "add",
            arguments: &arguments,
        };
        plugin.call_hook(&ctx, input).await.unwrap();
    };
    timed(WARMUP, call).await;
    let alone = timed(CALLS, call).await;

    let hooks = wasmclaw::hooks::HookSet::build(&catalog);
    let bus = EventBus::new(0);
    let scope = Scope::host();
    let hs = HookScope {
        bus: &bus,
        scope: &scope,
        ctx: ctx.clone(),
    };
    let chained = timed(CALLS, async || {
        let gate = hooks
            .before_tool(&hs, "add", &arguments, 1 << 20, |_| Ok(()))
            .await;
        assert_eq!(gate, ToolGate::Call(arguments.clone()));
    })
    .await;
    (alone, chained)
}

struct Turns {
    wall: Vec<Duration>,
    delivered: u64,
    dropped: u64,
}

/// Sequential turns with the echo plugin and `hooks` (point, behaviour).
async fn turns(hooks: &[(&str, &str)]) -> Turns {
    let (mut child, base) = fake_model_child();
    let dir = PluginDir::new();
    dir.add("echo");
    for (i, (point, behaviour)) in hooks.iter().enumerate() {
        add_hook(&dir, &format!("hook{i}"), point, behaviour);
    }
    let store = Store::open_in_memory().unwrap();
    let bus = EventBus::new(0);
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
    let agent = Arc::new(Agent::new(
        dir.load().await,
        Arc::new(chain),
        bus,
        store,
        AgentConfig::default(),
    ));
    let mut wall = Vec::with_capacity(TURNS);
    for i in 0..WARMUP + TURNS {
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
    let stats = agent.observer_stats();
    drop(child.stdin.take());
    child.wait().unwrap();
    Turns {
        wall,
        delivered: stats.iter().map(|s| s.delivered).sum(),
        dropped: stats.iter().map(|s| s.dropped).sum(),
    }
}
