//! wasmclaw tool plugin `calculator`: one tool, `calculate`, that evaluates
//! arithmetic expressions exactly as written instead of leaving the model to
//! do arithmetic in its head.

pub mod expr;

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `Calculator`. The glue is generated unsafe
// code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::Calculator;
    #[cfg(target_arch = "wasm32")]
    export!(Calculator);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
#[cfg(target_arch = "wasm32")]
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use serde_json::{Value, json};

struct Calculator;

impl Guest for Calculator {
    fn list_tools() -> Vec<ToolSpec> {
        let schema = json!({
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "The expression, e.g. \"(2 + 3) * 4^2 / sqrt(2)\". \
                        Operators: + - * / % ^ (or **), unary minus, parentheses. \
                        Literals: 42, 3.14, 1.5e-3. Constants: pi, e, tau. \
                        Functions: sqrt abs ln log10 log2 exp sin cos tan asin acos atan \
                        floor ceil round(x) round(x, digits) min(a, b, ...) max(a, b, ...). \
                        Angles are in radians.",
                    "minLength": 1,
                    "maxLength": expr::MAX_LEN
                }
            },
            "required": ["expression"],
            "additionalProperties": false
        });
        vec![ToolSpec {
            name: "calculate".to_string(),
            description: "Evaluate an arithmetic expression with double-precision floating \
                point and return the result as a number (whole numbers without a decimal \
                point, up to 15 significant digits). Use it for any arithmetic instead of \
                computing by hand."
                .to_string(),
            input_schema: schema.to_string(),
        }]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        if name != "calculate" {
            return Err(error(
                ErrorKind::NotFound,
                format!("no tool named '{name}'"),
            ));
        }
        let args: Value = serde_json::from_str(&arguments).map_err(|e| {
            error(
                ErrorKind::InvalidInput,
                format!("arguments are not JSON: {e}"),
            )
        })?;
        let Some(expression) = args.get("expression").and_then(Value::as_str) else {
            return Err(error(
                ErrorKind::InvalidInput,
                "'expression' (a string) is required",
            ));
        };
        debug(&format!("calculate: {} chars", expression.chars().count()));
        expr::evaluate(expression)
            .map(expr::format_number)
            .map_err(|e| error(ErrorKind::InvalidInput, e.0))
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

fn error(kind: ErrorKind, message: impl Into<String>) -> PluginError {
    PluginError {
        kind,
        message: message.into(),
        retryable: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(arguments: &str) -> Result<String, PluginError> {
        let ctx = CallContext {
            session_key: "s".into(),
            turn_id: "t".into(),
            parent_turn_id: None,
            depth: 0,
            call_id: "c".into(),
            deadline_ms: 0,
        };
        Calculator::call_tool(ctx, "calculate".into(), arguments.into())
    }

    #[test]
    fn lists_one_tool_with_a_closed_schema() {
        let tools = Calculator::list_tools();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "calculate");
        let schema: Value = serde_json::from_str(&tools[0].input_schema).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["expression"]));
    }

    #[test]
    fn calls() {
        assert_eq!(call(r#"{"expression": "2 * (3 + 4)"}"#).unwrap(), "14");
        let e = call(r#"{"expression": "1 / 0"}"#).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::InvalidInput));
        assert_eq!(e.message, "division by zero at column 3");
        let e = call("{}").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::InvalidInput));
    }
}
