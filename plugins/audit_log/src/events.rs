//! Which events the audit log asks for, and how one becomes a line.

use serde_json::Value;
use wasmclaw_protocol::EventKind;

/// The event kinds to subscribe to: the config's `events` list when there is
/// one, else [`default_kinds`]. `Err` says why `events` was not usable (the
/// caller logs it and falls back to the defaults).
pub fn kinds(config: &Value) -> Result<Vec<String>, String> {
    let Some(events) = config.get("events") else {
        return Ok(default_kinds());
    };
    let strings = events.as_array().and_then(|list| {
        list.iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
    });
    strings.ok_or_else(|| "config `events` must be a list of event kinds".to_string())
}

/// Every event kind of the host except `llm_delta` (one per streamed chunk of
/// model text: many, small, and repeated whole in `llm_response`), as a
/// subscription wants them. The list comes from the host's protocol crate,
/// so a new kind is logged without a change here.
pub fn default_kinds() -> Vec<String> {
    EventKind::ALL
        .iter()
        .filter(|k| **k != EventKind::LlmDelta)
        .map(|k| k.as_str().to_string())
        .collect()
}

/// The event exactly as given, made to fit on one line. Raw line breaks can
/// only be whitespace between JSON tokens (inside strings they are escaped as
/// `\n`), so dropping them keeps the JSON valid and its content unchanged.
pub fn line(event: &str) -> String {
    let mut line: String = event
        .trim()
        .chars()
        .filter(|c| !matches!(c, '\n' | '\r'))
        .collect();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_leave_out_llm_delta() {
        let kinds = kinds(&json!({})).unwrap();
        assert_eq!(kinds.len(), EventKind::ALL.len() - 1);
        assert!(!kinds.iter().any(|k| k == "llm_delta"));
        assert!(kinds.iter().any(|k| k == "hook_error"));
    }

    #[test]
    fn config_overrides_the_list() {
        let config = json!({"events": ["tool_call_end", "turn_end"]});
        assert_eq!(kinds(&config).unwrap(), ["tool_call_end", "turn_end"]);
        assert!(kinds(&json!({"events": "turn_end"})).is_err());
        assert!(kinds(&json!({"events": [1]})).is_err());
    }

    #[test]
    fn one_line_per_event() {
        assert_eq!(
            line(r#"{"seq":1,"output":"a\nb"}"#),
            "{\"seq\":1,\"output\":\"a\\nb\"}\n"
        );
        assert_eq!(line("{\n  \"seq\": 1\n}\n"), "{  \"seq\": 1}\n");
    }
}
