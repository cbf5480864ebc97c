//! `wasmclaw:plugin@0.1.0` in the newest version's terms.
//!
//! - Its imports are answered by the newest version's implementation
//!   ([`crate::plugin::host`]): a request is converted up (a SubTurn request
//!   of 0.1 names no agent), the answer converted back down.
//! - What its exports return is converted up to the newest types, and what
//!   the host passes them converted down (see [`crate::plugin::exports`]).
//!
//! 0.1.0 is frozen, so only the newest side of these conversions changes:
//! when a newer version changes a type, the compiler points here.

use wasmtime::component::{HasSelf, Linker};

use crate::plugin::bindings::latest as new;
use crate::plugin::bindings::v0_1 as old;
use crate::plugin::sandbox::state::PluginState;

use new::exports::wasmclaw::plugin::hooks as new_hooks;
use new::wasmclaw::plugin::types as new_types;
use new::wasmclaw::plugin::{agent as new_agent, config as new_config, log as new_log};
use old::exports::wasmclaw::plugin::hooks as old_hooks;
use old::wasmclaw::plugin::types as old_types;
use old::wasmclaw::plugin::{agent as old_agent, config as old_config, log as old_log};

/// Puts the 0.1.0 imports in `linker`, beside the other versions'.
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    old::ToolAndHookPlugin::add_to_linker::<_, HasSelf<PluginState>>(linker, |s| s)
}

// The imports, answered by the newest version's implementation.

impl old_types::Host for PluginState {}

impl old_log::Host for PluginState {
    fn log(&mut self, level: old_log::Level, message: String) -> wasmtime::Result<()> {
        new_log::Host::log(self, level.into(), message)
    }
}

impl old_config::Host for PluginState {
    fn get(&mut self) -> wasmtime::Result<String> {
        new_config::Host::get(self)
    }
}

impl old_agent::Host for PluginState {
    async fn spawn_subturn(
        &mut self,
        request: old_agent::SubturnRequest,
    ) -> wasmtime::Result<Result<String, old_types::PluginError>> {
        let answer = new_agent::Host::spawn_subturn(self, request.into()).await?;
        Ok(answer.map_err(Into::into))
    }
}

impl From<old_log::Level> for new_log::Level {
    fn from(level: old_log::Level) -> Self {
        match level {
            old_log::Level::Trace => Self::Trace,
            old_log::Level::Debug => Self::Debug,
            old_log::Level::Info => Self::Info,
            old_log::Level::Warn => Self::Warn,
            old_log::Level::Error => Self::Error,
        }
    }
}

impl From<old_agent::SubturnRequest> for new_agent::SubturnRequest {
    fn from(r: old_agent::SubturnRequest) -> Self {
        Self {
            task: r.task,
            label: r.label,
            model: r.model,
            // 0.1 has no named agents: the child runs as its parent's agent.
            agent: None,
            tools: r.tools,
            critical: r.critical,
            timeout_ms: r.timeout_ms,
            token_budget: r.token_budget,
        }
    }
}

// The shared types, both ways.

impl From<new_types::CallContext> for old_types::CallContext {
    fn from(c: new_types::CallContext) -> Self {
        Self {
            session_key: c.session_key,
            turn_id: c.turn_id,
            parent_turn_id: c.parent_turn_id,
            depth: c.depth,
            call_id: c.call_id,
            deadline_ms: c.deadline_ms,
        }
    }
}

impl From<old_types::ToolSpec> for new_types::ToolSpec {
    fn from(s: old_types::ToolSpec) -> Self {
        Self {
            name: s.name,
            description: s.description,
            input_schema: s.input_schema,
        }
    }
}

impl From<old_types::ErrorKind> for new_types::ErrorKind {
    fn from(kind: old_types::ErrorKind) -> Self {
        match kind {
            old_types::ErrorKind::InvalidInput => Self::InvalidInput,
            old_types::ErrorKind::NotFound => Self::NotFound,
            old_types::ErrorKind::Denied => Self::Denied,
            old_types::ErrorKind::Timeout => Self::Timeout,
            old_types::ErrorKind::Upstream => Self::Upstream,
            old_types::ErrorKind::Internal => Self::Internal,
        }
    }
}

