//! Human approval of tool calls: the gate every call passes after its
//! `before-tool` hooks, before the tool runs.
//!
//! - The agent's rules (`[agents.NAME.approvals]`, first match wins) give a
//!   call `allow`, `ask` or `deny`; a `before-tool` hook may ask too. `deny`
//!   answers the model with an error it can read.
//! - `ask`: a decision kept for the session or the agent
//!   ([`crate::store::Store::kept_approval`]) answers at once
//!   (`approval_decided` by `remembered`); else the call publishes
//!   `approval_requested` and waits, while the other calls of its reply run
//!   on, for an [`Op::Approve`](crate::protocol::Op::Approve) naming its
//!   session and call id.
//! - The wait is bounded and has one outcome: a decision, its timeout (a
//!   denial), a graceful interrupt (a denial) or a hard one (the call is
//!   cancelled). Every way out removes the waiting call from the table
//!   under its lock ([`Approvals::decide`], [`Approvals::take`]): whoever
//!   removes it decides and publishes the one `approval_decided`, and a
//!   decision that comes after is refused. A wait whose task is dropped (a
//!   hard interrupt aborts the call) is ended by a guard.
//! - A decision with scope `session` or `always` is kept in the store
//!   before the call goes on.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use tokio::sync::oneshot;

use super::subturn::Parent;
use crate::bus::{EventBus, Scope};
use crate::config::Permission;
use crate::llm::ToolCall;
use crate::plugin::{ErrorKind, ToolError};
use crate::protocol::{
    ApprovalDecided, ApprovalDecision, ApprovalRequested, ApprovalScope, DecidedBy, EventBody,
    Refused,
};

/// A decision sent to a waiting call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub decision: ApprovalDecision,
    pub scope: ApprovalScope,
    pub note: Option<String>,
}

/// A call waiting for a decision, as front ends list it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PendingApproval {
    pub session: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: String,
    pub asked_by: String,
    pub expires_at: String,
}

struct Waiting {
    info: PendingApproval,
    tx: oneshot::Sender<Decision>,
    /// Where its `approval_decided` goes.
    bus: EventBus,
    scope: Scope,
}

/// Which call waits: a call id is the model's, unique in its reply, so the
/// turn names the reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    session: String,
    turn_id: String,
    call_id: String,
}

