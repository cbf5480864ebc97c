//! The `wasmclaw` binary of this build in a child process: any command
//! with a home and a plugin directory ([`wasmclaw_command`]), and `serve`
//! on a loopback port of its own with an OpenAI-format model, answered with
//! the token of [`crate::server`].

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::server::{TOKEN, client_builder};

/// How long the server may take to say where it serves.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The command that starts `wasmclaw serve` with `home`, the plugins of
/// `plugins` and the model `openai:m` at `base_url` (with `/v1`), on a free
/// loopback port, with [`TOKEN`], its stderr dropped. Add arguments (or
/// another stderr) before starting it with [`ServeChild::start`].
pub fn serve_command(home: &Path, plugins: &Path, base_url: &str) -> Command {
    let mut command = wasmclaw_command(home, plugins);
    command
        .env("WASMCLAW_API_TOKEN", TOKEN)
        .args(["serve", "--listen", "127.0.0.1:0", "--model", "openai:m"])
        .args(["--base-url", base_url])
        .stderr(Stdio::null());
    command
}

/// The binary with home `home` and the plugins of `plugins`, errors only
/// logged, no model from the environment, killed if dropped; add the
/// command and its arguments.
pub fn wasmclaw_command(home: &Path, plugins: &Path) -> Command {
    let mut command = Command::new(crate::wasmclaw_bin());
    command
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .arg("--plugins")
        .arg(plugins)
        .kill_on_drop(true);
    command
}

/// What `child` printed, once it has exited (within a minute) with
/// success; else a panic showing its stderr.
pub async fn succeeded(child: Child) -> std::process::Output {
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the command ends within a minute")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exited with {}: {err}", out.status);
    out
}

/// A running `wasmclaw serve`; killed if dropped.
pub struct ServeChild {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    pub pid: u32,
}

impl ServeChild {
    /// Spawns `command` (from [`serve_command`]) and waits until it says
    /// where it serves. Its stdout is read to its end, so a later line
    /// never meets a closed pipe.
    pub async fn start(mut command: Command) -> ServeChild {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting wasmclaw serve");
        let pid = child.id().expect("a running child");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(START_LIMIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("wasmclaw serving on ") {
                    return url.to_string();
                }
            }
            panic!("wasmclaw serve ended before it said where it serves")
        })
        .await
        .expect("wasmclaw serve says where it serves");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServeChild { child, url, pid }
    }

    /// A client that sends the token.
    pub fn client(&self) -> reqwest::Client {
        client_builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }

    /// `url` + `path`.
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Sends `content` to `session` and waits for the turn's end: the
    /// answer of `POST /v1/sessions/{session}/messages?wait=true`.
    pub async fn ask(&self, client: &reqwest::Client, session: &str, content: &str) -> Value {
        let path = format!("/v1/sessions/{session}/messages?wait=true");
        self.post(client, &path, json!({ "content": content }))
            .await
    }

    /// The JSON answer of `POST path` with `body`.
    pub async fn post(&self, client: &reqwest::Client, path: &str, body: Value) -> Value {
        let sent = client.post(self.at(path)).json(&body).send().await;
        sent.unwrap().json().await.unwrap()
    }

    /// The JSON answer of `GET path`.
    pub async fn get(&self, client: &reqwest::Client, path: &str) -> Value {
        let answered = client.get(self.at(path)).send().await;
        answered.unwrap().json().await.unwrap()
    }

    /// Waits until the plugin directory has been loaded (`/healthz`).
    pub async fn until_plugins_loaded(&self) {
        let client = self.client();
        let loaded = crate::eventually_async(START_LIMIT, async || {
            self.get(&client, "/healthz").await["plugins"] == "loaded"
        })
        .await;
        assert!(loaded, "the plugins load within {START_LIMIT:?}");
    }

    /// Kills the server with SIGKILL, as a crash would, and reaps it.
    pub async fn kill_9(mut self) {
        self.child.kill().await.expect("killing wasmclaw serve");
    }

    /// Stops the server with SIGTERM and waits for its clean exit.
    pub async fn stop(mut self) {
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("wasmclaw serve stops within 60 s")
            .unwrap();
        assert!(status.success(), "wasmclaw serve exited with {status}");
    }
}
