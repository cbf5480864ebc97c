//! wasmclaw as an MCP client: the tools of `[mcp.servers.NAME]` (the
//! Python SDK's server in `tests/python/mcp_tool_server.py`, and rmcp's in
//! `tests/support/bin/rmcp_server.rs`) in real turns of `wasmclaw run` and
//! `wasmclaw serve` against the fake model, and `wasmclaw mcp list`.
//!
//! Revisions: both SDKs (the Python `mcp` 2.3.0 and rmcp 3.11) serve the
//! stateless 2026-07-28 revision (`server/discover`) over stdio and
//! streamable HTTP, and 2025-11-25 (`initialize`) beside it; the client's
//! default probe ends on 2026-07-28 with each, and `protocol` pins either.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::python::{python, script};
use wasmclaw_tests::{PluginDir, json_lines, run_wasmclaw};

mod interrupt;
mod revisions;
mod rmcp;

fn server_script() -> PathBuf {
    script("mcp_tool_server.py")
}

/// `[mcp.servers.NAME]` for the Python server started with `mode`, plus
/// `extra` lines.
fn stdio_server(name: &str, mode: &str, extra: &str) -> String {
    format!(
        "[mcp.servers.{name}]\ncommand = {:?}\nargs = [{:?}, {mode:?}]\n{extra}\n",
        python().display().to_string(),
        server_script().display().to_string(),
    )
}

/// A home with `toml` as its configuration file.
fn home_with(dir: &PluginDir, toml: &str) -> PathBuf {
    let home = dir.scratch("home");
    std::fs::write(home.join("wasmclaw.toml"), toml).unwrap();
    home
}

/// `wasmclaw run` with the plugins of `dir`, the fake model, events on
/// stdout; (exit code, events, stderr).
async fn run(dir: &PluginDir, home: &Path, fake: &FakeModel) -> (i32, Vec<Value>, String) {
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "run",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--events",
        "-",
        "-m",
        "go",
    ];
    let (code, out, err) = run_wasmclaw(home, &[("OPENAI_API_KEY", "sk-test")], &args, "").await;
    (code, json_lines(&out), err)
}

