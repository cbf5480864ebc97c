//! The wire types: Ops in, Events out.
//!
//! Every front end (the CLI, the HTTP API, tests) talks to the core only by
//! submitting [`Op`]s and reading [`Event`]s. This module is serde-only: no
//! behaviour lives here, so the JSON shape is easy to review in one place.
//!
//! An event serializes as one flat JSON object:
//!
//! ```json
//! {"seq":7,"time":"2026-11-30T18:00:00.123Z","session":"s1","turn_id":"t-…",
//!  "parent_turn_id":null,"type":"tool_call_end","call_id":"c1","tool":"calculate",
//!  "ok":true,"output":"42","duration_ms":0.41}
//! ```

use serde::{Deserialize, Serialize};

pub use crate::plugin::subscriptions::HookPoint;

use crate::llm::{FinishReason, Usage};

/// A request to the core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// A user message for a session: starts a turn when the session is idle;
    /// otherwise steers its running turn or waits as a follow-up turn, by the
    /// session's [`Policy`].
    UserMessage { session: String, content: String },
    /// A message for the turn running on a session, taken in before its next
    /// model call whatever the session's policy; starts a turn when none runs.
    Steer { session: String, content: String },
    /// Stops a turn, named by its session or its id.
    Interrupt { target: Target, mode: InterruptMode },
    /// What a session does with a message that arrives while its turn runs.
    SetPolicy { session: String, policy: Policy },
}

/// What a session does with a user message that arrives while its turn runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Inject it into the running turn before its next model call.
    #[default]
    Steer,
    /// Queue it as a turn of its own, run after the current one.
    FollowUp,
}

/// What the core did with an accepted [`Op`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Accepted {
    /// A turn started (or waits for a free slot) for the message.
    Started {
        turn_id: String,
    },
    /// The message will be injected into the running turn.
    Steered {
        turn_id: String,
    },
    /// The message waits as a follow-up turn, which will have this id; 1
    /// is next.
    Queued {
        turn_id: String,
        position: usize,
    },
    /// The turn was told to stop. `discarded`: the messages that went with
    /// it (a hard interrupt drops its pending steering and the session's
    /// queued follow-ups).
    Interrupted {
        turn_id: String,
        discarded: Vec<String>,
    },
    PolicySet,
}

/// Why an [`Op`] was refused. Nothing else changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", content = "message", rename_all = "snake_case")]
pub enum Refused {
    /// The interrupt's target has no running turn.
    #[error("{0}")]
    NoActiveTurn(String),
    /// The session's steering or follow-up queue is at its limit.
    #[error("{0}")]
    QueueFull(String),
    /// The op itself is malformed (an empty session key).
    #[error("{0}")]
    Invalid(String),
    /// The host is shutting down.
    #[error("{0}")]
    Closed(String),
}

