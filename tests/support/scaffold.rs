//! Plugins made by `wasmclaw new-plugin` and built with their own
//! `build.sh`, the way a plugin author would.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{target_dir, wasmclaw_bin};

/// Every language `new-plugin` has a template for.
pub const LANGS: [&str; 6] = ["rust", "c", "zig", "go", "js", "python"];

/// Creates plugin `my_LANG_tool` in `parent` and builds it with the
/// toolchains `make lang-plugins` installed; returns the component. Its one
/// tool is `my_LANG_tool_words`. Panics with the build's output if it fails.
pub fn build(lang: &str, parent: &Path) -> PathBuf {
    let name = format!("my_{lang}_tool");
    let out = Command::new(wasmclaw_bin())
        .args(["new-plugin", "--lang", lang, &name, "--dir"])
        .arg(parent)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{lang}: new-plugin failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folder = parent.join(&name);
    let build = Command::new("bash")
        .arg(folder.join("build.sh"))
        .env("WASMCLAW_TOOLCHAINS", target_dir().join("toolchains"))
        // The Rust template's own target folder would rebuild its
        // dependencies every run: share one.
        .env("CARGO_TARGET_DIR", target_dir().join("guests/scaffold"))
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{lang}: build.sh failed (the toolchains come from `make lang-plugins`):\n{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    let wasm = folder.join(format!("{name}.wasm"));
    assert!(wasm.exists(), "{lang}: build.sh made no {}", wasm.display());
    wasm
}
