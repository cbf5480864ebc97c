//! Running the tool calls of one model reply.
//!
//! A call's tool is looked up once in the agent's tool registry (see
//! [`super::registry`]), whatever its source (a built-in, a plugin), and the
//! call runs through it: a plugin's tool in a fresh instance of its plugin.
//! Each call runs on its own task, so
//! calls of one reply run in parallel, at most `tool_concurrency` at once;
//! they start in the order the model asked, and their results come back in
//! that order whatever order they finish in. A failure (an unknown tool,
//! arguments that do not fit the schema, a plugin error, a breached limit)
//! becomes the call's result text, marked as an error, so the model can read
//! it and try something else: it does not end the turn.
//!
//! Each call, to a tool of any source or to an unknown one, goes through the
//! hooks: `before-tool` hooks may rewrite its arguments (checked against the
//! tool's schema), deny it or answer in its place; `after-tool` hooks may
//! replace its result (see [`crate::hooks::chain`]). Between the two, the
//! approval gate (see [`super::approval`]) may deny the call or make it
//! wait for a person's decision.
//!
//! A refused call (see [`super::refusals`]) made again unchanged is told so
//! in its result, and ends the turn after a configurable number of times.
//!
//! A call that has not started when the user steers the turn or interrupts
//! it gracefully is skipped (`tool_call_skipped`), and its result tells the
//! model why; so is every call of a reply cut at the output token limit, and
//! arguments that are not a JSON object are refused before the tool runs
//! (see [`super::arguments`]). Dropping the turn (a hard interrupt) aborts the calls still
//! running (the plugin instance stops at its next epoch tick) and ends each
//! with a `cancelled` error, so every `tool_call_begin` has its end.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio_util::task::AbortOnDropHandle;

use crate::bus::{EventBus, Scope};
use crate::hooks::{HookScope, ToolGate};
use crate::llm::{FinishReason, Message, ToolCall};
use crate::plugin::{ErrorKind, Limits, ToolError};
use crate::protocol::{EventBody, ToolCallBegin, ToolCallEnd, ToolCallSkipped};

use super::approval::AskedBy;
use super::refusals::Refusals;
use super::registry::{Caller, Found};
use super::subturn::Parent;
use super::turn::{Turn, millis};

/// Publishes a call's `tool_call_end` exactly once: from the call's task
/// when it finishes, or from the turn when it drops the call first. The lock
/// is held while publishing, so the end is on the bus before the loser
/// returns (and so before the turn's own end).
#[derive(Default)]
pub(crate) struct EndOnce(Mutex<bool>);

impl EndOnce {
    pub(crate) fn publish(&self, bus: &EventBus, scope: &Scope, end: impl FnOnce() -> EventBody) {
        let mut done = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !*done {
            *done = true;
            bus.publish(scope, end());
        }
    }
}

/// The calls of a batch that have begun; on drop (the turn was aborted),
/// ends those that have not.
struct Begun<'a> {
    turn: &'a Turn,
    calls: Vec<(Arc<EndOnce>, &'a ToolCall)>,
}

impl Drop for Begun<'_> {
    fn drop(&mut self) {
        let error = ToolError::new(
            ErrorKind::Cancelled,
            "the turn was aborted while the call ran",
        );
        for (end, call) in &self.calls {
            end.publish(&self.turn.agent().bus, &self.turn.scope, || {
                EventBody::ToolCallEnd(ToolCallEnd {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    ok: false,
                    output: for_model(&error),
                    error_kind: Some(error.kind),
                    duration_ms: 0.0,
                })
            });
        }
    }
}

enum Started {
    Running(AbortOnDropHandle<Message>, Arc<EndOnce>),
    Skipped(Message),
}

