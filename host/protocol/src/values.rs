//! The values Ops and Events carry: statuses, usage, error classes, hook
//! points, SubTurn requests.

use serde::{Deserialize, Serialize};

/// What a hook decided, in `hook_decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookVerdict {
    Deny,
    Rewrite,
    Answer,
    Replace,
    /// The call waits for a person's approval.
    Ask,
}

impl HookVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            HookVerdict::Deny => "deny",
            HookVerdict::Rewrite => "rewrite",
            HookVerdict::Answer => "answer",
            HookVerdict::Replace => "replace",
            HookVerdict::Ask => "ask",
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
    /// A named agent of the host's configuration to run the child as (its
    /// prompt, model and tools, still bounded by the parent's limits);
    /// default: the parent's agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
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

/// Why a turn failed, in `turn_end` beside its `reason`: a provider
/// failure keeps its class up to the turn. When every model candidate
/// failed, it is the class of the last candidate's last failure. The wire
/// names (`as_str`, snake_case) are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnErrorKind {
    /// The provider refused the credentials (HTTP 401, 403).
    Auth,
    /// The provider's rate limit (HTTP 429).
    RateLimited,
    /// The provider is overloaded (HTTP 503, 529, an overload event).
    Overloaded,
    /// The conversation is longer than the model's context window.
    ContextTooLong,
    /// The provider refused the request as malformed (another 4xx).
    BadRequest,
    /// The connection failed.
    Network,
    /// No answer (or no next chunk) in time.
    Timeout,
    /// The stream broke off before the reply was complete.
    CutStream,
    /// The provider failed on its side (HTTP 5xx) or answered with
    /// something that is not its wire format.
    Provider,
    /// The reply passed a bound of the host (its text, its arguments).
    ReplyTooLarge,
    /// The host's model settings are wrong (a missing key, a bad URL).
    Config,
    /// A hook stopped the turn (it denied the request or failed closed).
    Hook,
    /// The model gave no answer, even asked once more without tools.
    NoAnswer,
    /// The model repeated a refused tool call up to the turn's limit.
    RepeatedRefusal,
    /// The host itself failed: the turn panicked, or the session's history
    /// could not be read or saved.
    Internal,
}

impl TurnErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnErrorKind::Auth => "auth",
            TurnErrorKind::RateLimited => "rate_limited",
            TurnErrorKind::Overloaded => "overloaded",
            TurnErrorKind::ContextTooLong => "context_too_long",
            TurnErrorKind::BadRequest => "bad_request",
            TurnErrorKind::Network => "network",
            TurnErrorKind::Timeout => "timeout",
            TurnErrorKind::CutStream => "cut_stream",
            TurnErrorKind::Provider => "provider",
            TurnErrorKind::ReplyTooLarge => "reply_too_large",
            TurnErrorKind::Config => "config",
            TurnErrorKind::Hook => "hook",
            TurnErrorKind::NoAnswer => "no_answer",
            TurnErrorKind::RepeatedRefusal => "repeated_refusal",
            TurnErrorKind::Internal => "internal",
        }
    }
}

impl std::fmt::Display for TurnErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the model stopped. Serialized as a plain string (`"tool_calls"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    /// A value this host does not know, kept as the server sent it.
    Other(String),
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> String {
        match reason {
            FinishReason::Stop => "stop".into(),
            FinishReason::ToolCalls => "tool_calls".into(),
            FinishReason::Length => "length".into(),
            FinishReason::ContentFilter => "content_filter".into(),
            FinishReason::Other(other) => other,
        }
    }
}

impl From<String> for FinishReason {
    fn from(reason: String) -> FinishReason {
        match reason.as_str() {
            "stop" => FinishReason::Stop,
            "tool_calls" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Other(reason),
        }
    }
}

/// Tokens as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Why a tool call failed: the WIT `error-kind`, and `cancelled`, which
/// only the host gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolErrorKind {
    InvalidInput,
    NotFound,
    Denied,
    Timeout,
    Upstream,
    Internal,
    /// Host-side only: the host stopped the call (its turn was aborted).
    Cancelled,
}

impl ToolErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidInput => "invalid-input",
            ToolErrorKind::NotFound => "not-found",
            ToolErrorKind::Denied => "denied",
            ToolErrorKind::Timeout => "timeout",
            ToolErrorKind::Upstream => "upstream",
            ToolErrorKind::Internal => "internal",
            ToolErrorKind::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in a turn a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookPoint {
    BeforeLlm,
    AfterLlm,
    BeforeTool,
    AfterTool,
    OnEvent,
}

impl HookPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            HookPoint::BeforeLlm => "before-llm",
            HookPoint::AfterLlm => "after-llm",
            HookPoint::BeforeTool => "before-tool",
            HookPoint::AfterTool => "after-tool",
            HookPoint::OnEvent => "on-event",
        }
    }

    /// Whether a failure here may stop what the hook guards.
    pub fn is_before(self) -> bool {
        matches!(self, HookPoint::BeforeLlm | HookPoint::BeforeTool)
    }

    /// Whether the point is about a tool call.
    pub fn is_tool(self) -> bool {
        matches!(self, HookPoint::BeforeTool | HookPoint::AfterTool)
    }
}

impl std::fmt::Display for HookPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A person's answer to a tool call that waits for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    Allow,
    Deny,
}

/// How far an approval decision reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This call only.
    #[default]
    Once,
    /// Every call of the same tool for the rest of the session.
    Session,
    /// Every call of the same tool by the session's agent, kept in the
    /// store until revoked.
    Always,
}

/// Who decided a call that waited for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// An `Op::Approve`.
    User,
    /// A decision kept for the session or the agent.
    Remembered,
    /// Nobody decided in time: a denial.
    Timeout,
    /// The turn was interrupted (gracefully or hard): a denial.
    Interrupt,
}

impl ApprovalDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::Allow => "allow",
            ApprovalDecision::Deny => "deny",
        }
    }
}

impl ApprovalScope {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalScope::Once => "once",
            ApprovalScope::Session => "session",
            ApprovalScope::Always => "always",
        }
    }
}
