//! MCP tool call overhead: `cargo bench -p wasmclaw-tests --bench mcp` (or
//! `make bench`). An rmcp client calls the echo plugin's `add` through
//! wasmclaw serving MCP over stdio (`wasmclaw mcp`, a child process) and
//! over streamable HTTP (`/mcp` on the API), beside the same call in
//! process ([`Core::call_tool`], the path every MCP call takes) and the
//! plugin call alone. Prints median and p99 and writes
//! `target/bench/mcp.json`.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::json;
use wasmclaw_tests::agents::openai;
use wasmclaw_tests::bench::{Row, micros, percentile, print_and_save, timed, us};
use wasmclaw_tests::fake_model::FakeModel;
use wasmclaw_tests::server::{Setup, TOKEN, TestServer};
use wasmclaw_tests::{PluginDir, ctx, wasmclaw_bin};

const CALLS: usize = 2_000;

fn add() -> CallToolRequestParams {
    let args = json!({"a": 2, "b": 3});
    CallToolRequestParams::new("add").with_arguments(args.as_object().unwrap().clone())
}

fn rows(rows: &mut Vec<Row>, name: &str, samples: &[Duration]) {
    for (label, p) in [("median", 50), ("p99", 99)] {
        let d = percentile(samples, p);
        rows.push((format!("{name}, {label}"), us(d), micros(d)));
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut table: Vec<Row> = Vec::new();
    rt.block_on(async {
        let dir = PluginDir::new();
        dir.add("echo");
        let plugins = dir.load().await;
        let plain = timed(CALLS, async || {
            plugins
                .call(&ctx(), "add", r#"{"a":2,"b":3}"#)
                .await
                .unwrap();
        })
        .await;
        rows(&mut table, "plugin call in process", &plain);

        let fake = FakeModel::start([]).await;
        let candidates = vec![openai(&fake, "model", true)];
        let server = TestServer::start(plugins.clone(), candidates, Setup::default()).await;
        let core = server.core.clone();
        let through_core = timed(CALLS, async || {
            let r = core
                .call_tool("bench", None, "add", r#"{"a":2,"b":3}"#)
                .await;
            assert_eq!(r.unwrap().content, "5");
        })
        .await;
        rows(&mut table, "Core::call_tool in process", &through_core);

        let config =
            StreamableHttpClientTransportConfig::with_uri(server.at("/mcp")).auth_header(TOKEN);
        let client =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .expect("connecting to /mcp");
        let http = timed(CALLS, async || {
            client.call_tool(add()).await.unwrap();
        })
        .await;
        rows(&mut table, "MCP over streamable HTTP", &http);
        client.cancel().await.unwrap();
        server.stop().await;

        let home = dir.scratch("home");
        let mut command = tokio::process::Command::new(wasmclaw_bin());
        command
            .env("RUST_LOG", "error")
            .args(["--home", home.to_str().unwrap()])
            .args(["--plugins", dir.path().to_str().unwrap(), "mcp"])
            .args(["--model", "openai:unused"]);
        let client =
            ().serve(TokioChildProcess::new(command).unwrap())
                .await
                .expect("starting wasmclaw mcp");
        let stdio = timed(CALLS, async || {
            client.call_tool(add()).await.unwrap();
        })
        .await;
        rows(&mut table, "MCP over stdio", &stdio);
        client.cancel().await.unwrap();
    });
    print_and_save("mcp", &table);
}
