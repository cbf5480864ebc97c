//! The plugin runtime benchmark: `cargo bench -p wasmclaw-tests --bench runtime`
//! (or `make bench`). Prints a table and writes the figures to
//! `target/bench/runtime.json`.
//!
//! Measures: one call into a fresh instance of a small Rust plugin (median,
//! p99), calls per second with many concurrent calls, host start to ready with
//! ten plugins from a warm cache and the RSS after (in a fresh child process),
//! and the time to compile a plugin.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmclaw::plugin::sandbox::cache::Compiler;
use wasmclaw::plugin::{CallContext, Plugins, Runtime, RuntimeConfig};
use wasmclaw_tests::bench::{
    Row, add_ten_plugins, micros, ms, percentile, print_and_save, rss_kib, timed, us,
};
use wasmclaw_tests::{PluginDir, guest, target_dir};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--startup-probe") {
        return startup_probe(Path::new(&args[i + 1]), Path::new(&args[i + 2]));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows: Vec<Row> = Vec::new();
    rt.block_on(async {
        let dir = PluginDir::new();
        dir.add("echo");
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(target_dir().join("bench-cache")),
            compiler: Compiler::InProcess,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let plugins = Plugins::load_dir(runtime.clone(), dir.path()).await;
        let ctx = ctx();

        // One call at a time, each in a fresh instance.
        for _ in 0..500 {
            plugins.call(&ctx, "add", ADD).await.unwrap();
        }
        let samples = timed(10_000, async || {
            plugins.call(&ctx, "add", ADD).await.unwrap();
        })
        .await;
        let (median, p99) = (percentile(&samples, 50), percentile(&samples, 99));
        rows.push((
            "fresh-instance call, median (echo `add`)".into(),
            us(median),
            micros(median),
        ));
        rows.push(("fresh-instance call, p99".into(), us(p99), micros(p99)));

        // The same without the host's argument validation.
        let catalog = plugins.catalog();
        let (echo, _) = catalog.tool("add").unwrap();
        let samples = timed(10_000, async || {
            echo.call(&ctx, "add", ADD).await.unwrap();
        })
        .await;
        let raw = percentile(&samples, 50);
        rows.push((
            "  of which instance + call (no validation)".into(),
            us(raw),
            micros(raw),
        ));

        // Many calls at once.
        let concurrency = 64;
        let per_task = 500;
        let t = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let plugins: Arc<Plugins> = plugins.clone();
            let ctx = ctx.clone();
            tasks.spawn(async move {
                for _ in 0..per_task {
                    plugins.call(&ctx, "add", ADD).await.unwrap();
                }
            });
        }
        tasks.join_all().await;
        let rate = (concurrency * per_task) as f64 / t.elapsed().as_secs_f64();
        rows.push((
            format!("calls per second, {concurrency} concurrent"),
            format!("{rate:.0}"),
            json!(rate.round()),
        ));
    });

    // Start to ready with ten cached plugins, in a fresh process.
    let dir = PluginDir::new();
    add_ten_plugins(&dir);
    let cache = target_dir().join("bench-cache");
    let exe = std::env::current_exe().unwrap();
    let probe = || -> (Duration, u64, Duration) {
        let out = Command::new(&exe)
            .arg("--startup-probe")
            .arg(dir.path())
            .arg(&cache)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            Duration::from_micros(v["ready_us"].as_u64().unwrap()),
            v["rss_kib"].as_u64().unwrap(),
            Duration::from_micros(v["engine_us"].as_u64().unwrap()),
        )
    };
    probe(); // warms the cache
    let mut runs: Vec<(Duration, u64, Duration)> = (0..7).map(|_| probe()).collect();
    runs.sort();
    let (ready, rss, engine) = runs[runs.len() / 2];
    rows.push((
        "start to ready, 10 cached plugins (median of 7)".into(),
        ms(ready),
        json!(ready.as_micros() as u64),
    ));
    rows.push((
        "  of which process start and engine setup".into(),
        ms(engine),
        json!(engine.as_micros() as u64),
    ));
    rows.push((
        "RSS after loading them".into(),
        format!("{:.1} MiB", rss as f64 / 1024.0),
        json!(rss),
    ));

    // Compiling: a small and a larger plugin, no cache.
    let engine =
        wasmtime::Engine::new(&wasmclaw::plugin::sandbox::engine::compile_config()).unwrap();
    for name in ["echo", "text"] {
        let bytes = std::fs::read(guest(name)).unwrap();
        let t = Instant::now();
        engine.precompile_component(&bytes).unwrap();
        let took = t.elapsed();
        rows.push((
            format!("compile {name}.wasm ({} KiB)", bytes.len() / 1024),
            ms(took),
            json!(took.as_micros() as u64),
        ));
    }

    print_and_save("runtime", &rows);
}

/// Child process: load `dir` with the cache, print time to ready and RSS.
fn startup_probe(dir: &Path, cache: &Path) {
    let start = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut engine_ready = Duration::ZERO;
    let loaded = rt.block_on(async {
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(cache.to_path_buf()),
            compiler: Compiler::InProcess,
            ..RuntimeConfig::default()
        })
        .unwrap();
        engine_ready = start.elapsed();
        let plugins = Plugins::load_dir(runtime, dir).await;
        let catalog = plugins.catalog();
        catalog
            .plugins
            .iter()
            .filter(|p| matches!(p, wasmclaw::plugin::PluginStatus::Loaded(_)))
            .count()
    });
    let ready = start.elapsed();
    assert_eq!(loaded, 10, "all ten plugins load");
    let rss_kib = rss_kib();
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{}",
            json!({"ready_us": ready.as_micros() as u64, "engine_us": engine_ready.as_micros() as u64, "rss_kib": rss_kib})
        );
    }
}

const ADD: &str = r#"{"a":1,"b":2}"#;

fn ctx() -> CallContext {
    CallContext {
        session_key: "bench".into(),
        turn_id: "turn".into(),
        call_id: "call".into(),
        ..Default::default()
    }
}
