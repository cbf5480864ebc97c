//! wasmclaw hook plugin `audit_log`: appends every event of the host it
//! receives, as one JSON line, to `/audit/events.jsonl`, a file in the
//! read-write directory the operator grants in `audit_log.toml`.
//!
//! The event kinds and the line format live in [`events`]; this file wires
//! them to the hook contract (`hook-plugin` world of `wit/plugin.wit`).

pub mod events;

// Rust bindings for the `hook-plugin` world, and the component-ABI glue that
// routes the exported functions to `AuditLog`. The glue is generated unsafe
// code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "hook-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::AuditLog;
    #[cfg(target_arch = "wasm32")]
    export!(AuditLog);
}

use std::fs::OpenOptions;
use std::io::Write;

use bindings::exports::wasmclaw::plugin::hooks::{
    Guest, HookPoint, LlmDecision, ResultDecision, Subscription, ToolDecision,
};
use bindings::wasmclaw::plugin::config;
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, PluginError};
use serde_json::Value;

/// The log file, inside the directory granted at `/audit` (audit_log.toml).
const FILE: &str = "/audit/events.jsonl";

struct AuditLog;

impl Guest for AuditLog {
    fn subscriptions() -> Vec<Subscription> {
        let config: Value = serde_json::from_str(&config::get()).unwrap_or(Value::Null);
        let kinds = events::kinds(&config).unwrap_or_else(|e| {
            log(Level::Warn, &format!("{e}; using the default list"));
            events::default_kinds()
        });
        vec![Subscription {
            point: HookPoint::OnEvent,
            priority: 0,
            tools: Vec::new(),
            events: kinds, // an empty list would mean every kind
        }]
    }

    fn on_event(_ctx: CallContext, event: String) {
        // Append mode and a single write per event keep every line whole.
        let result = OpenOptions::new()
            .create(true)
            .append(true)
            .open(FILE)
            .and_then(|mut file| file.write_all(events::line(&event).as_bytes()));
        if let Err(e) = result {
            // No trap: losing a line is bad, failing the hook changes nothing.
            log(
                Level::Error,
                &format!("cannot append to {FILE} (is a directory granted at /audit?): {e}"),
            );
        }
    }

    // Subscribed to on-event only; the host never calls the others.

    fn before_llm(_ctx: CallContext, _request: String) -> LlmDecision {
        LlmDecision::Proceed
    }

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
}
