//! The protocol revision: pinned by `protocol` (either SDK's server), a
//! value no revision has, and a server that ignores `server/discover`.

use serde_json::json;

use super::{one_call, rmcp_stdio, stdio_server, tool_results};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::serve_bin::{ServeChild, serve_command};
use wasmclaw_tests::{PluginDir, run_wasmclaw};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn protocol_pins_the_revision_and_its_handshake() {
    let echo = json!({"text": "hi"});
    for (toml, tool, result, protocol) in [
        (
            stdio_server("py", "stdio", "protocol = \"2025-11-25\""),
            "echo",
            "echo: hi",
            "2025-11-25",
        ),
        (
            stdio_server("py", "stdio", "protocol = \"2026-07-28\""),
            "echo",
            "echo: hi",
            "2026-07-28",
        ),
        (
            rmcp_stdio("protocol = \"2025-11-25\""),
            "hello",
            "hello from rmcp",
            "2025-11-25",
        ),
        (
            rmcp_stdio("protocol = \"2026-07-28\""),
            "hello",
            "hello from rmcp",
            "2026-07-28",
        ),
    ] {
        assert_eq!(
            one_call(&toml, tool, echo.clone()).await,
            (vec![result.to_string()], json!(protocol)),
            "{toml}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_protocol_other_than_the_two_revisions_is_a_config_error() {
    let dir = PluginDir::new();
    let server = stdio_server("py", "stdio", "protocol = \"2025-06-18\"");
    let home = super::home_with(&dir, &server);
    let plugins = dir.path();
    let args = ["--plugins", plugins.to_str().unwrap(), "mcp", "list"];
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "").await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {}:4:12: mcp.servers.py.protocol: unknown value `2025-06-18`; did you mean \
             `2026-07-28`? (expected one of: 2025-11-25, 2026-07-28)",
            home.join("wasmclaw.toml").display()
        )
    );
}

/// A bare 2025-11-25 server that ignores `server/discover` (neither answers
/// nor refuses it) fails its first start after the startup wait; the next
/// start speaks `initialize` alone, and its tool works. The server's log
/// of the methods it received shows the two starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ignores_server_discover_is_started_again_with_initialize() {
    let dir = PluginDir::new();
    let mark = dir.scratch("mark").join("methods");
    let env = format!("env = {{ MCP_MARK = {:?} }}", mark.display().to_string());
    let toml = format!(
        "[mcp]\nstartup_wait_secs = 5\n{}",
        stdio_server("old", "silent", &env)
    );
    let home = super::home_with(&dir, &toml);
    let fake = FakeModel::start([]).await;
    let server =
        ServeChild::start(serve_command(&home, &dir.path(), &fake.openai_base_url())).await;
    let client = server.client();
    // Until its tool is offered: a turn before that is told it is unknown.
    let reached = wasmclaw_tests::eventually_async(LIMIT, async || {
        fake.push(Reply::tool("c1", "echo", json!({"text": "hi"})));
        fake.push(Reply::text("done"));
        let answer = server.ask(&client, "s", "go").await;
        assert_eq!(answer["answer"], "done", "{answer}");
        // The session's history holds the earlier turns' results too.
        tool_results(&fake)
            .last()
            .is_some_and(|r| r == "silent echo: hi")
    })
    .await;
    assert!(reached, "the server was never reached");
    let methods = std::fs::read_to_string(&mark).unwrap();
    assert_eq!(
        methods,
        "server/discover\ninitialize\nnotifications/initialized\ntools/list\ntools/call\n"
    );
    server.stop().await;
}
