//! wasmclaw tool plugin `research`: a question researched from two angles by
//! two sub-agents (child turns of the calling turn, started through the
//! host's `agent.spawn-subturn`), with different tools, and their answers
//! merged into one report.
//!
//! - The analyst answers the question with the tools it is given (by
//!   default all of the turn's tools).
//! - The reviewer gets no tools: it checks the question's assumptions and
//!   says what an answer must not overlook.
//!
//! The children run one after the other (a component call is synchronous);
//! either may fail without losing the other's answer.

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `Research`. The glue is generated unsafe
// code; everything written by hand stays safe.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::Research;
    #[cfg(target_arch = "wasm32")]
    export!(Research);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
use bindings::wasmclaw::plugin::agent::SubturnRequest;
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use serde_json::{Map, Value, json};

struct Research;

/// One sub-agent's part.
pub struct Angle {
    pub label: &'static str,
    pub task: String,
    /// None: all of the turn's tools.
    pub tools: Option<Vec<String>>,
}

/// The two angles on `question`; `tools` narrows the analyst's tools.
pub fn angles(question: &str, tools: Option<Vec<String>>) -> [Angle; 2] {
    [
        Angle {
            label: "analyst",
            task: format!(
                "Answer this question as precisely as you can, using your tools where they help. \
                 Give the answer first, then how you got it, in at most five sentences.\n\nQuestion: {question}"
            ),
            tools,
        },
        Angle {
            label: "reviewer",
            task: format!(
                "Do not answer this question. Check it: name any assumption in it that may be \
                 wrong, and what a good answer must not overlook, in at most three sentences.\n\nQuestion: {question}"
            ),
            tools: Some(Vec::new()),
        },
    ]
}

/// The report: each angle's answer, or why it is missing.
pub fn merge(question: &str, parts: &[(&str, Result<String, String>)]) -> String {
    let mut report = format!("Research on: {question}\n");
    for (label, part) in parts {
        match part {
            Ok(answer) => report.push_str(&format!("\n## {label}\n{}\n", answer.trim())),
            Err(error) => report.push_str(&format!("\n## {label}\n(no answer: {error})\n")),
        }
    }
    report
}

fn invalid(message: impl Into<String>) -> PluginError {
    PluginError {
        kind: ErrorKind::InvalidInput,
        message: message.into(),
        retryable: false,
    }
}

/// `question` and the optional `tools` list from the arguments.
pub fn parse(arguments: &str) -> Result<(String, Option<Vec<String>>), String> {
    let args: Map<String, Value> =
        serde_json::from_str(arguments).map_err(|e| format!("arguments: {e}"))?;
    let question = args
        .get("question")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or("question: expected a non-empty string")?;
    let tools = match args.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|t| t.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("tools: expected a list of tool names")?,
        ),
        Some(_) => return Err("tools: expected a list of tool names".into()),
    };
    Ok((question.to_string(), tools))
}

impl Guest for Research {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "research".into(),
            description: "Researches a question with two sub-agents: an analyst that answers it \
                          with tools, and a reviewer that checks its assumptions. Returns both, \
                          merged. Use it for questions that deserve a second look."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "The question to research."},
                    "tools": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The tools the analyst may use (default: all of yours)."
                    }
                },
                "required": ["question"],
                "additionalProperties": false
            })
            .to_string(),
        }]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        if name != "research" {
            return Err(PluginError {
                kind: ErrorKind::NotFound,
                message: format!("unknown tool `{name}`"),
                retryable: false,
            });
        }
        let (question, tools) = parse(&arguments).map_err(invalid)?;
        let mut parts = Vec::new();
        for angle in angles(&question, tools) {
            let request = SubturnRequest {
                task: angle.task,
                label: Some(angle.label.to_string()),
                model: None,
                agent: None,
                tools: angle.tools,
                critical: false,
                timeout_ms: Some(120_000),
                token_budget: None,
            };
            let answer = bindings::wasmclaw::plugin::agent::spawn_subturn(&request);
            parts.push((angle.label, answer.map_err(|e| e.message)));
        }
        if parts.iter().all(|(_, p)| p.is_err()) {
            // Denied, or both failed: the first reason is the one to read.
            let reason = parts
                .into_iter()
                .find_map(|(_, p)| p.err())
                .unwrap_or_default();
            return Err(PluginError {
                kind: ErrorKind::Upstream,
                message: format!("no sub-agent answered: {reason}"),
                retryable: false,
            });
        }
        Ok(merge(&question, &parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        assert_eq!(
            parse(r#"{"question": " why? ", "tools": ["calculate"]}"#),
            Ok(("why?".into(), Some(vec!["calculate".into()])))
        );
        assert_eq!(
            parse(r#"{"question": ""}"#),
            Err("question: expected a non-empty string".into())
        );
        assert_eq!(
            parse(r#"{"question": "q", "tools": [1]}"#),
            Err("tools: expected a list of tool names".into())
        );
    }

    #[test]
    fn the_reviewer_gets_no_tools_and_a_missing_answer_says_why() {
        let [analyst, reviewer] = angles("q", None);
        assert_eq!((analyst.tools, reviewer.tools), (None, Some(vec![])));
        assert_eq!(
            merge(
                "q",
                &[
                    ("analyst", Ok(" 42 ".into())),
                    ("reviewer", Err("timed out".into()))
                ]
            ),
            "Research on: q\n\n## analyst\n42\n\n## reviewer\n(no answer: timed out)\n"
        );
    }
}
