//! `wasmclaw config show`: the effective configuration as TOML, each value
//! with where it came from as a trailing comment. Keys never appear: a
//! provider's `api_key_env` and the server's `token_env` show the name of
//! the variable and whether it is set.

use serde_json::json;

use super::entries::Entry;
use super::settings::Config;

/// Whether the entry names a variable that holds a key, and if so whether
/// it is set.
fn key_state(entry: &Entry, env: &dyn Fn(&str) -> Option<String>) -> Option<bool> {
    let holds_key = entry.key == "api_key_env" || entry.path() == "server.token_env";
    let var = entry.value.as_str().filter(|_| holds_key)?;
    Some(env(var).is_some_and(|v| !v.trim().is_empty()))
}

/// The text: `[table]` headers, then `key = value  # source` lines.
pub fn text(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = match &config.file {
        Some(file) => format!("# configuration file: {}\n", file.display()),
        None => "# no configuration file: built-in defaults, environment and flags\n".to_string(),
    };
    let mut table = None;
    for entry in config.entries() {
        if table.as_ref() != Some(&entry.table) {
            if !entry.table.is_empty() {
                out.push_str(&format!("\n[{}]\n", entry.table));
            }
            table = Some(entry.table.clone());
        }
        let source = config.sources.get(&entry.path());
        let state = match key_state(&entry, env) {
            Some(true) => "; set",
            Some(false) => "; not set",
            None => "",
        };
        out.push_str(&format!(
            "{} = {}  # {source}{state}\n",
            entry.key, entry.value
        ));
    }
    out
}

/// The same as JSON: `{"file", "values": [{"key", "value", "source"}]}`,
/// with `"set"` beside a variable that holds a key.
pub fn json(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> serde_json::Value {
    let values: Vec<serde_json::Value> = (config.entries().iter())
        .map(|entry| {
            let mut value = json!({
                "key": entry.path(),
                "value": entry.value,
                "source": config.sources.get(&entry.path()).to_string(),
            });
            if let Some(set) = key_state(entry, env) {
                value["set"] = json!(set);
            }
            value
        })
        .collect();
    json!({
        "file": config.file.as_ref().map(|f| f.display().to_string()),
        "values": values,
    })
}
