//! SubTurns: child turns (sub-agents) that a turn starts with the built-in
//! `subagent` tool (it waits for the answer) or `spawn` tool (it goes on and
//! gets the result later; both in [`super::builtins`]), or that a plugin
//! starts through the host's `agent.spawn-subturn` import.
//!
//! - Limits, for every turn: nesting depth, children running per parent (a
//!   spawn waits a bounded time for a free place), SubTurns alive in the
//!   whole host, SubTurns started in one turn tree over its life, and
//!   SubTurns started by one plugin call. A spawn over a limit is a tool
//!   error the model (or the plugin) can read.
//! - Tokens: a child gets at most what its parent has left of its budget,
//!   set aside in the parent from its start; once it ends, what it used
//!   counts against the parent's budget instead (see [`super::budget`]).
//! - A child runs with the model and tools it was given (a subset of its
//!   parent's), its own timeout and token budget, and an ephemeral history
//!   that starts from its task and never enters the session's history.
//! - Delivery, exactly once: a `subagent` child's answer is the tool result;
//!   a `spawn` child's result is put in its parent's inbox and taken in
//!   before the parent's next model call, or, if the parent has ended, runs
//!   as a follow-up turn on the session (`subturn_orphan`). A child stopped
//!   by an ancestor's hard interrupt has no result to deliver.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde_json::json;

use super::budget::CallSpawns;
use super::control::{ChildResult, TurnControl};
use super::profile::Profile;
use super::task::{self, InternalOp, TurnHandle};
use super::turn::TurnSpec;
use super::{Agent, AgentConfig, TurnOutcome};
use crate::bus::EventBus;
use crate::plugin::sandbox::access::SubTurnSpawner;
use crate::plugin::{CallContext, ErrorKind, ToolError};
use crate::protocol::{
    Delivery, EventBody, SpawnMode, SubTurnRequest, SubturnDelivered, SubturnEnd, SubturnOrphan,
    SubturnSpawn, TurnStatus,
};

/// The longest timeout a child may ask for: a day.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The built-in tools' names (defined with the tools in [`super::builtins`]).
pub use super::builtins::{SPAWN, SUBAGENT};

/// How far SubTurns may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTurnLimits {
    /// How deep children may nest below a top-level turn.
    pub max_depth: u32,
    /// Children of one turn running at once.
    pub per_parent: usize,
    /// SubTurns alive at once in the host.
    pub total: usize,
    /// SubTurns started in one turn tree (a top-level turn and all its
    /// descendants), over the tree's life.
    pub per_tree: usize,
    /// SubTurns one plugin call may start through `agent.spawn-subturn`.
    pub per_call: usize,
    /// How long a spawn waits for one of its parent's places to free up.
    pub slot_wait: Duration,
    /// A child's timeout when the request names none.
    pub default_timeout: Duration,
}

impl SubTurnLimits {
    /// The tighter of `self` and `other`, bound by bound: what a child that
    /// runs as another agent may do (its own limits, within its parent's).
    pub fn narrowed(&self, other: &SubTurnLimits) -> SubTurnLimits {
        SubTurnLimits {
            max_depth: self.max_depth.min(other.max_depth),
            per_parent: self.per_parent.min(other.per_parent),
            total: self.total.min(other.total),
            per_tree: self.per_tree.min(other.per_tree),
            per_call: self.per_call.min(other.per_call),
            slot_wait: self.slot_wait.min(other.slot_wait),
            default_timeout: self.default_timeout.min(other.default_timeout),
        }
    }
}

impl Default for SubTurnLimits {
    fn default() -> Self {
        SubTurnLimits {
            max_depth: 3,
            per_parent: 5,
            total: 64,
            per_tree: 32,
            per_call: 8,
            slot_wait: Duration::from_secs(10),
            default_timeout: Duration::from_secs(600),
        }
    }
}

/// What a turn hands down to the children it starts.
#[derive(Clone)]
pub struct Parent {
    pub agent: Arc<Agent>,
    pub control: Arc<TurnControl>,
    pub spec: Arc<TurnSpec>,
}

impl Parent {
    /// Who is calling, for a plugin or a hook: this turn, and `call_id`
    /// (empty outside a tool call).
    pub fn call_context(&self, call_id: &str) -> CallContext {
        let control = &self.control;
        CallContext {
            session_key: control.session.clone(),
            turn_id: control.id.clone(),
            parent_turn_id: control.lineage.parent_id.clone(),
            depth: control.lineage.depth,
            call_id: call_id.to_string(),
            deadline: self.spec.deadline,
            spawner: None,
        }
    }
}

/// A child's share of its parent's budget, set aside from its start; when
/// dropped (the child ended, however it ended, or never started), what the
/// child used replaces it.
struct Share {
    parent: Arc<TurnControl>,
    child: Option<Arc<TurnControl>>,
    tokens: u64,
}

