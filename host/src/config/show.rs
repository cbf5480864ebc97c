//! `wasmclaw config show`: the effective configuration as TOML-like lines,
//! each value on one line with where it came from as a trailing comment
//! (a system prompt longer than a line is cut, with its length; `--json`
//! has it whole). Keys never appear: a provider's `api_key_env` and the
//! server's `token_env` show the name of the variable and whether it is
//! set.

use serde_json::json;
use toml::Value;

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
        let value = match (&entry.value, entry.key.as_str()) {
            (Value::String(prompt), "system_prompt") => shortened(prompt),
            (value, _) => one_line(value),
        };
        out.push_str(&format!("{} = {value}  # {source}{state}\n", entry.key));
    }
    out
}

/// A value on one line: strings with their line breaks escaped.
fn one_line(value: &Value) -> String {
    match value {
        Value::String(s) => serde_json::to_string(s).expect("a string serializes"),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(one_line).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A prompt as one line: its first 60 characters, and its length when it
/// is longer.
fn shortened(prompt: &str) -> String {
    let count = prompt.chars().count();
    if count <= 60 {
        return one_line(&Value::String(prompt.to_string()));
    }
    let start: String = prompt.chars().take(60).collect();
    format!("{}… ({count} characters)", one_line(&Value::String(start)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_one_line() {
        let array = Value::Array(vec!["a\nb".into(), Value::Integer(3)]);
        assert_eq!(one_line(&array), r#"["a\nb", 3]"#);
        assert_eq!(shortened("Be brief.\n"), r#""Be brief.\n""#);
        let long = "x".repeat(61);
        assert_eq!(
            shortened(&long),
            format!("\"{}\"… (61 characters)", "x".repeat(60))
        );
    }
}
