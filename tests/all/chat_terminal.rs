//! `wasmclaw chat` (and `run`) on a real terminal, a pty driven as a person
//! types: line editing, the history in the home, Ctrl-C and Ctrl-D, colour.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rexpect::process::WaitStatus;
use rexpect::session::{Options, PtySession, spawn_with_options};
use serde_json::json;
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::gate::{ToolGates, gate_args};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

const LIMIT_MS: u64 = 30_000;
const LEFT: &str = "\x1b[D";
const UP: &str = "\x1b[A";
const BACKSPACE: &str = "\x7f";

/// `wasmclaw ARGS` on a pty, with `home` and `env`, talking to `fake`.
fn spawn(home: &Path, env: &[(&str, &str)], args: &[&str]) -> PtySession {
    let mut command = Command::new(wasmclaw_bin());
    command
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("WASMCLAW_MODEL")
        .env_remove("WASMCLAW_CONFIG")
        .envs(env.iter().copied())
        .args(args);
    let options = Options::default().timeout_ms(Some(LIMIT_MS));
    spawn_with_options(command, options).expect("a pty")
}

fn chat_args<'a>(plugins: &'a str, url: &'a str, session: &'a str) -> Vec<&'a str> {
    vec![
        "--plugins",
        plugins,
        "chat",
        "--model",
        "openai:m",
        "--base-url",
        url,
        "--session",
        session,
    ]
}

/// Types `text` (rexpect buffers it until a flush).
fn keys(chat: &mut PtySession, text: &str) {
    chat.send(text).unwrap();
    chat.flush().unwrap();
}

/// Waits for the chat's end; its exit code and all it printed since.
fn ended(mut chat: PtySession) -> (i32, String) {
    let rest = chat.exp_eof().expect("the chat ended");
    let code = match chat.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => code,
        other => panic!("{other:?}"),
    };
    (code, rest)
}

/// A chat with hostile loaded, whose first message ("take a nap") has the
/// model call `wait_gate`: returned once the call waits at gate `nap`.
async fn napping(fake: &FakeModel) -> (PtySession, ToolGates, PluginDir) {
    let dir = PluginDir::new();
    let gates = ToolGates::new();
    dir.add("hostile");
    let grants = format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants());
    dir.grants("hostile", &grants);
    let home = dir.scratch("home");
    let (plugins, url) = (dir.path().display().to_string(), fake.openai_base_url());
    let chat = blocking(move || {
        let mut chat = spawn(&home, &[], &chat_args(&plugins, &url, "nap"));
        chat.exp_string("> ").unwrap();
        keys(&mut chat, "take a nap\r");
        // rexpect reads bytes as Latin-1: ASCII text only.
        chat.exp_string("wait_gate {").unwrap();
        chat
    })
    .await;
    let limit = Duration::from_millis(LIMIT_MS);
    gates.wait_started("nap", limit).await;
    (chat, gates, dir)
}

/// SGR (colour) sequences in `text`: ESC [ digits and `;` then `m`.
fn colours(text: &str) -> usize {
    text.split("\x1b[")
        .skip(1)
        .filter(|rest| {
            let code = rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == ';');
            code.starts_with('m')
        })
        .count()
}

