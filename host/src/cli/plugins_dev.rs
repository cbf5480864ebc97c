//! `wasmclaw plugins dev DIR`: the edit-build-reload loop of a plugin author.
//!
//! It builds the plugin folder DIR with its own `./build.sh` (its output
//! shown as it comes), checks that the `NAME.wasm` it wrote loads (with the
//! folder's `NAME.toml`), and installs both into the plugin directory
//! atomically ([`install_plugin`]), where a running `serve` or `chat` picks
//! the new version up. Then it watches DIR and does it again after every
//! change, once the folder has been quiet for [`QUIET`]. A build that fails
//! or a component that does not load is reported and the installed plugin
//! stays. Ctrl-C ends it (and a build under way).
//!
//! NAME is the folder's name, as `wasmclaw new-plugin NAME` made it.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::plugin::Runtime;
use crate::plugin::install::install_plugin;
use crate::plugin::policy::grants::Grants;

/// How long the folder must be quiet after a change before a build: an
/// editor's save (write, rename, chmod) or a `git checkout` is one build.
pub const QUIET: Duration = Duration::from_millis(300);

/// Folders a build writes into, never sources: a change there starts no
/// build (hidden ones, `.zig-cache` and `.git` among them, are skipped too).
const BUILD_OUTPUTS: [&str; 3] = ["target", "node_modules", "__pycache__"];

/// Builds, checks and installs the plugin in `src` into `plugin_dir`, then
/// again on every change, until Ctrl-C.
pub async fn run(runtime: &Runtime, plugin_dir: &Path, src: &Path) -> Result<ExitCode> {
    let src = std::fs::canonicalize(src)
        .with_context(|| format!("{}: not a plugin folder", src.display()))?;
    if !src.join("build.sh").is_file() {
        bail!(
            "{}: there is no build.sh; `plugins dev` rebuilds a folder made by \
             `wasmclaw new-plugin` (or any folder whose build.sh writes NAME.wasm \
             beside it, NAME being the folder's name)",
            src.display()
        );
    }
    let name = src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .context("the plugin folder has no name")?;
    let dev = Dev {
        runtime,
        plugin_dir,
        src: src.clone(),
        name,
    };

    let (tx, mut changes) = mpsc::unbounded_channel::<()>();
    let root = src.clone();
    // A plugin directory inside the folder is the build's output too.
    let installed = std::fs::create_dir_all(plugin_dir)
        .and_then(|()| std::fs::canonicalize(plugin_dir))
        .with_context(|| format!("creating the plugin directory {}", plugin_dir.display()))?;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !event.kind.is_access()
            && event
                .paths
                .iter()
                .any(|p| !p.starts_with(&installed) && is_source(&root, p))
        {
            let _ = tx.send(());
        }
    })
    .context("starting the file watcher")?;
    watcher
        .watch(&src, RecursiveMode::Recursive)
        .with_context(|| format!("watching {}", src.display()))?;
    println!(
        "plugins dev: watching {} (Ctrl-C ends); each build goes into {}",
        src.display(),
        plugin_dir.display()
    );

    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            () = dev.round() => {}
        }
        // Wait for a change, then for the folder to be quiet. Changes made
        // during the build are among them, so none is missed.
        tokio::select! {
            _ = &mut ctrl_c => break,
            got = changes.recv() => if got.is_none() { break },
        }
        let quiet =
            async { while let Ok(Some(())) = tokio::time::timeout(QUIET, changes.recv()).await {} };
        tokio::select! {
            _ = &mut ctrl_c => break,
            () = quiet => {}
        }
    }
    println!("plugins dev: stopped");
    Ok(ExitCode::SUCCESS)
}

/// One plugin folder and where it goes.
struct Dev<'a> {
    runtime: &'a Runtime,
    plugin_dir: &'a Path,
    src: PathBuf,
    name: String,
}

impl Dev<'_> {
    /// Build, check, install; every outcome is printed.
    async fn round(&self) {
        let name = &self.name;
        println!("plugins dev: building {name} (./build.sh) ...");
        let start = Instant::now();
        let status = tokio::process::Command::new("bash")
            .arg("build.sh")
            .current_dir(&self.src)
            // Ctrl-C during a build drops this future: the build goes too.
            .kill_on_drop(true)
            .status()
            .await;
        let took = format!("{:.1} s", start.elapsed().as_secs_f64());
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!(
                    "plugins dev: the build of {name} failed ({status}) after {took}; \
                     the installed {name}.wasm stays"
                );
                return;
            }
            Err(e) => {
                eprintln!("plugins dev: could not run bash build.sh: {e}");
                return;
            }
        }
        let wasm = self.src.join(format!("{name}.wasm"));
        if !wasm.is_file() {
            eprintln!(
                "plugins dev: build.sh succeeded after {took} but wrote no {}",
                wasm.display()
            );
            return;
        }
        let grants = Grants::sidecar_of(&wasm);
        let grants = grants.is_file().then_some(grants.as_path());
        // Checked as `plugins install` checks: with the grants as they will
        // be in the plugin directory.
        let checked = super::plugins::install::check(self.runtime, self.plugin_dir, &wasm, grants);
        let plugin = match checked.await.map_err(|e| format!("{e:#}")) {
            Ok(Ok(plugin)) => plugin,
            Ok(Err(reason)) | Err(reason) => {
                eprintln!(
                    "plugins dev: {name}.wasm was built in {took} but does not load: {reason}; \
                     the installed {name}.wasm stays"
                );
                return;
            }
        };
        match install_plugin(self.plugin_dir, &wasm, grants, true) {
            Ok(installed) => {
                let with = if installed.grants.is_some() {
                    format!(" (with {name}.toml)")
                } else {
                    String::new()
                };
                println!(
                    "plugins dev: {name} built in {took} and installed{with} into {} ({})",
                    self.plugin_dir.display(),
                    super::plugins::offers(&plugin)
                );
            }
            Err(e) => eprintln!("plugins dev: installing {name}: {e}"),
        }
    }
}

/// Whether a change to `path` should start a build: a file of the plugin
/// folder `root`, not one the build writes (a `.wasm`, or anything in a
/// hidden folder or one of [`BUILD_OUTPUTS`]), nor in `CARGO_TARGET_DIR`.
fn is_source(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else {
        return false;
    };
    if relative.as_os_str().is_empty() || path.extension().is_some_and(|e| e == "wasm") {
        return false;
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR")
        && path.starts_with(root.join(target))
    {
        return false;
    }
    !relative.components().any(|c| match c {
        Component::Normal(part) => {
            let part = part.to_string_lossy();
            part.starts_with('.') || BUILD_OUTPUTS.contains(&part.as_ref())
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sources_start_a_build() {
        let root = Path::new("/src/weather");
        for source in [
            "src/lib.rs",
            "Cargo.toml",
            "weather.toml",
            "app.py",
            "wit/plugin.wit",
        ] {
            assert!(is_source(root, &root.join(source)), "{source}");
        }
        for output in [
            "weather.wasm",
            "wasi_snapshot_preview1.reactor.wasm",
            "target/release/x.rlib",
            "node_modules/a/index.js",
            "__pycache__/app.pyc",
            ".zig-cache/o/x",
            ".git/index",
            ".app.py.swp",
            "",
        ] {
            assert!(!is_source(root, &root.join(output)), "{output}");
        }
        assert!(!is_source(root, Path::new("/elsewhere/lib.rs")));
    }
}
