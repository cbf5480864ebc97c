//! Reload: the long-running commands (`serve`, `chat`) watch the
//! configuration file. Once it has been quiet for [`DEBOUNCE`] after a
//! change, it is loaded again with the same flags and environment:
//!
//! - a configuration that loads, and whose agents build, replaces the
//!   running one for turns that start from now on (running turns keep the
//!   snapshot they started with) and is announced as `config_reloaded`,
//!   with the key paths that changed and those that apply only after a
//!   restart ([`super::needs_restart`]);
//! - one that does not is refused whole, announced as `config_rejected`
//!   with every fault, and the running configuration stays;
//! - a change that changes no value is not announced.
//!
//! The file's folder is watched, not the file: editors replace a file by
//! renaming a new one over it, and a file that does not exist yet may be
//! created.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Config, ConfigErrors, Overrides, file_path, load, needs_restart, process_env};
use crate::core::Core;
use crate::folder_watch::{self, FolderWatch, Writes};
use crate::home::Home;
use crate::protocol::ConfigReloaded;

/// How long the file must be quiet before it is read.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Where a configuration comes from: the home, `--config`, and the flags.
/// What the process loaded at its start, and loads again on a change.
#[derive(Debug, Clone)]
pub struct Loader {
    pub home: Home,
    pub explicit: Option<PathBuf>,
    pub overrides: Overrides,
}

impl Loader {
    /// The configuration, or every fault.
    pub fn load(&self) -> Result<Config, ConfigErrors> {
        load(
            &self.home,
            self.explicit.as_deref(),
            &self.overrides,
            &process_env,
        )
    }

    /// The file read (it may not exist).
    pub fn file(&self) -> PathBuf {
        file_path(&self.home, self.explicit.as_deref()).0
    }
}

/// Watching stops when this is dropped.
pub struct ConfigWatch {
    _watch: FolderWatch,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `loader`'s file and reloads `core` on each change; `running` is
/// the configuration `core` runs now.
pub fn watch(core: Core, loader: Loader, running: Config) -> Result<ConfigWatch> {
    let file = loader.file();
    let folder = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("creating the folder of {}", file.display()))?;
    // Not woken by the writes of the session store, whose files are
    // often beside it.
    let name = file.file_name().map(|n| n.to_os_string());
    let (watch, mut rx) = folder_watch::watch(&folder, Writes::OnClose, move |changed| {
        Some(changed) == name.as_deref()
    })?;
    let task = tokio::spawn(async move {
        let mut running = running;
        while rx.recv().await.is_some() {
            while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
            if let Some(new) = reload(&core, &loader, &running) {
                running = new;
            }
        }
    });
    Ok(ConfigWatch {
        _watch: watch,
        task,
    })
}

/// Loads the file again: the new configuration if `core` now runs it.
fn reload(core: &Core, loader: &Loader, running: &Config) -> Option<Config> {
    let file = loader.file().display().to_string();
    let reject = |error: String| {
        tracing::warn!(
            "{file} changed but does not load; the running configuration stays:\n{error}"
        );
        core.reject_config(&file, &error);
        None
    };
    let new = match loader.load() {
        Ok(new) => new,
        Err(errors) => return reject(errors.to_string()),
    };
    let changed = running.diff(&new);
    if changed.is_empty() {
        return None;
    }
    let new = Arc::new(new);
    let profiles = match new.profiles(process_env) {
        Ok(profiles) => profiles,
        Err(e) => return reject(e.to_string()),
    };
    let restart_needed: Vec<String> = (changed.iter())
        .filter(|path| needs_restart(path))
        .cloned()
        .collect();
    tracing::info!(changed = ?changed, "{file} reloaded");
    if !restart_needed.is_empty() {
        tracing::warn!(keys = ?restart_needed, "these apply once the host restarts");
    }
    core.reload(
        profiles,
        ConfigReloaded {
            file,
            changed,
            restart_needed,
        },
    );
    Some(Arc::unwrap_or_clone(new))
}
