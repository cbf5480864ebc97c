//! Open descriptors are bounded per call (`limits.open_files`) and for all
//! plugin calls together (half the process's open-file limit), so a plugin
//! that opens files in a loop inside its grant is told `quota` and other
//! sessions keep working.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use wasmclaw::plugin::ErrorKind;
use wasmclaw_tests::fake_model::{Reply, fake_model};
use wasmclaw_tests::server::TOKEN;
use wasmclaw_tests::{PluginDir, ctx, eventually, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(60);

/// What the guest's `std::fs::File::create` reports for `error-code.quota`.
const QUOTA: &str = "Quota exceeded (os error 19)";

/// hostile with a read-write grant of `data`, and `limits`.
fn hostile_with_data(dir: &PluginDir, limits: &str) -> std::path::PathBuf {
    let data = dir.scratch("data");
    dir.add("echo");
    dir.add("hostile");
    dir.grants(
        "hostile",
        &format!(
            "[[dirs]]\nhost = \"../data\"\nguest = \"/data\"\nmode = \"read-write\"\n[limits]\ntimeout_ms = 60000\n{limits}"
        ),
    );
    data
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_holds_at_most_its_limit_of_open_files_and_the_guest_is_told_quota() {
    let dir = PluginDir::new();
    hostile_with_data(&dir, "open_files = 16\n");
    let plugins = dir.load().await;
    let args = json!({"dir": "/data", "count": 1000}).to_string();
    for _ in 0..2 {
        // Each call starts from nothing: the last one's files were closed.
        let out = plugins.call(&ctx(), "open_files", &args).await;
        assert_eq!(
            out,
            Ok(format!("opened 16 files; the next open failed: {QUOTA}"))
        );
    }
    // Within the limit, files open as before.
    let out = plugins
        .call(&ctx(), "open_files", r#"{"dir":"/data","count":16}"#)
        .await;
    assert_eq!(out, Ok("opened 16 files".to_string()));
    let out = plugins.call(&ctx(), "echo", r#"{"text":"ok"}"#).await;
    assert_eq!(out, Ok("ok".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_limit_is_checked_when_the_grants_are_read() {
    let dir = PluginDir::new();
    hostile_with_data(&dir, "open_files = 0\n");
    let plugins = dir.load().await;
    let error = wasmclaw_tests::load_error(&plugins, "hostile");
    assert!(
        error.ends_with("limits.open_files: expected 1 to 4096, found 0"),
        "{error}"
    );
    let err = plugins.call(&ctx(), "open_files", "{}").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
}

/// `wasmclaw serve` under `ulimit -n 256`: while one session's plugin call
/// holds every descriptor it can get, another session's turn (a new API
/// connection, a model request, a tool call) still completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_hoarding_files_leaves_the_host_descriptors_for_other_sessions() {
    let fake = fake_model(|last_user, after_tool| match (last_user, after_tool) {
        ("hog", false) => Reply::tool(
            "h1",
            "open_files",
            json!({"dir": "/data", "count": 100000, "hold": true}),
        ),
        ("other", false) => Reply::tool("o1", "add", json!({"a": 40, "b": 2})),
        (user, true) => Reply::text(format!("{user} is done")),
        (user, false) => Reply::text(format!("unexpected {user}")),
    })
    .await;
    let dir = PluginDir::new();
    // No per-call bound below the host's: only the host-wide one stops it.
    let data = hostile_with_data(&dir, "open_files = 4096\n");
    let home = dir.scratch("home");
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(wasmclaw_bin())
        .env("WASMCLAW_HOME", &home)
        .env("WASMCLAW_API_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .env_remove("WASMCLAW_MODEL")
        .args(["--plugins", dir.path().to_str().unwrap(), "serve"])
        .args(["--listen", "127.0.0.1:0", "--model", "openai:m"])
        .args(["--base-url", &fake.openai_base_url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = tokio::time::timeout(LIMIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("the server says where it serves");
        if let Some(url) = line.strip_prefix("wasmclaw serving on ") {
            break url.to_string();
        }
    };
    let ask = |session: &str, content: &str| {
        let url = format!("{url}/v1/sessions/{session}/messages?wait=true");
        let body = json!({ "content": content });
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(TOKEN)
                .json(&body)
                .timeout(LIMIT)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };

    let hog = tokio::spawn(ask("hog", "hog"));
    // The guest writes `full` into its first file once an open has failed
    // and it holds all the others.
    let full = || std::fs::read_to_string(data.join("f0")).is_ok_and(|s| s.starts_with("full"));
    assert!(
        eventually(LIMIT, full).await,
        "the hoarding call never filled up"
    );
    let other = ask("other", "other").await;
    assert_eq!(other["status"], "completed", "{other}");
    assert_eq!(other["answer"], "other is done");

    std::fs::write(data.join("release"), "").unwrap();
    let hog = hog.await.unwrap();
    // 128 descriptors for plugins (half of 256), one of them the call's
    // granted directory.
    assert_eq!(
        tool_result(&fake, "hog"),
        format!("opened 127 files; the next open failed: {QUOTA}")
    );
    assert_eq!(hog["answer"], "hog is done");

    child.start_kill().unwrap();
    let _ = child.wait().await;
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .await
        .unwrap();
    assert!(
        log.contains("plugin 'hostile' could not open \"f127\": plugin calls hold 128 open descriptors, the host's limit (half of its open-file limit); try again shortly"),
        "{log}"
    );
}

/// The tool result the model was shown in the session whose user said
/// `user`.
fn tool_result(fake: &wasmclaw_tests::fake_model::FakeModel, user: &str) -> String {
    fake.requests()
        .iter()
        .filter_map(|r| {
            let messages = r.body["messages"].as_array()?;
            let said = messages
                .iter()
                .any(|m| m["role"] == "user" && m["content"] == user);
            let result = messages.iter().find(|m| m["role"] == "tool")?;
            said.then(|| result["content"].as_str().unwrap().to_string())
        })
        .next()
        .unwrap_or_else(|| panic!("no tool result for {user}"))
}