/// Runs `calls`, asked for by a reply that ended with `finish_reason`; one
/// `Tool` message per call, in the same order.
pub async fn run_all<'a>(
    turn: &'a Turn,
    calls: &'a [ToolCall],
    finish_reason: &FinishReason,
) -> Vec<Message> {
    let cut = super::arguments::cut_reason(finish_reason);
    let agent = turn.agent();
    let slots = Arc::new(Semaphore::new(turn.spec.config().tool_concurrency.max(1)));
    let mut begun = Begun {
        turn,
        calls: Vec::with_capacity(calls.len()),
    };
    let mut started = Vec::with_capacity(calls.len());
    for call in calls {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        if let Some(reason) = turn.control.skip_reason().or(cut) {
            turn.publish(EventBody::ToolCallSkipped(ToolCallSkipped {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                reason: reason.to_string(),
            }));
            started.push(Started::Skipped(tool_message(
                call,
                format!("skipped: {reason}"),
                true,
            )));
            continue;
        }
        turn.publish(EventBody::ToolCallBegin(ToolCallBegin {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
        let end = Arc::new(EndOnce::default());
        begun.calls.push((end.clone(), call));
        let (parent, call) = (turn.as_parent(), call.clone());
        let refusals = turn.refusals.clone();
        let task = AbortOnDropHandle::new(turn.control.calls.spawn({
            let end = end.clone();
            async move {
                let result = run_one(&parent, &call, &end, &refusals).await;
                drop(slot);
                result
            }
        }));
        started.push(Started::Running(task, end));
    }
    let mut results = Vec::with_capacity(calls.len());
    for (started, call) in started.into_iter().zip(calls) {
        let (task, end) = match started {
            Started::Skipped(message) => {
                results.push(message);
                continue;
            }
            Started::Running(task, end) => (task, end),
        };
        results.push(task.await.unwrap_or_else(|e| {
            let error = ToolError::new(
                ErrorKind::Internal,
                format!("the call failed inside the host: {e}"),
            );
            let content = for_model(&error);
            end.publish(&agent.bus, &turn.scope, || {
                EventBody::ToolCallEnd(ToolCallEnd {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    ok: false,
                    output: content.clone(),
                    error_kind: Some(error.kind),
                    duration_ms: 0.0,
                })
            });
            tool_message(call, content, true)
        }));
    }
    results
}

pub(crate) async fn run_one(
    parent: &Parent,
    call: &ToolCall,
    end: &EndOnce,
    refusals: &Refusals,
) -> Message {
    let started = Instant::now();
    let result = call_with_hooks(parent, call).await;
    let duration_ms = millis(started.elapsed());
    let (bus, scope) = (&parent.agent.bus, &parent.control.scope());
    let (content, is_error, error_kind) = match result {
        Ok(output) => (output, false, None),
        Err(error) => (
            refusals.record(call, &error, for_model(&error)),
            true,
            Some(error.kind),
        ),
    };
    end.publish(bus, scope, || {
        EventBody::ToolCallEnd(ToolCallEnd {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            ok: !is_error,
            output: content.clone(),
            error_kind,
            duration_ms,
        })
    });
    tool_message(call, content, is_error)
}

/// The `before-tool` hooks, the tool (unless a hook denied the call or
/// answered it), then the `after-tool` hooks. Only the tools the turn was
/// given.
async fn call_with_hooks(parent: &Parent, call: &ToolCall) -> Result<String, ToolError> {
    if !parent.spec.allows(&call.name) {
        return Err(ToolError::new(
            ErrorKind::NotFound,
            format!(
                "tool '{}' is not among the tools of agent '{}' in this turn",
                call.name, parent.spec.profile.name
            ),
        ));
    }
    let agent = &parent.agent;
    let hooks = agent.hooks();
    let scope = parent.control.scope();
    let hs = HookScope {
        bus: &agent.bus,
        scope: &scope,
        ctx: parent.call_context(&call.id),
    };
    // Looked up once: a rewrite is checked against the schema of the tool
    // the call goes to, whatever its source. An unknown tool still goes
    // through the hooks (one may answer it); its error is the outcome.
    let found = agent.registry.lookup(&call.name);
    let check = |arguments: &str| match &found {
        Ok(tool) => tool.check_arguments(arguments),
        Err(_) => Ok(()),
    };
    let limit = found
        .as_ref()
        .map_or(Limits::default().output_bytes, Found::output_limit);
    let (arguments, asked) = match hooks
        .before_tool(&hs, &call.name, &call.arguments, limit, check)
        .await
    {
        ToolGate::Call(arguments) => (arguments, None),
        ToolGate::Ask {
            arguments,
            hook,
            reason,
        } => (arguments, Some(AskedBy::Hook { hook, reason })),
        ToolGate::Answered(answer) => {
            return hooks
                .after_tool(&hs, &call.name, &call.arguments, limit, answer)
                .await;
        }
        ToolGate::Denied(error) => return Err(error),
    };
    super::arguments::check_object(&call.name, &arguments)?;
    // An unknown tool is not put to anyone: its error is the outcome.
    if let Ok(tool) = &found {
        super::approval::gate(parent, call, &arguments, tool.permission(), asked).await?;
    }
    let outcome = match found {
        Ok(tool) => {
            let caller = Caller {
                turn: parent,
                ctx: &hs.ctx,
            };
            tool.call(&arguments, caller).await
        }
        Err(error) => Err(error),
    };
    hooks
        .after_tool(&hs, &call.name, &arguments, limit, outcome)
        .await
}

fn tool_message(call: &ToolCall, content: String, is_error: bool) -> Message {
    Message::Tool {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
    }
}

/// A failed call as the model reads it: `error (timeout): plugin 'x' ...`.
pub fn for_model(error: &ToolError) -> String {
    format!("error ({}): {}", error.kind, error.message)
}
