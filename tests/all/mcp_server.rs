//! wasmclaw as an MCP server: the Python SDK's client over stdio and
//! streamable HTTP, and the token and the Host/Origin checks on `/mcp`.
//!
//! `tests/python/mcp_client.py`, run with the virtualenv `make pyenv`
//! makes, starts `wasmclaw mcp` on a plugin directory holding the echo and
//! the hostile plugins, lists the tools, calls `add` (right, with a field
//! of the wrong type), an unknown tool and one that traps, and prints what
//! the SDK saw as JSON, checked here value by value; once with the
//! `initialize` handshake and once with the `server/discover` probe.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::bus::Filter;
use wasmclaw::plugin::ErrorKind;
use wasmclaw::protocol::{EventBody, EventKind};
use wasmclaw_tests::agents::openai;
use wasmclaw_tests::fake_model::FakeModel;
use wasmclaw_tests::python::{python, script};
use wasmclaw_tests::server::{Setup, TOKEN, TestServer};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

/// The whole client run: a hang fails the test.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `tests/python/mcp_client.py` with `revision` against `wasmclaw mcp`
/// on `dir`: the JSON object it printed.
async fn run_stdio(dir: &PluginDir, revision: &str) -> Value {
    let home = dir.scratch("home");
    let plugins = dir.path();
    let mut args = vec![revision.to_string(), wasmclaw_bin().display().to_string()];
    args.extend(
        ["--home", home.to_str().unwrap()]
            .into_iter()
            .chain(["--plugins", plugins.to_str().unwrap(), "mcp"])
            // The agent's model is never called: only its tools are served.
            .chain(["--model", "openai:unused"])
            .map(String::from),
    );
    run_client(&args).await
}

/// Runs `tests/python/mcp_client.py` with `args`: the JSON object it
/// printed.
async fn run_client(args: &[String]) -> Value {
    run_script("mcp_client.py", args).await
}

async fn run_script(name: &str, args: &[String]) -> Value {
    wasmclaw_tests::python::run_script(name, args, LIMIT).await
}

fn plugins() -> PluginDir {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("hostile");
    dir
}

async fn lists_and_calls(revision: &str) {
    let dir = plugins();
    let out = run_stdio(&dir, revision).await;
    check(&out);
}

/// What the client saw: the tools, `add`'s schema, the exact results.
fn check(out: &Value) {
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

/// `serve`'s API on `dir`; its model is never called.
async fn http_server(dir: &PluginDir) -> (FakeModel, TestServer) {
    let fake = FakeModel::start([]).await;
    let candidates = vec![openai(&fake, "model", true)];
    let server = TestServer::start(dir.load().await, candidates, Setup::default()).await;
    (fake, server)
}

async fn lists_and_calls_over_http(revision: &str) {
    let dir = plugins();
    let (_fake, server) = http_server(&dir).await;
    let args = [revision, "--http", &server.at("/mcp"), TOKEN].map(String::from);
    let out = run_client(&args).await;
    check(&out);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_client_lists_and_calls_over_http_with_the_handshake() {
    lists_and_calls_over_http("handshake").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_client_lists_and_calls_over_http_with_discover() {
    lists_and_calls_over_http("modern").await;
}

/// An `initialize` request as a client posts it.
fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}
        }
    })
}

