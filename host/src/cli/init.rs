//! `wasmclaw init`: the home's folders and a commented configuration file.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::config::template::TEMPLATE;
use crate::home::Home;

/// Creates the home, its `plugins` and `cache` folders, and writes the
/// template to `explicit` (`--config`) or HOME/wasmclaw.toml; an existing
/// file is kept unless `force`. Prints what it created.
pub fn run(home: &Home, explicit: Option<&Path>, force: bool) -> Result<ExitCode> {
    let file = explicit.map_or_else(|| home.config_file(), Path::to_path_buf);
    if file.exists() && !force {
        bail!(
            "{} exists; `wasmclaw init --force` writes it anew",
            file.display()
        );
    }
    let folders = [
        home.root().to_path_buf(),
        home.plugins_dir(),
        home.cache_dir(),
    ];
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
    for dir in folders.iter().map(|d| d.as_path()).chain(parent) {
        if !dir.exists() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            println!("created {}", dir.display());
        }
    }
    let existed = file.exists();
    std::fs::write(&file, TEMPLATE).with_context(|| format!("writing {}", file.display()))?;
    println!(
        "{} {}: every setting, commented out at its default (`wasmclaw config check` checks it)",
        if existed { "rewrote" } else { "created" },
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}
