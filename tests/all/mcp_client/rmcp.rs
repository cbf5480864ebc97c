//! rmcp's server (`tests/support/bin/rmcp_server.rs`) over streamable
//! HTTP, at each revision.

use serde_json::json;

use super::one_call;

const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// rmcp's server over streamable HTTP (`rmcp_server --http`): its URL, as
/// it prints it; killed on drop.
async fn rmcp_http() -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rmcp_server"))
        .arg("--http")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let line = tokio::time::timeout(LIMIT, stdout.lines().next_line()).await;
    let url = line.expect("rmcp_server --http prints its URL").unwrap();
    (child, url.expect("a line"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_rmcp_server_over_streamable_http() {
    let (_server, url) = rmcp_http().await;
    for (protocol, line) in [
        ("2026-07-28", ""),
        ("2025-11-25", "protocol = \"2025-11-25\""),
    ] {
        let toml = format!("[mcp.servers.web]\nurl = {url:?}\n{line}\n");
        assert_eq!(
            one_call(&toml, "hello", json!({})).await,
            (vec!["hello from rmcp".to_string()], json!(protocol))
        );
    }
}
