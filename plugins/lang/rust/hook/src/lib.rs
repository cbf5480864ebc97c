//! wasmclaw hook plugin `__NAME__`: before each tool call, denies the call
//! when its arguments contain one of the words in `deny` of the `[config]`
//! table of `__NAME__.toml` (by default `"rm -rf"`); the model reads the
//! reason as the tool's result. Replace it with yours: the shape (subscribe
//! to the points you need, answer every call quickly, never trap) stays the
//! same.

// Rust bindings for the `hook-plugin` world of wit/plugin.wit, and the glue
// that routes the component's exports to `Plugin`.
mod bindings {
    wit_bindgen::generate!({ world: "hook-plugin", path: "wit" });

    use super::Plugin;
    export!(Plugin);
}

use bindings::exports::wasmclaw::plugin::hooks::{
    Guest, HookPoint, LlmDecision, ResultDecision, Subscription, ToolDecision,
};
use bindings::wasmclaw::plugin::config;
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, PluginError};
use serde_json::Value;

/// Hooks at one point run lowest first; the operator may override it with
/// `[hooks] priority`.
const PRIORITY: i32 = 50;

/// What it denies when the grants file sets no `deny`.
const DEFAULT_DENY: &[&str] = &["rm -rf"];

struct Plugin;

impl Guest for Plugin {
    fn subscriptions() -> Vec<Subscription> {
        vec![Subscription {
            point: HookPoint::BeforeTool,
            priority: PRIORITY,
            tools: Vec::new(), // every tool; or names, '*' matching any run of characters
            events: Vec::new(),
        }]
    }

    fn before_tool(_ctx: CallContext, name: String, arguments: String) -> ToolDecision {
        match deny_words().into_iter().find(|w| arguments.contains(w.as_str())) {
            Some(word) => {
                log(Level::Info, &format!("denied a call of `{name}`: it mentions {word:?}"));
                // The model reads "denied by hook '__NAME__': " and this.
                ToolDecision::Deny(format!("its arguments mention {word:?}"))
            }
            None => ToolDecision::Proceed,
        }
    }

    // Subscribed to before-tool only; the host never calls the others.

    fn before_llm(_ctx: CallContext, _request: String) -> LlmDecision {
        LlmDecision::Proceed
    }

    fn after_llm(_ctx: CallContext, _response: String) -> LlmDecision {
        LlmDecision::Proceed
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

/// `deny` of the `[config]` table (a list of strings), or the default. A
/// mistake there is logged and the default used: a hook that traps fails
/// its call, which for a before-tool hook denies every tool.
fn deny_words() -> Vec<String> {
    let config: Value = serde_json::from_str(&config::get()).unwrap_or(Value::Null);
    match config.get("deny") {
        None => DEFAULT_DENY.iter().map(|w| w.to_string()).collect(),
        Some(Value::Array(words)) if words.iter().all(Value::is_string) => words
            .iter()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect(),
        Some(other) => {
            log(
                Level::Error,
                &format!("config.deny must be a list of strings, got {other}; using {DEFAULT_DENY:?}"),
            );
            DEFAULT_DENY.iter().map(|w| w.to_string()).collect()
        }
    }
}
