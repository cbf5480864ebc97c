//! wasmclaw hook plugin `secret_redactor`: after every tool call, hides what
//! looks like a secret (API keys, tokens, private keys, passwords) in the
//! result before the model sees it, replacing it with `[REDACTED:<kind>]`.
//!
//! The patterns live in [`redact`]; this file only wires them to the hook
//! contract (`hook-plugin` world of `wit/plugin.wit`). The operator may add
//! patterns in `secret_redactor.toml` (see that file).

pub mod redact;

// Rust bindings for the `hook-plugin` world, and the component-ABI glue that
// routes the exported functions to `SecretRedactor`. The glue is generated
// unsafe code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "hook-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::SecretRedactor;
    #[cfg(target_arch = "wasm32")]
    export!(SecretRedactor);
}

use bindings::exports::wasmclaw::plugin::hooks::{
    Guest, HookPoint, LlmDecision, ResultDecision, Subscription, ToolDecision,
};
use bindings::wasmclaw::plugin::config;
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, PluginError};
use redact::Redactor;

/// Runs after the other after-tool hooks of lower priority (lowest first), so
/// that it sees their replacements too.
const PRIORITY: i32 = 100;

struct SecretRedactor;

impl Guest for SecretRedactor {
    fn subscriptions() -> Vec<Subscription> {
        vec![Subscription {
            point: HookPoint::AfterTool,
            priority: PRIORITY,
            tools: Vec::new(), // every tool
            events: Vec::new(),
        }]
    }

    fn after_tool(
        _ctx: CallContext,
        name: String,
        _arguments: String,
        outcome: Result<String, PluginError>,
    ) -> ResultDecision {
        let redactor = load_redactor();
        // Both a result and an error message may quote a secret. Nothing
        // found: `proceed`, so that the host records no decision.
        match outcome {
            Ok(text) => match hide(&redactor, &name, &text) {
                Some(text) => ResultDecision::Replace(Ok(text)),
                None => ResultDecision::Proceed,
            },
            Err(error) => match hide(&redactor, &name, &error.message) {
                Some(message) => ResultDecision::Replace(Err(PluginError { message, ..error })),
                None => ResultDecision::Proceed,
            },
        }
    }

    // Subscribed to after-tool only; the host never calls the others.

    fn before_llm(_ctx: CallContext, _request: String) -> LlmDecision {
        LlmDecision::Proceed
    }

    fn after_llm(_ctx: CallContext, _response: String) -> LlmDecision {
        LlmDecision::Proceed
    }

    fn before_tool(_ctx: CallContext, _name: String, _arguments: String) -> ToolDecision {
        ToolDecision::Proceed
    }

    fn on_event(_ctx: CallContext, _event: String) {}
}

/// `text` with its secrets hidden, or `None` if it has none.
fn hide(redactor: &Redactor, tool: &str, text: &str) -> Option<String> {
    let redacted = redactor.redact(text)?;
    log(
        Level::Info,
        &format!("hid {} secret(s) in the result of `{tool}`", redacted.count),
    );
    Some(redacted.text)
}

/// The built-in patterns plus the operator's. Every call runs in a fresh
/// instance, so this is built anew each time; bad operator patterns are
/// logged and skipped rather than failing the call.
fn load_redactor() -> Redactor {
    let config = serde_json::from_str(&config::get()).unwrap_or_else(|e| {
        log(
            Level::Warn,
            &format!("config is not JSON ({e}); using the built-in patterns"),
        );
        serde_json::Value::Null
    });
    let (redactor, warnings) = Redactor::from_config(&config);
    for warning in warnings {
        log(Level::Warn, &warning);
    }
    redactor
}
