//! Resolution: the file's [`ConfigToml`], the flags and the environment
//! into one [`Config`], every value by the same rule (flag > environment >
//! file > built-in default) and with its [`Source`].
//!
//! Resolution is a pure function of its [`Input`] (it reads nothing but
//! the prompt files the configuration names): every fault is collected,
//! and a configuration with one is not returned at all, so nothing ever
//! runs on half of it.
//!
//! - [`providers`]: the built-in providers and `[providers.NAME]`.
//! - [`agents`]: `[agents.NAME]`, the agent run and its flags.
//! - [`host`]: `[limits]`, `[server]`, `[plugins]` and `[hooks]`.

mod agents;

pub use agents::parse_chain;
mod host;
mod mcp;
mod providers;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::Duration;

use super::document::{Document, Step, key_path};
use super::error::{ConfigError, ConfigErrors, Place};
use super::file::ConfigToml;
use super::overrides::Overrides;
use super::settings::Config;
use super::sources::{Source, Sources};
use crate::home::Home;

/// What a configuration is resolved from.
pub struct Input<'a> {
    pub home: &'a Home,
    /// The file read, parsed; `None`: no file (built-in defaults).
    pub file: Option<(&'a Document<'a>, &'a ConfigToml)>,
    pub overrides: &'a Overrides,
    /// The environment (`std::env::var` in the binary; a map in tests).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The configuration `input` describes, or every fault in it.
pub fn resolve(input: &Input) -> Result<Config, ConfigErrors> {
    let empty = ConfigToml::default();
    let (doc, toml) = match input.file {
        Some((doc, toml)) => (Some(doc), toml),
        None => (None, &empty),
    };
    let mut r = Resolver {
        doc,
        env: input.env,
        errors: Vec::new(),
        sources: Sources::default(),
    };
    let flags = input.overrides;
    let mut providers = providers::resolve(&mut r, toml.providers.as_ref());
    let limits = host::limits(&mut r, toml.limits.as_ref(), flags);
    let (agents, default_agent) = agents::resolve(
        &mut r,
        toml.agents.as_ref(),
        &flags.agent,
        &mut providers,
        &limits,
    );
    let server = host::server(&mut r, toml.server.as_ref(), &flags.server);
    let plugins = host::plugins(
        &mut r,
        toml.plugins.as_ref(),
        &flags.plugins,
        flags.serving,
        input.home,
    );
    let hooks = host::hooks(&mut r, toml.hooks.as_ref());
    let mcp_server = mcp::server(
        &mut r,
        toml.mcp.as_ref().and_then(|m| m.server.as_ref()),
        &agents,
    );
    if !r.errors.is_empty() {
        // Flags' and variables' faults first, then the file's in its order.
        r.errors.sort_by_key(|e| match &e.place {
            Place::Elsewhere => None,
            Place::File(_) => Some(None),
            Place::At(position) => Some(Some((position.line, position.column))),
        });
        return Err(ConfigErrors(r.errors));
    }
    Ok(Config {
        file: doc.map(|d| d.path.clone()),
        providers,
        agents,
        default_agent,
        limits,
        server,
        plugins,
        hooks,
        mcp_client: super::mcp::McpClientSettings::from_toml(toml.mcp.as_ref()),
        mcp_server,
        sources: r.sources,
    })
}

/// The state of one resolution: the file, the environment, what went
/// wrong and where each value came from.
pub(super) struct Resolver<'a> {
    doc: Option<&'a Document<'a>>,
    env: &'a dyn Fn(&str) -> Option<String>,
    errors: Vec<ConfigError>,
    sources: Sources,
}

/// A value as an environment variable writes it.
pub(super) trait FromEnv: Sized {
    fn from_env(text: &str) -> Result<Self, String>;
}

impl FromEnv for u64 {
    fn from_env(text: &str) -> Result<Self, String> {
        text.trim()
            .parse()
            .map_err(|_| format!("expected a whole number, 0 or more, found {text:?}"))
    }
}

impl FromEnv for f64 {
    fn from_env(text: &str) -> Result<Self, String> {
        text.trim()
            .parse()
            .map_err(|_| format!("expected a number, found {text:?}"))
    }
}