impl Drop for Share {
    fn drop(&mut self) {
        let used = self.child.as_ref().map_or(0, |c| c.usage.tokens());
        self.parent.usage.child_ended(self.tokens, used);
    }
}

/// A child that is running.
pub struct Spawned {
    pub id: String,
    pub label: String,
    handle: TurnHandle,
}

fn denied(message: String) -> ToolError {
    ToolError::new(ErrorKind::Denied, message)
}

fn invalid(message: String) -> ToolError {
    ToolError::new(ErrorKind::InvalidInput, message)
}

impl Parent {
    /// Checks `request` against the limits and the parent's tools, then
    /// starts the child on its own task.
    pub async fn start_child(
        &self,
        request: SubTurnRequest,
        mode: SpawnMode,
    ) -> Result<Spawned, ToolError> {
        let limits = &self.spec.config().subturns;
        let depth = self.control.lineage.depth;
        if depth >= limits.max_depth {
            return Err(denied(format!(
                "sub-agents nest at most {} deep, and this turn is at depth {depth}; do the task yourself",
                limits.max_depth
            )));
        }
        if self.control.winding_down() {
            return Err(denied(
                "this turn was interrupted and starts no new sub-agents".into(),
            ));
        }
        if request.task.trim().is_empty() {
            return Err(invalid(
                "task: must say what the sub-agent should do".into(),
            ));
        }
        let (mut spec, timeout) = self.child_spec(&request)?;
        // Set aside before the wait for a place: children started together
        // share what is left. Given back if the child does not start.
        let mut share = self.reserve_tokens(&mut spec)?;
        let tree = &self.control.usage.tree;
        let over_tree = || {
            denied(format!(
                "this turn's tree has started {} sub-agents, its limit (subturns.per_tree); finish the task without more",
                limits.per_tree
            ))
        };
        if tree.subturns_started() >= limits.per_tree {
            return Err(over_tree());
        }
        let place = tokio::time::timeout(
            limits.slot_wait,
            self.control.child_slots.clone().acquire_owned(),
        )
        .await
        .map_err(|_| {
            denied(format!(
                "this turn already runs {} sub-agents, its limit, and none finished within {:?}",
                limits.per_parent, limits.slot_wait
            ))
        })?
        .expect("never closed");
        let slot = self
            .agent
            .subturn_slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                denied(format!(
                    "the host already runs {} sub-agents, its limit; try again when one has finished",
                    limits.total
                ))
            })?;
        // Counted once it is sure to start (places taken), so the count is
        // of children started, not of spawns asked for.
        tree.start_subturn(limits.per_tree)
            .map_err(|_| over_tree())?;

        // The child's time starts now, not before its wait for a place.
        let deadline = Instant::now() + timeout;
        spec.deadline = Some(self.spec.deadline.map_or(deadline, |d| d.min(deadline)));
        let per_parent = spec.config().subturns.per_parent;
        let child = TurnControl::child(&self.control, request.critical, per_parent);
        share.child = Some(child.clone());
        let label = request
            .label
            .clone()
            .filter(|l| !l.trim().is_empty())
            .unwrap_or_else(|| format!("sub-agent {}", &child.id[child.id.len() - 6..]));
        self.agent.bus.publish(
            &self.control.scope(),
            EventBody::SubturnSpawn(SubturnSpawn {
                subturn_id: child.id.clone(),
                label: label.clone(),
                task: request.task.clone(),
                depth: child.lineage.depth,
                mode,
                agent: spec.profile.name.clone(),
                model: spec.model.clone(),
                // What the child gets: its own agent's filter applied.
                tools: (spec.tools.as_ref())
                    .map(|t| t.iter().filter(|n| spec.allows(n)).cloned().collect()),
                critical: request.critical,
            }),
        );
        let (agent, parent, id) = (self.agent.clone(), self.control.clone(), child.id.clone());
        let (task_text, child_label) = (request.task, label.clone());
        // Counted before it starts, ended after its delivery: an orphan's
        // follow-up turn is queued before the end, on the same queue, so the
        // session is never idle in between.
        let _ = child.report(InternalOp::SubturnStarted {
            session: child.session.clone(),
        });
        let ended = child.clone();
        let on_end = move |outcome: &TurnOutcome| {
            drop((place, slot));
            // Before its end is published: whoever learns of the end sees
            // the tokens counted.
            drop(share);
            agent.bus.publish(
                &parent.scope(),
                EventBody::SubturnEnd(SubturnEnd {
                    subturn_id: ended.id.clone(),
                    status: outcome.status,
                    reason: outcome.reason.clone(),
                    usage: outcome.usage,
                }),
            );
            if mode == SpawnMode::Spawn {
                deliver_later(&agent.bus, &parent, &ended, &child_label, outcome);
            }
            let _ = ended.report(InternalOp::SubturnEnded {
                session: ended.session.clone(),
            });
        };
        let start = task::Start {
            on_end: Some(Box::new(on_end)),
            ..task::Start::new(child)
        };
        let handle = task::spawn(&self.agent, start, spec, task_text);
        // The parent keeps its children's tasks: stopped, it stops them.
        self.control.adopt(handle.clone());
        Ok(Spawned { id, label, handle })
    }

    /// The child's agent, model, tools and budget, and its timeout.
    fn child_spec(&self, request: &SubTurnRequest) -> Result<(TurnSpec, Duration), ToolError> {
        let mine = || self.spec.tool_names(&self.agent);
        let mut tools = match &request.tools {
            None => self.spec.tools.clone(),
            Some(names) => {
                let mine = mine();
                let unknown: Vec<&str> = names
                    .iter()
                    .filter(|n| !mine.contains(n.as_str()))
                    .map(String::as_str)
                    .collect();
                if !unknown.is_empty() {
                    let mine: Vec<&str> = mine.iter().map(String::as_str).collect();
                    return Err(invalid(format!(
                        "tools: {} not among this turn's tools ({})",
                        unknown
                            .iter()
                            .map(|n| format!("'{n}'"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        mine.join(", ")
                    )));
                }
                Some(Arc::new(names.iter().cloned().collect::<BTreeSet<_>>()))
            }
        };
        let requested = request.agent.as_deref().filter(|a| !a.trim().is_empty());
        let mut outer_approvals = self.spec.outer_approvals.clone();
        let (profile, model) = match requested {
            Some(name) if name != self.spec.profile.name => {
                let other =
                    (self.spec.profiles.agent(name)).map_err(|e| invalid(format!("agent: {e}")))?;
                // Another agent's tools, within this turn's, and its calls
                // within this agent's approval rules too: a child never
                // reaches what its parent could not.
                tools.get_or_insert_with(|| Arc::new(mine()));
                let parent = &self.spec.profile;
                outer_approvals.push((parent.name.clone(), parent.config.approvals.clone()));
                let profile = Arc::new(Profile {
                    name: other.name.clone(),
                    chain: other.chain.clone(),
                    config: AgentConfig {
                        subturns: self.spec.config().subturns.narrowed(&other.config.subturns),
                        ..other.config.clone()
                    },
                });
                (profile, None)
            }
            _ => (self.spec.profile.clone(), self.spec.model.clone()),
        };
        let max = MAX_TIMEOUT.as_secs();
        let timeout = match request.timeout_s {
            None => profile.config.subturns.default_timeout,
            Some(s) if s > 0.0 && s <= max as f64 => Duration::from_secs_f64(s),
            Some(_) => {
                return Err(invalid(format!(
                    "timeout_s: expected a number of seconds above 0 and at most {max}"
                )));
            }
        };
        if request.token_budget == Some(0) {
            return Err(invalid("token_budget: expected at least 1".into()));
        }
        let spec = TurnSpec {
            profiles: self.spec.profiles.clone(),
            profile,
            outer_approvals,
            model: (request.model.clone())
                .filter(|m| !m.trim().is_empty())
                .or(model),
            tools,
            deadline: None,
            token_budget: request.token_budget,
        };
        Ok((spec, timeout))
    }

    /// Sets aside the child's budget in this turn's, if it has one: what the
    /// child asked, at most what is left (all of it when it asked nothing).
    fn reserve_tokens(&self, spec: &mut TurnSpec) -> Result<Share, ToolError> {
        let mut share = Share {
            parent: self.control.clone(),
            child: None,
            tokens: 0,
        };
        let Some(budget) = self.spec.token_budget else {
            return Ok(share);
        };
        let usage = &self.control.usage;
        let granted = usage.reserve(budget, spec.token_budget).map_err(|spent| {
            let used = spent.used;
            denied(if spent.reserved == 0 {
                format!(
                    "this turn has used {used} tokens of its budget of {budget} (its sub-agents' included); none are left for a sub-agent"
                )
            } else {
                format!(
                    "this turn has used {used} tokens of its budget of {budget} (its sub-agents' included) and set aside {} for its sub-agents still running; none are left for a sub-agent",
                    spent.reserved
                )
            })
        })?;
        share.tokens = granted;
        spec.token_budget = Some(granted);
        Ok(share)
    }

    /// Runs a child to its end and returns its answer: the `subagent` tool
    /// (a plugin's `agent.spawn-subturn` is [`PluginCallSpawner`]).
    pub async fn subagent(&self, request: SubTurnRequest) -> Result<String, ToolError> {
        let spawned = self.start_child(request, SpawnMode::Subagent).await?;
        self.answer_of(spawned).await
    }

    /// Waits for a `subagent` child's end and returns its answer.
    async fn answer_of(&self, spawned: Spawned) -> Result<String, ToolError> {
        let outcome = spawned.handle.clone().join().await;
        if self.control.cancelled().is_cancelled() {
            // This turn is being stopped with the child: nothing to deliver.
            return Err(ToolError::new(
                ErrorKind::Cancelled,
                format!("sub-agent '{}' was stopped with its parent", spawned.label),
            ));
        }
        self.agent.bus.publish(
            &self.control.scope(),
            EventBody::SubturnDelivered(SubturnDelivered {
                subturn_id: spawned.id.clone(),
                via: Delivery::ToolResult,
            }),
        );
        match outcome.status {
            TurnStatus::Completed => Ok(outcome.answer.unwrap_or_default()),
            status => Err(ToolError::new(
                ErrorKind::Upstream,
                format!(
                    "sub-agent '{}' ({}) ended {}: {}",
                    spawned.label,
                    spawned.id,
                    status.as_str(),
                    outcome.reason
                ),
            )),
        }
    }

    /// The `spawn` tool: starts the child and says how to recognise its
    /// result.
    pub async fn spawn_tool(&self, request: SubTurnRequest) -> Result<String, ToolError> {
        let spawned = self.start_child(request, SpawnMode::Spawn).await?;
        Ok(json!({
            "subturn_id": spawned.id,
            "label": spawned.label,
            "status": "running",
            "result": "arrives as a message naming this id before a later model call",
        })
        .to_string())
    }
}

/// The message the parent's model reads for a finished `spawn` child.
fn result_message(label: &str, id: &str, outcome: &TurnOutcome) -> String {
    match (outcome.status, &outcome.answer) {
        (TurnStatus::Completed, Some(answer)) => {
            format!("[Result of sub-agent '{label}' ({id})]\n{answer}")
        }
        (status, _) => format!(
            "[Sub-agent '{label}' ({id}) ended {}: {}]",
            status.as_str(),
            outcome.reason
        ),
    }
}

/// Hands a `spawn` child's result to its parent, or to a follow-up turn if
/// the parent has ended.
fn deliver_later(
    bus: &EventBus,
    parent: &TurnControl,
    child: &TurnControl,
    label: &str,
    outcome: &TurnOutcome,
) {
    if parent.cancelled().is_cancelled() {
        // Stopped with its parent: nothing to deliver.
        return;
    }
    let result = ChildResult {
        subturn_id: child.id.clone(),
        content: result_message(label, &child.id, outcome),
    };
    if let Err(result) = parent.deliver(result) {
        orphan(bus, parent, result);
    }
}

/// A result whose parent has ended: it runs as a follow-up turn, unless
/// the parent was stopped (a hard interrupt, a timeout): then nothing of its
/// tree is delivered.
pub(crate) fn orphan(bus: &EventBus, parent: &TurnControl, result: ChildResult) {
    if parent.cancelled().is_cancelled() {
        return;
    }
    bus.publish(
        &parent.scope(),
        EventBody::SubturnOrphan(SubturnOrphan {
            subturn_id: result.subturn_id,
        }),
    );
    let op = InternalOp::FollowUp {
        session: parent.session.clone(),
        content: result.content,
    };
    if let Err(InternalOp::FollowUp { session, content }) = parent.report(op) {
        tracing::warn!(
            session,
            "no scheduler runs follow-up turns; dropped: {content}"
        );
    }
}

/// What one plugin call's `agent.spawn-subturn` starts: `subagent` children
/// of the calling turn, at most `subturns.per_call` of them.
pub struct PluginCallSpawner {
    parent: Parent,
    spawns: Arc<CallSpawns>,
}

impl Parent {
    /// The spawner handed to one plugin call of this turn.
    pub fn plugin_call_spawner(&self) -> PluginCallSpawner {
        PluginCallSpawner {
            parent: self.clone(),
            spawns: Arc::default(),
        }
    }
}

impl SubTurnSpawner for PluginCallSpawner {
    fn run(
        &self,
        plugin: &str,
        request: SubTurnRequest,
    ) -> BoxFuture<'static, Result<String, ToolError>> {
        let parent = self.parent.clone();
        let spawns = self.spawns.clone();
        let limit = parent.spec.config().subturns.per_call;
        let plugin = plugin.to_string();
        Box::pin(async move {
            spawns.start(limit).map_err(|started| {
                denied(format!(
                    "plugin '{plugin}' has started {started} sub-agents in this call, its limit (subturns.per_call); it may start no more"
                ))
            })?;
            let spawned = match parent.start_child(request, SpawnMode::Subagent).await {
                Ok(spawned) => spawned,
                Err(e) => {
                    spawns.undo();
                    return Err(e);
                }
            };
            parent.answer_of(spawned).await
        })
    }
}
