//! One tool call outside a model turn: what an MCP client asks for.
//!
//! The call runs as a turn of its own on the session it names (a fresh
//! [`TurnControl`], the agent's profile as a top-level turn would have it),
//! through exactly the path a model's call takes ([`super::tools::run_one`]):
//! the agent's tool filter, the `before-tool` hooks, the argument check
//! against the tool's schema, the approval gate, the tool in a fresh
//! sandboxed instance with its plugin's grants and limits, the `after-tool`
//! hooks. It publishes `tool_call_begin` and `tool_call_end` in that
//! session's scope, so observers and the event log see it like any call.
//!
//! Dropping the call's future (the client cancelled) aborts the task that
//! runs it: the plugin instance stops at its next epoch tick, and the
//! call's end is published as `cancelled`.

use std::sync::Arc;

use tokio_util::task::AbortOnDropHandle;

use super::Agent;
use super::control::TurnControl;
use super::refusals::Refusals;
use super::subturn::Parent;
use super::tools::{EndOnce, for_model, run_one};
use super::turn::TurnSpec;
use crate::llm::{Message, ToolCall};
use crate::plugin::{ErrorKind, ToolError};
use crate::protocol::{EventBody, ToolCallBegin, ToolCallEnd};

/// What a lone call gave: the tool's text, or the error as the model would
/// read it (`error (kind): ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoneResult {
    pub content: String,
    pub is_error: bool,
}

/// Ends the call as `cancelled` if it is dropped before its end.
struct Pending {
    end: Arc<EndOnce>,
    parent: Arc<Parent>,
    call: ToolCall,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let error = ToolError::new(ErrorKind::Cancelled, "the caller cancelled the call");
        let scope = self.parent.control.scope();
        self.end.publish(&self.parent.agent.bus, &scope, || {
            EventBody::ToolCallEnd(ToolCallEnd {
                call_id: self.call.id.clone(),
                tool: self.call.name.clone(),
                ok: false,
                output: for_model(&error),
                error_kind: Some(error.kind),
                duration_ms: 0.0,
            })
        });
    }
}

/// Runs `tool` with `arguments` (JSON text) on `session`, as the agent
/// `agent_name` (`None`: the default agent).
pub async fn call(
    agent: &Arc<Agent>,
    session: &str,
    agent_name: Option<&str>,
    tool: &str,
    arguments: &str,
) -> Result<LoneResult, super::profile::ProfileError> {
    let profiles = agent.profiles();
    let profile = match agent_name {
        Some(name) => profiles.agent(name)?.clone(),
        None => profiles.default_profile().clone(),
    };
    let control = TurnControl::new(session, 0, profile.config.subturns.per_parent);
    let spec = TurnSpec::top(profiles, profile);
    let parent = Arc::new(Parent {
        agent: agent.clone(),
        control: Arc::new(control),
        spec: Arc::new(spec),
    });
    let call = ToolCall {
        id: format!("call_{}", uuid::Uuid::now_v7().simple()),
        name: tool.to_string(),
        arguments: arguments.to_string(),
    };
    agent.bus.publish(
        &parent.control.scope(),
        EventBody::ToolCallBegin(ToolCallBegin {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        }),
    );
    let end = Arc::new(EndOnce::default());
    let pending = Pending {
        end: end.clone(),
        parent: parent.clone(),
        call: call.clone(),
    };
    let task = AbortOnDropHandle::new(tokio::spawn({
        let (parent, call) = (parent.clone(), call.clone());
        async move { run_one(&parent, &call, &end, &Refusals::default()).await }
    }));
    let message = task.await;
    drop(pending);
    Ok(match message {
        Ok(Message::Tool {
            content, is_error, ..
        }) => LoneResult { content, is_error },
        Ok(_) => unreachable!("run_one answers with a tool message"),
        Err(e) => LoneResult {
            content: for_model(&ToolError::new(
                ErrorKind::Internal,
                format!("the call failed inside the host: {e}"),
            )),
            is_error: true,
        },
    })
}