/// Which turn a control operation is for: never "the active turn".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Session(String),
    Turn(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptMode {
    /// Finish running tools, then one last answer without tools.
    Graceful,
    /// Cancel at once; the turn leaves no history.
    Hard,
}

/// One event, with the envelope every event carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Monotonic over the host's lifetime (and across restarts: it continues
    /// from the event log).
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// Null for host-wide events (plugins loaded or unloaded).
    pub session: Option<String>,
    pub turn_id: Option<String>,
    /// Null for a top-level turn.
    pub parent_turn_id: Option<String>,
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened. `type` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    TurnBegin {
        /// The user message that started the turn.
        input: String,
    },
    TurnEnd {
        status: TurnStatus,
        /// Why it ended: `final_answer`, `max_iterations`, `interrupted`, or
        /// the error.
        reason: String,
        iterations: u32,
        usage: Usage,
        /// The final answer (completed turns).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    LlmRequest {
        iteration: u32,
        /// The first candidate that will be tried, `provider:model`.
        model: String,
        messages: usize,
        tools: usize,
    },
    LlmDelta {
        iteration: u32,
        text: String,
    },
    LlmResponse {
        iteration: u32,
        /// The candidate that answered.
        model: String,
        text: String,
        tool_calls: Vec<ToolCallInfo>,
        finish_reason: FinishReason,
        usage: Usage,
        duration_ms: f64,
    },
    LlmRetry {
        iteration: u32,
        /// The candidate that failed.
        model: String,
        /// 1 for the first retry of this candidate.
        attempt: u32,
        error: String,
        /// The candidate tried next: the same one after `delay_ms`, or the
        /// next in the chain.
        next_model: String,
        delay_ms: u64,
        /// Text already streamed for the failed attempt is void.
        discard_partial: bool,
    },
    ToolCallBegin {
        call_id: String,
        tool: String,
        arguments: String,
    },
    ToolCallEnd {
        call_id: String,
        tool: String,
        ok: bool,
        /// The tool's result (ok) or the error text the model is shown.
        output: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_kind: Option<crate::plugin::ErrorKind>,
        duration_ms: f64,
    },
    ToolCallSkipped {
        call_id: String,
        tool: String,
        reason: String,
    },
    /// A user message taken into the running turn, before the model call of
    /// `iteration`.
    SteeringInjected {
        iteration: u32,
        content: String,
    },
    /// A user message that will run as a turn of its own after the current
    /// one (1 is next). `turn_id` is the id that turn will have.
    FollowUpQueued {
        content: String,
        position: usize,
    },
    /// An interrupt reached the turn. `discarded`: the messages a hard
    /// interrupt dropped with it (pending steering, queued follow-ups).
    InterruptReceived {
        mode: InterruptMode,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        discarded: Vec<String>,
    },
    /// A turn started a child turn. SubTurn events carry the parent's
    /// `turn_id`; `subturn_id` is the child's (its own events carry it as
    /// `turn_id`, and the parent's as `parent_turn_id`).
    SubturnSpawn {
        subturn_id: String,
        label: String,
        task: String,
        depth: u32,
        /// `subagent` (the parent waits for the answer) or `spawn`.
        mode: SpawnMode,
        /// The model asked for (null: the parent's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The tools it may use (null: all of the parent's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<Vec<String>>,
        critical: bool,
    },
    SubturnEnd {
        subturn_id: String,
        status: TurnStatus,
        reason: String,
        usage: Usage,
    },
    /// The child's result reached its parent: as the tool's result
    /// (`subagent`, a plugin's call) or injected before a model call (`spawn`).
    SubturnDelivered {
        subturn_id: String,
        via: Delivery,
    },
    /// The parent had ended: the child's result runs as a follow-up turn on
    /// the session.
    SubturnOrphan {
        subturn_id: String,
    },
    PluginLoaded {
        plugin: String,
        tools: Vec<String>,
    },
    PluginFailed {
        plugin: String,
        file: String,
        error: String,
    },
    PluginUnloaded {
        plugin: String,
    },
    /// A hook changed what happens: denied a tool call or a model request,
    /// rewrote a call's arguments, answered in place of a tool, or replaced
    /// a request, a response or a result.
    HookDecision {
        /// The hook plugin's name.
        hook: String,
        point: HookPoint,
        decision: HookVerdict,
        /// Tool points: the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// `deny`: the hook's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// `rewrite`: the arguments the tool is called with.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<String>,
    },
    /// A hook failed (trapped, ran out of time or memory, or returned
    /// something the host refuses), and what the host did about it.
    HookError {
        hook: String,
        point: HookPoint,
        error: String,
        effect: HookEffect,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
    },
}

