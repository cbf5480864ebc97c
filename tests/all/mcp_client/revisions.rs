//! The protocol revision: pinned by `protocol` (either SDK's server), a
//! value no revision has, and a server that ignores `server/discover`.

use serde_json::json;

use super::{one_call, rmcp_stdio, stdio_server};
use wasmclaw_tests::{PluginDir, run_wasmclaw};

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
/// nor refuses it): the probe gives up after half the startup wait and the
/// server is started again with `initialize`, within the startup wait (the
/// run waits that long for the servers: the tool is offered, no failure).
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ignores_server_discover_is_reached_with_initialize() {
    let toml = stdio_server("old", "silent", "");
    assert_eq!(
        one_call(&toml, "echo", json!({"text": "hi"})).await,
        (vec!["silent echo: hi".to_string()], json!("2025-11-25"))
    );
}
