//! What happened: one [`Event`] per thing the core did, each kind a struct
//! of its own.
//!
//! The list of kinds is written once, in the `events!` invocation below:
//! the [`EventBody`] enum, the [`EventKind`] enum, each kind's `type`
//! string and the `From` conversions all come from it.

use serde::{Deserialize, Serialize};

use crate::op::InterruptMode;
use crate::values::{
    ApprovalDecision, ApprovalScope, DecidedBy, Delivery, FinishReason, HookEffect, HookPoint,
    HookVerdict, SpawnMode, ToolCallInfo, ToolErrorKind, TurnErrorKind, TurnStatus, Usage,
};

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

/// Declares [`EventBody`] (what happened, `type` in JSON) and [`EventKind`]
/// (which kind of thing) from one list of `Variant(Struct) = "type"`.
macro_rules! events {
    ($( $(#[$doc:meta])* $variant:ident($body:ident) = $kind:literal, )*) => {
        /// What happened. `type` in JSON.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        pub enum EventBody {
            $( $(#[$doc])* #[serde(rename = $kind)] $variant($body), )*
        }

        /// The kind of an event: its `type`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum EventKind {
            $( $(#[$doc])* #[serde(rename = $kind)] $variant, )*
        }

        impl EventKind {
            /// Every kind there is, in the order they are declared.
            pub const ALL: &[EventKind] = &[$(EventKind::$variant,)*];

            /// The `type` string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $kind,)*
                }
            }
        }

        impl EventBody {
            pub fn kind(&self) -> EventKind {
                match self {
                    $(EventBody::$variant(_) => EventKind::$variant,)*
                }
            }
        }

        $(
            impl From<$body> for EventBody {
                fn from(body: $body) -> EventBody {
                    EventBody::$variant(body)
                }
            }
        )*
    };
}

events! {
    TurnBegin(TurnBegin) = "turn_begin",
    TurnEnd(TurnEnd) = "turn_end",
    LlmRequest(LlmRequest) = "llm_request",
    LlmDelta(LlmDelta) = "llm_delta",
    LlmResponse(LlmResponse) = "llm_response",
    LlmRetry(LlmRetry) = "llm_retry",
    CompactionBegin(CompactionBegin) = "compaction_begin",
    CompactionEnd(CompactionEnd) = "compaction_end",
    ToolCallBegin(ToolCallBegin) = "tool_call_begin",
    ToolCallEnd(ToolCallEnd) = "tool_call_end",
    ToolCallSkipped(ToolCallSkipped) = "tool_call_skipped",
    SteeringInjected(SteeringInjected) = "steering_injected",
    FollowUpQueued(FollowUpQueued) = "follow_up_queued",
    InterruptReceived(InterruptReceived) = "interrupt_received",
    SubturnSpawn(SubturnSpawn) = "subturn_spawn",
    SubturnEnd(SubturnEnd) = "subturn_end",
    SubturnDelivered(SubturnDelivered) = "subturn_delivered",
    SubturnOrphan(SubturnOrphan) = "subturn_orphan",
    PluginLoaded(PluginLoaded) = "plugin_loaded",
    PluginFailed(PluginFailed) = "plugin_failed",
    PluginUnloaded(PluginUnloaded) = "plugin_unloaded",
    HookDecision(HookDecision) = "hook_decision",
    HookError(HookError) = "hook_error",
    ConfigReloaded(ConfigReloaded) = "config_reloaded",
    ConfigRejected(ConfigRejected) = "config_rejected",
    ApprovalRequested(ApprovalRequested) = "approval_requested",
    ApprovalDecided(ApprovalDecided) = "approval_decided",
    // MCP servers wasmclaw is a client of.
    McpServerReady(McpServerReady) = "mcp_server_ready",
    McpServerFailed(McpServerFailed) = "mcp_server_failed",
}

impl EventKind {
    /// The kind whose `type` string is `s`.
    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A turn started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnBegin {
    /// The user message that started the turn.
    pub input: String,
    /// The named agent it runs as.
    #[serde(default)]
    pub agent: String,
}

/// A turn ended: every turn that began ends with exactly one of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    pub status: TurnStatus,
    /// Why it ended: `final_answer`, `max_iterations`, `interrupted`, or
    /// the error.
    pub reason: String,
    /// For `error`: what kind of failure, so a front end (and the host's
    /// own recovery) can tell an auth failure from a context overflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<TurnErrorKind>,
    pub iterations: u32,
    pub usage: Usage,
    /// The final answer (completed turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// A model call is about to be made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    pub iteration: u32,
    /// The first candidate that will be tried, `provider:model`.
    pub model: String,
    pub messages: usize,
    pub tools: usize,
    /// The request's tokens as counted before it is sent: the provider's
    /// own count of the part it has seen, an estimate of the rest (see
    /// the host's `agent/context.rs`).
    #[serde(default)]
    pub tokens: u64,
    /// The model's context window, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
}

/// Text streamed by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmDelta {
    pub iteration: u32,
    pub text: String,
}

/// The model's whole reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    pub iteration: u32,
    /// The candidate that answered.
    pub model: String,
    pub text: String,
    pub tool_calls: Vec<ToolCallInfo>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub duration_ms: f64,
}

