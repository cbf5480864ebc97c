//! `wasmclaw run` as scripts and people use it: the prompt as an argument or
//! on stdin, the answer streamed as it comes, events as JSON lines on their
//! own stream, no colour in pipes, each error said once.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt;
use wasmclaw_tests::fake_model::{FakeModel, Gate, Reply};
use wasmclaw_tests::{PluginDir, json_lines, kinds_but_deltas, run_wasmclaw, wasmclaw_command};

const LIMIT: Duration = Duration::from_secs(30);

/// A home whose model calls are retried at once, without jitter.
fn quick_retries(dir: &PluginDir) -> std::path::PathBuf {
    let home = dir.scratch("home");
    let file = "[limits.retry]\njitter = 0\nbackoff_ms = 10\n";
    std::fs::write(home.join("wasmclaw.toml"), file).unwrap();
    home
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prompt_is_an_argument_or_all_of_stdin_and_not_both() {
    let fake = FakeModel::start([Reply::text("one"), Reply::text("two")]).await;
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let url = fake.openai_base_url();
    let model = ["--model", "openai:m", "--base-url", url.as_str()];
    let args = [&["run"][..], &model, &["what is", "-v"]].concat();
    // `-v` after the prompt is a flag, and a prompt with a space is one word.
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "").await;
    assert_eq!((code, out.as_str()), (0, "one\n"), "{err}");
    assert_eq!(fake.user_messages(), ["what is"]);

    let args = [&["run"][..], &model].concat();
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "first line\nsecond\n").await;
    assert_eq!((code, out.as_str()), (0, "two\n"), "{err}");
    assert_eq!(fake.user_messages()[1], "first line\nsecond");

    let args = [&["run"][..], &model, &["-m", "a", "b"]].concat();
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "").await;
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.starts_with("error: the argument '") && err.contains("' cannot be used with '"),
        "{err}"
    );

    let (code, _, err) = run_wasmclaw(&home, &[], &args[..5], "\n").await;
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "error: no prompt: stdin was empty; pass the prompt on stdin, as an argument or with -m\n"
        )
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_answer_streams_to_stdout_before_the_turn_ends() {
    let fox = "The quick brown fox jumps over the lazy dog.";
    let gate = Gate::default();
    let fake = FakeModel::start([Reply::PauseMidStream(gate.clone(), fox.into())]).await;
    let dir = PluginDir::new();
    let url = fake.openai_base_url();
    let args = ["run", "--model", "openai:m", "--base-url", &url, "the fox?"];
    let mut child = wasmclaw_command(&dir.scratch("home"), &[], &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    // The model sent two thirds of its reply and waits at the gate.
    let first = "The quick brown fox jumps ove";
    while seen.len() < first.len() {
        let n = tokio::time::timeout(LIMIT, stdout.read(&mut buf))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no streamed text; seen {:?}",
                    String::from_utf8_lossy(&seen)
                )
            })
            .unwrap();
        assert!(n > 0, "stdout ended: {:?}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&seen), first);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the turn is still running"
    );
    gate.open();
    tokio::time::timeout(LIMIT, stdout.read_to_end(&mut seen))
        .await
        .unwrap()
        .unwrap();
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .await
        .unwrap();
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));
    assert_eq!(String::from_utf8(seen).unwrap(), format!("{fox}\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_cut_and_retried_is_said_void_on_stderr_and_no_stream_prints_only_the_answer() {
    let fox = "The quick brown fox jumps over the lazy dog.";
    let fake = FakeModel::start([
        Reply::CutMidStream,
        Reply::text(fox),
        Reply::CutMidStream,
        Reply::text(fox),
    ])
    .await;
    let dir = PluginDir::new();
    let home = quick_retries(&dir);
    let url = fake.openai_base_url();
    let args = ["run", "--model", "openai:m", "--base-url", &url, "the fox?"];
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("This reply is cut off be\n{fox}\n"));
    assert_eq!(
        err,
        "↑ void: that reply failed and is asked again; the text above is not the answer\n"
    );

    let args = [
        "run",
        "--no-stream",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "the fox?",
    ];
    let (code, out, err) = run_wasmclaw(&home, &[], &args, "").await;
    assert_eq!((code, out, err), (0, format!("{fox}\n"), String::new()));
}

#[tokio::test(flavor = "multi_thread")]
async fn events_on_stdout_are_json_lines_only_and_logs_stay_on_stderr() {
    let fake = FakeModel::start([Reply::text("Hello.")]).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "-v",
        "run",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--events",
        "-",
        "hi",
    ];
    // Info logs, so there are log lines to keep apart.
    let env = [("RUST_LOG", "info")];
    let (code, out, err) = run_wasmclaw(&dir.scratch("home"), &env, &args, "").await;
    assert_eq!(code, 0, "{err}");
    let events = json_lines(&out);
    assert_eq!(
        kinds_but_deltas(&events),
        [
            "plugin_loaded",
            "turn_begin",
            "llm_request",
            "llm_response",
            "turn_end"
        ]
    );
    assert_eq!(events.last().unwrap()["answer"], "Hello.");
    assert!(err.contains("INFO running one turn"), "{err}");
    assert!(!err.contains("\"type\""), "{err}");
}

/// Escape sequences (colour or cursor codes) in `text`.
fn escape_codes(text: &str) -> usize {
    text.matches("\x1b[").count()
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_output_of_run_and_chat_has_no_colour() {
    let fake =
        FakeModel::start([Reply::text("Hello."), Reply::text("Hi."), Reply::text("x")]).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let home = dir.scratch("home");
    let env = [("RUST_LOG", "info")];
    for (command, input) in [("run", "hi"), ("chat", "hi\nhello\n")] {
        let args = [
            "--plugins",
            plugins.to_str().unwrap(),
            command,
            "--model",
            "openai:m",
            "--base-url",
            &url,
        ];
        let (code, out, err) = run_wasmclaw(&home, &env, &args, input).await;
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(" INFO "), "{command}: logs are written: {err}");
        assert_eq!(
            (escape_codes(&out), escape_codes(&err)),
            (0, 0),
            "{command}: {out}{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_turn_is_said_once() {
    let status = |_: &Value| Reply::Status {
        code: 500,
        message: "overloaded".into(),
        retry_after: None,
    };
    let options = wasmclaw_tests::fake_model::Options {
        responder: Some(wasmclaw_tests::fake_model::Responder::new(status)),
        ..Default::default()
    };
    let fake = FakeModel::start_with(options, []).await;
    let dir = PluginDir::new();
    let home = quick_retries(&dir);
    let url = fake.openai_base_url();
    let args = ["run", "--model", "openai:m", "--base-url", &url, "hi"];
    // The default log level: warnings shown.
    let env = [("RUST_LOG", "warn,plugin=info")];
    let (code, out, err) = run_wasmclaw(&home, &env, &args, "").await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        "error: the turn ended error: openai:m: HTTP 500 Internal Server Error: overloaded (after 3 attempts)\n"
    );
}
