//! Where wasmclaw keeps its files.
//!
//! Everything lives under one folder, `$WASMCLAW_HOME`, which defaults to
//! `~/.wasmclaw`: `plugins/` (the plugin directory) and `cache/` (compiled code).

use std::path::{Path, PathBuf};

/// The wasmclaw home folder and the paths inside it.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$WASMCLAW_HOME` if set, else `~/.wasmclaw`, else `./.wasmclaw` when the
    /// user has no home folder.
    pub fn from_env() -> Self {
        let root = std::env::var_os("WASMCLAW_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| user_home().map(|h| h.join(".wasmclaw")))
            .unwrap_or_else(|| PathBuf::from(".wasmclaw"));
        Self { root }
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The default plugin directory.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// The session store (history, turns, event log).
    pub fn sessions_db(&self) -> PathBuf {
        self.root.join("sessions.db")
    }

    /// The HTTP API's bearer token, made at the first `wasmclaw serve`.
    pub fn api_token(&self) -> PathBuf {
        self.root.join("api-token")
    }

    /// The operator's secrets, which plugins' credentials name (owner-only).
    pub fn secrets(&self) -> PathBuf {
        self.root.join("secrets.toml")
    }

    /// Where compiled plugin code is cached.
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }
}

/// The user's home folder, from `$HOME`.
pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
