//! `wasmclaw-adapter FILE` writes exactly what `wasmclaw plugins adapter
//! FILE` writes, and builds without the host: its only dependency is the
//! crate that ships the adapter.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wasmclaw-adapter");

#[test]
fn writes_the_hosts_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("nested/adapter.wasm");
    let status = Command::new(BIN).arg(&ours).status().unwrap();
    assert!(status.success());
    let written = std::fs::read(&ours).unwrap();
    assert_eq!(
        written,
        wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER
    );

    // The host's own command, from the same target folder.
    let host = Path::new(BIN).with_file_name("wasmclaw");
    assert!(
        host.exists(),
        "{} is missing: build it with `cargo build -p wasmclaw` before the tests",
        host.display()
    );
    let theirs = dir.path().join("host.wasm");
    let out = Command::new(&host)
        .args(["plugins", "adapter"])
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read(&theirs).unwrap() == written,
        "the two adapters differ"
    );
    // A temporary file was renamed into place; none is left.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("nested"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["adapter.wasm"]);
}

#[test]
fn depends_on_the_adapter_crate_only() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&manifest).unwrap();
    let deps: Vec<&String> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(deps, ["wasi-preview1-component-adapter-provider"]);
    assert!(!manifest.contains_key("build-dependencies"));
}

#[test]
fn usage_without_a_file() {
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "usage: wasmclaw-adapter FILE (writes the WASI preview1 reactor adapter to FILE)\n"
    );
}
