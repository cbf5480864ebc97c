//! wasmclaw as an MCP server: the Python SDK's client over stdio.
//!
//! `tests/python/mcp_client.py`, run with the virtualenv `make pyenv`
//! makes, starts `wasmclaw mcp` on a plugin directory holding the echo and
//! the hostile plugins, lists the tools, calls `add` (right, with a field
//! of the wrong type), an unknown tool and one that traps, and prints what
//! the SDK saw as JSON, checked here value by value; once with the
//! `initialize` handshake and once with the `server/discover` probe.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

/// The whole client run: a hang fails the test.
const LIMIT: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    let target = wasmclaw_tests::target_dir();
    target.parent().expect("target is in the repository").into()
}

fn python() -> PathBuf {
    let python = wasmclaw_tests::target_dir().join("pyenv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make pyenv` (`make test` does) to install the MCP Python SDK",
        python.display()
    );
    python
}

/// Runs `tests/python/mcp_client.py` with `revision` against `wasmclaw mcp`
/// on `dir`: the JSON object it printed.
async fn run_client(dir: &PluginDir, revision: &str) -> Value {
    let home = dir.scratch("home");
    let plugins = dir.path();
    let script = repo().join("tests/python/mcp_client.py");
    let run = tokio::process::Command::new(python())
        .arg(&script)
        .arg(revision)
        .arg(wasmclaw_bin())
        .args(["--home", home.to_str().unwrap()])
        .args(["--plugins", plugins.to_str().unwrap(), "mcp"])
        // The agent's model is never called: only its tools are served.
        .args(["--model", "openai:unused"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("{} did not finish within {LIMIT:?}", script.display()))
        .expect("running the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client failed ({}):\n{stderr}{stdout}",
        output.status
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the client printed no JSON object ({e}):\n{stdout}{stderr}"))
}

async fn lists_and_calls(revision: &str) {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("hostile");
    let out = run_client(&dir, revision).await;
    assert_eq!(out["server"], "wasmclaw");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for tool in ["add", "echo", "trap", "spin", "sleep"] {
        assert!(tools.contains(&tool), "{tool} is not in {tools:?}");
    }
    assert_eq!(out["add_schema"]["type"], "object");
    assert_eq!(out["add_schema"]["required"], json!(["a", "b"]));
    assert_eq!(out["add"], json!({"is_error": false, "text": ["5"]}));
    let expected = r#"expected {"a": integer, "b": integer} (required: a, b; no other properties)"#;
    assert_eq!(
        out["bad_field"],
        json!({"is_error": true, "text": [format!(
            r#"error (invalid-input): invalid arguments for add: /a: "two" is not of type "integer"; {expected}"#
        )]})
    );
    assert_eq!(
        out["unknown"],
        json!({"is_error": true, "text": [
            "error (not-found): unknown tool \"nope\"; available tools: add, alloc, context, count, echo, fail, header_objects, huge_output, log, log_flood, open_files, print_flood, read_env, read_path, sleep, spawn_loop, spin, trap, wait_gate, write_path"
        ]})
    );
    assert_eq!(out["trap"]["is_error"], true);
    let trap = out["trap"]["text"][0].as_str().unwrap();
    assert!(
        trap.starts_with(
            "error (internal): plugin 'hostile' crashed (wasm `unreachable` instruction executed)"
        ),
        "{trap}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn python_client_lists_and_calls_over_stdio_with_the_handshake() {
    lists_and_calls("handshake").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_client_lists_and_calls_over_stdio_with_discover() {
    lists_and_calls("modern").await;
}
