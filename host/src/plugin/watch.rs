//! Picking up plugin files added, replaced or removed while the host runs.
//!
//! File events are debounced: a rescan runs once the directory has been quiet
//! for [`DEBOUNCE`], so a file still being copied is loaded once, whole.
//!
//! Every change is logged under the target [`LOG_TARGET`], which the
//! command line shows at its default level: a running `serve` says which
//! plugin it loaded, which failed and why, and which it removed.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use super::catalog::{PluginChange, Plugins};
use crate::folder_watch::{self, FolderWatch, Writes};

/// The log target of the changes a watch picks up.
pub const LOG_TARGET: &str = "plugins";

/// How long the directory must be quiet before a rescan.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Watches while alive; dropping it stops watching.
pub struct WatchHandle {
    _watch: FolderWatch,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Plugins {
    /// Starts watching the plugin directory. Each rescan's changes are sent
    /// to `changes` (if given) as well as logged ([`LOG_TARGET`]).
    pub fn watch(
        self: &Arc<Self>,
        changes: Option<mpsc::UnboundedSender<Vec<PluginChange>>>,
    ) -> Result<WatchHandle> {
        let dir = self.dir().to_path_buf();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the plugin directory {}", dir.display()))?;
        // Each write: a file still being copied in is not rescanned.
        let (watch, mut rx) = folder_watch::watch(&dir, Writes::Each, |_| true)?;

        let plugins = self.clone();
        let task = tokio::spawn(async move {
            // The first pass catches changes made before the watch began;
            // like every pass, it waits for the directory to be quiet, so a
            // file still being copied is not reported as broken.
            loop {
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
                let changed = plugins.rescan().await;
                changed.iter().for_each(log_change);
                if let Some(out) = &changes
                    && !changed.is_empty()
                {
                    let _ = out.send(changed);
                }
                if rx.recv().await.is_none() {
                    break;
                }
            }
        });
        Ok(WatchHandle {
            _watch: watch,
            task,
        })
    }
}

fn log_change(change: &PluginChange) {
    match change {
        PluginChange::Loaded {
            name,
            tools,
            wit_version,
        } => tracing::info!(
            target: LOG_TARGET,
            "plugin {name} loaded ({wit_version}; tools: {})",
            if tools.is_empty() { "none".to_string() } else { tools.join(", ") }
        ),
        PluginChange::Failed { file, error, .. } => tracing::warn!(
            target: LOG_TARGET,
            "plugin {} not loaded: {error}",
            file.display()
        ),
        PluginChange::Unloaded { name } => {
            tracing::info!(target: LOG_TARGET, "plugin {name} removed")
        }
    }
}