impl EventBody {
    /// The `type` string.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::TurnBegin { .. } => "turn_begin",
            EventBody::TurnEnd { .. } => "turn_end",
            EventBody::LlmRequest { .. } => "llm_request",
            EventBody::LlmDelta { .. } => "llm_delta",
            EventBody::LlmResponse { .. } => "llm_response",
            EventBody::LlmRetry { .. } => "llm_retry",
            EventBody::ToolCallBegin { .. } => "tool_call_begin",
            EventBody::ToolCallEnd { .. } => "tool_call_end",
            EventBody::ToolCallSkipped { .. } => "tool_call_skipped",
            EventBody::SteeringInjected { .. } => "steering_injected",
            EventBody::FollowUpQueued { .. } => "follow_up_queued",
            EventBody::InterruptReceived { .. } => "interrupt_received",
            EventBody::SubturnSpawn { .. } => "subturn_spawn",
            EventBody::SubturnEnd { .. } => "subturn_end",
            EventBody::SubturnDelivered { .. } => "subturn_delivered",
            EventBody::SubturnOrphan { .. } => "subturn_orphan",
            EventBody::PluginLoaded { .. } => "plugin_loaded",
            EventBody::PluginFailed { .. } => "plugin_failed",
            EventBody::PluginUnloaded { .. } => "plugin_unloaded",
            EventBody::HookDecision { .. } => "hook_decision",
            EventBody::HookError { .. } => "hook_error",
        }
    }

    /// Every `type` there is.
    pub const KINDS: &[&str] = &[
        "turn_begin",
        "turn_end",
        "llm_request",
        "llm_delta",
        "llm_response",
        "llm_retry",
        "tool_call_begin",
        "tool_call_end",
        "tool_call_skipped",
        "steering_injected",
        "follow_up_queued",
        "interrupt_received",
        "subturn_spawn",
        "subturn_end",
        "subturn_delivered",
        "subturn_orphan",
        "plugin_loaded",
        "plugin_failed",
        "plugin_unloaded",
        "hook_decision",
        "hook_error",
    ];
}

/// What a hook decided, in `hook_decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookVerdict {
    Deny,
    Rewrite,
    Answer,
    Replace,
}

impl HookVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            HookVerdict::Deny => "deny",
            HookVerdict::Rewrite => "rewrite",
            HookVerdict::Answer => "answer",
            HookVerdict::Replace => "replace",
        }
    }
}

/// What the host did when a hook failed, in `hook_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEffect {
    /// The tool call was denied (a `before-tool` hook that fails closed).
    Denied,
    /// The tool's result was withheld from the model (an `after-tool` hook
    /// that fails closed).
    Withheld,
    /// The turn ended with an error (a `before-llm` or `after-llm` hook that
    /// fails closed).
    TurnFailed,
    /// The hook was passed over.
    Ignored,
}

/// A tool call as shown in `llm_response`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallInfo {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Completed,
    Aborted,
    Error,
    /// A SubTurn used more tokens than its budget.
    BudgetExceeded,
    /// A SubTurn ran past its timeout.
    TimedOut,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Completed => "completed",
            TurnStatus::Aborted => "aborted",
            TurnStatus::Error => "error",
            TurnStatus::BudgetExceeded => "budget_exceeded",
            TurnStatus::TimedOut => "timed_out",
        }
    }

    pub fn parse(s: &str) -> Option<TurnStatus> {
        [
            TurnStatus::Completed,
            TurnStatus::Aborted,
            TurnStatus::Error,
            TurnStatus::BudgetExceeded,
            TurnStatus::TimedOut,
        ]
        .into_iter()
        .find(|status| status.as_str() == s)
    }
}

/// What a child is asked to do, and with what: the arguments of `spawn` and
/// `subagent`, and of `agent.spawn-subturn`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubTurnRequest {
    pub task: String,
    #[serde(default)]
    pub label: Option<String>,
    /// A model name for the same provider (default: the parent's).
    #[serde(default)]
    pub model: Option<String>,
    /// A subset of the parent's tools (default: all of them).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Survives the parent's graceful end, and delivers as a follow-up.
    #[serde(default)]
    pub critical: bool,
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Tokens (input and output, as the provider reports them) the child
    /// may use.
    #[serde(default)]
    pub token_budget: Option<u64>,
}

/// How a SubTurn was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnMode {
    /// The parent waits for the answer (the `subagent` tool, a plugin).
    Subagent,
    /// The parent goes on; the result arrives later (the `spawn` tool).
    Spawn,
}

/// How a SubTurn's result reached its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    ToolResult,
    Injected,
}
