//! Plugins made by `wasmclaw new-plugin` and built with their own
//! `build.sh`, the way a plugin author would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{target_dir, wasmclaw_bin};

/// Every language `new-plugin` has a template for.
pub const LANGS: [&str; 6] = ["rust", "c", "zig", "go", "js", "python"];

/// Creates plugin `my_LANG_tool` in `parent` and builds it with the
/// toolchains `make lang-plugins` installed; returns the component. Its one
/// tool is `my_LANG_tool_words`. Panics with the build's output if it fails.
pub fn build(lang: &str, parent: &Path) -> PathBuf {
    build_kind(lang, "tool", parent)
}

/// Creates plugin `my_LANG_KIND` (`new-plugin --kind KIND`) in `parent` and
/// builds it; returns the component, with the grants file `new-plugin`
/// wrote beside it.
pub fn build_kind(lang: &str, kind: &str, parent: &Path) -> PathBuf {
    let name = format!("my_{lang}_{kind}");
    rebuild(lang, &create(lang, kind, &name, parent))
}

/// Builds the plugin folder `folder` (made by [`create`], then perhaps
/// edited) with its `build.sh`; returns the component.
pub fn rebuild(lang: &str, folder: &Path) -> PathBuf {
    let name = folder.file_name().unwrap().to_str().unwrap();
    let mut build = Command::new("bash");
    build.arg(folder.join("build.sh"));
    shared_toolchains(&mut build);
    let build = run_within(build, BUILD_TIME, lang);
    assert!(
        build.status.success(),
        "{lang}: build.sh failed (the toolchains come from `make lang-plugins`):\n{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    let wasm = folder.join(format!("{name}.wasm"));
    assert!(wasm.exists(), "{lang}: build.sh made no {}", wasm.display());
    wasm
}

/// `wasmclaw new-plugin --lang LANG --kind KIND NAME` in `parent`; returns
/// the folder.
pub fn create(lang: &str, kind: &str, name: &str, parent: &Path) -> PathBuf {
    let out = Command::new(wasmclaw_bin())
        .args(["new-plugin", "--lang", lang, "--kind", kind, name, "--dir"])
        .arg(parent)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{lang}: new-plugin failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parent.join(name)
}

/// The toolchains `make lang-plugins` installed, and one target folder for
/// every Rust plugin built from a template: without it each would compile
/// wit-bindgen and serde_json again.
pub fn shared_toolchains(command: &mut impl Envs) {
    command.set("WASMCLAW_TOOLCHAINS", &target_dir().join("toolchains"));
    command.set("CARGO_TARGET_DIR", &target_dir().join("guests/scaffold"));
}

/// Setting an environment variable, on a std or a tokio command.
pub trait Envs {
    fn set(&mut self, key: &str, value: &Path);
}

impl Envs for Command {
    fn set(&mut self, key: &str, value: &Path) {
        self.env(key, value);
    }
}

impl Envs for tokio::process::Command {
    fn set(&mut self, key: &str, value: &Path) {
        self.env(key, value);
    }
}

/// The longest a template's build may take (a cold Zig cache takes about a
/// minute on two cores).
const BUILD_TIME: Duration = Duration::from_secs(600);

/// Runs `command` to its end, or kills it after `limit` and panics, so that
/// a stalled build fails instead of holding up the test run.
fn run_within(mut command: Command, limit: Duration, what: &str) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain both pipes on threads, so a chatty build cannot block on them.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut buf).ok();
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut buf).ok();
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            panic!("{what}: build.sh did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}
