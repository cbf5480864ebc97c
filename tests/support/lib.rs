//! Test support: the guest plugins built by `build.rs`, plugin directories in
//! temporary folders, one shared runtime, and the `wasmclaw` binary.

pub mod agents;
pub mod bench;
pub mod fake_model;
pub mod gate;
pub mod heap;
pub mod long_session;
pub mod plugin_log;
pub mod python;
pub mod scaffold;
pub mod serve_bin;
pub mod server;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use wasmclaw::plugin::sandbox::cache::Compiler;
use wasmclaw::plugin::{CallContext, Plugins, Runtime, RuntimeConfig};

/// The built guest `NAME.wasm`.
pub fn guest(name: &str) -> PathBuf {
    let path = Path::new(env!("WASMCLAW_GUESTS")).join(format!("{name}.wasm"));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// A plugin written in another language, built by `make lang-plugins`
/// into `target/guests/lang/NAME.wasm` (with its grants file, if it has one).
pub fn lang_guest(name: &str) -> PathBuf {
    let path = target_dir()
        .join("guests/lang")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build the plugins in other languages with `make lang-plugins` \
         (`make test` does; it installs their toolchains into target/toolchains)",
        path.display()
    );
    path
}

/// The source folder of an example plugin (holds its grants file).
pub fn example_src(name: &str) -> PathBuf {
    Path::new(env!("WASMCLAW_PLUGINS_SRC")).join(name)
}

/// The repository's `target` folder.
pub fn target_dir() -> PathBuf {
    Path::new(env!("WASMCLAW_GUESTS"))
        .ancestors()
        .nth(3)
        .expect("target/guests/wasm32-wasip2/release")
        .to_path_buf()
}

/// One runtime for the whole test binary, with a compile cache that outlives
/// runs (entries are keyed by content, so a stale hit is impossible).
pub fn runtime() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(own_runtime).clone()
}

/// A runtime of the caller's own (its engine and epoch ticker), with the
/// shared compile cache: for a test that watches the ticker, which the
/// other tests' calls would keep running.
pub fn own_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(target_dir().join("test-cache")),
        compiler: Compiler::InProcess,
        ..RuntimeConfig::default()
    })
    .expect("creating the runtime")
}

/// A plugin directory in a temporary folder.
pub struct PluginDir {
    root: TempDir,
}

impl Default for PluginDir {
    fn default() -> Self {
        Self::new()
    }
}

impl PluginDir {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("plugins")).unwrap();
        Self { root }
    }

    /// The plugin directory.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("plugins")
    }

    /// A scratch folder beside the plugin directory.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.root.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Copies guest `name` in as `as_name.wasm`.
    pub fn add_as(&self, name: &str, as_name: &str) -> PathBuf {
        let to = self.path().join(format!("{as_name}.wasm"));
        std::fs::copy(guest(name), &to).unwrap();
        to
    }

    /// Copies a plugin built from another language in, with its grants
    /// file if it has one.
    pub fn add_lang(&self, name: &str) -> PathBuf {
        let wasm = lang_guest(name);
        let to = self.path().join(format!("{name}.wasm"));
        std::fs::copy(&wasm, &to).unwrap();
        let grants = wasm.with_extension("toml");
        if grants.exists() {
            std::fs::copy(&grants, to.with_extension("toml")).unwrap();
        }
        to
    }

    pub fn add(&self, name: &str) -> PathBuf {
        self.add_as(name, name)
    }

    /// Writes raw bytes as `file`.
    pub fn write(&self, file: &str, bytes: &[u8]) -> PathBuf {
        let to = self.path().join(file);
        std::fs::write(&to, bytes).unwrap();
        to
    }

    /// Writes the grants file of plugin `name`.
    pub fn grants(&self, name: &str, toml: &str) {
        self.write(&format!("{name}.toml"), toml.as_bytes());
    }

    pub async fn load(&self) -> Arc<Plugins> {
        self.load_in(runtime()).await
    }

    /// Loads the folder in `runtime`.
    pub async fn load_in(&self, runtime: Runtime) -> Arc<Plugins> {
        Plugins::load_dir(runtime, self.path()).await
    }
}

/// A call context as a turn would pass it.
pub fn ctx() -> CallContext {
    CallContext {
        session_key: "test-session".into(),
        turn_id: "turn-1".into(),
        parent_turn_id: None,
        depth: 0,
        call_id: "call-1".into(),
        deadline: None,
        spawner: None,
    }
}

/// The error text of plugin file `name` in the current catalog.
pub fn load_error(plugins: &Plugins, name: &str) -> String {
    let catalog = plugins.catalog();
    let status = catalog
        .plugins
        .iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("no plugin file named {name}"));
    match status {
        wasmclaw::plugin::PluginStatus::Failed { error, .. } => error.clone(),
        wasmclaw::plugin::PluginStatus::Loaded(_) => panic!("{name} loaded, expected an error"),
    }
}

/// Polls `check` until it is true or `timeout` passes.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// [`eventually`] with a check that awaits (a request to a server).
pub async fn eventually_async(timeout: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check().await
}

/// A command's stderr split into the plugin files it compiled (each a
/// progress line `compiling NAME ... done in T s`, in order) and the rest.
pub fn split_progress(stderr: &str) -> (Vec<String>, String) {
    let mut compiled = Vec::new();
    let mut rest = String::new();
    for line in stderr.split_inclusive('\n') {
        let name = line
            .strip_prefix("compiling ")
            .and_then(|l| l.split_once(" ... done in "))
            .filter(|(_, took)| took.ends_with(" s\n"));
        match name {
            Some((name, _)) => compiled.push(name.to_string()),
            None => rest.push_str(line),
        }
    }
    (compiled, rest)
}

/// The `wasmclaw` binary of this build (`cargo build -p wasmclaw` first; the
/// README's test command does).
pub fn wasmclaw_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("wasmclaw"))
        .unwrap();
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p wasmclaw` before the tests",
        bin.display()
    );
    bin
}

/// The `wasmclaw` binary on `home` with `args`, in a clean environment: none
/// of the variables that choose a model, an agent, a configuration file or
/// a key, but those of `env`; logs at `error` unless `env` sets `RUST_LOG`.
pub fn wasmclaw_command(
    home: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(wasmclaw_bin());
    command.env("WASMCLAW_HOME", home).env("RUST_LOG", "error");
    for var in [
        "WASMCLAW_MODEL",
        "WASMCLAW_AGENT",
        "WASMCLAW_CONFIG",
        "WASMCLAW_API_TOKEN",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ] {
        command.env_remove(var);
    }
    command
        .envs(env.iter().copied())
        .args(args)
        .kill_on_drop(true);
    command
}

/// Runs [`wasmclaw_command`] with `input` on stdin; (exit code, stdout,
/// stderr), within 60 s.
pub async fn run_wasmclaw(
    home: &Path,
    env: &[(&str, &str)],
    args: &[&str],
    input: &str,
) -> (i32, String, String) {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let mut command = wasmclaw_command(home, env, args);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every line of `text` as JSON (the output of `--events`); panics naming
/// a line that is not.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    (text.lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

/// The kinds of `events`, without the `llm_delta` ones.
pub fn kinds_but_deltas(events: &[serde_json::Value]) -> Vec<&str> {
    (events.iter())
        .map(|e| e["type"].as_str().unwrap())
        .filter(|k| *k != "llm_delta")
        .collect()
}
