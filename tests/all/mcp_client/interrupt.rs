//! A hard interrupt of a turn whose MCP call hangs, through `wasmclaw
//! serve`'s API.

use serde_json::{Value, json};
use wasmclaw::protocol::EventBody;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::serve_bin::{ServeChild, serve_command};

use super::{home_with, stdio_server, tool_results};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A turn of `wasmclaw serve` whose MCP call hangs, stopped by a hard
/// interrupt: the turn ends `aborted`, the server sees
/// `notifications/cancelled` for the call, and the next call to it works,
/// over the same connection; at each revision.
#[tokio::test(flavor = "multi_thread")]
async fn a_hard_interrupt_mid_call_aborts_the_turn_and_cancels_the_call() {
    for line in ["", "protocol = \"2025-11-25\""] {
        let dir = PluginDir::new();
        let mark = dir.scratch("mark").join("calls");
        let env = format!("env = {{ MCP_MARK = {:?} }}", mark.display().to_string());
        let home = home_with(
            &dir,
            &stdio_server("py", "stdio", &format!("{line}\n{env}")),
        );
        let fake = FakeModel::start([
            Reply::tool("c1", "hang", json!({})),
            Reply::tool("c2", "echo", json!({"text": "after"})),
            Reply::text("done"),
        ])
        .await;
        let start = serve_command(&home, &dir.path(), &fake.openai_base_url());
        let server = ServeChild::start(start).await;
        let client = server.client();
        let marked = |want: &'static str| {
            let mark = mark.clone();
            wasmclaw_tests::eventually(LIMIT, move || {
                std::fs::read_to_string(&mark).is_ok_and(|m| m == want)
            })
        };
        let asked = {
            let (client, url) = (
                client.clone(),
                server.at("/v1/sessions/s/messages?wait=true"),
            );
            tokio::spawn(async move {
                let sent = client.post(url).json(&json!({"content": "go"})).send();
                sent.await.unwrap().json::<Value>().await.unwrap()
            })
        };
        assert!(
            marked("server started\nstarted hang\n").await,
            "the call never started"
        );
        let interrupt = json!({"mode": "hard"});
        let interrupted = (server.post(&client, "/v1/sessions/s/interrupt", interrupt)).await;
        assert_eq!(interrupted["mode"], "hard", "{interrupted}");
        let ended = tokio::time::timeout(LIMIT, asked).await.unwrap().unwrap();
        assert_eq!(ended["status"], "aborted", "{ended}");
        assert!(
            marked("server started\nstarted hang\ncancelled hang\n").await,
            "the server never saw notifications/cancelled ({line:?})"
        );
        let next = server.ask(&client, "s", "again").await;
        assert_eq!(
            (&next["status"], &next["answer"]),
            (&json!("completed"), &json!("done"))
        );
        assert_eq!(tool_results(&fake), ["echo: after"]);
        // By the same process: the cancellation did not cost the connection.
        let marks = std::fs::read_to_string(&mark).unwrap();
        assert_eq!(marks, "server started\nstarted hang\ncancelled hang\n");
        server.stop().await;
        // `serve` publishes the server's state like any front end.
        let store = Store::open(&home.join("sessions.db")).unwrap();
        let ready: Vec<String> = (store.events(None, 0, 10_000).await.unwrap().into_iter())
            .filter_map(|e| match e.body {
                EventBody::McpServerReady(r) => Some(format!("{} {}", r.server, r.protocol)),
                _ => None,
            })
            .collect();
        let protocol = if line.is_empty() {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(ready, [format!("py {protocol}")], "{line:?}");
    }
}
