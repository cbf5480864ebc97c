//! Running the hooks of one point, one after another, and what their
//! decisions and failures do.
//!
//! - `before-tool`: proceed; rewrite the arguments (checked against the
//!   tool's schema again; the next hook sees the new ones); deny; answer in
//!   place of the tool. The first deny or answer ends the chain.
//! - `after-tool`: proceed or replace the result; every hook runs, each on
//!   the result the previous one left.
//! - An answer or a replacement result is held to the tool's own output
//!   limit: past it, it becomes the same error as a tool's oversized output.
//! - `before-llm` and `after-llm`: proceed, replace the request or response,
//!   or deny, which ends the turn with an error.
//!
//! A hook that fails (traps, breaks its budget, returns something the host
//! refuses) is reported as `hook_error`. At a `before-*` point it fails
//! closed unless its grants say `fail = "open"`: the tool call is denied, or
//! the turn ends with an error naming the hook. At `after-*` points it is
//! passed over unless its grants say `fail = "closed"` (a secret redactor
//! that fails must not let the result through): the tool's result is then
//! withheld, or the turn ends. Every decision that changes something is a
//! `hook_decision`.

use crate::bus::{EventBus, Scope};
use crate::llm::{ChatRequest, ChatResponse};
use crate::plugin::call::within_output_limit;
use crate::plugin::hook_call::{HookInput, HookOutput, LlmDecision, ResultDecision, ToolDecision};
use crate::plugin::policy::hook_settings::FailMode;
use crate::plugin::{CallContext, ErrorKind, HookPoint, ToolError};
use crate::protocol::{EventBody, HookDecision, HookEffect, HookError, HookVerdict};

use super::{HookSet, Hooked, llm_json};

/// Where a chain runs: the turn's context (with the call's id at tool
/// points) and the place its events go.
pub struct HookScope<'a> {
    pub bus: &'a EventBus,
    pub scope: &'a Scope,
    pub ctx: CallContext,
}

/// What the `before-tool` chain decided.
#[derive(Debug, PartialEq)]
pub enum ToolGate {
    /// Call the tool with these arguments.
    Call(String),
    /// Call the tool with these arguments once a person approves: `hook`
    /// asked, for `reason`.
    Ask {
        arguments: String,
        hook: String,
        reason: String,
    },
    /// Do not call it; this is its result (an error when the answer is
    /// over the tool's output limit).
    Answered(Result<String, ToolError>),
    Denied(ToolError),
}

impl HookScope<'_> {
    fn decision(&self, hook: &Hooked, decision: HookVerdict, tool: Option<&str>) -> Decision<'_> {
        Decision {
            scope: self,
            body: EventBody::HookDecision(HookDecision {
                hook: hook.name().to_string(),
                point: hook.subscription.point,
                decision,
                call_id: tool.map(|_| self.ctx.call_id.clone()),
                tool: tool.map(str::to_string),
                reason: None,
                arguments: None,
            }),
        }
    }

    /// Reports a failed hook; returns whether it fails closed.
    fn failed(&self, hook: &Hooked, tool: Option<&str>, error: String) -> bool {
        let point = hook.subscription.point;
        let closed = hook.plugin.grants.hooks.fail_mode(point) == FailMode::Closed;
        let effect = match (closed, point) {
            (true, HookPoint::BeforeTool) => HookEffect::Denied,
            (true, HookPoint::AfterTool) => HookEffect::Withheld,
            (true, _) => HookEffect::TurnFailed,
            (false, _) => HookEffect::Ignored,
        };
        tracing::warn!(hook = hook.name(), %point, "hook failed: {error}");
        self.bus.publish(
            self.scope,
            EventBody::HookError(HookError {
                hook: hook.name().to_string(),
                point,
                error,
                effect,
                call_id: tool.map(|_| self.ctx.call_id.clone()),
                tool: tool.map(str::to_string),
            }),
        );
        closed
    }
}

/// A `hook_decision` being filled in before it is published.
struct Decision<'a> {
    scope: &'a HookScope<'a>,
    body: EventBody,
}

impl Decision<'_> {
    fn reason(mut self, text: &str) -> Self {
        if let EventBody::HookDecision(HookDecision { reason, .. }) = &mut self.body {
            *reason = Some(text.to_string());
        }
        self
    }

    fn arguments(mut self, text: &str) -> Self {
        if let EventBody::HookDecision(HookDecision { arguments, .. }) = &mut self.body {
            *arguments = Some(text.to_string());
        }
        self
    }

    fn publish(self) {
        self.scope.bus.publish(self.scope.scope, self.body);
    }
}

