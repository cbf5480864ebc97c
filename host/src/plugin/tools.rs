//! Tool specs: the rules a plugin's `list-tools` answer must follow, and
//! validation of a call's arguments against the tool's input schema.
//!
//! A tool's schema is compiled (as a JSON Schema validator) on its first
//! call, not at load: most tools of a run are never called, and the first
//! compilation of all sets up the validator library (milliseconds). That a
//! schema compiles is still checked at load, the first time a plugin's
//! schemas are seen: the loader keeps a mark of schemas found good in the
//! compile cache ([`schemas_digest`]), and checks them again only when
//! they change.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use jsonschema::error::ValidationErrorKind;
use serde::Serialize;
use serde_json::Value;

use super::bindings::latest::wasmclaw::plugin::types::ToolSpec;
use super::error::{ErrorKind, ToolError};
use super::units::size;

/// Most tools one plugin may offer.
pub const MAX_TOOLS_PER_PLUGIN: usize = 128;
/// Longest description kept.
pub const MAX_DESCRIPTION: usize = 8 * 1024;
/// Largest input schema of one tool, as the JSON text `list-tools` returns:
/// every model request carries it.
pub const MAX_SCHEMA: usize = 64 * 1024;
/// Largest sum of one plugin's schemas and (kept) descriptions: what the
/// plugin adds to every model request.
pub const MAX_SPECS: usize = 256 * 1024;
/// Validation errors named in one message.
const MAX_REPORTED_ERRORS: usize = 3;

/// A validated tool of a loaded plugin.
#[derive(Clone, Serialize)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// Compiled on first use; shared by the tool's clones.
    #[serde(skip)]
    validator: Arc<OnceLock<Result<jsonschema::Validator, String>>>,
}

/// When [`validate_specs`] compiles the schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaCheck {
    /// Now: a schema that does not compile refuses the plugin.
    Now,
    /// On each tool's first call: these schemas were found good before.
    OnFirstCall,
}

/// What identifies a plugin's schemas for [`SchemaCheck`]: a digest of
/// their texts and of this host's version.
pub fn schemas_digest(specs: &[ToolSpec]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(env!("CARGO_PKG_VERSION"));
    for spec in specs {
        hash.update(spec.input_schema.len().to_le_bytes());
        hash.update(&spec.input_schema);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).finish()
    }
}

/// The names of the host's built-in tools, which no plugin tool may take:
/// the model would see two tools of one name, and a call would reach only
/// one of them.
pub const RESERVED_TOOL_NAMES: [&str; 3] = [
    crate::agent::subturn::SPAWN,
    crate::agent::subturn::SUBAGENT,
    crate::agent::history_search::HISTORY_SEARCH,
];

