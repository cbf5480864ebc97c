//! Where each value of a [`super::Config`] came from, by key path: a flag,
//! an environment variable, a position of the file, or the built-in
//! default. `wasmclaw config show` prints it beside each value.

use std::collections::BTreeMap;
use std::fmt;

use super::error::Position;

/// Where one value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `flag --model`.
    Flag(&'static str),
    /// `env WASMCLAW_MODEL`.
    Env(String),
    /// `file PATH:LINE:COL`: where the value is written.
    File(Position),
    /// `default`: built in.
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Env(var) => write!(f, "env {var}"),
            Source::File(position) => write!(f, "file {position}"),
            Source::Default => f.write_str("default"),
        }
    }
}

/// The source of every value that did not come from its default, by key
/// path (`agents.coder.model`, `limits.retry.tries`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources(BTreeMap<String, Source>);

impl Sources {
    /// Records where the value at `key` came from.
    pub fn set(&mut self, key: impl Into<String>, source: Source) {
        let key = key.into();
        match source {
            Source::Default => self.0.remove(&key),
            source => self.0.insert(key, source),
        };
    }

    /// Where the value at `key` came from.
    pub fn get(&self, key: &str) -> &Source {
        self.0.get(key).unwrap_or(&Source::Default)
    }

    /// Every key not at its default, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Source)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}