/// The tool results the model was sent, in order (the last request's).
fn tool_results(fake: &FakeModel) -> Vec<String> {
    let requests = fake.requests();
    let last = &requests.last().unwrap().body;
    (last["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The tool names of the first model request.
fn offered(fake: &FakeModel) -> Vec<String> {
    let first = &fake.requests()[0].body;
    (first["tools"].as_array().into_iter().flatten())
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_servers_tool_runs_in_a_real_turn() {
    let dir = PluginDir::new();
    let home = home_with(&dir, &stdio_server("py", "stdio", "deny = [\"grow\"]"));
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({"text": "hi"})),
        Reply::text("done"),
    ])
    .await;
    let (code, events, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(tool_results(&fake), ["echo: hi"]);
    // Offered beside the built-ins; `deny` keeps `grow` out.
    assert_eq!(
        offered(&fake),
        [
            "echo",
            "add",
            "crash",
            "hang",
            "huge",
            "fails",
            "whoami",
            "subagent",
            "spawn",
            "history_search"
        ]
    );
    let ready = of_kind(&events, "mcp_server_ready");
    assert_eq!(ready.len(), 1, "{events:?}");
    assert_eq!(
        (
            &ready[0]["server"],
            &ready[0]["tools"],
            &ready[0]["protocol"]
        ),
        (&json!("py"), &json!(8), &json!("2026-07-28"))
    );
    let ends = of_kind(&events, "tool_call_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["tool"], "echo", "{:?}", ends[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_a_plugin_has_is_prefixed_and_always_prefix_prefixes_all() {
    let dir = PluginDir::new();
    dir.add("echo");
    let allow = "allow = [\"add\", \"echo\", \"huge\"]";
    let home = home_with(&dir, &stdio_server("py", "stdio", allow));
    let fake = FakeModel::start([
        Reply::tool("c1", "py__add", json!({"a": 2, "b": 3})),
        Reply::tool("c2", "add", json!({"a": 2, "b": 3})),
        Reply::text("done"),
    ])
    .await;
    let (code, _, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    let names = offered(&fake);
    // The plugin keeps its names; the server's clashing ones are prefixed.
    assert!(
        names
            == [
                "add",
                "context",
                "count",
                "echo",
                "fail",
                "log",
                "py__echo",
                "py__add",
                "huge",
                "subagent",
                "spawn",
                "history_search"
            ],
        "{names:?}"
    );
    assert_eq!(tool_results(&fake), ["mcp sum 5", "5"]);

    let toml = format!(
        "[mcp]\nalways_prefix = true\n{}",
        stdio_server("py", "stdio", allow)
    );
    std::fs::write(home.join("wasmclaw.toml"), toml).unwrap();
    let fake = FakeModel::start([Reply::text("done")]).await;
    let (code, _, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    let names = offered(&fake);
    assert!(
        names
            == [
                "add",
                "context",
                "count",
                "echo",
                "fail",
                "log",
                "py__echo",
                "py__add",
                "py__huge",
                "subagent",
                "spawn",
                "history_search"
            ],
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_past_the_deadline_or_over_the_output_limit_fails_with_a_readable_error() {
    let dir = PluginDir::new();
    let mark = dir.scratch("mark").join("cancelled");
    let extra = format!(
        "timeout_secs = 2\noutput_kib = 64\nenv = {{ MCP_MARK = {:?} }}",
        mark.display().to_string()
    );
    let home = home_with(&dir, &stdio_server("py", "stdio", &extra));
    let fake = FakeModel::start([
        Reply::tool("c1", "hang", json!({})),
        Reply::tool("c2", "huge", json!({})),
        Reply::tool("c3", "fails", json!({})),
        Reply::tool("c4", "echo", json!({"text": "still here"})),
        Reply::text("done"),
    ])
    .await;
    let (code, events, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        tool_results(&fake),
        [
            "error (timeout): MCP server \"py\" did not answer the call of \"hang\" within 2 s",
            "error (internal): MCP server \"py\" returned 2000000 bytes from \"huge\", over its output limit of 64 KiB",
            "error (upstream): Error executing tool fails",
            "echo: still here",
        ]
    );
    let errors: Vec<&Value> = of_kind(&events, "tool_call_end")
        .iter()
        .map(|e| &e["error_kind"])
        .collect();
    assert_eq!(
        errors,
        [
            &json!("timeout"),
            &json!("internal"),
            &json!("upstream"),
            &Value::Null
        ]
    );
    // The call given up was cancelled at the server.
    assert!(
        wasmclaw_tests::eventually(std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(&mark)
                .is_ok_and(|m| m == "server started\nstarted hang\ncancelled hang\n")
        })
        .await,
        "the server never saw notifications/cancelled"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_crashes_mid_call_is_reported_and_restarted() {
    let dir = PluginDir::new();
    let home = home_with(&dir, &stdio_server("py", "stdio", ""));
    let fake = FakeModel::start([
        Reply::tool("c1", "crash", json!({})),
        Reply::tool("c2", "echo", json!({"text": "back"})),
        Reply::text("done"),
    ])
    .await;
    let (code, events, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    let results = tool_results(&fake);
    assert!(
        results[0].starts_with(
            "error (upstream): MCP server \"py\" failed during the call of \"crash\": "
        ),
        "{results:?}"
    );
    assert_eq!(results[1], "echo: back");
    let mcp: Vec<&str> = (events.iter())
        .map(|e| e["type"].as_str().unwrap())
        .filter(|k| k.starts_with("mcp_"))
        .collect();
    assert_eq!(
        mcp,
        ["mcp_server_ready", "mcp_server_failed", "mcp_server_ready"]
    );
    let failed = of_kind(&events, "mcp_server_failed")[0];
    assert_eq!(failed["server"], "py");
    assert_eq!(failed["stderr_tail"], "crashing on purpose");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_fails_to_start_is_reported_with_its_stderr_and_its_calls_fail() {
    let dir = PluginDir::new();
    let toml = format!(
        "[mcp]\nstartup_wait_secs = 5\n{}",
        stdio_server("bad", "fail", "timeout_secs = 1\nallow = [\"echo\"]")
    );
    let home = home_with(&dir, &toml);
    let fake = FakeModel::start([Reply::text("done")]).await;
    let (code, events, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    let failed = of_kind(&events, "mcp_server_failed");
    assert!(!failed.is_empty(), "{events:?}");
    assert_eq!(failed[0]["server"], "bad");
    assert_eq!(failed[0]["stderr_tail"], "cannot start: no database");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("the handshake failed: "),
        "{:?}",
        failed[0]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_shows_each_servers_state_and_tools() {
    let dir = PluginDir::new();
    dir.add("echo");
    let toml = format!(
        "{}{}",
        stdio_server("bad", "fail", ""),
        stdio_server("py", "stdio", "allow = [\"echo\", \"huge\"]")
    );
    let home = home_with(&dir, &toml);
    let plugins = dir.path();
    let args = ["--plugins", plugins.to_str().unwrap(), "mcp", "list"];
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "bad: failed: the handshake failed: connection closed: discover response\n\
         py: ready (protocol 2026-07-28)\n  py__echo\n  huge\n"
    );
}

/// At 2026-07-28 the change comes on the `subscriptions/listen` stream
/// the client opens; at 2025-11-25 as a notification of the session.
#[tokio::test(flavor = "multi_thread")]
async fn tools_list_changed_refreshes_the_list_within_a_turn() {
    for (protocol, line) in [
        ("2026-07-28", ""),
        ("2025-11-25", "protocol = \"2025-11-25\""),
    ] {
        let dir = PluginDir::new();
        let home = home_with(&dir, &stdio_server("py", "stdio", line));
        let fake = FakeModel::start([
            Reply::tool("c1", "grow", json!({})),
            Reply::tool("c2", "extra", json!({})),
            Reply::text("done"),
        ])
        .await;
        let (code, events, err) = run(&dir, &home, &fake).await;
        assert_eq!(code, 0, "{err}");
        assert_eq!(tool_results(&fake), ["grown", "extra ran"], "{protocol}");
        assert!(!offered(&fake).contains(&"extra".to_string()));
        assert_eq!(
            of_kind(&events, "mcp_server_ready")[0]["protocol"],
            protocol
        );
    }
}

/// The Python server over streamable HTTP on a free port, killed on drop.
async fn http_server() -> (tokio::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(python())
        .arg(server_script())
        .args(["http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let up = wasmclaw_tests::eventually_async(std::time::Duration::from_secs(30), async || {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    assert!(up, "the HTTP MCP server did not start");
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_with_headers_from_the_environment() {
    let (_server, url) = http_server().await;
    let dir = PluginDir::new();
    let toml = format!(
        "[mcp.servers.web]\nurl = {url:?}\nheaders_env = {{ x-test-key = \"MCP_TEST_KEY\" }}\n"
    );
    let home = home_with(&dir, &toml);
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({"text": "over http"})),
        Reply::tool("c2", "whoami", json!({})),
        Reply::text("done"),
    ])
    .await;
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "run",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--events",
        "-",
        "-m",
        "go",
    ];
    let env = [("OPENAI_API_KEY", "sk-test"), ("MCP_TEST_KEY", "sekrit")];
    let (code, out, err) = run_wasmclaw(&home, &env, &args, "").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(tool_results(&fake), ["echo: over http", "key=sekrit"]);
    let events = json_lines(&out);
    let ready = of_kind(&events, "mcp_server_ready");
    assert_eq!(
        (&ready[0]["server"], &ready[0]["protocol"]),
        (&json!("web"), &json!("2026-07-28"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_rmcp_server_over_stdio() {
    let dir = PluginDir::new();
    let toml = format!(
        "[mcp.servers.rs]\ncommand = {:?}\n",
        env!("CARGO_BIN_EXE_rmcp_server")
    );
    let home = home_with(&dir, &toml);
    let fake = FakeModel::start([Reply::tool("c1", "hello", json!({})), Reply::text("done")]).await;
    let (code, events, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(tool_results(&fake), ["hello from rmcp"]);
    let ready = of_kind(&events, "mcp_server_ready");
    assert_eq!(
        (
            &ready[0]["server"],
            &ready[0]["tools"],
            &ready[0]["protocol"]
        ),
        (&json!("rs"), &json!(1), &json!("2026-07-28"))
    );
}

/// `[mcp.servers.rs]`: the rmcp server over stdio, plus `extra` lines.
fn rmcp_stdio(extra: &str) -> String {
    format!(
        "[mcp.servers.rs]\ncommand = {:?}\n{extra}\n",
        env!("CARGO_BIN_EXE_rmcp_server")
    )
}

/// A turn calling `tool` of the one server of `toml`: the tool results
/// and the protocol its (only) `mcp_server_ready` names.
async fn one_call(toml: &str, tool: &str, arguments: Value) -> (Vec<String>, Value) {
    let dir = PluginDir::new();
    let home = home_with(&dir, toml);
    let fake = FakeModel::start([Reply::tool("c1", tool, arguments), Reply::text("done")]).await;
    let (code, events, err) = run(&dir, &home, &fake).await;
    assert_eq!(code, 0, "{err}");
    let ready = of_kind(&events, "mcp_server_ready");
    assert_eq!(ready.len(), 1, "{events:?}");
    (tool_results(&fake), ready[0]["protocol"].clone())
}