/// The older part of a conversation is about to be summarized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionBegin {
    /// `threshold` (the request would pass the agent's threshold),
    /// `overflow` (the provider said it was too long) or `command`
    /// (`/compact`, `Op::Compact`).
    pub reason: String,
    /// The messages to be summarized (an earlier summary among them).
    pub messages: usize,
    /// The conversation's tokens before.
    pub tokens_before: u64,
}

/// A compaction ended: the summary replaces the messages it covers (they
/// stay in the session's store), or it failed and nothing changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionEnd {
    pub reason: String,
    /// The messages the summary replaces.
    pub summarized: usize,
    /// The messages kept verbatim after it.
    pub kept: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Characters of the summary.
    pub summary_chars: usize,
    /// The candidate that wrote the summary, `provider:model`.
    pub model: String,
    /// The tokens of the summarizing call.
    #[serde(default)]
    pub usage: Usage,
    pub duration_ms: f64,
    /// Why it failed (nothing was replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A model call failed and is tried again, or the next candidate is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRetry {
    pub iteration: u32,
    /// The candidate that failed.
    pub model: String,
    /// 1 for the first retry of this candidate.
    pub attempt: u32,
    pub error: String,
    /// The candidate tried next: the same one after `delay_ms`, or the
    /// next in the chain.
    pub next_model: String,
    pub delay_ms: u64,
    /// Text already streamed for the failed attempt is void.
    pub discard_partial: bool,
}

/// A tool call starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallBegin {
    pub call_id: String,
    pub tool: String,
    pub arguments: String,
}

/// A tool call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallEnd {
    pub call_id: String,
    pub tool: String,
    pub ok: bool,
    /// The tool's result (ok) or the error text the model is shown.
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ToolErrorKind>,
    pub duration_ms: f64,
}

/// A tool call the model asked for that was not made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallSkipped {
    pub call_id: String,
    pub tool: String,
    pub reason: String,
}

/// A user message taken into the running turn, before the model call of
/// `iteration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteeringInjected {
    pub iteration: u32,
    pub content: String,
}

/// A user message that will run as a turn of its own after the current
/// one (1 is next). `turn_id` is the id that turn will have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowUpQueued {
    pub content: String,
    pub position: usize,
}

/// An interrupt reached the turn. `discarded`: the messages a hard
/// interrupt dropped with it (pending steering, queued follow-ups).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterruptReceived {
    pub mode: InterruptMode,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discarded: Vec<String>,
}

/// A turn started a child turn. SubTurn events carry the parent's
/// `turn_id`; `subturn_id` is the child's (its own events carry it as
/// `turn_id`, and the parent's as `parent_turn_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubturnSpawn {
    pub subturn_id: String,
    pub label: String,
    pub task: String,
    pub depth: u32,
    /// `subagent` (the parent waits for the answer) or `spawn`.
    pub mode: SpawnMode,
    /// The named agent it runs as.
    #[serde(default)]
    pub agent: String,
    /// The model asked for (null: the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The tools it may use (null: all of the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    pub critical: bool,
}

/// A child turn ended, as its parent sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubturnEnd {
    pub subturn_id: String,
    pub status: TurnStatus,
    pub reason: String,
    pub usage: Usage,
}

/// The child's result reached its parent: as the tool's result
/// (`subagent`, a plugin's call) or injected before a model call (`spawn`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubturnDelivered {
    pub subturn_id: String,
    pub via: Delivery,
}

/// The parent had ended: the child's result runs as a follow-up turn on
/// the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubturnOrphan {
    pub subturn_id: String,
}

