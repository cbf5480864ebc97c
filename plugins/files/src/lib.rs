//! wasmclaw tool plugin `files`: list, read, write and search files in the
//! one directory the operator grants (seen by the plugin at `/workspace`).

pub mod workspace;

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `Files`. The glue is generated unsafe code;
// everything written by hand stays safe. It is exported only when building
// the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::Files;
    #[cfg(target_arch = "wasm32")]
    export!(Files);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
#[cfg(target_arch = "wasm32")]
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use serde_json::{Value, json};
use workspace::{DEFAULT_READ, DEFAULT_RESULTS, MAX_READ, MAX_RESULTS, Workspace, invalid};

/// Where the granted directory is mounted inside the sandbox (files.toml).
const ROOT: &str = "/workspace";

struct Files;

const PATH_HELP: &str = "Path relative to the workspace, '/'-separated, e.g. 'notes/todo.md'.";

impl Guest for Files {
    fn list_tools() -> Vec<ToolSpec> {
        vec![
            tool(
                "list_files",
                "List the files and directories in a workspace directory, one per line: \
                 'dir/', 'file (N bytes)', 'link@'. Paths are relative to the workspace. \
                 Recursive listings do not enter .git and stop after 1000 entries.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {
                            "type": "string",
                            "description": "Directory relative to the workspace \
                                (default \".\", the workspace itself)."
                        },
                        "recursive": {
                            "type": "boolean",
                            "description": "Also list everything below, depth first \
                                (default false)."
                        }
                    },
                    "required": [],
                    "additionalProperties": false
                }),
            ),
            tool(
                "read_file",
                "Read a UTF-8 text file from the workspace, up to `limit` bytes from \
                 `offset`. A partial read stops after its last whole line and ends with a \
                 note giving the byte range shown and the offset to continue from. Binary \
                 files are reported, not shown.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": PATH_HELP},
                        "offset": {
                            "type": "integer",
                            "description": "Byte offset to start at (default 0).",
                            "minimum": 0
                        },
                        "limit": {
                            "type": "integer",
                            "description": "Most bytes to read (default 65536, at most \
                                1048576).",
                            "minimum": 1,
                            "maximum": MAX_READ
                        }
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
            tool(
                "write_file",
                "Write text to a file in the workspace, replacing it (or appending), and \
                 creating missing parent directories.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": PATH_HELP},
                        "content": {"type": "string", "description": "The text to write."},
                        "append": {
                            "type": "boolean",
                            "description": "Append to the end instead of replacing the \
                                file (default false)."
                        }
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            ),
            tool(
                "search_files",
                "Search the text files under a workspace directory for lines containing a \
                 plain substring (case-sensitive, not a regex). Returns 'path:line: text' \
                 lines. Binary files, files over 8 MiB and .git are skipped.",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {
                            "type": "string",
                            "description": "The exact text to look for.",
                            "minLength": 1
                        },
                        "path": {
                            "type": "string",
                            "description": "Directory or file to search, relative to the \
                                workspace (default \".\")."
                        },
                        "max_results": {
                            "type": "integer",
                            "description": "Most matching lines to return (default 100).",
                            "minimum": 1,
                            "maximum": MAX_RESULTS
                        }
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            ),
        ]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| invalid(format!("arguments are not JSON: {e}")))?;
        let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
        debug(&format!("{name}: '{path}'"));
        let ws = Workspace::new(ROOT);
        match name.as_str() {
            "list_files" => ws.list(path, flag(&args, "recursive")),
            "read_file" => ws.read(
                string(&args, "path")?,
                integer(&args, "offset").unwrap_or(0),
                integer(&args, "limit").unwrap_or(DEFAULT_READ),
            ),
            "write_file" => ws.write(
                string(&args, "path")?,
                string(&args, "content")?,
                flag(&args, "append"),
            ),
            "search_files" => ws.search(
                string(&args, "pattern")?,
                path,
                integer(&args, "max_results").map_or(DEFAULT_RESULTS, |n| {
                    usize::try_from(n).unwrap_or(MAX_RESULTS)
                }),
            ),
            _ => Err(PluginError {
                kind: ErrorKind::NotFound,
                message: format!("no tool named '{name}'"),
                retryable: false,
            }),
        }
    }
}

fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, PluginError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("'{key}' (a string) is required")))
}

fn integer(args: &Value, key: &str) -> Option<u64> {
    args.get(key).and_then(Value::as_u64)
}

fn flag(args: &Value, key: &str) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn tool(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: schema.to_string(),
    }
}

/// Logs one line through the host's `log` import. Host-side unit tests have
/// no host to log to, so there it does nothing.
fn debug(message: &str) {
    #[cfg(target_arch = "wasm32")]
    log(Level::Debug, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = message;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_closed_objects() {
        let tools = Files::list_tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["list_files", "read_file", "write_file", "search_files"]
        );
        for t in &tools {
            let schema: Value = serde_json::from_str(&t.input_schema).unwrap();
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            for key in schema["required"].as_array().unwrap() {
                assert!(schema["properties"].get(key.as_str().unwrap()).is_some());
            }
        }
    }
}
