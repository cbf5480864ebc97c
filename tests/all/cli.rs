//! The `wasmclaw plugins` commands, run as a user runs them.

use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wasmclaw_tests::{PluginDir, guest, wasmclaw_bin};

fn wasmclaw(home: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_says_ok_or_why_not() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let echo = dir.add("echo");
    let (code, out, _) = wasmclaw(&home, &["plugins", "check", echo.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!(
            "{}: ok (tool-plugin@0.2.0; tools: echo, context, add, fail, log, count)\n",
            echo.display()
        )
    );

    let core = dir.write("core.wasm", b"\0asm\x01\0\0\0");
    let (code, out, err) = wasmclaw(&home, &["plugins", "check", core.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "{}: a core WebAssembly module, not a component: build it as a component (e.g. for the wasm32-wasip2 target) or wrap it with `wasm-tools component new`\n",
            core.display()
        )
    );
}

#[test]
fn a_component_that_does_not_compile_is_reported_by_the_compiler_process() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    // A component header followed by garbage: compiled (and refused) in the
    // child process the binary uses for cache misses.
    let bad = dir.write("bad.wasm", b"\0asm\x0d\0\x01\0garbage");
    let (code, _, err) = wasmclaw(&home, &["plugins", "check", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!(
            "compiling bad.wasm ... failed\n{}: cannot be compiled: failed to parse WebAssembly module: unexpected end-of-file (at offset 0xa)\n",
            bad.display()
        )
    );
}

#[test]
fn call_prints_the_result_and_fails_with_the_error() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    dir.add("echo");
    let plugins = dir.path();
    let plugins = plugins.to_str().unwrap();

    let (code, out, _) = wasmclaw(
        &home,
        &[
            "plugins",
            "call",
            "--plugins",
            plugins,
            "add",
            r#"{"a":2,"b":3}"#,
        ],
    );
    assert_eq!((code, out.as_str()), (0, "5\n"));

    let (code, out, _) = wasmclaw(
        &home,
        &[
            "plugins",
            "call",
            "--plugins",
            plugins,
            "--json",
            "fail",
            r#"{"kind":"denied","message":"no"}"#,
        ],
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"error": {"kind": "denied", "message": "no", "retryable": false}})
    );

    let (code, _, err) = wasmclaw(
        &home,
        &["plugins", "call", "--plugins", plugins, "add", r#"{"a":2}"#],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: invalid-input: invalid arguments for add: \"b\" is a required property; \
         expected {\"a\": integer, \"b\": integer} (required: a, b; no other properties)\n"
    );
}

#[test]
fn list_json_shows_every_file_and_the_cache_is_keyed_by_content() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    dir.add("echo");
    dir.add_as("contract_v0_1", "old");
    dir.add("wit_v3");
    dir.grants("echo", "env = [\"LANG\"]\n[limits]\ntimeout_ms = 1500\n");
    // The default plugin directory is HOME/plugins.
    std::fs::rename(dir.path(), home.join("plugins")).unwrap();

    let (code, out, err) = wasmclaw(&home, &["plugins", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["status"], "ok");
    assert_eq!(list[0]["name"], "echo");
    assert_eq!(list[0]["world"], "tool-plugin");
    assert_eq!(list[0]["wit_version"], "0.2.0");
    assert_eq!(list[0]["tools"][0]["name"], "echo");
    assert_eq!(
        list[0]["tools"][0]["input_schema"]["required"],
        serde_json::json!(["text"])
    );
    assert_eq!(list[0]["grants"]["env"], serde_json::json!(["LANG"]));
    assert_eq!(list[0]["grants"]["limits"]["timeout_ms"], 1500);
    // A plugin built for 0.1.0 loads, and says so.
    assert_eq!(
        (
            &list[1]["status"],
            &list[1]["name"],
            &list[1]["wit_version"]
        ),
        (&json!("ok"), &json!("old"), &json!("0.1.0"))
    );
    assert_eq!(list[2]["status"], "error");
    assert_eq!(list[2]["name"], "wit_v3");
    assert_eq!(
        list[2]["error"],
        "plugin 'wit_v3' was built for wasmclaw:plugin@0.3.0 (it exports wasmclaw:plugin/tool@0.3.0), which this host does not load; it loads wasmclaw:plugin 0.1.0 and 0.2.0: rebuild the plugin against one of them (wit/plugin.wit is 0.2.0)"
    );

    // Compiled code was cached (by a child process) under the file's hash.
    let digest: String = Sha256::digest(std::fs::read(guest("echo")).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cached: Vec<String> = std::fs::read_dir(home.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        cached
            .iter()
            .any(|f| f.starts_with(&format!("{digest}-")) && f.ends_with(".cwasm")),
        "{cached:?}"
    );
    // A second run loads from the cache (the entries are not rewritten:
    // a write renames a new file into place) and agrees.
    let stamps = || -> Vec<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let mut all: Vec<_> = std::fs::read_dir(home.join("cache"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap())
            .map(|m| (m.ino(), m.len()))
            .collect();
        all.sort();
        all
    };
    let before = stamps();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (code, again, _) = wasmclaw(&home, &["plugins", "list", "--json"]);
    assert_eq!((code, again), (0, out));
    assert_eq!(stamps(), before);
}