/// A plugin was loaded (or reloaded) and offers these tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginLoaded {
    pub plugin: String,
    pub tools: Vec<String>,
    /// The version of `wasmclaw:plugin` it was built for (`0.1.0`, ...);
    /// empty in events logged before versions were recorded.
    #[serde(default)]
    pub wit_version: String,
}

/// A plugin file could not be loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginFailed {
    pub plugin: String,
    pub file: String,
    pub error: String,
}

/// An MCP server of `[mcp.servers]` started (or restarted) and offers
/// this many tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerReady {
    pub server: String,
    pub tools: usize,
    /// The protocol revision agreed on (`2025-11-25`, ...).
    pub protocol: String,
}

/// An MCP server of `[mcp.servers]` failed to start or stopped; it is
/// started again after a backoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerFailed {
    pub server: String,
    pub error: String,
    /// The last lines it wrote to stderr (stdio servers).
    pub stderr_tail: String,
}

/// A plugin's file was removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginUnloaded {
    pub plugin: String,
}

/// A tool call waits for a person's decision (`Op::Approve`); the other
/// calls of its reply run on. The event's session is the root session (a
/// SubTurn's call names the SubTurn in `turn_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    pub call_id: String,
    pub tool: String,
    /// Exactly what the tool will be called with (after the hooks).
    pub arguments: String,
    /// Why it asks: the agent's approval rule, or the hook that asked and
    /// its reason.
    pub asked_by: String,
    /// When the wait ends as a denial (RFC 3339).
    pub expires_at: String,
}

/// A call that waited for approval was decided: exactly one of these per
/// `approval_requested`, also for one that timed out or was interrupted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecided {
    pub call_id: String,
    pub tool: String,
    pub decision: ApprovalDecision,
    pub scope: ApprovalScope,
    pub by: DecidedBy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The configuration file changed and the new configuration applies to
/// turns that start from now on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigReloaded {
    pub file: String,
    /// The key paths whose values changed.
    pub changed: Vec<String>,
    /// Those of `changed` that apply only when the host restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_needed: Vec<String>,
}

/// The configuration file changed but does not load: the running
/// configuration stays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigRejected {
    pub file: String,
    /// Every error, one per line.
    pub error: String,
}

/// A hook changed what happens: denied a tool call or a model request,
/// rewrote a call's arguments, answered in place of a tool, or replaced
/// a request, a response or a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookDecision {
    /// The hook plugin's name.
    pub hook: String,
    pub point: HookPoint,
    pub decision: HookVerdict,
    /// Tool points: the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `deny`: the hook's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `rewrite`: the arguments the tool is called with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// A hook failed (trapped, ran out of time or memory, or returned
/// something the host refuses), and what the host did about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookError {
    pub hook: String,
    pub point: HookPoint,
    pub error: String,
    pub effect: HookEffect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_type_string_that_parses_back() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in EventKind::ALL {
            assert!(seen.insert(kind.as_str()), "{kind} twice");
            assert_eq!(EventKind::parse(kind.as_str()), Some(*kind));
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(EventKind::parse("turn_ended"), None);
    }

    #[test]
    fn an_event_is_one_flat_object_whose_type_is_its_kind() {
        let event = Event {
            seq: 7,
            time: "2026-11-30T18:00:00.123Z".into(),
            session: Some("s1".into()),
            turn_id: Some("t-1".into()),
            parent_turn_id: None,
            body: ToolCallEnd {
                call_id: "c1".into(),
                tool: "calculate".into(),
                ok: true,
                output: "42".into(),
                error_kind: None,
                duration_ms: 0.41,
            }
            .into(),
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "seq": 7, "time": "2026-11-30T18:00:00.123Z", "session": "s1",
                "turn_id": "t-1", "parent_turn_id": null, "type": "tool_call_end",
                "call_id": "c1", "tool": "calculate", "ok": true, "output": "42",
                "duration_ms": 0.41
            })
        );
        assert_eq!(event.body.kind(), EventKind::ToolCallEnd);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn a_failed_turn_end_names_its_error_kind() {
        let body: EventBody = TurnEnd {
            status: TurnStatus::Error,
            reason: "openai:gpt-4o: HTTP 401 Unauthorized: bad key".into(),
            error_kind: Some(TurnErrorKind::Auth),
            iterations: 1,
            usage: Usage::default(),
            answer: None,
        }
        .into();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["type"], "turn_end");
        assert_eq!(json["error_kind"], "auth");
        assert_eq!(serde_json::from_value::<EventBody>(json).unwrap(), body);
    }
}
