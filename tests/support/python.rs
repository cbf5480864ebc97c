//! The official Python SDKs the tests drive wasmclaw with (`openai` and
//! `mcp`, pinned, in the virtualenv `make pyenv` makes at `target/pyenv`),
//! and the scripts of `tests/python`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// `target/pyenv/bin/python`; a test fails at once, saying how to install
/// it, when it is missing.
pub fn python() -> PathBuf {
    let python = crate::target_dir().join("pyenv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make pyenv` (`make test` does) to install the OpenAI and MCP Python SDKs",
        python.display()
    );
    python
}

/// `tests/python/NAME`.
pub fn script(name: &str) -> PathBuf {
    let target = crate::target_dir();
    let repo = target.parent().expect("target is in the repository");
    repo.join("tests/python").join(name)
}

/// Runs `tests/python/NAME` with `args`, within `limit`: the JSON object it
/// printed. It must exit 0.
pub async fn run_script(name: &str, args: &[String], limit: Duration) -> Value {
    let script = script(name);
    let run = tokio::process::Command::new(python())
        .arg(&script)
        .args(args)
        // A proxy in the environment must not take loopback requests.
        .env("NO_PROXY", "127.0.0.1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(limit, run)
        .await
        .unwrap_or_else(|_| panic!("{} did not finish within {limit:?}", script.display()))
        .expect("running the Python script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} failed ({}):\n{stderr}{stdout}",
        script.display(),
        output.status
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{} printed no JSON object ({e}):\n{stdout}{stderr}",
            script.display()
        )
    })
}
