//! wasmclaw tool plugin `__NAME__`: one tool, `__NAME___words`, that counts
//! the lines, words, characters and bytes of a text. Replace it with yours: the
//! shape (a JSON Schema per tool, arguments checked, errors the model can act
//! on) stays the same.

// Rust bindings for the `tool-plugin` world of wit/plugin.wit, and the glue
// that routes the component's exports to `Plugin`.
mod bindings {
    wit_bindgen::generate!({ world: "tool-plugin", path: "wit" });

    use super::Plugin;
    export!(Plugin);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use serde_json::{Value, json};

struct Plugin;

impl Guest for Plugin {
    fn list_tools() -> Vec<ToolSpec> {
        let schema = json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The text to count."}
            },
            "required": ["text"],
            "additionalProperties": false
        });
        vec![ToolSpec {
            // ^[a-zA-Z0-9_-]{1,64}$, unique among all loaded plugins.
            name: "__NAME___words".into(),
            description: "Count the lines, words (whitespace-separated), characters and UTF-8 bytes of a text."
                .into(),
            input_schema: schema.to_string(),
        }]
    }

    fn call_tool(_ctx: CallContext, name: String, arguments: String) -> Result<String, PluginError> {
        // The host has checked `arguments` against the schema already; a
        // plugin still parses defensively and says what was wrong.
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| invalid(format!("arguments are not JSON: {e}")))?;
        match name.as_str() {
            "__NAME___words" => {
                let text = args["text"]
                    .as_str()
                    .ok_or_else(|| invalid("`text` must be a string".into()))?;
                Ok(json!({
                    "lines": text.lines().count(),
                    "words": text.split_whitespace().count(),
                    "characters": text.chars().count(),
                    "bytes": text.len(),
                })
                .to_string())
            }
            other => Err(PluginError {
                kind: ErrorKind::NotFound,
                message: format!("no tool named {other:?}"),
                retryable: false,
            }),
        }
    }
}

fn invalid(message: String) -> PluginError {
    PluginError {
        kind: ErrorKind::InvalidInput,
        message,
        retryable: false,
    }
}
