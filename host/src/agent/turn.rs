//! One turn: the loop of model calls and tool calls that answers one user
//! message.
//!
//! Each iteration sends the conversation and the current tool list to the
//! model chain. A reply with tool calls runs them (see [`super::tools`]) and
//! appends their results in the order the model asked; a reply without tool
//! calls is the final answer. The last allowed iteration forbids tool calls
//! (`tool_choice: none`) and adds a note asking for an answer, so a turn that
//! reaches the limit still ends with one (reason `max_iterations`).
//!
//! Before each model call the request is counted against the model's
//! window, the older history compacted past the threshold, and the request
//! fitted to the window; a provider's overflow error is recovered from
//! (see `turn/compact.rs`). Then the `before-llm` hooks may change the
//! request (or end the turn); after it the `after-llm` hooks may change the
//! response.
//!
//! The turn is steered and interrupted through its [`TurnControl`]:
//! steering is taken in before each model call (`steering_injected`); a tool
//! call that has not started when steering or a graceful interrupt arrives is
//! skipped, and its result says why; a final answer given while steering is
//! pending does not end the turn. After a graceful interrupt the next model
//! call is the last, without tools (reason `interrupted`), and a model call
//! in flight is wound down (see `turn/model_call.rs`); a hard interrupt drops
//! whatever the turn is waiting for (the model's reply, running tool calls)
//! and ends it `aborted`.
//!
//! A completed turn has an answer: a reply without text is asked once more
//! without tools (see `turn/no_answer.rs`). A model that repeats a refused tool
//! call ends the turn (see [`super::refusals`]).
//!
//! History is written once, when the turn ends: a completed turn appends the
//! user message and everything after it in one transaction; a turn that ends
//! in error or is aborted appends nothing, so the history never holds half a
//! turn (a tool call without its result, a question without an answer). The
//! turn itself, with its status and reason, is recorded either way.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

mod compact;
mod deltas;
mod model_call;
mod no_answer;

use crate::bus::Scope;
use crate::hooks::{HookScope, HookStop};
use crate::llm::types::ToolChoice;
use crate::llm::{ChainError, ChatRequest, ForHistory, MemoRef, Message, ToolCall, ToolDef, Usage};
use crate::protocol::{
    EventBody, SteeringInjected, SubturnDelivered, TurnBegin, TurnErrorKind, TurnStatus,
};
use crate::store::TurnRecord;

use self::compact::{Borrowed, Conversation};
use self::model_call::Asked;
use super::context::OfferedTools;
use super::control::TurnControl;
use super::profile::{Profile, Profiles};
use super::refusals::Refusals;
use super::subturn::{self, Parent};
use super::{Agent, AgentConfig, TurnOutcome};
use crate::config::ApprovalSettings;

/// Added to the request (not the history), as a system message, on the
/// last allowed iteration.
const LAST_ITERATION_NOTE: &str = "You have used every tool call this turn allows. Answer now, briefly, with what you have; do not call tools.";

/// Added after a graceful interrupt, on the turn's last call.
const INTERRUPTED_NOTE: &str =
    "The user interrupted this turn. Do not call tools; answer now, briefly, with what you have.";

/// How a completed turn ended.
struct Answer {
    text: String,
    /// `final_answer`, `max_iterations` or `interrupted`.
    reason: &'static str,
    /// The user message and everything after it: what the history gains.
    messages: Vec<Message>,
    /// The history the store lent the turn, given back after the commit.
    history: Option<Borrowed>,
}

/// What a turn runs with: its agent (a snapshot of the configuration
/// taken when the top-level turn started) and, for a SubTurn, its model,
/// tools, deadline and budget.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// Every agent of the snapshot the turn tree runs with: a SubTurn
    /// started as another agent finds it here.
    pub profiles: Arc<Profiles>,
    /// The agent this turn runs as.
    pub profile: Arc<Profile>,
    /// The approval rules of the other agents above it in its tree (a
    /// SubTurn started as another agent): a call passes the strictest of
    /// them and its own agent's.
    pub outer_approvals: Vec<(String, ApprovalSettings)>,
    /// A model name for the chain's providers (None: their own).
    pub model: Option<String>,
    /// The tools it may use beyond the agent's filter (None: all the agent
    /// offers).
    pub tools: Option<Arc<BTreeSet<String>>>,
    pub deadline: Option<Instant>,
    pub token_budget: Option<u64>,
}

impl TurnSpec {
    /// A top-level turn of `profile`, from `profiles`.
    pub fn top(profiles: Arc<Profiles>, profile: Arc<Profile>) -> TurnSpec {
        TurnSpec {
            token_budget: profile.config.token_budget,
            profiles,
            profile,
            outer_approvals: Vec::new(),
            model: None,
            tools: None,
            deadline: None,
        }
    }