/// Whether the OpenAI and Anthropic APIs accept `name` as a tool name:
/// `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks what `list-tools` returned; the error says which tool and why.
/// The schemas are compiled now or on first call, as `check` says.
pub fn validate_specs(specs: Vec<ToolSpec>, check: SchemaCheck) -> Result<Vec<Tool>, String> {
    if specs.len() > MAX_TOOLS_PER_PLUGIN {
        return Err(format!(
            "list-tools returned {} tools; at most {MAX_TOOLS_PER_PLUGIN} are allowed",
            specs.len()
        ));
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(specs.len());
    let mut total = 0;
    for spec in specs {
        let name = spec.name;
        if !is_valid_tool_name(&name) {
            return Err(format!(
                "tool name {name:?} is not accepted by model APIs: use 1 to 64 of a-z, A-Z, 0-9, '_' and '-'"
            ));
        }
        if RESERVED_TOOL_NAMES.contains(&name.as_str()) {
            return Err(format!(
                "tool name {name:?} is reserved: the host's built-in tools ({}) cannot be offered by a plugin; rename it",
                RESERVED_TOOL_NAMES.join(", ")
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(format!("tool name {name:?} is listed twice"));
        }
        if spec.input_schema.len() > MAX_SCHEMA {
            return Err(format!(
                "tool {name:?}: input-schema is {}, over the limit of {} per tool",
                size(spec.input_schema.len() as u64),
                size(MAX_SCHEMA as u64)
            ));
        }
        let schema: Value = serde_json::from_str(&spec.input_schema)
            .map_err(|e| format!("tool {name:?}: input-schema is not valid JSON: {e}"))?;
        if !schema.is_object() {
            return Err(format!(
                "tool {name:?}: input-schema must be a JSON object (a JSON Schema), found {}",
                json_type(&schema)
            ));
        }
        let validator = OnceLock::new();
        if check == SchemaCheck::Now {
            let compiled = compile(&name, &schema)?;
            let _ = validator.set(Ok(compiled));
        }
        let mut description = spec.description;
        description.truncate(description.floor_char_boundary(MAX_DESCRIPTION));
        total += spec.input_schema.len() + description.len();
        if total > MAX_SPECS {
            return Err(format!(
                "the input schemas and descriptions of its tools take more than {} (at tool {name:?}); every model request carries them",
                size(MAX_SPECS as u64)
            ));
        }
        tools.push(Tool {
            name,
            description,
            input_schema: schema,
            validator: Arc::new(validator),
        });
    }
    Ok(tools)
}

/// `schema` as a validator; the error names the tool.
fn compile(name: &str, schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema)
        .map_err(|e| format!("tool {name:?}: input-schema is not a valid JSON Schema: {e}"))
}

impl Tool {
    /// A tool of the host's own, whose schema is part of the host (a test
    /// compiles every built-in's).
    pub fn builtin(name: &str, description: &str, schema: Value) -> Tool {
        Tool {
            name: name.to_string(),
            description: description.to_string(),
            input_schema: schema,
            validator: Arc::default(),
        }
    }

    /// Whether its schema has been compiled yet (on its first call, or at
    /// load when the schemas were new).
    pub fn is_compiled(&self) -> bool {
        self.validator.get().is_some()
    }

    /// The compiled schema, compiled now if this is the first call.
    fn validator(&self) -> Result<&jsonschema::Validator, ToolError> {
        self.validator
            .get_or_init(|| compile(&self.name, &self.input_schema))
            .as_ref()
            .map_err(|e| ToolError::new(ErrorKind::Internal, e.clone()))
    }

    /// Parses and validates call arguments; the error names the failing
    /// fields and says what the schema expects, for the model to correct
    /// (an argument the schema does not have is named, and a JSON Schema
    /// keyword copied from the tool's description is called one).
    pub fn check_arguments(&self, arguments: &str) -> Result<(), ToolError> {
        let value: Value = serde_json::from_str(arguments).map_err(|e| {
            ToolError::new(
                ErrorKind::InvalidInput,
                format!("arguments for {} are not valid JSON: {e}", self.name),
            )
        })?;
        let problems: Vec<String> = self
            .validator()?
            .iter_errors(&value)
            .take(MAX_REPORTED_ERRORS)
            .map(|e| {
                let path = e.instance_path().to_string();
                let problem = match e.kind() {
                    ValidationErrorKind::AdditionalProperties { unexpected } => {
                        not_arguments(&self.name, unexpected, path.is_empty())
                    }
                    _ => e.to_string(),
                };
                if path.is_empty() {
                    problem
                } else {
                    format!("{path}: {problem}")
                }
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let expected = shape(&self.input_schema)
            .map(|shape| format!("; expected {shape}"))
            .unwrap_or_default();
        Err(ToolError::new(
            ErrorKind::InvalidInput,
            format!(
                "invalid arguments for {}: {}{expected}",
                self.name,
                problems.join("; ")
            ),
        ))
    }
}

/// Keywords of JSON Schema that small models copy from a tool's schema into
/// its arguments.
const SCHEMA_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "default",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "examples",
    "title",
];

/// Names the properties the schema does not allow: at the top, arguments
/// of `tool` that do not exist.
fn not_arguments(tool: &str, unexpected: &[String], top: bool) -> String {
    let names: Vec<String> = unexpected.iter().map(|n| format!("{n:?}")).collect();
    let (names, verb) = match names.as_slice() {
        [one] => (one.clone(), "is"),
        _ => (names.join(", "), "are"),
    };
    let mut text = if top {
        let noun = if unexpected.len() == 1 {
            "an argument"
        } else {
            "arguments"
        };
        format!("{names} {verb} not {noun} of {tool}")
    } else {
        format!("{names} {verb} not allowed here")
    };
    let keywords: Vec<&str> = unexpected
        .iter()
        .map(String::as_str)
        .filter(|n| SCHEMA_KEYWORDS.contains(n))
        .collect();
    if !keywords.is_empty() {
        text.push_str(&format!(
            " ({} {} the schema's own rules, not values to send)",
            keywords.join(", "),
            if keywords.len() == 1 {
                "is one of"
            } else {
                "are"
            }
        ));
    }
    text
}

/// What a schema with `properties` expects, in one line:
/// `{"a": integer, "b": string} (required: a; no other properties)`.
fn shape(schema: &Value) -> Option<String> {
    let properties = schema.get("properties")?.as_object()?;
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, property)| format!("{name:?}: {}", type_text(property)))
        .collect();
    let mut notes = Vec::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !required.is_empty() {
        notes.push(format!("required: {}", required.join(", ")));
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        notes.push("no other properties".to_string());
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    };
    Some(format!("{{{}}}{notes}", fields.join(", ")))
}

/// A property's type as a word: `string`, `integer or null`, `one of "a", "b"`.
fn type_text(property: &Value) -> String {
    match (property.get("type"), property.get("enum")) {
        (_, Some(Value::Array(values))) => {
            let values: Vec<String> = values.iter().map(Value::to_string).collect();
            format!("one of {}", values.join(", "))
        }
        (Some(Value::String(t)), _) => t.clone(),
        (Some(Value::Array(types)), _) => {
            let types: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            types.join(" or ")
        }
        _ => "any".to_string(),
    }
}

/// A JSON value's type as a sentence names it: `a string`, `null`.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, schema: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema: schema.into(),
        }
    }

    const ADD: &str = r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}"#;

    #[test]
    fn tool_names_follow_the_model_api_rule() {
        assert!(is_valid_tool_name("read_file-2"));
        assert!(is_valid_tool_name(&"a".repeat(64)));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name("dot.ted"));
    }

    #[test]
    fn the_built_in_tools_names_are_reserved() {
        for name in ["spawn", "subagent", "history_search"] {
            let err = validate_specs(vec![spec("ok", ADD), spec(name, ADD)], SchemaCheck::Now)
                .unwrap_err();
            assert_eq!(
                err,
                format!(
                    "tool name \"{name}\" is reserved: the host's built-in tools (spawn, subagent, history_search) cannot be offered by a plugin; rename it"
                )
            );
        }
        assert!(validate_specs(vec![spec("spawner", ADD)], SchemaCheck::Now).is_ok());
    }

    #[test]
    fn duplicate_and_non_object_schemas_are_refused() {
        let err =
            validate_specs(vec![spec("x", ADD), spec("x", ADD)], SchemaCheck::Now).unwrap_err();
        assert_eq!(err, "tool name \"x\" is listed twice");
        let err = validate_specs(vec![spec("x", "[1]")], SchemaCheck::Now).unwrap_err();
        assert_eq!(
            err,
            "tool \"x\": input-schema must be a JSON object (a JSON Schema), found an array"
        );
    }

    #[test]
    fn schemas_are_bounded_per_tool_and_per_plugin() {
        // A schema of 64 KiB + 1 byte: an object with one long description.
        let long = |n: usize| format!(r#"{{"type":"object","description":"{}"}}"#, "x".repeat(n));
        let at_limit = long(MAX_SCHEMA - 34);
        assert_eq!(at_limit.len(), MAX_SCHEMA);
        validate_specs(vec![spec("x", &at_limit)], SchemaCheck::Now).unwrap();
        let err =
            validate_specs(vec![spec("x", &long(MAX_SCHEMA - 33))], SchemaCheck::Now).unwrap_err();
        assert_eq!(
            err,
            "tool \"x\": input-schema is 65537 bytes, over the limit of 64 KiB per tool"
        );
        let specs: Vec<ToolSpec> = (0..5).map(|i| spec(&format!("t{i}"), &at_limit)).collect();
        let err = validate_specs(specs, SchemaCheck::Now).unwrap_err();
        assert_eq!(
            err,
            "the input schemas and descriptions of its tools take more than 256 KiB (at tool \"t3\"); every model request carries them"
        );
    }

    #[test]
    fn a_schema_seen_before_is_compiled_on_the_first_call() {
        let tools = validate_specs(vec![spec("add", ADD)], SchemaCheck::OnFirstCall).unwrap();
        assert!(!tools[0].is_compiled());
        let clone = tools[0].clone();
        clone.check_arguments(r#"{"a":1,"b":2}"#).unwrap();
        assert!(tools[0].is_compiled(), "the clones share it");
        let err = tools[0]
            .check_arguments(r#"{"a":"one","b":2}"#)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        assert!(validate_specs(vec![spec("add", ADD)], SchemaCheck::Now).unwrap()[0].is_compiled());

        // One that does not compile after all fails its calls, saying why.
        let bad = r#"{"type": "object", "properties": {"a": {"type": 5}}}"#;
        assert!(validate_specs(vec![spec("bad", bad)], SchemaCheck::Now).is_err());
        let tools = validate_specs(vec![spec("bad", bad)], SchemaCheck::OnFirstCall).unwrap();
        let err = tools[0].check_arguments(r#"{"a":1}"#).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(
            err.message
                .starts_with(r#"tool "bad": input-schema is not a valid JSON Schema: "#),
            "{}",
            err.message
        );
    }

    #[test]
    fn the_digest_of_schemas_changes_with_any_of_them() {
        let one = schemas_digest(&[spec("a", ADD), spec("b", "{}")]);
        assert_eq!(one, schemas_digest(&[spec("a", ADD), spec("b", "{}")]));
        assert_ne!(one, schemas_digest(&[spec("a", ADD), spec("b", "{ }")]));
        assert_ne!(one, schemas_digest(&[spec("a", ADD)]));
        assert_eq!(one.len(), 64);
    }

    #[test]
    fn arguments_are_checked_and_the_field_named() {
        let tools = validate_specs(vec![spec("add", ADD)], SchemaCheck::Now).unwrap();
        let add = &tools[0];
        add.check_arguments(r#"{"a":1,"b":2}"#).unwrap();
        let err = add.check_arguments(r#"{"a":"one","b":2}"#).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        let expected =
            r#"; expected {"a": integer, "b": integer} (required: a, b; no other properties)"#;
        assert_eq!(
            err.message,
            format!(r#"invalid arguments for add: /a: "one" is not of type "integer"{expected}"#)
        );
        let err = add.check_arguments(r#"{"a":1}"#).unwrap_err();
        assert_eq!(
            err.message,
            format!(r#"invalid arguments for add: "b" is a required property{expected}"#)
        );
        let err = add
            .check_arguments(r#"{"a":1,"b":2,"maxLength":10,"sum":3}"#)
            .unwrap_err();
        assert_eq!(
            err.message,
            format!(
                r#"invalid arguments for add: "maxLength", "sum" are not arguments of add (maxLength is one of the schema's own rules, not values to send){expected}"#
            )
        );
        let err = add.check_arguments("{oops").unwrap_err();
        assert!(
            err.message
                .starts_with("arguments for add are not valid JSON: key must be a string"),
            "{}",
            err.message
        );
    }
}
