//! A served call in flight: a plugin tool's call, or a whole turn of an
//! agent served as a tool. It runs in a task of its own, so that it can
//! outlive the request that started it while the client answers an
//! approval question (a 2026-07-28 client answers in a new `tools/call`).
//! Dropped before its end (the client cancelled, or went away), it stops:
//! the task is aborted, and an agent's turn is interrupted hard.

use std::time::Instant;

use tokio_util::task::AbortOnDropHandle;

use crate::agent::lone_call::LoneResult;
use crate::bus::Filter;
use crate::core::{Core, Events, StopOnDrop};
use crate::protocol::{Accepted, EventKind, Op, TurnStatus};

/// The prefix of the tool that runs the agent NAME: `agent__NAME`.
pub const AGENT_TOOL_PREFIX: &str = "agent__";

pub(super) struct Running {
    /// What the client called, for progress messages.
    pub name: String,
    pub started: Instant,
    /// `approval_requested` of the call's session, subscribed before it
    /// began, so none is missed.
    pub approvals: Events,
    pub result: AbortOnDropHandle<LoneResult>,
}

fn approvals(core: &Core, session: &str) -> Events {
    let filter = Filter {
        session: Some(session.to_string()),
        no_deltas: true,
        kinds: vec![EventKind::ApprovalRequested],
    };
    core.subscribe(filter, None)
}

/// Starts `tool` with `arguments` (JSON text) on `session`, as `agent`.
pub(super) fn tool(
    core: &Core,
    session: &str,
    agent: String,
    tool: &str,
    arguments: String,
) -> Running {
    let approvals = approvals(core, session);
    let task = tokio::spawn({
        let (core, session, tool) = (core.clone(), session.to_string(), tool.to_string());
        async move {
            match core
                .call_tool(&session, Some(&agent), &tool, &arguments)
                .await
            {
                Ok(result) => result,
                Err(e) => error(e.to_string()),
            }
        }
    });
    Running {
        name: tool.to_string(),
        started: Instant::now(),
        approvals,
        result: AbortOnDropHandle::new(task),
    }
}

/// Starts a turn of `agent` on a new `session`, its first message `task`.
pub(super) fn agent_turn(core: &Core, session: &str, agent: &str, task: String) -> Running {
    let approvals = approvals(core, session);
    let op = Op::UserMessage {
        session: session.to_string(),
        content: task,
        agent: Some(agent.to_string()),
    };
    let core = core.clone();
    let task = tokio::spawn(async move {
        let turn_id = match core.submit(op).await {
            Ok(Accepted::Started { turn_id } | Accepted::Queued { turn_id, .. }) => turn_id,
            Ok(other) => return error(format!("the turn did not start: {other:?}")),
            Err(refused) => return error(refused.to_string()),
        };
        // Dropped while it waits (the client cancelled), the turn stops.
        let mut stop = StopOnDrop::new(&core, &turn_id);
        let outcome = core.wait_turn(&turn_id).await;
        stop.disarm();
        match outcome {
            Ok(outcome) if outcome.status == TurnStatus::Completed => LoneResult {
                content: outcome.answer.unwrap_or_default(),
                is_error: false,
            },
            Ok(outcome) => error(format!(
                "the agent's turn ended {}: {}",
                outcome.status.as_str(),
                outcome.reason
            )),
            Err(e) => error(format!("{e:#}")),
        }
    });
    Running {
        name: format!("{AGENT_TOOL_PREFIX}{agent}"),
        started: Instant::now(),
        approvals,
        result: AbortOnDropHandle::new(task),
    }
}

fn error(text: String) -> LoneResult {
    LoneResult {
        content: format!("error: {text}"),
        is_error: true,
    }
}
