//! The wasmclaw home as the binary keeps it: one process owns it at a time,
//! the session store's files are the owner's only, and output to a closed
//! pipe ends the command quietly.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, split_progress, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(60);

fn command(home: &Path, plugins: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(wasmclaw_bin());
    command
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .env_remove("WASMCLAW_API_TOKEN")
        .arg("--plugins")
        .arg(plugins)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// `wasmclaw run -m MESSAGE` against `fake`: (exit code, stdout, stderr).
async fn run(
    home: &Path,
    plugins: &Path,
    fake: &FakeModel,
    message: &str,
) -> (i32, String, String) {
    let out = command(home, plugins)
        .args(["run", "--model", "openai:m", "--base-url"])
        .arg(fake.openai_base_url())
        .args(["-m", message])
        .output();
    let out = tokio::time::timeout(LIMIT, out).await.unwrap().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_on_a_home_in_use_fails_at_once_naming_the_holder() {
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    let fake = FakeModel::start([Reply::text("after serve")]).await;

    let mut serve = command(&home, &dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--model", "openai:m"])
        .args(["--base-url", &fake.openai_base_url()])
        .spawn()
        .unwrap();
    let pid = serve.id().unwrap();
    // The gate: serve says where it serves once it owns the home.
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    loop {
        let line = tokio::time::timeout(LIMIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("serve says where it serves");
        if line.starts_with("wasmclaw serving on ") {
            break;
        }
    }

    let (code, out, err) = run(&home, &dir.path(), &fake, "while serve runs").await;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            1,
            "",
            format!(
                "error: the wasmclaw home {} is in use by another wasmclaw process (pid {pid}, holding {}/lock); stop it first, or give this one another home with --home or WASMCLAW_HOME\n",
                home.display(),
                home.display()
            )
            .as_str()
        )
    );
    assert_eq!(fake.requests().len(), 0, "the second process ran no turn");

    // Once serve has stopped, the home is free again.
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(LIMIT, serve.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    let (code, out, err) = run(&home, &dir.path(), &fake, "after").await;
    assert_eq!((code, out.as_str()), (0, "after serve\n"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_store_and_the_lock_are_the_owners_only() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let fake = FakeModel::start([Reply::text("stored")]).await;
    let (code, out, err) = run(&home, &dir.path(), &fake, "hello").await;
    assert_eq!((code, out.as_str()), (0, "stored\n"), "{err}");
    let mut modes: Vec<(String, u32)> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                mode(&p),
            )
        })
        .collect();
    modes.sort();
    // Whatever SQLite left beside the database (its write-ahead log and
    // index) is owner-only too.
    assert!(
        ["lock", "sessions.db"]
            .iter()
            .all(|f| modes.iter().any(|(name, _)| name == f)),
        "{modes:?}"
    );
    assert!(modes.iter().all(|(_, mode)| *mode == 0o600), "{modes:?}");
}

#[test]
fn output_to_a_closed_pipe_ends_the_command_quietly() {
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    // A pipe whose reading end is closed before the command writes.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    for args in [&["plugins", "list"][..], &["plugins", "list", "--json"]] {
        let out = std::process::Command::new(wasmclaw_bin())
            .env("WASMCLAW_HOME", &home)
            .env("RUST_LOG", "error")
            .arg("--plugins")
            .arg(dir.path())
            .args(args)
            .stdout(writer.try_clone().unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        // Only the progress of the first, cold, run.
        let (_, rest) = split_progress(&String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            (out.status.code(), rest.as_str()),
            (Some(0), ""),
            "{args:?}"
        );
    }
}
