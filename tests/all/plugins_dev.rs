//! `wasmclaw plugins dev DIR` with a running `wasmclaw serve` on the same
//! home: the plugin folder `new-plugin` made is built and installed; an edit
//! of its source is rebuilt and installed, and the served tool's next call
//! returns the new output; a broken edit shows the compiler's error and
//! leaves the last good plugin serving; Ctrl-C ends it.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use wasmclaw_tests::fake_model::{FakeModel, Reply, fake_model};
use wasmclaw_tests::scaffold::{create, shared_toolchains};
use wasmclaw_tests::{eventually, wasmclaw_bin};

/// A cold shared target folder compiles wit-bindgen first.
const BUILD: Duration = Duration::from_secs(300);
const LIMIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "dev-token-0123456789";
const TOOL: &str = "my_dev_words";

/// The lines a child wrote on stdout and stderr, as they come.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn read(&self, from: impl AsyncRead + Unpin + Send + 'static) {
        let lines = self.0.clone();
        tokio::spawn(async move {
            let mut from = BufReader::new(from).lines();
            while let Ok(Some(line)) = from.next_line().await {
                lines.lock().unwrap().push(line);
            }
        });
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    fn count(&self, pred: impl Fn(&str) -> bool) -> usize {
        self.all().iter().filter(|l| pred(l)).count()
    }

    /// Waits until `n` lines match `pred`.
    async fn wait_for(&self, n: usize, limit: Duration, pred: impl Fn(&str) -> bool) {
        let seen = eventually(limit, || self.count(&pred) >= n).await;
        assert!(
            seen,
            "waited {limit:?} for line {n}; the output:\n{}",
            self.all().join("\n")
        );
    }
}

fn wasmclaw(home: &Path) -> Command {
    let mut command = Command::new(wasmclaw_bin());
    command
        .env("WASMCLAW_HOME", home)
        .env("WASMCLAW_API_TOKEN", TOKEN)
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .env_remove("WASMCLAW_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

fn spawn(mut command: Command, lines: &Lines) -> Child {
    let mut child = command.spawn().unwrap();
    lines.read(child.stdout.take().unwrap());
    lines.read(child.stderr.take().unwrap());
    child
}

/// One turn in a new session in which the model calls the tool once; the
/// tool's output as the model was given it.
async fn call_tool(url: &str, fake: &FakeModel, session: &str) -> Value {
    let reply: Value = reqwest::Client::new()
        .post(format!("{url}/v1/sessions/{session}/messages?wait=true"))
        .bearer_auth(TOKEN)
        .json(&json!({"content": "count"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["status"], "completed", "{reply}");
    let requests = fake.requests();
    let last = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool", "{last}");
    serde_json::from_str(last["content"].as_str().unwrap()).unwrap()
}

/// Replaces `from` with `to` in the plugin's source, which must contain it.
fn edit(src: &Path, from: &str, to: &str) {
    let file = src.join("src/lib.rs");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{from:?} is not in {}", file.display());
    std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_dev_rebuilds_and_a_running_serve_reloads_the_plugin() {
    let fake = fake_model(|_, after_tool| {
        if after_tool {
            Reply::text("counted")
        } else {
            Reply::tool("c1", TOOL, json!({"text": "one two"}))
        }
    })
    .await;
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("wasmclaw.toml"),
        format!(
            "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\n\n[agents.default]\nmodel = \"local:m\"\n",
            fake.openai_base_url()
        ),
    )
    .unwrap();
    let src = create("rust", "tool", "my_dev", root.path());

    // The first build and install, before the server starts.
    let dev_out = Lines::default();
    let mut dev = wasmclaw(&home);
    dev.args(["plugins", "dev"]).arg(&src);
    shared_toolchains(&mut dev);
    let dev = spawn(dev, &dev_out);
    let installed = |l: &str| {
        l.starts_with("plugins dev: my_dev built in ")
            && l.contains(" and installed (with my_dev.toml) into ")
    };
    dev_out.wait_for(1, BUILD, installed).await;
    let plugin_dir = home.join("plugins");
    assert!(plugin_dir.join("my_dev.wasm").is_file());
    assert_eq!(
        std::fs::read(plugin_dir.join("my_dev.toml")).unwrap(),
        std::fs::read(src.join("my_dev.toml")).unwrap()
    );

    let serve_out = Lines::default();
    let mut serve = wasmclaw(&home);
    serve.args(["serve", "--listen", "127.0.0.1:0"]);
    let mut serve = spawn(serve, &serve_out);
    serve_out
        .wait_for(1, LIMIT, |l| l.starts_with("wasmclaw serving on "))
        .await;
    let url = serve_out
        .all()
        .iter()
        .find_map(|l| l.strip_prefix("wasmclaw serving on ").map(str::to_string))
        .unwrap();
    let counts = json!({"lines": 1, "words": 2, "characters": 7, "bytes": 7});
    assert_eq!(call_tool(&url, &fake, "s1").await, counts);

    // An edit of the tool's output: rebuilt, installed, served.
    edit(
        &src,
        "\"bytes\": text.len(),",
        "\"bytes\": text.len(),\n                    \"version\": 2,",
    );
    dev_out.wait_for(2, BUILD, installed).await;
    let mut v2 = counts.clone();
    v2["version"] = json!(2);
    let mut session = 1;
    let reloaded = loop {
        session += 1;
        let got = call_tool(&url, &fake, &format!("s{session}")).await;
        if got == v2 || session > 100 {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(reloaded, v2, "the served tool after the edit");

    // A broken edit: the compiler's error is shown, the last good plugin stays.
    let installed_before = std::fs::read(plugin_dir.join("my_dev.wasm")).unwrap();
    edit(&src, "struct Plugin;", "struct Plugin");
    let failed = |l: &str| {
        l.starts_with("plugins dev: the build of my_dev failed (exit status: 101) after ")
            && l.ends_with("; the installed my_dev.wasm stays")
    };
    dev_out.wait_for(1, BUILD, failed).await;
    assert!(
        dev_out
            .count(|l| l.starts_with("error: expected `where`, `{`, `(`, or `;` after struct name"))
            == 1
            && dev_out
                .count(|l| l == "error: could not compile `my_dev` (lib) due to 1 previous error")
                == 1,
        "the build's error is shown:\n{}",
        dev_out.all().join("\n")
    );
    assert_eq!(dev_out.count(installed), 2, "{}", dev_out.all().join("\n"));
    assert_eq!(
        std::fs::read(plugin_dir.join("my_dev.wasm")).unwrap(),
        installed_before
    );
    assert_eq!(call_tool(&url, &fake, "after-broken").await, v2);

    // Ctrl-C ends it.
    let pid = dev.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let mut dev = dev;
    let code = tokio::time::timeout(LIMIT, dev.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code.code(), Some(0));
    dev_out
        .wait_for(1, LIMIT, |l| l == "plugins dev: stopped")
        .await;
    serve.kill().await.unwrap();
}