/// Posts `initialize` to `/mcp` with `headers`: the status.
async fn post(server: &TestServer, token: Option<&str>, headers: &[(&str, &str)]) -> u16 {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut request = client
        .post(server.at("/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .json(&initialize());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_http_needs_the_token_and_a_loopback_or_configured_host_and_origin() {
    let dir = plugins();
    let (fake, server) = http_server(&dir).await;
    assert_eq!(post(&server, None, &[]).await, 401);
    assert_eq!(post(&server, Some("wrong"), &[]).await, 401);
    // DNS rebinding: a page of evil.example whose name now points at
    // 127.0.0.1.
    let rebound = [("Host", "evil.example:8080")];
    assert_eq!(post(&server, Some(TOKEN), &rebound).await, 403);
    let page = [("Origin", "http://evil.example")];
    assert_eq!(post(&server, Some(TOKEN), &page).await, 403);
    let local = [("Origin", "http://localhost:3000")];
    assert_eq!(post(&server, Some(TOKEN), &local).await, 200);
    assert_eq!(post(&server, Some(TOKEN), &[]).await, 200);
    let lan = [("Host", "wasmclaw.lan:8787")];
    assert_eq!(post(&server, Some(TOKEN), &lan).await, 403);
    server.stop().await;

    // `[mcp.server] allowed_hosts` and `allowed_origins` add to loopback.
    let mut setup = Setup::default();
    setup
        .server
        .mcp
        .allowed_hosts
        .push("wasmclaw.lan:8787".into());
    (setup.server.mcp.allowed_origins).push("https://console.wasmclaw.lan".into());
    let server = TestServer::start(dir.load().await, vec![openai(&fake, "m", true)], setup).await;
    assert_eq!(post(&server, Some(TOKEN), &lan).await, 200);
    let other_port = [("Host", "wasmclaw.lan:9999")];
    assert_eq!(post(&server, Some(TOKEN), &other_port).await, 403);
    let console = [
        ("Host", "wasmclaw.lan:8787"),
        ("Origin", "https://console.wasmclaw.lan"),
    ];
    assert_eq!(post(&server, Some(TOKEN), &console).await, 200);
    assert_eq!(post(&server, Some(TOKEN), &page).await, 403);
    assert_eq!(post(&server, Some(TOKEN), &[]).await, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_the_client_cancels_is_stopped_and_a_long_one_reports_progress() {
    cancels_and_progress("handshake").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_clients_cancelled_call_is_stopped_and_a_long_one_reports_progress() {
    cancels_and_progress("modern").await;
}

/// The cancel client at `revision`: `spin` cancelled (its instance
/// stopped), then `add`, then a `sleep` long enough for progress.
async fn cancels_and_progress(revision: &str) {
    let dir = plugins();
    let (_fake, server) = http_server(&dir).await;
    let filter = Filter {
        session: None,
        no_deltas: true,
        kinds: vec![EventKind::ToolCallEnd],
    };
    let mut events = server.core.subscribe(filter, None);
    let args = [revision.to_string(), server.at("/mcp"), TOKEN.to_string()];
    let out = run_script("mcp_client_cancel.py", &args).await;
    // A call that runs over a second is told as progress.
    assert_eq!(
        out,
        json!({
            "spin_cancelled": true,
            "add": ["5"],
            "sleep_error": false,
            "progress": ["sleep running for 1 s"]
        })
    );
    let (mut ends, mut sessions) = (Vec::new(), Vec::new());
    while ends.len() < 2 {
        let event = tokio::time::timeout(LIMIT, events.recv())
            .await
            .expect("the calls end")
            .expect("the bus is open");
        let EventBody::ToolCallEnd(end) = &event.body else {
            continue;
        };
        ends.push((end.tool.clone(), end.ok, end.error_kind, end.output.clone()));
        sessions.push(event.session.clone().unwrap_or_default());
    }
    // Both calls ran in a session of the client's, `mcp:<client name>:<id>`
    // (the SDK's client calls itself `mcp`): with the handshake, the one of
    // its connection; stateless, each request stands alone, and so has one
    // of its own.
    assert!(
        sessions.iter().all(|s| s.starts_with("mcp:mcp:")),
        "{sessions:?}"
    );
    assert_eq!(
        sessions[0] == sessions[1],
        revision == "handshake",
        "{sessions:?}"
    );
    // The spinning instance was stopped by the cancellation, not by its
    // timeout, and the session went on.
    assert_eq!(
        ends,
        vec![
            (
                "spin".to_string(),
                false,
                Some(ErrorKind::Cancelled),
                "error (cancelled): the caller cancelled the call".to_string()
            ),
            ("add".to_string(), true, None, "5".to_string()),
        ]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_is_told_when_a_plugin_is_dropped_into_the_directory() {
    told_of_a_new_plugin("handshake").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_client_listening_is_told_when_a_plugin_is_dropped_into_the_directory() {
    let out = told_of_a_new_plugin("modern").await;
    assert_eq!(out["event"], "ToolsListChanged", "{out}");
}

/// The reload client at `revision`: what it printed, checked to show the
/// plugin added between its two listings.
async fn told_of_a_new_plugin(revision: &str) -> Value {
    use tokio::io::AsyncBufReadExt;
    let dir = PluginDir::new();
    dir.add("echo");
    let (_fake, server) = http_server(&dir).await;
    let _watch = server.core.watch_plugins().unwrap();
    let script = script("mcp_client_reload.py");
    let mut child = tokio::process::Command::new(python())
        .arg(&script)
        .args([revision.to_string(), server.at("/mcp"), TOKEN.to_string()])
        .env("NO_PROXY", "127.0.0.1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let listed = tokio::time::timeout(LIMIT, stdout.next_line())
        .await
        .expect("the client lists the tools")
        .unwrap();
    assert_eq!(listed.as_deref(), Some("listed"));
    dir.add("hostile");
    let line = tokio::time::timeout(LIMIT, stdout.next_line())
        .await
        .expect("the client sees the change")
        .unwrap()
        .expect("the client prints what it saw");
    let out: Value = serde_json::from_str(&line).unwrap();
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    let (before, after) = (names(&out["before"]), names(&out["after"]));
    assert!(!before.contains(&"spin".to_string()), "{before:?}");
    assert!(before.contains(&"add".to_string()), "{before:?}");
    assert!(after.contains(&"spin".to_string()), "{after:?}");
    assert!(after.contains(&"trap".to_string()), "{after:?}");
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    server.stop().await;
    out
}