    /// How this turn runs.
    pub fn config(&self) -> &AgentConfig {
        &self.profile.config
    }

    pub fn allows(&self, tool: &str) -> bool {
        self.profile.config.tools.allows(tool)
            && self.tools.as_ref().is_none_or(|t| t.contains(tool))
    }

    /// The tools on offer now (plugins may have been added or removed since
    /// the last iteration), as allowed. With nothing to filter out, the
    /// registry's own list (no copy).
    pub fn tool_defs(&self, agent: &Agent) -> Arc<Vec<ToolDef>> {
        if self.allows_all() {
            return agent.tool_defs();
        }
        Arc::new(
            agent
                .tool_defs()
                .iter()
                .filter(|t| self.allows(&t.name))
                .cloned()
                .collect(),
        )
    }

    /// The same, and the tokens they take: with nothing to filter out, the
    /// registry's count, made once per set of tools.
    pub fn offered(&self, agent: &Agent) -> OfferedTools {
        if self.allows_all() {
            return agent.offered_tools();
        }
        OfferedTools::new(self.tool_defs(agent))
    }

    fn allows_all(&self) -> bool {
        self.tools.is_none() && self.profile.config.tools.allows_all()
    }

    pub fn tool_names(&self, agent: &Agent) -> BTreeSet<String> {
        self.tool_defs(agent)
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }
}

pub struct Turn {
    agent: Arc<Agent>,
    pub(crate) id: String,
    pub(crate) scope: Scope,
    session: String,
    started_at: String,
    iterations: u32,
    usage: Usage,
    pub(crate) control: Arc<TurnControl>,
    pub(crate) spec: Arc<TurnSpec>,
    /// The refused tool calls of this turn, to stop a model that repeats one.
    pub(crate) refusals: Arc<Refusals>,
    /// The tokens counted of the next request, and the model's window
    /// (for its `llm_request`).
    counted: (u64, Option<u64>),
}

/// Why a turn did not complete.
enum Failure {
    /// The turn's `error_kind` and its reason.
    Error {
        kind: TurnErrorKind,
        reason: String,
    },
    /// A hard interrupt.
    Aborted,
    BudgetExceeded(String),
    TimedOut,
}

impl Failure {
    fn error(kind: TurnErrorKind, reason: impl Into<String>) -> Failure {
        Failure::Error {
            kind,
            reason: reason.into(),
        }
    }

