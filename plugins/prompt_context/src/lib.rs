//! wasmclaw hook plugin `prompt_context`: before every model request, adds a
//! system message with the current date and time (UTC) and the operator's
//! notes from `prompt_context.toml`. Models do not know today's date; this
//! tells them.
//!
//! The change applies to that one request: the session's history keeps no
//! trace of it, so the message never piles up.

pub mod clock;
pub mod context;

// Rust bindings for the `hook-plugin` world, and the component-ABI glue that
// routes the exported functions to `PromptContext`. The glue is generated
// unsafe code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "hook-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::PromptContext;
    #[cfg(target_arch = "wasm32")]
    export!(PromptContext);
}

use std::time::{SystemTime, UNIX_EPOCH};

use bindings::exports::wasmclaw::plugin::hooks::{
    Guest, HookPoint, LlmDecision, ResultDecision, Subscription, ToolDecision,
};
use bindings::wasmclaw::plugin::config;
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, PluginError};
use serde_json::Value;

struct PromptContext;

impl Guest for PromptContext {
    fn subscriptions() -> Vec<Subscription> {
        vec![Subscription {
            point: HookPoint::BeforeLlm,
            priority: 0,
            tools: Vec::new(),
            events: Vec::new(),
        }]
    }

    fn before_llm(_ctx: CallContext, request: String) -> LlmDecision {
        let config: Value = serde_json::from_str(&config::get()).unwrap_or(Value::Null);
        let notes = context::notes(&config).unwrap_or_else(|e| {
            log(Level::Warn, &format!("{e}; left out"));
            None
        });
        // The WASI wall clock; a clock before 1970 would be a host bug.
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let text = context::text(&clock::format_utc(i64::try_from(secs).unwrap_or(0)), notes);

        let mut request: Value = match serde_json::from_str(&request) {
            Ok(request) => request,
            Err(e) => {
                log(
                    Level::Warn,
                    &format!("the request is not JSON ({e}); left unchanged"),
                );
                return LlmDecision::Proceed;
            }
        };
        match context::insert(&mut request, text) {
            Ok(()) => LlmDecision::Replace(request.to_string()),
            Err(e) => {
                log(Level::Warn, &format!("{e}; left unchanged"));
                LlmDecision::Proceed
            }
        }
    }

    // Subscribed to before-llm only; the host never calls the others.

    fn after_llm(_ctx: CallContext, _response: String) -> LlmDecision {
        LlmDecision::Proceed
    }

    fn before_tool(_ctx: CallContext, _name: String, _arguments: String) -> ToolDecision {
        ToolDecision::Proceed
    }

    fn after_tool(
        _ctx: CallContext,
        _name: String,
        _arguments: String,
        _outcome: Result<String, PluginError>,
    ) -> ResultDecision {
        ResultDecision::Proceed
    }

    fn on_event(_ctx: CallContext, _event: String) {}
}
