//! Plugins in each language: `cargo bench -p wasmclaw-tests --bench
//! languages` (or `make bench`), after `make lang-plugins` installed the
//! toolchains. Prints a table and writes the figures to
//! `target/bench/languages.json`.
//!
//! The same plugin in every language: the `new-plugin` template, built with
//! its own `build.sh`, whose one tool counts the words of a short text. Per
//! language: the component's size, the time to compile it, the time to load
//! it from a warm cache, one call in a fresh instance (median and p99, with
//! the host's argument check), and the memory one live instance holds (RSS,
//! in a child process that keeps twenty alive).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmclaw::plugin::sandbox::cache::Compiler;
use wasmclaw::plugin::{CallContext, Plugins, Runtime, RuntimeConfig};
use wasmclaw_tests::bench::{Row, micros, millis, ms, percentile, print_and_save, rss_kib, timed};
use wasmclaw_tests::{PluginDir, scaffold, target_dir};

/// The targets for one fresh instance plus call, median, where there is one.
fn target(lang: &str) -> &'static str {
    match lang {
        "c" | "zig" => " (target ≤ 60 µs)",
        "go" => " (target ≤ 500 µs)",
        "js" => " (target ≤ 600 µs)",
        "python" => " (target ≤ 1 ms)",
        _ => "",
    }
}

/// Calls measured per language: fewer where each takes longer.
fn samples(lang: &str) -> usize {
    match lang {
        "rust" | "c" | "zig" => 5000,
        "go" => 2000,
        _ => 500,
    }
}

/// Live instances the memory probe keeps.
const LIVE: usize = 20;

const TEXT: &str = r#"{"text":"the quick brown fox\njumps over the lazy dog"}"#;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--live-probe") {
        return live_probe(Path::new(&args[i + 1]), &args[i + 2]);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let parent = tempfile::tempdir().unwrap();
    let cache = target_dir().join("bench-cache");
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.clone()),
        compiler: Compiler::InProcess,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let engine =
        wasmtime::Engine::new(&wasmclaw::plugin::sandbox::engine::compile_config()).unwrap();
    let mut rows: Vec<Row> = Vec::new();
    for lang in scaffold::LANGS {
        let wasm = scaffold::build(lang, parent.path());
        let tool = format!("my_{lang}_tool_words");
        let bytes = std::fs::read(&wasm).unwrap();
        rows.push((
            format!("{lang}: component size"),
            format!("{} KiB", bytes.len() / 1024),
            json!(bytes.len()),
        ));

        let t = Instant::now();
        engine.precompile_component(&bytes).unwrap();
        let compile = t.elapsed();
        rows.push((format!("{lang}: compile"), ms(compile), millis(compile)));

        rt.block_on(async {
            let dir = PluginDir::new();
            let file = dir.write(wasm.file_name().unwrap().to_str().unwrap(), &bytes);
            Plugins::load_file(&runtime, &file).await.unwrap(); // fills the cache
            let mut loads = Vec::new();
            for _ in 0..7 {
                let t = Instant::now();
                Plugins::load_file(&runtime, &file).await.unwrap();
                loads.push(t.elapsed());
            }
            loads.sort();
            let load = loads[loads.len() / 2];
            rows.push((
                format!("{lang}: load from the cache (median of 7)"),
                ms(load),
                millis(load),
            ));

            let plugins = Plugins::load_dir(runtime.clone(), dir.path()).await;
            let ctx = ctx();
            let n = samples(lang);
            for _ in 0..n / 10 {
                plugins.call(&ctx, &tool, TEXT).await.unwrap();
            }
            let samples = timed(n, async || {
                plugins.call(&ctx, &tool, TEXT).await.unwrap();
            })
            .await;
            let (median, p99) = (percentile(&samples, 50), percentile(&samples, 99));
            rows.push((
                format!("{lang}: fresh instance + call, median{}", target(lang)),
                show(median),
                micros(median),
            ));
            rows.push((
                format!("{lang}: fresh instance + call, p99"),
                show(p99),
                micros(p99),
            ));
        });

        let per_instance = live_memory(&wasm, &tool);
        rows.push((
            format!("{lang}: memory per live instance (RSS, {LIVE} kept)"),
            format!("{:.0} KiB", per_instance),
            json!(per_instance),
        ));
    }
    print_and_save("languages", &rows);
}

fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_nanos() as f64 / 1000.0)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1000.0)
    }
}

/// KiB of RSS one live instance adds, measured in a fresh child process.
fn live_memory(wasm: &Path, tool: &str) -> f64 {
    let out = Command::new(std::env::current_exe().unwrap())
        .arg("--live-probe")
        .arg(wasm)
        .arg(tool)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["per_instance_kib"].as_f64().unwrap()
}

/// Child process: load `wasm`, make one call and drop it (so what every
/// instance shares is in place), then keep [`LIVE`] instances after a call
/// each, and print the RSS they added, per instance.
fn live_probe(wasm: &Path, tool: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(target_dir().join("bench-cache")),
            compiler: Compiler::InProcess,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let plugin = std::sync::Arc::new(Plugins::load_file(&runtime, wasm).await.unwrap());
        let ctx = ctx();
        drop(plugin.call_and_keep(&ctx, tool, TEXT).await.unwrap());
        let before = rss_kib();
        let mut live = Vec::new();
        for _ in 0..LIVE {
            live.push(plugin.call_and_keep(&ctx, tool, TEXT).await.unwrap());
        }
        let after = rss_kib();
        let per_instance = after.saturating_sub(before) as f64 / LIVE as f64;
        #[allow(clippy::print_stdout)]
        {
            println!("{}", json!({ "per_instance_kib": per_instance }));
        }
        drop(live);
    });
}

fn ctx() -> CallContext {
    CallContext {
        session_key: "bench".into(),
        turn_id: "turn".into(),
        call_id: "call".into(),
        ..Default::default()
    }
}
