//! Running the tool calls of one model reply.
//!
//! Each call runs on its own task, in a fresh instance of its plugin, so
//! calls of one reply run in parallel, at most `tool_concurrency` at once;
//! they start in the order the model asked, and their results come back in
//! that order whatever order they finish in. A failure (an unknown tool,
//! arguments that do not fit the schema, a plugin error, a breached limit)
//! becomes the call's result text, marked as an error, so the model can read
//! it and try something else: it does not end the turn. Dropping the turn
//! (a hard interrupt) aborts the calls still running.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio_util::task::AbortOnDropHandle;

use crate::bus::{EventBus, Scope};
use crate::llm::{Message, ToolCall};
use crate::plugin::{CallContext, ErrorKind, Plugins, ToolError};
use crate::protocol::EventBody;

use super::turn::{Turn, millis};

/// Runs `calls`; one `Tool` message per call, in the same order.
pub async fn run_all(turn: &Turn<'_>, calls: &[ToolCall]) -> Vec<Message> {
    let agent = turn.agent();
    let slots = Arc::new(Semaphore::new(agent.config.tool_concurrency.max(1)));
    let mut running = Vec::with_capacity(calls.len());
    for call in calls {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        turn.publish(EventBody::ToolCallBegin {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let ctx = CallContext {
            session_key: turn.scope.session.clone().unwrap_or_default(),
            turn_id: turn.id.clone(),
            parent_turn_id: turn.scope.parent_turn_id.clone(),
            depth: 0,
            call_id: call.id.clone(),
            deadline: None,
        };
        let (plugins, bus, scope, call) = (
            agent.plugins.clone(),
            agent.bus.clone(),
            turn.scope.clone(),
            call.clone(),
        );
        running.push(AbortOnDropHandle::new(tokio::spawn(async move {
            let result = run_one(&plugins, &bus, &scope, &ctx, &call).await;
            drop(slot);
            result
        })));
    }
    let mut results = Vec::with_capacity(calls.len());
    for (task, call) in running.into_iter().zip(calls) {
        results.push(task.await.unwrap_or_else(|e| {
            let error = ToolError::new(
                ErrorKind::Internal,
                format!("the call failed inside the host: {e}"),
            );
            let content = for_model(&error);
            turn.publish(EventBody::ToolCallEnd {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                ok: false,
                output: content.clone(),
                error_kind: Some(error.kind),
                duration_ms: 0.0,
            });
            tool_message(call, content, true)
        }));
    }
    results
}

async fn run_one(
    plugins: &Plugins,
    bus: &EventBus,
    scope: &Scope,
    ctx: &CallContext,
    call: &ToolCall,
) -> Message {
    let started = Instant::now();
    let result = plugins.call(ctx, &call.name, &call.arguments).await;
    let duration_ms = millis(started.elapsed());
    let (content, is_error, error_kind) = match result {
        Ok(output) => (output, false, None),
        Err(error) => (for_model(&error), true, Some(error.kind)),
    };
    bus.publish(
        scope,
        EventBody::ToolCallEnd {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            ok: !is_error,
            output: content.clone(),
            error_kind,
            duration_ms,
        },
    );
    tool_message(call, content, is_error)
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
