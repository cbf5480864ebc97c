//! `make install`, `wasmclaw plugins install`, and the completion script
//! and man page, run as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmclaw_tests::{PluginDir, guest, run_wasmclaw, split_progress};

async fn wasmclaw(home: &Path, args: &[&str]) -> (i32, String, String) {
    run_wasmclaw(home, &[], args, "").await
}

/// Every file of `dir` (none if it is missing), with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut all: Vec<_> = read
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    all.sort();
    all
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const GRANTS: &str = "[limits]\nmemory_mib = 32\n";

/// The home, its plugin directory (not there yet) and a source folder.
fn folders(dir: &PluginDir) -> (PathBuf, PathBuf, PathBuf) {
    let home = dir.scratch("home");
    let plugins = home.join("plugins");
    (home, plugins, dir.scratch("src"))
}

/// `plugins install echo.wasm SRC/g.toml`, the grants being [`GRANTS`].
async fn install_echo_with_grants(home: &Path, src: &Path) -> (i32, String, String) {
    let grants = src.join("g.toml");
    std::fs::write(&grants, GRANTS).unwrap();
    wasmclaw(home, &["plugins", "install", s(&guest("echo")), s(&grants)]).await
}

#[test]
fn make_install_puts_a_binary_that_runs_from_anywhere() {
    let dir = PluginDir::new();
    let prefix = dir.scratch("prefix");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut make = Command::new("make")
        .current_dir(repo)
        .args(["install", "PROFILE=dev"])
        .arg(format!("PREFIX={}", prefix.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    while make.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "make install took over 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = make.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = prefix.join("bin/wasmclaw");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("installed {} (dev profile)", installed.display())),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let elsewhere = dir.scratch("elsewhere");
    let out = Command::new(&installed)
        .current_dir(&elsewhere)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("wasmclaw {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn install_copies_a_good_plugin_and_its_grants_and_list_shows_it() {
    let dir = PluginDir::new();
    let (home, plugins, src) = folders(&dir);
    let (code, out, err) = install_echo_with_grants(&home, &src).await;
    assert_eq!(
        (code, split_progress(&err)),
        (0, (vec!["echo.wasm".to_string()], String::new()))
    );
    assert_eq!(
        out,
        format!(
            "installed {} (tool-plugin@0.2.0; tools: echo, context, add, fail, log, count)\ngrants: {}\n",
            plugins.join("echo.wasm").display(),
            plugins.join("echo.toml").display()
        )
    );
    assert_eq!(
        files(&plugins),
        vec![
            ("echo.toml".to_string(), GRANTS.as_bytes().to_vec()),
            (
                "echo.wasm".to_string(),
                std::fs::read(guest("echo")).unwrap()
            ),
        ]
    );

    let (code, out, _) = wasmclaw(&home, &["plugins", "list", "--json"]).await;
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["status"], "ok");
    assert_eq!(list[0]["name"], "echo");
    assert_eq!(list[0]["grants"]["limits"]["memory_bytes"], 32 << 20);
}

#[tokio::test]
async fn a_bad_plugin_or_grants_file_is_refused_with_the_reason_and_nothing_is_copied() {
    let dir = PluginDir::new();
    let (home, plugins, src) = folders(&dir);

    let junk = src.join("junk.wasm");
    std::fs::write(&junk, "not wasm").unwrap();
    let (code, out, err) = wasmclaw(&home, &["plugins", "install", s(&junk)]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "{}: not a WebAssembly file (it does not start with the \\0asm magic bytes)\n",
            junk.display()
        )
    );
    assert_eq!(files(&plugins), vec![]);

    let bad = src.join("bad.toml");
    std::fs::write(&bad, "[limits]\nmemory_mb = 32\n").unwrap();
    let (code, _, err) = wasmclaw(&home, &["plugins", "install", s(&guest("echo")), s(&bad)]).await;
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("{}: unknown field `memory_mb`", bad.display())),
        "{err}"
    );
    assert_eq!(files(&plugins), vec![]);

    // A grants file beside the component is its own and is checked too.
    let hooks = src.join("hooktest.wasm");
    std::fs::copy(guest("hooktest"), &hooks).unwrap();
    std::fs::write(src.join("hooktest.toml"), "env = [\"WASMCLAW_HOME\"]\n").unwrap();
    let (code, _, err) = wasmclaw(&home, &["plugins", "install", s(&hooks)]).await;
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("{}: env: ", src.join("hooktest.toml").display())),
        "{err}"
    );
    assert_eq!(files(&plugins), vec![]);
}

#[tokio::test]
async fn an_installed_plugin_is_replaced_only_with_force() {
    let dir = PluginDir::new();
    let (home, plugins, src) = folders(&dir);
    let (code, _, err) = install_echo_with_grants(&home, &src).await;
    assert_eq!(code, 0, "{err}");
    let before = files(&plugins);

    // Another component under the same name.
    let other: PathBuf = src.join("echo.wasm");
    std::fs::copy(guest("calculator"), &other).unwrap();
    let (code, out, err) = wasmclaw(&home, &["plugins", "install", s(&other)]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "error: {} is already installed; pass --force to replace it\n",
            plugins.join("echo.wasm").display()
        )
    );
    assert_eq!(files(&plugins), before);

    let (code, out, err) = wasmclaw(&home, &["plugins", "install", "--force", s(&other)]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "replaced {} (",
            plugins.join("echo.wasm").display()
        )),
        "{out}"
    );
    assert!(
        out.ends_with("\ngrants: none (the old grants file was removed)\n"),
        "{out}"
    );
    assert_eq!(
        files(&plugins),
        vec![(
            "echo.wasm".to_string(),
            std::fs::read(guest("calculator")).unwrap()
        )]
    );
}

#[tokio::test]
async fn completions_name_the_subcommands_and_man_is_roff() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let (code, out, err) = wasmclaw(&home, &["completions", "bash"]).await;
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out.starts_with("_wasmclaw() {\n"), "{out}");
    for sub in [
        "run",
        "chat",
        "serve",
        "plugins",
        "plugins__subcmd__install",
        "completions",
        "man",
    ] {
        let case = format!("\n        wasmclaw__subcmd__{sub})\n");
        assert!(out.contains(&case), "{sub} is not in the script");
    }

    let (code, out, err) = wasmclaw(&home, &["man"]).await;
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out.contains("\n.TH wasmclaw 1 "), "{out}");
    assert!(out.contains("\n.SH NAME\nwasmclaw \\- "), "{out}");
    assert!(out.contains("\n.SH SUBCOMMANDS\n"), "{out}");
}
