//! Running the tool calls of one model reply.
//!
//! The calls run at the same time, at most `tool_concurrency` at once, each
//! in a fresh instance of its plugin; their results come back in the order
//! the model asked, whatever order they finish in. A failure (an unknown
//! tool, arguments that do not fit the schema, a plugin error, a breached
//! limit) becomes the call's result text, marked as an error, so the model
//! can read it and try something else: it does not end the turn.

use std::time::Instant;

use futures_util::StreamExt;

use crate::llm::{Message, ToolCall};
use crate::plugin::{CallContext, ToolError};
use crate::protocol::EventBody;

use super::turn::{Turn, millis};

/// Runs `calls`; one `Tool` message per call, in the same order.
pub async fn run_all(turn: &Turn<'_>, calls: &[ToolCall]) -> Vec<Message> {
    let concurrency = turn.agent().config.tool_concurrency.max(1);
    futures_util::stream::iter(calls)
        .map(|call| run_one(turn, call))
        .buffered(concurrency)
        .collect()
        .await
}

async fn run_one(turn: &Turn<'_>, call: &ToolCall) -> Message {
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
    let started = Instant::now();
    let result = turn
        .agent()
        .plugins
        .call(&ctx, &call.name, &call.arguments)
        .await;
    let duration_ms = millis(started.elapsed());
    let (content, is_error, error_kind) = match result {
        Ok(output) => (output, false, None),
        Err(error) => (for_model(&error), true, Some(error.kind)),
    };
    turn.publish(EventBody::ToolCallEnd {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        ok: !is_error,
        output: content.clone(),
        error_kind,
        duration_ms,
    });
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
