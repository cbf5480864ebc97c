//! `wasmclaw chat` while a turn runs: a typed line steers it, Ctrl-C once
//! winds it down, twice stops it. The binary runs as a user runs it, with
//! real signals, against the fake model.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::gate::{ToolGates, gate_args};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(30);

/// `wasmclaw chat --live` with echo and hostile loaded, talking to `fake`.
struct Chat {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every line read so far.
    seen: Vec<String>,
    /// The gates hostile's `wait_gate` calls wait at.
    gates: ToolGates,
    _dir: PluginDir,
}

impl Chat {
    async fn start(fake: &FakeModel) -> Chat {
        let dir = PluginDir::new();
        let gates = ToolGates::new();
        dir.add("echo");
        dir.add("hostile");
        dir.grants(
            "hostile",
            &format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants()),
        );
        let url = fake.openai_base_url();
        let plugins = dir.path();
        let home = dir.scratch("home");
        // Retry waits without jitter: a test reads them.
        std::fs::write(home.join("wasmclaw.toml"), "[limits.retry]\njitter = 0\n").unwrap();
        let mut child = tokio::process::Command::new(wasmclaw_bin())
            .env("WASMCLAW_HOME", &home)
            .env("RUST_LOG", "error")
            .env_remove("WASMCLAW_MODEL")
            .args(["--plugins", plugins.to_str().unwrap(), "chat", "--live"])
            .args(["--model", "openai:m", "--base-url", &url, "--session", "c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Chat {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
            seen: Vec::new(),
            gates,
            _dir: dir,
        }
    }

    async fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Reads lines until one contains `text`.
    async fn wait_for(&mut self, text: &str) {
        loop {
            let line = tokio::time::timeout(LIMIT, self.stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("no line with {text:?} in {:#?}", self.seen))
                .unwrap()
                .unwrap_or_else(|| panic!("output ended before {text:?}: {:#?}", self.seen));
            let found = line.contains(text);
            self.seen.push(line);
            if found {
                return;
            }
        }
    }

    /// Waits for the prompt that says the turns have ended (it ends no
    /// line: it is left for the line read next).
    async fn wait_for_prompt(&mut self) {
        use tokio::io::AsyncBufReadExt;
        let next = tokio::time::timeout(LIMIT, self.stdout.get_mut().fill_buf())
            .await
            .unwrap_or_else(|_| panic!("no prompt after {:#?}", self.seen))
            .unwrap();
        assert!(
            next.starts_with(b"> "),
            "{:?}",
            String::from_utf8_lossy(next)
        );
    }

    fn ctrl_c(&self) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Closes the input; the chat ends once the turn has; (exit code, the
    /// lines after the header, durations shown as T).
    async fn finish(mut self) -> (i32, Vec<String>) {
        drop(self.stdin.take());
        while let Some(line) = tokio::time::timeout(LIMIT, self.stdout.next_line())
            .await
            .expect("the chat ended")
            .unwrap()
        {
            self.seen.push(line);
        }
        let status = tokio::time::timeout(LIMIT, self.child.wait())
            .await
            .unwrap()
            .unwrap();
        let lines = self.seen[3..]
            .iter()
            .map(|l| match (l.find(" ("), l.find(" ms)")) {
                (Some(a), Some(b)) if a < b => format!("{} (T ms){}", &l[..a], &l[b + 4..]),
                _ => l.clone(),
            })
            .collect();
        (status.code().unwrap_or(-1), lines)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn typing_while_a_turn_runs_steers_it() {
    let fake = FakeModel::start([
        Reply::tool("c1", "wait_gate", gate_args("nap")),
        Reply::text("Understood."),
    ])
    .await;
    let mut chat = Chat::start(&fake).await;
    chat.type_line("take a nap").await;
    chat.wait_for("⚙ wait_gate").await;
    // The tool runs until the line has been taken as steering.
    chat.type_line("keep it short").await;
    chat.wait_for("[steering:").await;
    chat.gates.open("nap");
    chat.wait_for("Understood.").await;
    let (code, lines) = chat.finish().await;
    assert_eq!(code, 0);
    assert_eq!(
        lines,
        [
            ">   ⚙ wait_gate {\"name\":\"nap\"}",
            "  [steering: taken in before the next model call]",
            "  ✓ wait_gate (T ms): gate nap opened",
            "  [taken in: keep it short]",
            "Understood.",
            "> ",
        ]
    );
    let second = &fake.requests()[1].body["messages"];
    assert_eq!(
        second.as_array().unwrap().last().unwrap()["content"],
        "keep it short"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_once_lets_the_tool_finish_and_asks_for_a_last_answer() {
    let fake = FakeModel::start([
        Reply::tool("c1", "wait_gate", gate_args("nap")),
        Reply::text("Stopped early."),
    ])
    .await;
    let mut chat = Chat::start(&fake).await;
    chat.type_line("take a nap").await;
    chat.wait_for("⚙ wait_gate").await;
    // The tool runs until the interrupt has been taken.
    chat.ctrl_c();
    chat.wait_for("[interrupting").await;
    chat.gates.open("nap");
    chat.wait_for("[turn ended early").await;
    let (code, lines) = chat.finish().await;
    assert_eq!(code, 0);
    assert_eq!(
        lines,
        [
            ">   ⚙ wait_gate {\"name\":\"nap\"}",
            "  [interrupting: running tools finish, then a last answer; Ctrl-C again stops at once]",
            "  ✓ wait_gate (T ms): gate nap opened",
            "Stopped early.",
            "[turn ended early: interrupted]",
            "> ",
        ]
    );
    assert_eq!(fake.requests()[1].body["tool_choice"], "none");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_twice_stops_a_spinning_plugin_and_the_chat_goes_on() {
    let fake = FakeModel::start([
        Reply::tool("c1", "spin", json!({})),
        Reply::text("Hello again."),
    ])
    .await;
    let mut chat = Chat::start(&fake).await;
    chat.type_line("spin forever").await;
    chat.wait_for("⚙ spin").await;
    chat.ctrl_c();
    chat.wait_for("[interrupting").await;
    chat.ctrl_c();
    chat.wait_for("[turn aborted").await;
    // Typed before the session is idle, the line would queue as a follow-up.
    chat.wait_for_prompt().await;
    chat.type_line("hello").await;
    chat.wait_for("Hello again.").await;
    let (code, lines) = chat.finish().await;
    assert_eq!(code, 0);
    assert_eq!(
        lines,
        [
            ">   ⚙ spin {}",
            "  [interrupting: running tools finish, then a last answer; Ctrl-C again stops at once]",
            "  [stopping]",
            "  ✗ spin (T ms): error (cancelled): the turn was aborted while the call ran",
            "[turn aborted: interrupted]",
            "> Hello again.",
            "> ",
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_text_of_a_reply_cut_and_retried_is_marked_void() {
    let fox = "The quick brown fox jumps over the lazy dog.";
    let fake = FakeModel::start([Reply::CutMidStream, Reply::text(fox)]).await;
    let mut chat = Chat::start(&fake).await;
    chat.type_line("the fox?").await;
    chat.wait_for(fox).await;
    let (code, lines) = chat.finish().await;
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert_eq!(
        [&lines[0], &lines[1], &lines[3], &lines[4]],
        [
            "> This reply is cut off be",
            "  [↑ void: that reply failed; the text above is not the answer]",
            fox,
            "> "
        ]
    );
    assert!(
        lines[2].starts_with("  [openai:m: the connection was cut mid-stream: ")
            && lines[2].ends_with("; trying openai:m in 500 ms]"),
        "{}",
        lines[2]
    );
}
