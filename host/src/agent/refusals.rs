//! The loop rule: a model that keeps making the same refused tool call.
//!
//! Small models loop: refused a call, they send it again, unchanged, until
//! the context is full. A call is refused when it cannot succeed as written,
//! whatever the moment: its arguments do not fit the tool's schema or the
//! tool rejects them (`invalid-input`), the tool does not exist
//! (`not-found`), or a hook or grant forbids it (`denied`). Each turn counts
//! its refused calls by tool and arguments (compared as JSON, so spacing and
//! key order do not matter). From the second identical refusal on, the
//! result tells the model that it repeated the call; at
//! [`AgentConfig::max_repeated_refusals`](crate::agent::AgentConfig) identical
//! refusals the turn ends with an `error` naming the call and the refusal,
//! instead of filling the context.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::llm::ToolCall;
use crate::plugin::{ErrorKind, ToolError};

/// The refused calls of one turn.
#[derive(Debug, Default)]
pub struct Refusals {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Refusals per (tool, arguments as canonical JSON).
    counts: HashMap<(String, String), u32>,
    /// The call refused most often (as the model last wrote it), and how:
    /// for the turn's reason.
    worst: Option<Worst>,
}

#[derive(Debug)]
struct Worst {
    count: u32,
    tool: String,
    arguments: String,
    error: String,
}

/// Whether repeating the call unchanged can only be refused again.
pub fn is_refusal(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidInput | ErrorKind::NotFound | ErrorKind::Denied
    )
}

impl Refusals {
    /// Counts a failed `call`; returns the result the model reads: `shown`
    /// (the error's text), with a note when the same call was refused before.
    pub fn record(&self, call: &ToolCall, error: &ToolError, shown: String) -> String {
        if !is_refusal(error.kind) {
            return shown;
        }
        let arguments = canonical(&call.arguments);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let count = state
            .counts
            .entry((call.name.clone(), arguments))
            .or_insert(0);
        *count += 1;
        let count = *count;
        if state.worst.as_ref().is_none_or(|w| count > w.count) {
            state.worst = Some(Worst {
                count,
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                error: shown.clone(),
            });
        }
        if count < 2 {
            return shown;
        }
        format!(
            "{shown}\nThis exact call was refused {count} times in this turn; sent again unchanged it will be refused again. Change the arguments as the error says, or answer without this tool."
        )
    }

    /// The reason to end the turn, once a call was refused `max` times
    /// (0: never).
    pub fn exceeded(&self, max: u32) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let worst = state.worst.as_ref()?;
        (max > 0 && worst.count >= max).then(|| {
            format!(
                "the model made the same refused call {} times (the limit is {max}): {} {} was refused with: {}",
                worst.count,
                worst.tool,
                worst.arguments,
                worst.error.lines().next().unwrap_or_default()
            )
        })
    }
}

/// `arguments` as canonical JSON (its own text when it is not JSON).
fn canonical(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value) => sort_keys(value).to_string(),
        Err(_) => arguments.trim().to_string(),
    }
}

/// `value` with every object's keys in order, whatever the map keeps.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(arguments: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "calculate".into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn identical_refusals_are_counted_noted_and_end_the_turn_at_the_limit() {
        let refusals = Refusals::default();
        let refused = ToolError::new(ErrorKind::InvalidInput, "bad");
        let shown = || "error (invalid-input): bad".to_string();
        assert_eq!(
            refusals.record(&call(r#"{"a":1,"b":2}"#), &refused, shown()),
            "error (invalid-input): bad"
        );
        assert_eq!(refusals.exceeded(2), None);
        // The same arguments, spaced and ordered otherwise.
        let second = refusals.record(&call(r#"{ "b": 2, "a": 1 }"#), &refused, shown());
        assert_eq!(
            second,
            "error (invalid-input): bad\nThis exact call was refused 2 times in this turn; sent again unchanged it will be refused again. Change the arguments as the error says, or answer without this tool."
        );
        assert_eq!(
            refusals.exceeded(2).as_deref(),
            Some(
                r#"the model made the same refused call 2 times (the limit is 2): calculate { "b": 2, "a": 1 } was refused with: error (invalid-input): bad"#
            )
        );
        assert_eq!(refusals.exceeded(3), None);
        assert_eq!(refusals.exceeded(0), None);
    }

    #[test]
    fn other_failures_and_other_arguments_are_not_the_same_refusal() {
        let refusals = Refusals::default();
        let timeout = ToolError::new(ErrorKind::Timeout, "slow");
        for _ in 0..3 {
            refusals.record(&call("{}"), &timeout, "slow".into());
        }
        let refused = ToolError::new(ErrorKind::NotFound, "no such tool");
        refusals.record(&call(r#"{"a":1}"#), &refused, "x".into());
        refusals.record(&call(r#"{"a":2}"#), &refused, "x".into());
        assert_eq!(refusals.exceeded(2), None);
    }
}
