//! wasmclaw hook plugin `tool_policy`: before every tool call, checks the
//! operator's `deny` and `require` rules (in `tool_policy.toml`) and denies
//! the calls they forbid. The model reads the rule's reason as the tool's
//! result.
//!
//! The rules live in [`policy`]; this file only wires them to the hook
//! contract (`hook-plugin` world of `wit/plugin.wit`).

pub mod policy;

// Rust bindings for the `hook-plugin` world, and the component-ABI glue that
// routes the exported functions to `ToolPolicy`. The glue is generated unsafe
// code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "hook-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::ToolPolicy;
    #[cfg(target_arch = "wasm32")]
    export!(ToolPolicy);
}

use bindings::exports::wasmclaw::plugin::hooks::{
    Guest, HookPoint, LlmDecision, ResultDecision, Subscription, ToolDecision,
};
use bindings::wasmclaw::plugin::config;
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, PluginError};
use policy::Policy;
use serde_json::Value;

/// Runs before the other before-tool hooks (lowest priority first), so a
/// forbidden call is stopped before anything rewrites or answers it.
const PRIORITY: i32 = -100;

struct ToolPolicy;

impl Guest for ToolPolicy {
    fn subscriptions() -> Vec<Subscription> {
        // Read the policy once at load time too, so that a broken one shows
        // up in the log right away rather than at the first tool call.
        if let Err(e) = load_policy() {
            log(Level::Error, &broken(&e));
        }
        vec![Subscription {
            point: HookPoint::BeforeTool,
            priority: PRIORITY,
            tools: Vec::new(), // every tool; the rules pick their own
            events: Vec::new(),
        }]
    }

    fn before_tool(_ctx: CallContext, name: String, arguments: String) -> ToolDecision {
        let policy = match load_policy() {
            Ok(policy) => policy,
            Err(e) => {
                // Fail closed: a policy that cannot be read allows nothing.
                let reason = broken(&e);
                log(Level::Error, &reason);
                return ToolDecision::Deny(reason);
            }
        };
        // The host has validated the arguments; should they not parse, every
        // argument counts as missing (deny rules skip, require rules deny).
        let arguments = serde_json::from_str(&arguments).unwrap_or(Value::Null);
        match policy.decide(&name, &arguments) {
            Some(reason) => {
                log(Level::Info, &format!("denied `{name}`: {reason}"));
                ToolDecision::Deny(reason)
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

/// The operator's rules. Every call runs in a fresh instance, so they are
/// read and compiled anew each time.
fn load_policy() -> Result<Policy, String> {
    let config: Value =
        serde_json::from_str(&config::get()).map_err(|e| format!("the config is not JSON: {e}"))?;
    Policy::from_config(&config)
}

/// The message for a policy that does not parse.
fn broken(error: &str) -> String {
    format!(
        "tool_policy: the operator's tool policy is invalid ({error}), so every tool \
         call is denied until its config is fixed"
    )
}
