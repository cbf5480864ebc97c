//! One plugin does not slow the others down: guest code runs on the plugin
//! pool, never on the runtime that runs the turns, and an observer that
//! falls behind has its drops counted when they happen.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use serde_json::json;
use wasmclaw::hooks::ObserverStats;
use wasmclaw::plugin::loader::Plugin;
use wasmclaw::plugin::sandbox::engine::EPOCH_TICK;
use wasmclaw::plugin::{PluginStatus, Plugins};
use wasmclaw::protocol::TurnStatus;
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent, openai};
use wasmclaw_tests::fake_model::{Reply, fake_model};
use wasmclaw_tests::plugin_log::lines_of;
use wasmclaw_tests::{PluginDir, ctx, eventually, own_runtime};

const LIMIT: Duration = Duration::from_secs(20);

/// On a runtime of one thread, twice as many looping calls as the pool has
/// threads: each guest runs on a pool thread (the thread its log line was
/// written on), a turn of another session runs to its end meanwhile, and
/// dropping the calls stops the guests and lets go of their instances.
#[tokio::test(flavor = "current_thread")]
async fn looping_plugins_run_on_the_plugin_pool_not_on_the_turns_runtime() {
    let mut lines = lines_of("looper");
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add_as("hostile", "looper");
    dir.grants("looper", "[limits]\ntimeout_ms = 60000\n");
    let fake = fake_model(|_, after_tool| {
        if after_tool {
            Reply::text("The sum is 42.")
        } else {
            Reply::tool("c1", "add", json!({"a": 40, "b": 2}))
        }
    })
    .await;
    let (agent, _events) = agent(
        dir.load().await,
        vec![openai(&fake, "fake-gpt", true)],
        Store::open_in_memory().unwrap(),
    );
    let looper = loaded(agent.plugins(), "looper");
    let held = Arc::strong_count(&looper);

    let loops = 2 * wasmclaw::plugin::sandbox::pool::threads();
    let calls: Vec<_> = (0..loops)
        .map(|_| {
            let plugins = agent.plugins().clone();
            tokio::spawn(async move { plugins.call(&ctx(), "spin", "{}").await })
        })
        .collect();
    let this_thread = std::thread::current().name().map(str::to_string);
    for _ in 0..loops {
        let line = tokio::time::timeout(LIMIT, lines.recv())
            .await
            .expect("every loop begins")
            .unwrap();
        assert_eq!(line.text, "spinning");
        assert!(
            line.thread.starts_with("wasmclaw-plugin-"),
            "a guest ran on thread {:?} (this test's runtime is {this_thread:?})",
            line.thread
        );
    }

    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("other", "What is 40 + 2?"))
        .await
        .expect("the other session's turn ends while the loops run");
    assert_eq!(
        (outcome.status, outcome.answer.as_deref()),
        (TurnStatus::Completed, Some("The sum is 42."))
    );
    assert!(
        calls.iter().all(|c| !c.is_finished()),
        "the loops still run"
    );

    for call in &calls {
        call.abort();
    }
    assert!(
        eventually(LIMIT, || Arc::strong_count(&looper) == held).await,
        "the aborted calls' instances were let go of ({} references, {held} before)",
        Arc::strong_count(&looper)
    );
}

/// Calls dropped before their first tick, by a caller whose runtime never
/// ran its timers in between (so nothing but the drop starts the epoch
/// ticker for them, which is the test's own), as many as the pool has
/// threads: the guests, which compute forever, still stop at a tick and let
/// go of their instances.
#[tokio::test(flavor = "current_thread")]
async fn looping_calls_dropped_before_their_first_tick_still_stop() {
    let mut lines = lines_of("dropped");
    let dir = PluginDir::new();
    dir.add_as("hostile", "dropped");
    dir.grants("dropped", "[limits]\ntimeout_ms = 60000\n");
    let runtime = own_runtime();
    let plugins = dir.load_in(runtime.clone()).await;
    let ticks = || runtime.epochs().ticks();
    let looper = loaded(&plugins, "dropped");
    let held = Arc::strong_count(&looper);

    let context = ctx();
    let mut calls: Vec<_> = (0..wasmclaw::plugin::sandbox::pool::threads())
        .map(|_| Box::pin(plugins.call(&context, "spin", "{}")))
        .collect();
    // Polled by hand and waited for with this thread blocked: this
    // runtime's scheduler, and so its timers, never run until the drop.
    let mut cx = Context::from_waker(Waker::noop());
    let before = ticks();
    let end = Instant::now() + LIMIT;
    let mut spinning = 0;
    while spinning < calls.len() {
        assert!(
            Instant::now() < end,
            "{spinning} of {} loops began",
            calls.len()
        );
        for call in &mut calls {
            assert!(call.as_mut().poll(&mut cx).is_pending(), "a loop ended");
        }
        while let Ok(line) = lines.try_recv() {
            assert_eq!(line.text, "spinning");
            spinning += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Three ticks' time: the ticker is not running for the spinning calls
    // (at most the tick under way when the loading's calls ended).
    std::thread::sleep(EPOCH_TICK * 3);
    assert!(ticks() <= before + 1, "{} ticks, {before} before", ticks());
    drop(calls);
    assert!(
        eventually(LIMIT, || Arc::strong_count(&looper) == held).await,
        "the dropped calls' guests stopped and their instances were let go of \
         ({} references, {held} before)",
        Arc::strong_count(&looper)
    );
}

/// The plugin `name`, loaded.
fn loaded(plugins: &Plugins, name: &str) -> Arc<Plugin> {
    plugins
        .catalog()
        .plugins
        .iter()
        .find_map(|s| match s {
            PluginStatus::Loaded(p) if &*p.name == name => Some(p.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{name} loaded"))
}

/// An observer stuck in its first event, with a queue of two: of five more
/// events, two wait in its queue and three are dropped, and the three are
/// counted as soon as the turns that published them have ended, not when
/// the observer reaches the gap.
#[tokio::test(flavor = "multi_thread")]
async fn an_observers_drops_are_counted_when_its_queue_overflows() {
    let dir = PluginDir::new();
    let out = dir.scratch("out");
    dir.add_as("hooktest", "stuck");
    dir.grants(
        "stuck",
        &format!(
            "[config]\nsubscriptions = [{{ point = \"on-event\", priority = 0, events = [\"turn_end\"] }}]\non_event = {{ action = \"record\", file = \"/out/seen.jsonl\", ms = 50000 }}\n[[dirs]]\nhost = {out:?}\nguest = \"/out\"\nmode = \"read-write\"\n[hooks]\nqueue = 2\ntimeout_ms = 60000\n"
        ),
    );
    let fake = fake_model(|_, _| Reply::text("done")).await;
    let (agent, _events) = agent(
        dir.load().await,
        vec![openai(&fake, "fake-gpt", false)],
        Store::open_in_memory().unwrap(),
    );
    let seen = out.join("seen.jsonl");
    let recorded = || {
        std::fs::read_to_string(&seen)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };

    assert_eq!(
        agent.run_turn("first", "hi").await.status,
        TurnStatus::Completed
    );
    // The observer took the first turn's end in, and stays in that call.
    assert!(eventually(LIMIT, || recorded() == 1).await);
    for n in 0..5 {
        let outcome = agent.run_turn(&format!("s{n}"), "hi").await;
        assert_eq!(outcome.status, TurnStatus::Completed);
    }
    assert_eq!(
        agent.observer_stats(),
        vec![ObserverStats {
            hook: "stuck".into(),
            delivered: 0,
            dropped: 3,
            failed: 0,
        }]
    );
    assert_eq!(recorded(), 1);
}
