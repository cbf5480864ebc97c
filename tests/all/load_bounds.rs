//! Loading is bounded: a plugin's input schemas, its file's size (checked
//! before it is read), the compiler process's time and memory; and `serve`
//! answers while plugins load.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use wasmclaw::plugin::sandbox::cache::LoadLimits;
use wasmclaw::plugin::units::size;
use wasmclaw::plugin::{PluginStatus, Plugins, Runtime, RuntimeConfig};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder};
use wasmclaw_tests::{PluginDir, load_error, split_progress, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_over_the_limit_is_refused_naming_the_plugin_tool_and_limit() {
    let dir = PluginDir::new();
    let file = dir.add("big_schema");
    dir.add("echo");
    let plugins = dir.load().await;
    let catalog = plugins.catalog();
    let PluginStatus::Failed { name, file: at, .. } = &catalog.plugins[0] else {
        panic!("big_schema loaded");
    };
    assert_eq!((name.as_str(), at), ("big_schema", &file));
    assert_eq!(
        load_error(&plugins, "big_schema"),
        "tool \"big_schema_tool\": input-schema is 4194338 bytes, over the limit of 64 KiB per tool"
    );
    // The model is not offered it; the other plugin loads.
    assert!(catalog.tool("big_schema_tool").is_none());
    assert!(catalog.tool("echo").is_some());
}

/// A runtime whose largest plugin file is `max` bytes.
fn runtime_with_max_file(max: u64) -> Runtime {
    Runtime::new(RuntimeConfig {
        load: LoadLimits {
            max_file_bytes: max,
            ..LoadLimits::default()
        },
        ..RuntimeConfig::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_file_over_the_size_limit_is_refused_before_it_is_read() {
    let dir = PluginDir::new();
    let echo = dir.add("echo");
    let echo_len = std::fs::metadata(&echo).unwrap().len();
    // A sparse file of 3 GiB that starts like a component: refused from
    // its size alone (reading it would take 3 GiB of memory).
    let huge = std::fs::File::create(dir.path().join("huge.wasm")).unwrap();
    (&huge).write_all(b"\0asm\x0d\0\x01\0").unwrap();
    huge.set_len(3 << 30).unwrap();
    let plugins = Plugins::load_dir(runtime_with_max_file(echo_len), dir.path()).await;
    assert_eq!(
        load_error(&plugins, "huge"),
        format!(
            "the file is 3072 MiB, over the limit of {} for a plugin file (--max-plugin-mib)",
            size(echo_len)
        )
    );
    // At the limit it loads; one byte over, it is refused.
    assert!(plugins.catalog().tool("echo").is_some());
    let plugins = Plugins::load_dir(runtime_with_max_file(echo_len - 1), dir.path()).await;
    assert_eq!(
        load_error(&plugins, "echo"),
        format!(
            "the file is {}, over the limit of {} for a plugin file (--max-plugin-mib)",
            size(echo_len),
            size(echo_len - 1)
        )
    );
    // Under the limit, its header is read before the rest.
    let fake = dir.write("zeros.wasm", b"");
    std::fs::File::options()
        .write(true)
        .open(&fake)
        .unwrap()
        .set_len(echo_len - 8)
        .unwrap();
    let plugins = Plugins::load_dir(runtime_with_max_file(echo_len), dir.path()).await;
    assert_eq!(
        load_error(&plugins, "zeros"),
        r"not a WebAssembly file (it does not start with the \0asm magic bytes)"
    );
}

/// `wasmclaw ARGS` with a fresh home: (exit code, stderr).
fn wasmclaw(home: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_compiler_process_is_stopped_past_its_time_and_memory_limits() {
    let dir = PluginDir::new();
    let echo = dir.add("echo");
    let file = echo.to_str().unwrap();
    let (code, err) = wasmclaw(
        &dir.scratch("home1"),
        &["--compile-timeout", "0.001", "plugins", "check", file],
    );
    assert_eq!(
        (code, err),
        (
            1,
            format!(
                "compiling echo.wasm ... failed\n{file}: cannot be compiled: compiling it took longer than the compiler's time limit of 1 ms (--compile-timeout), and the compiler was stopped\n"
            )
        )
    );
    let (code, err) = wasmclaw(
        &dir.scratch("home2"),
        &["--compile-memory-mib", "8", "plugins", "check", file],
    );
    assert_eq!(
        (code, err),
        (
            1,
            format!(
                "compiling echo.wasm ... failed\n{file}: cannot be compiled: compiling it needed more memory than the compiler's limit of 8 MiB (--compile-memory-mib)\n"
            )
        )
    );
    // Nothing half-written is left in the cache; within the defaults it
    // compiles.
    let cache = dir.scratch("home2").join("cache");
    let left: Vec<_> = std::fs::read_dir(&cache)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let (code, err) = wasmclaw(&dir.scratch("home2"), &["plugins", "check", file]);
    assert_eq!(
        (code, split_progress(&err)),
        (0, (vec!["echo.wasm".to_string()], String::new()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_while_plugins_load_and_turns_wait_for_them() {
    // The model answers with the tools it was offered.
    let responder = Responder::new(|body: &Value| {
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        Reply::text(tools.join(","))
    });
    let options = Options {
        responder: Some(responder),
        ..Options::default()
    };
    let fake = FakeModel::start_with(options, []).await;
    let dir = PluginDir::new();
    dir.add("echo");
    // The gate: echo's grants file is a pipe, so loading echo waits until
    // the test writes it.
    let grants = dir.path().join("echo.toml");
    let made = Command::new("mkfifo").arg(&grants).status().unwrap();
    assert!(made.success());
    let home = dir.scratch("home");
    // Killed on drop: a failing assertion never leaves it (and the reader of
    // its stdout) running.
    let mut child = tokio::process::Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", &home)
        .env("RUST_LOG", "error")
        .env("WASMCLAW_API_TOKEN", "t")
        .args(["--plugins", dir.path().to_str().unwrap(), "serve"])
        .args(["--listen", "127.0.0.1:0", "--model", "openai:m"])
        .args(["--base-url", &fake.openai_base_url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(LIMIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("wasmclaw serving on ") {
                return Some(url.to_string());
            }
        }
        None
    })
    .await
    .expect("serve listens while plugins load")
    .expect("the server says where it serves");
    let client = reqwest::Client::new();
    let health: Value = client
        .get(format!("{url}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&health["status"], &health["plugins"]),
        (&json!("ok"), &json!("loading"))
    );

    // A turn sent now waits for the plugins, then is offered their tools.
    let ask = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move {
            client
                .post(format!("{url}/v1/sessions/s/messages?wait=true"))
                .bearer_auth("t")
                .json(&json!({"content": "which tools?"}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    open_gate(&grants).await;
    let answer = tokio::time::timeout(LIMIT, ask).await.unwrap().unwrap();
    assert_eq!(
        answer["answer"],
        "add,context,count,echo,fail,log,subagent,spawn,history_search"
    );
    let health: Value = client
        .get(format!("{url}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["plugins"], "loaded");
    // And listed as loaded.
    let listed: Value = client
        .get(format!("{url}/v1/plugins"))
        .bearer_auth("t")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["plugins"][0]["status"], "ok");
    child.kill().await.unwrap();
}

/// Opens the pipe `gate` for writing and closes it, which lets its reader
/// (the loader, reading the grants file) go on. Opened without blocking and
/// tried again until the reader is there, so a server that never reads it
/// fails the test after [`LIMIT`] instead of hanging it.
async fn open_gate(gate: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(gate);
        match opened {
            Ok(_) => return,
            // ENXIO: nobody has the pipe open for reading yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the loader never opened {}",
                    gate.display()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{}: {e}", gate.display()),
        }
    }
}