/// A `before-llm` or `after-llm` hook ended the turn: the turn's reason, and
/// its `error_kind` is `hook`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookStop {
    /// The hook denied the model request or response.
    #[error("hook '{hook}' denied the model {}: {reason}", object(*.point))]
    Denied {
        hook: String,
        point: HookPoint,
        reason: String,
    },
    /// The hook failed, and it fails closed.
    #[error("hook '{hook}' failed {} the model {}, and it fails closed: {error}", when(*.point), object(*.point))]
    FailedClosed {
        hook: String,
        point: HookPoint,
        error: String,
    },
}

/// What a model hook at `point` sees: the request or the response.
fn object(point: HookPoint) -> &'static str {
    match point {
        HookPoint::AfterLlm => "response",
        _ => "request",
    }
}

fn when(point: HookPoint) -> &'static str {
    match point {
        HookPoint::AfterLlm => "after",
        _ => "before",
    }
}

/// A hook answered with a decision meant for another point: the host's
/// bindings would have to be broken; treated as the hook failing.
const WRONG_KIND: &str = "the hook returned a decision of another kind";

impl HookSet {
    /// Runs the `before-tool` hooks that apply to `tool`. `check` validates
    /// rewritten arguments against the tool's schema; `output_limit` is the
    /// tool's, which an answer in its place is held to.
    pub async fn before_tool(
        &self,
        hs: &HookScope<'_>,
        tool: &str,
        arguments: &str,
        output_limit: usize,
        check: impl Fn(&str) -> Result<(), ToolError>,
    ) -> ToolGate {
        let mut arguments = arguments.to_string();
        let mut asked: Option<(String, String)> = None;
        for hook in self.at(HookPoint::BeforeTool) {
            if !hook.subscription.applies_to_tool(tool) {
                continue;
            }
            let input = HookInput::BeforeTool {
                tool,
                arguments: &arguments,
            };
            let failure = match hook.plugin.call_hook(&hs.ctx, input).await {
                Ok(HookOutput::Tool(ToolDecision::Proceed)) => continue,
                Ok(HookOutput::Tool(ToolDecision::Rewrite(new))) => {
                    match check_rewrite(&new, &check) {
                        Ok(()) => {
                            hs.decision(hook, HookVerdict::Rewrite, Some(tool))
                                .arguments(&new)
                                .publish();
                            arguments = new;
                            continue;
                        }
                        Err(e) => format!("its rewritten arguments were refused: {e}"),
                    }
                }
                Ok(HookOutput::Tool(ToolDecision::Deny(reason))) => {
                    hs.decision(hook, HookVerdict::Deny, Some(tool))
                        .reason(&reason)
                        .publish();
                    return ToolGate::Denied(ToolError::new(
                        ErrorKind::Denied,
                        format!("denied by hook '{}': {reason}", hook.name()),
                    ));
                }
                Ok(HookOutput::Tool(ToolDecision::Ask(reason))) => {
                    hs.decision(hook, HookVerdict::Ask, Some(tool))
                        .reason(&reason)
                        .publish();
                    // The first hook that asks is the one named.
                    asked.get_or_insert_with(|| (hook.name().to_string(), reason));
                    continue;
                }
                Ok(HookOutput::Tool(ToolDecision::Answer(text))) => {
                    hs.decision(hook, HookVerdict::Answer, Some(tool)).publish();
                    return ToolGate::Answered(within_output_limit(
                        text,
                        output_limit,
                        |got, limit| {
                            format!(
                                "hook '{}' answered in place of tool '{tool}' with {got}, over the tool's output limit of {limit}",
                                hook.name()
                            )
                        },
                    ));
                }
                Ok(_) => WRONG_KIND.to_string(),
                Err(e) => e,
            };
            if hs.failed(hook, Some(tool), failure.clone()) {
                return ToolGate::Denied(ToolError::new(
                    ErrorKind::Denied,
                    format!(
                        "hook '{}' failed, and the call is denied (the hook fails closed): {failure}",
                        hook.name()
                    ),
                ));
            }
        }
        match asked {
            Some((hook, reason)) => ToolGate::Ask {
                arguments,
                hook,
                reason,
            },
            None => ToolGate::Call(arguments),
        }
    }

    /// Runs the `after-tool` hooks that apply to `tool` over its outcome; a
    /// replacement is held to the tool's `output_limit`.
    pub async fn after_tool(
        &self,
        hs: &HookScope<'_>,
        tool: &str,
        arguments: &String,
        output_limit: usize,
        mut outcome: Result<String, ToolError>,
    ) -> Result<String, ToolError> {
        for hook in self.at(HookPoint::AfterTool) {
            if !hook.subscription.applies_to_tool(tool) {
                continue;
            }
            let input = HookInput::AfterTool {
                tool,
                arguments,
                outcome: &outcome,
            };
            let failure = match hook.plugin.call_hook(&hs.ctx, input).await {
                Ok(HookOutput::Result(ResultDecision::Proceed)) => continue,
                Ok(HookOutput::Result(ResultDecision::Replace(replaced))) => {
                    hs.decision(hook, HookVerdict::Replace, Some(tool))
                        .publish();
                    outcome = match replaced {
                        Ok(text) => within_output_limit(text, output_limit, |got, limit| {
                            format!(
                                "hook '{}' replaced the result of tool '{tool}' with {got}, over the tool's output limit of {limit}",
                                hook.name()
                            )
                        }),
                        Err(e) => Err(ToolError::from(e).cut_to(output_limit)),
                    };
                    continue;
                }
                Ok(_) => WRONG_KIND.to_string(),
                Err(e) => e,
            };
            if hs.failed(hook, Some(tool), failure.clone()) {
                return Err(ToolError::new(
                    ErrorKind::Denied,
                    format!(
                        "hook '{}' failed, and the result is withheld (the hook fails closed): {failure}",
                        hook.name()
                    ),
                ));
            }
        }
        outcome
    }