impl From<new_types::ErrorKind> for old_types::ErrorKind {
    fn from(kind: new_types::ErrorKind) -> Self {
        match kind {
            new_types::ErrorKind::InvalidInput => Self::InvalidInput,
            new_types::ErrorKind::NotFound => Self::NotFound,
            new_types::ErrorKind::Denied => Self::Denied,
            new_types::ErrorKind::Timeout => Self::Timeout,
            new_types::ErrorKind::Upstream => Self::Upstream,
            new_types::ErrorKind::Internal => Self::Internal,
        }
    }
}

impl From<old_types::PluginError> for new_types::PluginError {
    fn from(e: old_types::PluginError) -> Self {
        Self {
            kind: e.kind.into(),
            message: e.message,
            retryable: e.retryable,
        }
    }
}

impl From<new_types::PluginError> for old_types::PluginError {
    fn from(e: new_types::PluginError) -> Self {
        Self {
            kind: e.kind.into(),
            message: e.message,
            retryable: e.retryable,
        }
    }
}

// What the hooks export answers, up.

impl From<old_hooks::HookPoint> for new_hooks::HookPoint {
    fn from(point: old_hooks::HookPoint) -> Self {
        match point {
            old_hooks::HookPoint::BeforeLlm => Self::BeforeLlm,
            old_hooks::HookPoint::AfterLlm => Self::AfterLlm,
            old_hooks::HookPoint::BeforeTool => Self::BeforeTool,
            old_hooks::HookPoint::AfterTool => Self::AfterTool,
            old_hooks::HookPoint::OnEvent => Self::OnEvent,
        }
    }
}

impl From<old_hooks::Subscription> for new_hooks::Subscription {
    fn from(s: old_hooks::Subscription) -> Self {
        Self {
            point: s.point.into(),
            priority: s.priority,
            tools: s.tools,
            events: s.events,
        }
    }
}

impl From<old_hooks::LlmDecision> for new_hooks::LlmDecision {
    fn from(d: old_hooks::LlmDecision) -> Self {
        match d {
            old_hooks::LlmDecision::Proceed => Self::Proceed,
            old_hooks::LlmDecision::Replace(json) => Self::Replace(json),
            old_hooks::LlmDecision::Deny(reason) => Self::Deny(reason),
        }
    }
}

impl From<old_hooks::ToolDecision> for new_hooks::ToolDecision {
    fn from(d: old_hooks::ToolDecision) -> Self {
        match d {
            old_hooks::ToolDecision::Proceed => Self::Proceed,
            old_hooks::ToolDecision::Rewrite(json) => Self::Rewrite(json),
            old_hooks::ToolDecision::Deny(reason) => Self::Deny(reason),
            old_hooks::ToolDecision::Answer(text) => Self::Answer(text),
        }
    }
}

impl From<old_hooks::ResultDecision> for new_hooks::ResultDecision {
    fn from(d: old_hooks::ResultDecision) -> Self {
        match d {
            old_hooks::ResultDecision::Proceed => Self::Proceed,
            old_hooks::ResultDecision::Replace(outcome) => {
                Self::Replace(outcome.map_err(Into::into))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subturn_request_of_0_1_names_no_agent_and_keeps_every_field() {
        let request = old_agent::SubturnRequest {
            task: "check it".into(),
            label: Some("checker".into()),
            model: Some("small".into()),
            tools: Some(vec!["add".into()]),
            critical: true,
            timeout_ms: Some(1500),
            token_budget: Some(900),
        };
        let up = new_agent::SubturnRequest::from(request);
        assert_eq!(
            (
                up.task.as_str(),
                up.label.as_deref(),
                up.model.as_deref(),
                up.agent,
                up.tools,
                up.critical,
                up.timeout_ms,
                up.token_budget
            ),
            (
                "check it",
                Some("checker"),
                Some("small"),
                None,
                Some(vec!["add".to_string()]),
                true,
                Some(1500),
                Some(900)
            )
        );
    }

    #[test]
    fn an_error_keeps_its_kind_both_ways() {
        let kinds = [
            new_types::ErrorKind::InvalidInput,
            new_types::ErrorKind::NotFound,
            new_types::ErrorKind::Denied,
            new_types::ErrorKind::Timeout,
            new_types::ErrorKind::Upstream,
            new_types::ErrorKind::Internal,
        ];
        for kind in kinds {
            let down = old_types::PluginError::from(new_types::PluginError {
                kind,
                message: "m".into(),
                retryable: true,
            });
            let back = new_types::PluginError::from(down);
            assert_eq!(
                (back.kind, back.message, back.retryable),
                (kind, "m".into(), true)
            );
        }
    }
}