/// The calls waiting for a decision. Shared by every turn of the agent.
#[derive(Default)]
pub struct Approvals {
    waiting: Mutex<HashMap<Key, Waiting>>,
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Waiting>> {
        // Inserts and removes only: never half-written.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The calls of `session` waiting now, oldest first by expiry.
    pub fn pending(&self, session: &str) -> Vec<PendingApproval> {
        let mut pending: Vec<PendingApproval> = (self.lock().values())
            .filter(|w| w.info.session == session)
            .map(|w| w.info.clone())
            .collect();
        pending.sort_by(|a, b| a.expires_at.cmp(&b.expires_at));
        pending
    }

    /// Decides the call `call_id` of `session` (of the turn `turn_id`,
    /// needed only when two turns of the session wait with the same call
    /// id): refused unless it waits.
    pub fn decide(
        &self,
        session: &str,
        turn_id: Option<&str>,
        call_id: &str,
        decision: Decision,
    ) -> Result<(), Refused> {
        let mut waiting = self.lock();
        let matching: Vec<Key> = (waiting.keys())
            .filter(|k| k.session == session && k.call_id == call_id)
            .filter(|k| turn_id.is_none_or(|t| k.turn_id == t))
            .cloned()
            .collect();
        let key = match matching.as_slice() {
            [key] => key.clone(),
            [] => {
                return Err(Refused::NotWaiting(format!(
                    "no tool call '{call_id}' of session '{session}' waits for approval: it \
                     was decided, timed out or stopped, or never asked"
                )));
            }
            several => {
                let turns: Vec<&str> = several.iter().map(|k| k.turn_id.as_str()).collect();
                return Err(Refused::Invalid(format!(
                    "tool call '{call_id}' waits in {} turns of session '{session}' ({}): name \
                     the turn",
                    turns.len(),
                    turns.join(", ")
                )));
            }
        };
        let call = waiting.remove(&key).expect("found under the lock");
        drop(waiting);
        publish_decided(
            &call.bus,
            &call.scope,
            &call.info,
            &decision,
            DecidedBy::User,
        );
        // A waiter whose entry is gone waits for this.
        let _ = call.tx.send(decision);
        Ok(())
    }

    /// Ends the wait of `key` as a denial `by` a timeout or an interrupt:
    /// false if a decision took it first.
    fn take(&self, key: &Key, by: DecidedBy) -> bool {
        let Some(call) = self.lock().remove(key) else {
            return false;
        };
        publish_decided(&call.bus, &call.scope, &call.info, &denial(), by);
        true
    }
}

/// What asked for a person's decision besides the agent's rules.
pub enum AskedBy {
    /// A `before-tool` hook, with its reason.
    Hook { hook: String, reason: String },
}

/// The gate: whether the call may run now, after a wait for a person if
/// the rules or a hook say so. `Err`: the call is denied, with the text the
/// model reads.
/// `source`: what the tool's own source's rules say (a plugin's grants
/// file); the stricter of it and the agent's rules applies.
pub async fn gate(
    parent: &Parent,
    call: &ToolCall,
    arguments: &str,
    source: Option<Permission>,
    hook: Option<AskedBy>,
) -> Result<(), ToolError> {
    let agent_name = &parent.spec.profile.name;
    // The rules of this turn's agent, then those of the other agents above
    // it (a SubTurn started as another agent): the strictest applies, and a
    // denial needs no one's answer.
    let own = [(agent_name.as_str(), &parent.spec.config().approvals)];
    let outer = (parent.spec.outer_approvals.iter()).map(|(name, rules)| (name.as_str(), rules));
    let (mut permission, mut by) = (Permission::Allow, String::new());
    let mut timeout = parent.spec.config().approvals.timeout;
    for (name, rules) in own.into_iter().chain(outer) {
        let (p, rule) = rules.permission(&call.name);
        let rule = rule.map_or("its default".to_string(), |r| format!("rule `{}`", r.tool));
        if p == Permission::Ask {
            timeout = timeout.min(rules.timeout);
        }
        if p > permission {
            (permission, by) = (p, format!("agent '{name}', {rule}"));
        }
    }
    let by_grants = "the grants of its plugin";
    let asked_by = match (permission, source.unwrap_or(Permission::Allow), &hook) {
        (Permission::Deny, _, _) => {
            return Err(denied(format!(
                "the approval policy denies tool '{}' ({by})",
                call.name
            )));
        }
        (_, Permission::Deny, _) => {
            return Err(denied(format!(
                "the approval policy of tool '{}' denies it ({by_grants})",
                call.name
            )));
        }
        (_, _, Some(AskedBy::Hook { hook, reason })) => format!("hook {hook}: {reason}"),
        (Permission::Ask, _, _) => by,
        (_, Permission::Ask, _) => by_grants.to_string(),
        (Permission::Allow, Permission::Allow, None) => return Ok(()),
    };
    let agent = &parent.agent;
    let session = &parent.control.session;
    let scope = parent.control.scope();
    // A hook asks about this call's arguments: a decision kept for the
    // tool does not answer it.
    let kept = match hook {
        Some(_) => None,
        None => (agent
            .store
            .kept_approval(session, agent_name, &call.name)
            .await)
            .map_err(|e| {
                ToolError::new(
                    ErrorKind::Internal,
                    format!("could not read the kept approval decisions: {e:#}"),
                )
            })?,
    };
    if let Some((kept_scope, decision)) = kept {
        let decided = Decision {
            decision,
            scope: kept_scope,
            note: None,
        };
        let info = PendingApproval {
            session: session.clone(),
            turn_id: parent.control.id.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: arguments.to_string(),
            asked_by,
            expires_at: String::new(),
        };
        publish_decided(&agent.bus, &scope, &info, &decided, DecidedBy::Remembered);
        return outcome(call, &decided, DecidedBy::Remembered);
    }

    let expires_at = humantime::format_rfc3339_millis(SystemTime::now() + timeout).to_string();
    let info = PendingApproval {
        session: session.clone(),
        turn_id: parent.control.id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: arguments.to_string(),
        asked_by: asked_by.clone(),
        expires_at: expires_at.clone(),
    };
    let key = Key {
        session: session.clone(),
        turn_id: parent.control.id.clone(),
        call_id: call.id.clone(),
    };
    let (tx, rx) = oneshot::channel();
    {
        let mut waiting = agent.approvals.lock();
        if waiting.contains_key(&key) {
            return Err(denied(format!(
                "call id '{}' already waits for approval in this turn; a call id must be \
                 unique while it waits",
                call.id
            )));
        }
        // Published under the lock: no decision can come before the
        // request is on the bus.
        agent.bus.publish(
            &scope,
            EventBody::ApprovalRequested(ApprovalRequested {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: arguments.to_string(),
                asked_by,
                expires_at,
            }),
        );
        let bus = agent.bus.clone();
        let scope = scope.clone();
        waiting.insert(
            key.clone(),
            Waiting {
                info,
                tx,
                bus,
                scope,
            },
        );
    }
    let guard = WaitGuard {
        approvals: &agent.approvals,
        key,
    };
    let control = &parent.control;
    let mut rx = rx;
    let ended = tokio::select! {
        biased;
        decided = &mut rx => Ok(decided),
        _ = control.cancelled().cancelled() => Err(DecidedBy::Interrupt),
        _ = control.winding().cancelled() => Err(DecidedBy::Interrupt),
        _ = tokio::time::sleep(timeout) => Err(DecidedBy::Timeout),
    };
    // The sender goes only with its entry, after it sent (a decision) or
    // from `take` (which only this waiter calls): `Err` below is not
    // reached, and would be a denial.
    let (decided, by) = match ended {
        Ok(decided) => (decided.unwrap_or_else(|_| denial()), DecidedBy::User),
        // Timed out or interrupted: the denial, unless a decision took the
        // call first (then it is on its way).
        Err(by) if guard.approvals.take(&guard.key, by) => (denial(), by),
        Err(_) => (rx.await.unwrap_or_else(|_| denial()), DecidedBy::User),
    };
    drop(guard);
    if decided.scope != ApprovalScope::Once {
        let owner = match decided.scope {
            ApprovalScope::Always => agent_name.as_str(),
            _ => session.as_str(),
        };
        let kept = agent
            .store
            .keep_approval(
                decided.scope,
                owner,
                &call.name,
                decided.decision,
                decided.note.as_deref(),
            )
            .await;
        if let Err(e) = kept {
            tracing::warn!(
                tool = call.name,
                "could not keep the approval decision: {e:#}"
            );
        }
    }
    outcome(call, &decided, by)
}

/// A denial nobody chose: a timeout or an interrupt.
fn denial() -> Decision {
    Decision {
        decision: ApprovalDecision::Deny,
        scope: ApprovalScope::Once,
        note: None,
    }
}

fn denied(message: String) -> ToolError {
    ToolError::new(ErrorKind::Denied, message)
}

/// The call runs, or the model reads why not.
fn outcome(call: &ToolCall, decided: &Decision, by: DecidedBy) -> Result<(), ToolError> {
    if decided.decision == ApprovalDecision::Allow {
        return Ok(());
    }
    let why = match by {
        DecidedBy::User => "it was denied".to_string(),
        DecidedBy::Remembered => "it was denied before, for every such call".to_string(),
        DecidedBy::Timeout => "nobody approved it in time".to_string(),
        DecidedBy::Interrupt => "the turn was interrupted while it waited".to_string(),
    };
    let note = (decided.note.as_deref()).map_or(String::new(), |n| format!(" (note: {n})"));
    Err(denied(format!(
        "tool '{}' was not approved: {why}{note}",
        call.name
    )))
}

fn publish_decided(
    bus: &EventBus,
    scope: &Scope,
    call: &PendingApproval,
    decided: &Decision,
    by: DecidedBy,
) {
    bus.publish(
        scope,
        EventBody::ApprovalDecided(ApprovalDecided {
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            decision: decided.decision,
            scope: decided.scope,
            by,
            note: decided.note.clone(),
        }),
    );
}

/// Ends a wait whose task was dropped (a hard interrupt aborted the call):
/// the call leaves the table and its `approval_decided` is published.
struct WaitGuard<'a> {
    approvals: &'a Approvals,
    key: Key,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.approvals.take(&self.key, DecidedBy::Interrupt);
    }
}
