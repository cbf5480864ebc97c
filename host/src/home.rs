//! Where wasmclaw keeps its files.
//!
//! Everything lives under one folder, `$WASMCLAW_HOME`, which defaults to
//! `~/.wasmclaw`: `wasmclaw.toml` (the configuration), `plugins/` (the plugin
//! directory), `cache/` (compiled code), `secrets.toml`, `sessions.db` and
//! `api-token`. No plugin's grants may reach any of them ([`Home::protected`]).

mod lock;

use std::path::{Path, PathBuf};

pub use lock::{HomeLock, HomeLockError};

use crate::plugin::policy::protected::Protected;

/// What the name of every environment variable wasmclaw reads starts with
/// (`WASMCLAW_HOME`, `WASMCLAW_MODEL`, `WASMCLAW_API_TOKEN`, the secrets'
/// `WASMCLAW_SECRET_*`): the host's own, never passed to a plugin.
pub const ENV_PREFIX: &str = "WASMCLAW_";

/// The variable that names the home.
pub const HOME_VAR: &str = "WASMCLAW_HOME";

/// The wasmclaw home folder and the paths inside it.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$WASMCLAW_HOME` if set, else `~/.wasmclaw`, else `./.wasmclaw` when the
    /// user has no home folder.
    pub fn from_env() -> Self {
        let root = std::env::var_os(HOME_VAR)
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

    /// Makes this process the home's owner, or says which process is
    /// (see [`HomeLock`]).
    pub fn lock(&self) -> Result<HomeLock, HomeLockError> {
        HomeLock::acquire(&self.root)
    }

    /// The configuration file (see [`crate::config`]).
    pub fn config_file(&self) -> PathBuf {
        self.root.join(crate::config::FILE_NAME)
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

    /// The paths no directory grant may reach, whether or not they exist
    /// yet: the home itself and each of its parts (listed too, in case one
    /// is a symbolic link to somewhere else).
    pub fn protected(&self) -> Vec<Protected> {
        vec![
            Protected::holder(
                &self.root,
                "wasmclaw's home",
                "it holds the operator's secrets, the session database, the API token and the plugins",
            ),
            Protected::plugin_dir(self.plugins_dir()),
            Protected::new(
                self.cache_dir(),
                "the compile cache",
                "the host runs the code it holds without checking it again",
            ),
            Protected::new(
                self.config_file(),
                "the configuration file",
                "it sets what every plugin may reach",
            ),
            Protected::new(
                self.secrets(),
                "the secrets file",
                "a plugin never holds the operator's secrets",
            ),
            Protected::new(
                self.sessions_db(),
                "the session database",
                "it holds every session's history and events",
            ),
            Protected::new(
                self.api_token(),
                "the API token file",
                "it holds the HTTP API's bearer token",
            ),
        ]
    }
}

/// The user's home folder, from `$HOME`.
pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
