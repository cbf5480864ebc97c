//! Every call runs in a fresh instance with its limits and only its grants;
//! a plugin that breaks a limit gets an error and the host carries on.

use std::time::{Duration, Instant};

use serde_json::Value;
use wasmclaw::plugin::{ErrorKind, Plugins, ToolError};
use wasmclaw_tests::{PluginDir, ctx};

/// echo plus hostile (with `grants`), loaded.
async fn hostile(grants: &str) -> (PluginDir, std::sync::Arc<Plugins>) {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("hostile");
    dir.grants("hostile", grants);
    let plugins = dir.load().await;
    assert!(
        plugins.catalog().tool("spin").is_some(),
        "hostile did not load"
    );
    (dir, plugins)
}

fn internal(message: &str) -> ToolError {
    ToolError::new(ErrorKind::Internal, message)
}

/// The host still serves a good plugin.
async fn echo_still_works(plugins: &Plugins) {
    let out = plugins.call(&ctx(), "echo", r#"{"text":"ok"}"#).await;
    assert_eq!(out, Ok("ok".to_string()));
}

/// A guest computing forever is stopped by the epoch check; one waiting
/// forever inside a host call (a WASI sleep) by dropping the call.
#[tokio::test(flavor = "multi_thread")]
async fn a_runaway_call_is_stopped_at_its_time_limit() {
    let (_dir, plugins) = hostile("[limits]\ntimeout_ms = 300\n").await;
    for (tool, args) in [("spin", "{}"), ("sleep", r#"{"ms":60000}"#)] {
        let started = Instant::now();
        let err = plugins.call(&ctx(), tool, args).await.unwrap_err();
        assert_eq!(
            err,
            ToolError::new(
                ErrorKind::Timeout,
                "plugin 'hostile' did not finish within its time limit of 300 ms and was stopped"
            ),
            "{tool}"
        );
        // Generous bound: this checks the call was stopped, not a latency target.
        assert!(started.elapsed() < Duration::from_secs(10), "{tool}");
        echo_still_works(&plugins).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outer_deadline_shortens_the_call() {
    let (_dir, plugins) = hostile("").await;
    let mut context = ctx();
    context.deadline = Some(Instant::now() + Duration::from_millis(200));
    let err = plugins.call(&context, "spin", "{}").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    // The turn's deadline, not the plugin's 30 s, bounded the call.
    let ms: u64 = err
        .message
        .strip_prefix("plugin 'hostile' did not finish before its turn's deadline (")
        .and_then(|rest| rest.strip_suffix(" ms) and was stopped"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", err.message));
    assert!((100..=200).contains(&ms), "{ms}");
}

#[tokio::test(flavor = "multi_thread")]
async fn allocating_a_gib_breaks_the_memory_limit() {
    let (_dir, plugins) = hostile("").await;
    let err = plugins
        .call(&ctx(), "alloc", r#"{"mib":1024}"#)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        internal("plugin 'hostile' exceeded its memory limit of 64 MiB and was stopped")
    );
    // Within the limit the same tool works.
    let ok = plugins.call(&ctx(), "alloc", r#"{"mib":8}"#).await;
    assert_eq!(ok, Ok((8 << 20).to_string()));
    echo_still_works(&plugins).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_100_mib_result_breaks_the_output_limit() {
    let (_dir, plugins) = hostile("[limits]\nmemory_mib = 512\n").await;
    let err = plugins
        .call(&ctx(), "huge_output", r#"{"mib":100}"#)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        internal("plugin 'hostile' returned 100 MiB, over its output limit of 1 MiB")
    );
    echo_still_works(&plugins).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_is_a_crash_report_with_the_guests_last_words() {
    let (_dir, plugins) = hostile("").await;
    let err = plugins.call(&ctx(), "trap", "{}").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.starts_with(
            "plugin 'hostile' crashed (wasm `unreachable` instruction executed); its stderr ended with: thread '<unnamed>' (1) panicked at hostile/src/lib.rs:"
        ),
        "{}",
        err.message
    );
    // The panic's message ends it: the backtrace hint after it is left out.
    assert!(
        err.message.ends_with(" / deliberate panic"),
        "{}",
        err.message
    );
    echo_still_works(&plugins).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_grants_there_is_no_filesystem_and_no_environment() {
    let (_dir, plugins) = hostile("").await;
    let err = plugins
        .call(&ctx(), "read_path", r#"{"path":"/etc/passwd"}"#)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::new(
            ErrorKind::NotFound,
            "/etc/passwd: No such file or directory (os error 44)"
        )
    );
    let err = plugins
        .call(&ctx(), "read_env", r#"{"name":"PATH"}"#)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::new(ErrorKind::NotFound, "PATH is not set"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_directory_is_reachable_and_nothing_above_it() {
    let dir = PluginDir::new();
    let data = dir.scratch("data");
    let ro = dir.scratch("ro");
    std::fs::write(data.join("inside.txt"), "inside").unwrap();
    std::fs::write(dir.scratch("secret").join("s.txt"), "secret").unwrap();
    dir.add("hostile");
    dir.grants(
        "hostile",
        "env = [\"PATH\"]\n\
         [[dirs]]\nhost = \"../data\"\nguest = \"/data\"\nmode = \"read-write\"\n\
         [[dirs]]\nhost = \"../ro\"\nguest = \"/ro\"\nmode = \"read-only\"\n",
    );
    let plugins = dir.load().await;
    let call = |tool: &'static str, args: Value| {
        let plugins = plugins.clone();
        async move { plugins.call(&ctx(), tool, &args.to_string()).await }
    };

    assert_eq!(
        call("read_path", serde_json::json!({"path": "/data/inside.txt"})).await,
        Ok("inside".to_string())
    );
    assert_eq!(
        call(
            "write_path",
            serde_json::json!({"path": "/data/new.txt", "content": "hello"})
        )
        .await,
        Ok("wrote 5 bytes".to_string())
    );
    assert_eq!(
        std::fs::read_to_string(data.join("new.txt")).unwrap(),
        "hello"
    );

    // `..` cannot leave the granted root, whichever way it is spelled.
    // Nor can a symlink inside it that points out.
    std::os::unix::fs::symlink(dir.scratch("secret"), data.join("link")).unwrap();
    for path in [
        "/data/../secret/s.txt",
        "/data/../../etc/passwd",
        "/data/link/s.txt",
    ] {
        let err = call("read_path", serde_json::json!({ "path": path }))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Denied, "{path}: {err}");
        assert!(err.message.starts_with(&format!("{path}: ")), "{err}");
    }
    let err = call("read_path", serde_json::json!({"path": "/etc/passwd"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);

    // Read-only means read-only.
    let err = call(
        "write_path",
        serde_json::json!({"path": "/ro/x.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Denied, "{err}");
    assert!(!ro.join("x.txt").exists());

    // A granted variable is passed through; others are not.
    assert_eq!(
        call("read_env", serde_json::json!({"name": "PATH"})).await,
        Ok(std::env::var("PATH").unwrap())
    );
    assert_eq!(
        call("read_env", serde_json::json!({"name": "HOME"})).await,
        Err(ToolError::new(ErrorKind::NotFound, "HOME is not set"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_million_log_lines_break_the_log_limit() {
    let (_dir, plugins) = hostile("").await;
    let expected =
        internal("plugin 'hostile' exceeded its limit of 1000 log lines per call and was stopped");
    for tool in ["log_flood", "print_flood"] {
        let err = plugins
            .call(&ctx(), tool, r#"{"lines":1000000}"#)
            .await
            .unwrap_err();
        assert_eq!(err, expected, "{tool}");
    }
    // Within the limit, logging is fine.
    let ok = plugins.call(&ctx(), "log_flood", r#"{"lines":1000}"#).await;
    assert_eq!(ok, Ok("done".to_string()));
    echo_still_works(&plugins).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_validated_before_the_plugin_runs() {
    let (_dir, plugins) = hostile("").await;
    // The guest would have said "`a` must be ..."; the host answers first.
    let err = plugins
        .call(&ctx(), "add", r#"{"a":"two","b":2}"#)
        .await
        .unwrap_err();
    // ... and says what the schema expects.
    let expected = r#"expected {"a": integer, "b": integer} (required: a, b; no other properties)"#;
    assert_eq!(
        err,
        ToolError::new(
            ErrorKind::InvalidInput,
            format!(r#"invalid arguments for add: /a: "two" is not of type "integer"; {expected}"#)
        )
    );
    let err = plugins.call(&ctx(), "add", "[1,2]").await.unwrap_err();
    assert_eq!(
        err.message,
        format!(r#"invalid arguments for add: [1,2] is not of type "object"; {expected}"#)
    );
    let err = plugins.call(&ctx(), "nope", "{}").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.starts_with(
        "unknown tool \"nope\"; available tools: add, alloc, context, count, echo, fail,"
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plugins_own_errors_and_the_call_context_reach_the_caller() {
    let (_dir, plugins) = hostile("").await;
    let err = plugins
        .call(
            &ctx(),
            "fail",
            r#"{"kind":"upstream","message":"the API is down"}"#,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError {
            kind: ErrorKind::Upstream,
            message: "the API is down".into(),
            retryable: true
        }
    );

    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut context = ctx();
    context.parent_turn_id = Some("turn-0".into());
    context.depth = 1;
    let out = plugins.call(&context, "context", "{}").await.unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["session_key"], "test-session");
    assert_eq!(v["turn_id"], "turn-1");
    assert_eq!(v["parent_turn_id"], "turn-0");
    assert_eq!(v["depth"], 1);
    assert_eq!(v["call_id"], "call-1");
    // The default time limit is 30 s.
    let deadline = v["deadline_ms"].as_u64().unwrap();
    assert!(
        (before + 29_000..=before + 31_000).contains(&deadline),
        "{deadline} vs {before}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_calls_never_share_an_instance() {
    let (_dir, plugins) = hostile("[limits]\ntimeout_ms = 500\n").await;
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..200i64 {
        let plugins = plugins.clone();
        calls.spawn(async move {
            if i % 20 == 0 {
                // Runaway calls in the mix must not hold up the others.
                let err = plugins.call(&ctx(), "spin", "{}").await.unwrap_err();
                (i, Err(err.kind))
            } else {
                // State in a fresh instance starts over: the count is 1.
                assert_eq!(plugins.call(&ctx(), "count", "{}").await.unwrap(), "1");
                let args = format!(r#"{{"a":{i},"b":{}}}"#, i * 2);
                (i, Ok(plugins.call(&ctx(), "add", &args).await.unwrap()))
            }
        });
    }
    let results = tokio::time::timeout(Duration::from_secs(60), calls.join_all())
        .await
        .expect("200 concurrent calls finished");
    assert_eq!(results.len(), 200);
    for (i, result) in results {
        if i % 20 == 0 {
            assert_eq!(result, Err(ErrorKind::Timeout));
        } else {
            assert_eq!(result, Ok((i * 3).to_string()));
        }
    }
}
