//! The compile cache: bounded, pruned least recently used, and each
//! compilation shown on stderr while a hit shows nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmclaw::plugin::sandbox::cache::{CacheOutcome, Compiler};
use wasmclaw::plugin::{Plugins, Runtime, RuntimeConfig};
use wasmclaw_tests::{PluginDir, run_wasmclaw};

fn runtime(cache: &Path, max_bytes: u64) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.to_path_buf()),
        compiler: Compiler::InProcess,
        cache_max_bytes: max_bytes,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

async fn load(rt: &Runtime, file: &Path) -> CacheOutcome {
    Plugins::load_file(rt, file).await.unwrap().cache
}

/// The entries (`*.cwasm`) of the cache folder, sorted, with their sizes.
fn entries(cache: &Path) -> Vec<(PathBuf, u64)> {
    let mut all: Vec<_> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .map(|p| {
            let len = std::fs::metadata(&p).unwrap().len();
            (p, len)
        })
        .collect();
    all.sort();
    all
}

/// Writes get apart in modification time on any file system.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test]
async fn the_least_recently_used_entry_is_pruned_at_the_bound_and_recompiles() {
    let dir = PluginDir::new();
    let cache = dir.scratch("cache");
    let (a, b) = (dir.add("echo"), dir.add("calculator"));

    // Unbounded: both are compiled and kept; a hit on `a` makes `b` the
    // least recently used.
    let wide = runtime(&cache, u64::MAX);
    assert_eq!(load(&wide, &a).await, CacheOutcome::Compiled);
    let only_a = entries(&cache);
    tick().await;
    assert_eq!(load(&wide, &b).await, CacheOutcome::Compiled);
    let both = entries(&cache);
    assert_eq!(both.len(), 2);
    let entry_b = both.iter().find(|e| !only_a.contains(e)).unwrap().clone();
    let entry_a = only_a[0].clone();
    tick().await;
    assert_eq!(load(&wide, &a).await, CacheOutcome::Hit);

    // A bound that holds either entry but not both: the new runtime
    // prunes at start, and `b`, the least recently used, goes.
    let bound = entry_a.1.max(entry_b.1) + 1;
    let narrow = runtime(&cache, bound);
    assert_eq!(entries(&cache), vec![entry_a.clone()]);

    // The pruned entry compiles again; writing it removes `a`, now the
    // oldest, and keeps the new one.
    tick().await;
    assert_eq!(load(&narrow, &b).await, CacheOutcome::Compiled);
    assert_eq!(entries(&cache), vec![entry_b.clone()]);
    assert_eq!(load(&narrow, &b).await, CacheOutcome::Hit);
    assert_eq!(load(&narrow, &a).await, CacheOutcome::Compiled);
    assert_eq!(entries(&cache), vec![entry_a]);
}

#[tokio::test]
async fn an_entry_alone_over_the_bound_is_kept_once_written() {
    let dir = PluginDir::new();
    let cache = dir.scratch("cache");
    let echo = dir.add("echo");
    let rt = runtime(&cache, 1);
    assert_eq!(load(&rt, &echo).await, CacheOutcome::Compiled);
    assert_eq!(entries(&cache).len(), 1);
    assert_eq!(load(&rt, &echo).await, CacheOutcome::Hit);
}

async fn plugins_list(home: &Path) -> (String, String) {
    let (code, out, err) = run_wasmclaw(home, &[], &["plugins", "list"], "").await;
    assert_eq!(code, 0, "{err}");
    (out, err)
}

#[tokio::test]
async fn a_cold_cache_shows_one_line_per_compilation_on_stderr_and_a_warm_one_nothing() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    std::fs::create_dir(home.join("plugins")).unwrap();
    std::fs::copy(
        wasmclaw_tests::guest("echo"),
        home.join("plugins/echo.wasm"),
    )
    .unwrap();

    let (cold_out, cold_err) = plugins_list(&home).await;
    let seconds = cold_err
        .strip_prefix("compiling echo.wasm ... done in ")
        .and_then(|rest| rest.strip_suffix(" s\n"))
        .unwrap_or_else(|| panic!("{cold_err:?}"));
    let (whole, tenths) = seconds.split_once('.').unwrap();
    assert!(
        whole.parse::<u32>().is_ok() && tenths.len() == 1,
        "{cold_err:?}"
    );
    assert!(cold_out.starts_with("echo.wasm  ok  "), "{cold_out}");

    let (warm_out, warm_err) = plugins_list(&home).await;
    assert_eq!(warm_err, "");
    assert_eq!(warm_out, cold_out);
}
