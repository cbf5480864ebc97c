//! What changed between two configurations, key path by key path (the
//! `config_reloaded` event names them), and which changes apply only once
//! the host restarts.

use std::collections::BTreeMap;

use super::settings::Config;

impl Config {
    /// The key paths whose values differ between `self` and `new`, in key
    /// order; a value only one of them has (a provider added, an agent
    /// removed, a prompt set) counts. Sources are not compared: the same
    /// value moved from a flag to the file is no change.
    pub fn diff(&self, new: &Config) -> Vec<String> {
        let values = |c: &Config| -> BTreeMap<String, toml::Value> {
            c.entries()
                .into_iter()
                .map(|e| (e.path(), e.value))
                .collect()
        };
        let (old, new) = (values(self), values(new));
        let mut changed: Vec<String> = (old.iter())
            .filter(|(k, v)| new.get(*k) != Some(v))
            .map(|(k, _)| k.clone())
            .collect();
        changed.extend(new.keys().filter(|k| !old.contains_key(*k)).cloned());
        changed.sort();
        changed
    }
}

/// Whether a change of the value at `path` (a key path of
/// [`Config::diff`]) takes effect only when the host restarts: what is
/// built once at start. That is the server (its socket, token, body limit
/// and grace are the API's from its start), the plugin runtime (its
/// directory, load bounds and the defaults of every grants file, applied
/// as each plugin loads), and the two host-wide pools: turns at once
/// (`limits.max_parallel_turns`) and SubTurns alive (`limits.max_subturns`).
/// Everything else (agents, providers, retries, a call's limits) is read by
/// each turn from the configuration current when it starts.
pub fn needs_restart(path: &str) -> bool {
    let under = |table: &str| {
        path.strip_prefix(table)
            .is_some_and(|rest| rest.starts_with('.'))
    };
    under("server")
        || under("plugins")
        || under("hooks")
        || path == "limits.max_parallel_turns"
        || path == "limits.max_subturns"
}
