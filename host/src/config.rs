//! The configuration: `wasmclaw.toml`, the environment and the flags,
//! resolved into one immutable [`Config`].
//!
//! # Layers
//! Every value comes from the first of these that sets it:
//!
//! 1. a flag (`--model`, `--max-iterations`, `--listen`, ...);
//! 2. an environment variable, for the values that have one
//!    (`WASMCLAW_MODEL`, `WASMCLAW_LLM_DEADLINE`, `OPENAI_BASE_URL`, ...;
//!    [`overrides::ENV`]);
//! 3. the file: `--config FILE` or `WASMCLAW_CONFIG` (which must then
//!    exist), else `$WASMCLAW_HOME/wasmclaw.toml` when it exists;
//! 4. the built-in default.
//!
//! The agent flags apply to the agent the process runs (`--agent NAME`,
//! `WASMCLAW_AGENT`, default `default`). [`Config::sources`] says, for each
//! key path, which layer gave its value (`wasmclaw config show` prints it).
//!
//! # Parts
//! - [`file`]: [`file::ConfigToml`], the file as written: every field
//!   optional, every table closed to unknown keys.
//! - [`document`]: reading the file, with the position of every key, and
//!   parse errors in the file's words.
//! - [`overrides`]: the flags, and the variables read.
//! - [`resolve`]: the layers into a [`Config`], with every fault collected.
//! - [`settings`]: [`Config`] and the types it holds.
//! - [`sources`]: where each value came from.
//! - [`error`]: one greppable line per fault, with file, line and column.
//! - [`entries`], [`show`], [`diff`]: a configuration as a list of values,
//!   printed, and compared (for a reload).
//! - [`build`]: what a [`Config`] builds: model chains, the agent's,
//!   scheduler's, server's and plugins' settings.
//! - [`template`]: the commented file `wasmclaw init` writes.
//! - [`watch`]: reload: the file watched, a valid change applied to turns
//!   that start after it, an invalid one refused whole.
//!
//! A configuration that does not load is never used in part: [`load`]
//! returns every fault, or a whole [`Config`].

pub mod build;
pub mod diff;
pub mod document;
pub mod entries;
pub mod error;
pub mod file;
pub mod mcp;
pub mod overrides;
pub mod resolve;
pub mod settings;
pub mod show;
pub mod sources;
pub mod template;
pub mod watch;

use std::path::{Path, PathBuf};

pub use diff::needs_restart;
pub use error::{ConfigError, ConfigErrors, Place};
pub use overrides::Overrides;
pub use settings::{
    AgentSettings, ApprovalRule, ApprovalSettings, Config, DEFAULT_AGENT, DEFAULT_APPROVAL_TIMEOUT,
    LimitsSettings, ModelRef, ModelSettings, Permission, PluginSettings, ProviderSettings,
    ServerSettings, ToolFilter, glob_match,
};
pub use sources::{Source, Sources};

use crate::home::Home;

/// The name of the file in the home.
pub const FILE_NAME: &str = "wasmclaw.toml";

/// The file to read: `explicit` (`--config`, `WASMCLAW_CONFIG`), which must
/// exist, or the home's, which may not.
pub fn file_path(home: &Home, explicit: Option<&Path>) -> (PathBuf, bool) {
    match explicit {
        Some(path) => (path.to_path_buf(), true),
        None => (home.config_file(), false),
    }
}

/// Reads the file (see [`file_path`]) and resolves it with `overrides` and
/// `env`: the configuration, or every fault found.
pub fn load(
    home: &Home,
    explicit: Option<&Path>,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let (path, must_exist) = file_path(home, explicit);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => None,
        Err(e) => {
            let message = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "no such file (named by --config or WASMCLAW_CONFIG)".to_string()
                }
                _ => format!("cannot read: {e}"),
            };
            return Err(ConfigError {
                place: Place::File(path),
                key: None,
                message,
            }
            .into());
        }
    };
    let parsed = match &text {
        Some(text) => Some(document::Document::parse(&path, text)?),
        None => None,
    };
    resolve::resolve(&resolve::Input {
        home,
        file: parsed.as_ref().map(|(doc, toml)| (doc, toml)),
        overrides,
        env,
    })
}

/// The process's environment, as [`load`] reads it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