    /// The `error_kind` of the turn it ends.
    fn kind(&self) -> Option<TurnErrorKind> {
        match self {
            Failure::Error { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// The model chain failed: the class of the failure that ended the call.
impl From<ChainError> for Failure {
    fn from(error: ChainError) -> Failure {
        Failure::error(error.class(), error.to_string())
    }
}

impl From<HookStop> for Failure {
    fn from(stop: HookStop) -> Failure {
        Failure::error(TurnErrorKind::Hook, stop.to_string())
    }
}

impl Turn {
    pub fn with_spec(agent: Arc<Agent>, control: Arc<TurnControl>, spec: TurnSpec) -> Turn {
        Turn {
            agent,
            scope: control.scope(),
            id: control.id.clone(),
            session: control.session.clone(),
            started_at: now(),
            iterations: 0,
            usage: Usage::default(),
            control,
            spec: Arc::new(spec),
            refusals: Arc::new(Refusals::default()),
            counted: (0, None),
        }
    }

    pub(crate) fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// What children of this turn inherit.
    pub(crate) fn as_parent(&self) -> Parent {
        Parent {
            agent: self.agent.clone(),
            control: self.control.clone(),
            spec: self.spec.clone(),
        }
    }

    /// A SubTurn: its history is its own, not the session's.
    fn is_child(&self) -> bool {
        self.control.lineage.depth > 0
    }

    pub(crate) fn publish(&self, body: EventBody) -> u64 {
        self.agent.bus.publish(&self.scope, body)
    }

    /// Runs the turn to its end; its `turn_end` is published by
    /// [`super::task`], which runs every turn.
    pub(crate) async fn run(mut self, input: &str) -> TurnOutcome {
        self.publish(EventBody::TurnBegin(TurnBegin {
            input: input.to_string(),
            agent: self.spec.profile.name.clone(),
        }));
        let cancel = self.control.cancelled().clone();
        let deadline = self.spec.deadline;
        let timed_out = async move {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(Failure::Aborted),
            _ = timed_out => Err(Failure::TimedOut),
            result = self.iterate(input) => result,
        };
        // A hard interrupt accepted during the loop's last step (its sender
        // was told the turn stops) wins over the step's result.
        let result = if cancel.is_cancelled() {
            Err(Failure::Aborted)
        } else {
            result
        };
        // A stop dropped the calls in flight: the turn ends after them.
        self.control.calls_gone().await;
        self.finish(input, result).await
    }

    /// The loop: the final answer, or why the turn failed.
    async fn iterate(&mut self, input: &str) -> Result<Answer, Failure> {
        // While `serve` loads the plugin directory, a turn waits for its
        // tools and hooks.
        self.agent.plugins.until_scanned().await;
        let (view, loan) = if self.is_child() {
            (None, None)
        } else {
            let (view, loan) =
                (self.agent.store.lend_history(&self.session).await).map_err(|e| {
                    let reason = format!("could not read the session's history: {e:#}");
                    Failure::error(TurnErrorKind::Internal, reason)
                })?;
            (Some(view), loan)
        };
        let prompt = self.spec.config().system_prompt.clone();
        let mut convo = Conversation::new(prompt.as_deref(), view, loan, input);

        let max = self.spec.config().max_iterations.max(1);
        loop {
            self.iterations += 1;
            let at_limit = self.iterations == max;
            if at_limit {
                // Steering from here on would come too late for this turn.
                self.control.close_steering();
            }
            let (results, steering) = self.control.take_inbox();
            for result in results {
                self.publish(EventBody::SubturnDelivered(SubturnDelivered {
                    subturn_id: result.subturn_id,
                    via: crate::protocol::Delivery::Injected,
                }));
                convo.push(Message::user(result.content));
            }
            for content in steering {
                self.publish(EventBody::SteeringInjected(SteeringInjected {
                    iteration: self.iterations,
                    content: content.clone(),
                }));
                convo.push(Message::user(content));
            }
            let interrupted = self.control.winding_down();
            let last = at_limit || interrupted;
            let tools = self.spec.offered(&self.agent);
            let mut fitted = self.fit(&mut convo, &tools).await?;
            let hooks = self.agent.hooks();
            let mut overflows = 0;
            let (request, reply, model) = loop {
                let sent = convo.messages.len();
                let shortened = fitted.shortened;
                self.counted = (fitted.tokens, fitted.window);
                let request = self
                    .request(
                        fitted.messages,
                        convo.memo(),
                        tools.defs.clone(),
                        interrupted,
                        at_limit,
                    )
                    .await?;
                match self.call(&hooks, &request).await {
                    Ok(Asked::Reply { response, model }) => {
                        if !shortened {
                            convo.counted.reported(sent, response.usage.input_tokens);
                        }
                        break (request, response, model);
                    }
                    Ok(Asked::Dropped { partial }) => {
                        // The request shares the conversation's messages.
                        drop(request);
                        return Ok(self.dropped(partial, convo));
                    }
                    Err(Failure::Error {
                        kind: TurnErrorKind::ContextTooLong,
                        reason,
                    }) => {
                        let tokens = self.counted.0;
                        fitted =
                            (self.recover(&mut convo, &tools, &mut overflows, tokens, &reason))
                                .await?;
                    }
                    Err(failure) => return Err(failure),
                }
            };
            let skip_reason = if interrupted {
                "the user interrupted the turn".to_string()
            } else {
                format!("the turn reached its limit of {max} iterations")
            };
            let reply = match self
                .insist_on_answer(&hooks, &request, (reply, model), last, &skip_reason)
                .await?
            {
                Asked::Reply { response, .. } => response,
                Asked::Dropped { partial } => {
                    drop(request);
                    return Ok(self.dropped(partial, convo));
                }
            };
            // The request shares the conversation's messages: let go of it
            // before they grow, so that they are not copied.
            drop(request);
            let tool_calls = reply.tool_calls;
            convo.push(Message::Assistant {
                content: reply.text.clone(),
                tool_calls: tool_calls.iter().map(ToolCall::for_history).collect(),
            });
            if tool_calls.is_empty() {
                // Steering that arrived during the reply is answered in this
                // turn, unless the turn is at its limit (it then runs as a
                // follow-up).
                if !self.control.try_end(!at_limit) {
                    continue;
                }
                let reason = if self.control.interrupted_gracefully() {
                    "interrupted"
                } else if at_limit && max > 1 {
                    "max_iterations"
                } else {
                    "final_answer"
                };
                let (messages, history) = convo.into_own();
                return Ok(Answer {
                    text: reply.text,
                    reason,
                    messages,
                    history,
                });
            }
            let results = super::tools::run_all(self, &tool_calls, &reply.finish_reason).await;
            convo.extend(results);
            if let Some(reason) = self
                .refusals
                .exceeded(self.spec.config().max_repeated_refusals)
            {
                return Err(Failure::error(TurnErrorKind::RepeatedRefusal, reason));
            }
        }
    }

    /// The request of one model call: `messages` (fitted to the window),
    /// the memo of the conversation's wire form, the tools, and on the
    /// turn's last call the note that asks for an answer; through the
    /// `before-llm` hooks.
    async fn request(
        &self,
        messages: Arc<Vec<Message>>,
        memo: MemoRef,
        tools: Arc<Vec<ToolDef>>,
        interrupted: bool,
        at_limit: bool,
    ) -> Result<ChatRequest, Failure> {
        let mut request = ChatRequest {
            messages,
            memo: Some(memo),
            tools,
            max_tokens: self.spec.config().max_tokens,
            model: self.spec.model.clone(),
            ..Default::default()
        };
        if interrupted || (at_limit && self.iterations > 1) {
            // The tools stay declared (Anthropic refuses tool results
            // without them), but the model may not call one.
            request.tool_choice = ToolChoice::None;
            let note = if interrupted {
                INTERRUPTED_NOTE
            } else {
                LAST_ITERATION_NOTE
            };
            Arc::make_mut(&mut request.messages).push(Message::system(note));
        }
        let hooks = self.agent.hooks();
        Ok(hooks.before_llm(&self.hook_scope(), request).await?)
    }

    /// A graceful interrupt dropped the model call: the turn ends with the
    /// text it streamed.
    fn dropped(&self, partial: String, convo: Conversation) -> Answer {
        let (mut messages, history) = convo.into_own();
        if !partial.is_empty() {
            messages.push(Message::Assistant {
                content: partial.clone(),
                tool_calls: Vec::new(),
            });
        }
        self.control.try_end(false);
        Answer {
            text: partial,
            reason: "interrupted",
            messages,
            history,
        }
    }

    /// Where this turn's `before-llm` and `after-llm` hooks run.
    fn hook_scope(&self) -> HookScope<'_> {
        HookScope {
            bus: &self.agent.bus,
            scope: &self.scope,
            ctx: self.as_parent().call_context(""),
        }
    }

    /// Writes the turn and its history. Its end is announced by
    /// [`super::task`], which runs every turn.
    async fn finish(self, input: &str, result: Result<Answer, Failure>) -> TurnOutcome {
        if matches!(result, Err(Failure::TimedOut)) {
            // Its own children go with it.
            self.control.cancelled().cancel();
        }
        for result in self.control.end(&self.agent.bus) {
            subturn::orphan(&self.agent.bus, &self.control, result);
        }
        let error_kind = result.as_ref().err().and_then(Failure::kind);
        // A turn that failed gave its history back as it was lent when
        // its conversation was dropped.
        let (status, reason, answer, mut messages, history) = match result {
            Ok(answer) => (
                TurnStatus::Completed,
                answer.reason.to_string(),
                Some(answer.text),
                answer.messages,
                answer.history,
            ),
            Err(Failure::Error { reason, .. }) => {
                (TurnStatus::Error, reason, None, Vec::new(), None)
            }
            Err(Failure::Aborted) => (
                TurnStatus::Aborted,
                "interrupted".to_string(),
                None,
                Vec::new(),
                None,
            ),
            Err(Failure::BudgetExceeded(reason)) => {
                (TurnStatus::BudgetExceeded, reason, None, Vec::new(), None)
            }
            Err(Failure::TimedOut) => (
                TurnStatus::TimedOut,
                "ran past its timeout".to_string(),
                None,
                Vec::new(),
                None,
            ),
        };
        if self.is_child() {
            // A SubTurn's conversation is its own; only the turn is recorded.
            messages.clear();
        }
        let mut outcome = TurnOutcome {
            turn_id: self.id.clone(),
            status,
            reason,
            error_kind,
            answer,
            iterations: self.iterations,
            usage: self.usage,
        };
        let record = TurnRecord {
            id: self.id.clone(),
            session: self.session.clone(),
            parent_turn_id: self.scope.parent_turn_id.clone(),
            input: input.to_string(),
            status: outcome.status,
            reason: outcome.reason.clone(),
            iterations: outcome.iterations,
            usage: outcome.usage,
            started_at: self.started_at.clone(),
            ended_at: now(),
        };
        match self.agent.store.commit_turn(&record, &messages).await {
            Ok(()) => {
                if let Some(history) = history {
                    history.give_back(messages);
                }
            }
            Err(e) => {
                tracing::error!(turn = %self.id, "could not save the turn: {e:#}");
                outcome.status = TurnStatus::Error;
                outcome.reason = format!("could not save the turn's history: {e:#}");
                outcome.error_kind = Some(TurnErrorKind::Internal);
                outcome.answer = None;
            }
        }
        outcome
    }
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Milliseconds with microsecond precision, for `duration_ms` fields.
pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}