/// Runs `f` off the async runtime (rexpect blocks), within the limit.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let limit = Duration::from_millis(3 * LIMIT_MS);
    tokio::time::timeout(limit, tokio::task::spawn_blocking(f))
        .await
        .expect("in time")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_is_edited_before_it_is_sent_and_kept_in_the_history() {
    let fake = FakeModel::start([Reply::text("Done."), Reply::text("Again.")]).await;
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let (plugins, url) = (dir.path().display().to_string(), fake.openai_base_url());
    let (h, p, u) = (home.clone(), plugins.clone(), url.clone());
    let (code, _) = blocking(move || {
        let mut chat = spawn(&h, &[], &chat_args(&p, &u, "e1"));
        chat.exp_string("> ").unwrap();
        // "hellp", a backspace, "o", five steps left, "say ": "say hello".
        keys(
            &mut chat,
            &format!("hellp{BACKSPACE}o{}say \r", LEFT.repeat(5)),
        );
        chat.exp_string("Done.").unwrap();
        chat.send_control('d').unwrap();
        ended(chat)
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(fake.user_messages(), ["say hello"]);
    let history = std::fs::read_to_string(home.join("chat_history")).unwrap();
    assert_eq!(history.lines().last(), Some("say hello"), "{history}");

    // A later chat has it: up, then Enter, sends it again.
    let (code, _) = blocking(move || {
        let mut chat = spawn(&home, &[], &chat_args(&plugins, &url, "e2"));
        chat.exp_string("> ").unwrap();
        keys(&mut chat, &format!("{UP}\r"));
        chat.exp_string("Again.").unwrap();
        chat.send_control('d').unwrap();
        ended(chat)
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(fake.user_messages(), ["say hello", "say hello"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_at_the_prompt_ends_the_chat() {
    let fake = FakeModel::start([]).await;
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let (plugins, url) = (dir.path().display().to_string(), fake.openai_base_url());
    let (code, _) = blocking(move || {
        let mut chat = spawn(&home, &[], &chat_args(&plugins, &url, "c"));
        chat.exp_string("> ").unwrap();
        keys(&mut chat, "half a line");
        chat.exp_string("half a line").unwrap();
        chat.send_control('c').unwrap();
        ended(chat)
    })
    .await;
    assert_eq!(code, 0);
    assert!(fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_a_turn_winds_it_down_and_ctrl_d_then_ends_the_chat() {
    let fake = FakeModel::start([
        Reply::tool("c1", "wait_gate", gate_args("nap")),
        Reply::text("Stopped early."),
    ])
    .await;
    let (chat, gates, _dir) = napping(&fake).await;
    let mut chat = blocking(move || {
        let mut chat = chat;
        chat.send_control('c').unwrap();
        chat.exp_string("[interrupting: running tools finish")
            .unwrap();
        chat
    })
    .await;
    gates.open("nap");
    let (code, _) = blocking(move || {
        chat.exp_string("Stopped early.").unwrap();
        chat.exp_string("[turn ended early: interrupted]").unwrap();
        chat.send_control('d').unwrap();
        ended(chat)
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.requests()[1].body["tool_choice"], "none");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_typed_while_a_turn_runs_steers_it() {
    let fake = FakeModel::start([
        Reply::tool("c1", "wait_gate", gate_args("nap")),
        Reply::text("Understood."),
    ])
    .await;
    // The tool runs until the line has been taken as steering.
    let (chat, gates, _dir) = napping(&fake).await;
    let mut chat = blocking(move || {
        let mut chat = chat;
        keys(&mut chat, "keep it short\r");
        chat.exp_string("[steering: taken in before the next model call]")
            .unwrap();
        chat
    })
    .await;
    gates.open("nap");
    let (code, _) = blocking(move || {
        chat.exp_string("[taken in: keep it short]").unwrap();
        chat.exp_string("Understood.").unwrap();
        chat.send_control('d').unwrap();
        ended(chat)
    })
    .await;
    assert_eq!(code, 0);
    let second = &fake.requests()[1].body["messages"];
    assert_eq!(
        second.as_array().unwrap().last().unwrap()["content"],
        "keep it short"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn colour_on_a_terminal_and_none_with_no_color() {
    let dir = PluginDir::new();
    dir.add("echo");
    let plugins = dir.path().display().to_string();
    let mut seen = Vec::new();
    for no_color in [false, true] {
        let fake = FakeModel::start([
            Reply::tool("c1", "add", json!({"a": 2, "b": 3})),
            Reply::text("It is 5."),
        ])
        .await;
        let home = dir.scratch(&format!("home-{no_color}"));
        let (p, url) = (plugins.clone(), fake.openai_base_url());
        let (code, out) = blocking(move || {
            let env: &[(&str, &str)] = if no_color {
                &[("NO_COLOR", "1"), ("RUST_LOG", "info")]
            } else {
                &[("RUST_LOG", "info")]
            };
            let mut chat = spawn(&home, env, &chat_args(&p, &url, "n"));
            let mut out = chat.exp_string("> ").unwrap();
            keys(&mut chat, "add 2 and 3\r");
            out += &chat.exp_string("It is 5.").unwrap();
            chat.send_control('d').unwrap();
            let (code, rest) = ended(chat);
            (code, out + &rest)
        })
        .await;
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("add (") && out.contains("INFO"), "{out}");
        seen.push(colours(&out));
    }
    assert!(seen[0] > 0, "colour on a terminal: {seen:?}");
    assert_eq!(seen[1], 0, "none with NO_COLOR");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_on_a_terminal_without_a_prompt_says_how_to_pass_one() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let (code, out) = blocking(move || {
        let run = spawn(&home, &[], &["run", "--model", "openai:m"]);
        ended(run)
    })
    .await;
    assert_eq!(code, 1);
    assert_eq!(
        out.trim_end(),
        "error: no prompt: pass it as an argument (wasmclaw run \"...\"), with -m \"...\", or on stdin (echo ... | wasmclaw run)"
    );
}