    /// Runs the `before-llm` hooks over `request`; an error ends the turn.
    pub async fn before_llm(
        &self,
        hs: &HookScope<'_>,
        mut request: ChatRequest,
    ) -> Result<ChatRequest, HookStop> {
        let hooks = self.at(HookPoint::BeforeLlm);
        if hooks.is_empty() {
            return Ok(request);
        }
        let mut json = llm_json::request_json(&request);
        for hook in hooks {
            let failure = match hook
                .plugin
                .call_hook(&hs.ctx, HookInput::BeforeLlm(&json))
                .await
            {
                Ok(HookOutput::Llm(LlmDecision::Proceed)) => continue,
                Ok(HookOutput::Llm(LlmDecision::Replace(new))) => {
                    match llm_json::request_from(&new, &request) {
                        Ok(replaced) => {
                            hs.decision(hook, HookVerdict::Replace, None).publish();
                            request = replaced;
                            json = new;
                            continue;
                        }
                        Err(e) => format!("its replacement request was refused: {e}"),
                    }
                }
                Ok(HookOutput::Llm(LlmDecision::Deny(reason))) => {
                    hs.decision(hook, HookVerdict::Deny, None)
                        .reason(&reason)
                        .publish();
                    return Err(HookStop::Denied {
                        hook: hook.name().to_string(),
                        point: HookPoint::BeforeLlm,
                        reason,
                    });
                }
                Ok(_) => WRONG_KIND.to_string(),
                Err(e) => e,
            };
            if hs.failed(hook, None, failure.clone()) {
                return Err(HookStop::FailedClosed {
                    hook: hook.name().to_string(),
                    point: HookPoint::BeforeLlm,
                    error: failure,
                });
            }
        }
        Ok(request)
    }

    /// Runs the `after-llm` hooks over `response`; an error (a deny, or a
    /// failure of a hook that fails closed) ends the turn.
    pub async fn after_llm(
        &self,
        hs: &HookScope<'_>,
        mut response: ChatResponse,
    ) -> Result<ChatResponse, HookStop> {
        let hooks = self.at(HookPoint::AfterLlm);
        if hooks.is_empty() {
            return Ok(response);
        }
        let mut json = llm_json::response_json(&response);
        for hook in hooks {
            let failure = match hook
                .plugin
                .call_hook(&hs.ctx, HookInput::AfterLlm(&json))
                .await
            {
                Ok(HookOutput::Llm(LlmDecision::Proceed)) => continue,
                Ok(HookOutput::Llm(LlmDecision::Replace(new))) => {
                    match llm_json::response_from(&new, &response) {
                        Ok(replaced) => {
                            hs.decision(hook, HookVerdict::Replace, None).publish();
                            response = replaced;
                            json = new;
                            continue;
                        }
                        Err(e) => format!("its replacement response was refused: {e}"),
                    }
                }
                Ok(HookOutput::Llm(LlmDecision::Deny(reason))) => {
                    hs.decision(hook, HookVerdict::Deny, None)
                        .reason(&reason)
                        .publish();
                    return Err(HookStop::Denied {
                        hook: hook.name().to_string(),
                        point: HookPoint::AfterLlm,
                        reason,
                    });
                }
                Ok(_) => WRONG_KIND.to_string(),
                Err(e) => e,
            };
            if hs.failed(hook, None, failure.clone()) {
                return Err(HookStop::FailedClosed {
                    hook: hook.name().to_string(),
                    point: HookPoint::AfterLlm,
                    error: failure,
                });
            }
        }
        Ok(response)
    }
}

/// Rewritten arguments must be a JSON object the tool's schema accepts.
fn check_rewrite(
    arguments: &str,
    check: &impl Fn(&str) -> Result<(), ToolError>,
) -> anyhow::Result<()> {
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => anyhow::bail!("expected a JSON object"),
        Err(e) => anyhow::bail!("not JSON: {e}"),
    }
    check(arguments).map_err(|e| anyhow::Error::msg(e.message))
}