impl FromEnv for String {
    fn from_env(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
}

impl<'a> Resolver<'a> {
    /// The variable `name`, unless unset or blank.
    pub fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.trim().is_empty())
    }

    /// The folder the file's relative paths are taken from.
    pub fn folder(&self) -> Option<&'a Path> {
        self.doc.map(|d| d.folder())
    }

    /// The value at `key`: the flag's, else the variable's, else the
    /// file's, else `default`. The value chosen is `check`ed, and a failed
    /// check is an error put where the value came from; its source is
    /// recorded.
    pub fn pick<T: FromEnv, U>(
        &mut self,
        key: &[Step],
        flag: Option<(&'static str, Option<T>)>,
        var: Option<&'static str>,
        file: Option<T>,
        default: U,
        check: impl FnOnce(T) -> Result<U, String>,
    ) -> U {
        let (raw, source) = if let Some((name, Some(value))) = flag {
            (value, Source::Flag(name))
        } else if let Some((var, text)) = var.and_then(|v| self.var(v).map(|t| (v, t))) {
            match T::from_env(&text) {
                Ok(value) => (value, Source::Env(var.to_string())),
                Err(message) => {
                    self.errors
                        .push(ConfigError::elsewhere(format!("{var}: {message}")));
                    return default;
                }
            }
        } else if let Some(value) = file {
            (value, self.file_source(key))
        } else {
            return default;
        };
        match check(raw) {
            Ok(value) => {
                self.sources.set(key_path(key), source);
                value
            }
            Err(message) => {
                self.fail(&source, key, message);
                default
            }
        }
    }

    /// A value of the file alone, `check`ed (see [`Resolver::pick`]).
    pub fn file<T: FromEnv, U>(
        &mut self,
        key: &[Step],
        file: Option<T>,
        default: U,
        check: impl FnOnce(T) -> Result<U, String>,
    ) -> U {
        self.pick(key, None, None, file, default, check)
    }

    /// Where the value at `key` is written.
    pub fn file_source(&self, key: &[Step]) -> Source {
        match self.doc {
            Some(doc) => Source::File(doc.value_at(key)),
            None => Source::Default,
        }
    }

    /// Records the source of the value at `key`.
    pub fn set_source(&mut self, key: &[Step], source: Source) {
        self.sources.set(key_path(key), source);
    }

    /// An error about the value at `key`, which came from `source`.
    pub fn fail(&mut self, source: &Source, key: &[Step], message: String) {
        let error = match source {
            Source::Flag(flag) => ConfigError::elsewhere(format!("{flag}: {message}")),
            Source::Env(var) => ConfigError::elsewhere(format!("{var}: {message}")),
            Source::File(position) => ConfigError::at(position.clone(), key_path(key), message),
            Source::Default => ConfigError::elsewhere(format!("{}: {message}", key_path(key))),
        };
        self.errors.push(error);
    }

    /// An error about the value at `key` of the file.
    pub fn fail_in_file(&mut self, key: &[Step], message: String) {
        let source = self.file_source(key);
        self.fail(&source, key, message);
    }

    /// An error about the key (not the value) `key` of the file.
    pub fn fail_at_key(&mut self, key: &[Step], message: String) {
        match self.doc {
            Some(doc) => self
                .errors
                .push(ConfigError::at(doc.key_at(key), key_path(key), message)),
            None => self.fail(&Source::Default, key, message),
        }
    }

    /// A name of an agent or a provider (`table`) must be what `--agent`,
    /// `PROVIDER:MODEL` and a URL can carry.
    pub fn check_name(&mut self, table: &'static str, name: &str) {
        let valid = (1..=64).contains(&name.len())
            && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            self.fail_at_key(
                &[Step::Key(table), Step::Key(name)],
                "expected a name of 1 to 64 letters, digits, `_` and `-`".into(),
            );
        }
    }

    /// An error that names its flag or variable itself.
    pub fn fail_elsewhere(&mut self, message: String) {
        self.errors.push(ConfigError::elsewhere(message));
    }
}

/// `min..=max`.
pub(super) fn range(min: u64, max: u64) -> impl FnOnce(u64) -> Result<u64, String> {
    move |value| {
        if (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(format!("expected {min} to {max}, found {value}"))
        }
    }
}

/// More than 0 seconds (and less than a century).
pub(super) fn positive_secs(value: f64) -> Result<Duration, String> {
    if value > 0.0 {
        seconds(value).map_err(|_| format!("expected a positive number of seconds, found {value}"))
    } else {
        Err(format!(
            "expected a positive number of seconds, found {value}"
        ))
    }
}

/// 0 seconds or more (and less than a century).
pub(super) fn secs(value: f64) -> Result<Duration, String> {
    seconds(value).map_err(|_| format!("expected a number of seconds, 0 or more, found {value}"))
}

fn seconds(value: f64) -> Result<Duration, ()> {
    const CENTURY: f64 = 100.0 * 365.0 * 24.0 * 3600.0;
    if (0.0..CENTURY).contains(&value) {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(())
    }
}

/// The name of an environment variable: letters, digits and `_`, not
/// starting with a digit.
pub(super) fn env_name(name: String) -> Result<String, String> {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid {
        Ok(name)
    } else {
        Err(format!(
            "expected the name of an environment variable (letters, digits and _), found {name:?}"
        ))
    }
}
