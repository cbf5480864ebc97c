//! The context step of a turn, before each model call: the request counted
//! against the usable window, the older history compacted when it passes
//! the threshold, and the request shaped to fit (see [`crate::agent::context`]);
//! after a provider's overflow error, the recovery.
//!
//! A compaction inside a turn summarizes older history only: for a
//! top-level turn, the history before its last `keep_user_turns` user
//! turns (never the current turn's own messages), stored as the session's
//! compaction record before the conversation is replaced; for a SubTurn,
//! whose conversation is its own and ephemeral, its rounds between its task
//! and its latest round, in memory only.
//!
//! Overflow recovery, when the provider says the request is too long:
//! compact and try again; then leave out the largest tool results in the
//! middle of the request and try again; then fail with how long the
//! request was and the window.

use std::ops::Range;
use std::sync::Arc;

use super::{Failure, Turn};
use crate::agent::compaction::{Compaction, Ended};
use crate::agent::context::{
    Budget, Counted, OfferedTools, cap_tool_results, child_range, estimate_all, history_range,
    middle_out, overflow_sizes, too_long,
};
use crate::llm::{MemoRef, Message, WireMemo};
use crate::protocol::TurnErrorKind;
use crate::store::{CompactionRecord, HistoryView, Loan, summary_message};

/// A turn's conversation, and what the context step knows of it.
pub(super) struct Conversation {
    /// The system prompt, the history, the turn's messages. Shared with
    /// the request of the model call in flight (a request is no copy of
    /// them); copied only if they change while it is still held.
    pub messages: Arc<Vec<Message>>,
    /// Where what compaction may summarize starts: after the system prompt
    /// (a SubTurn: after its task too).
    pub start: usize,
    /// Where the turn's own messages start (its user message).
    pub turn_start: usize,
    /// How the history stands in the store (a top-level turn).
    pub view: Option<HistoryView>,
    pub counted: Counted,
    /// The window a provider's overflow error named.
    pub learned_window: Option<u64>,
    /// The store's loan of the history (a top-level turn whose session is
    /// held): given back with the turn's messages after its commit.
    loan: Option<Loan>,
    /// The messages after the system prompt as the model was sent them
    /// (see `llm/memo.rs`): the one the store keeps beside the history it
    /// lent, else the turn's own; started again when the messages change
    /// other than by growing.
    memo: Arc<WireMemo>,
    /// Where the messages after the system prompt start.
    after_prompt: usize,
}

/// The history a turn was lent, to give back once the turn's messages are
/// committed (see `store/history.rs`).
pub(super) struct Borrowed {
    loan: Loan,
    history: Vec<Message>,
}

impl Borrowed {
    /// `own`, the turn's messages, are committed: the history with them
    /// goes back to the store's memory.
    pub fn give_back(mut self, own: Vec<Message>) {
        self.history.extend(own);
        self.loan.give_back(self.history);
    }
}

impl Conversation {
    /// A top-level turn's: `prompt`, the session's `view` (and the loan
    /// of its messages, if the store lent them), `input`. The view keeps
    /// where the history stands; its messages move here.
    pub fn new(
        prompt: Option<&str>,
        mut view: Option<HistoryView>,
        loan: Option<Loan>,
        input: &str,
    ) -> Conversation {
        let history = view
            .as_mut()
            .map_or_else(Vec::new, |v| std::mem::take(&mut v.messages));
        let mut messages = Vec::with_capacity(history.len() + 8);
        messages.extend(prompt.map(Message::system));
        let after_prompt = messages.len();
        let child = view.is_none();
        let start = messages.len() + usize::from(child);
        messages.extend(history);
        let turn_start = messages.len();
        messages.push(Message::user(input));
        Conversation {
            messages: Arc::new(messages),
            start,
            turn_start,
            view,
            counted: Counted::default(),
            learned_window: None,
            memo: loan.as_ref().map(Loan::memo).unwrap_or_default(),
            loan,
            after_prompt,
        }
    }

    /// The memo of the messages, for a request of `messages`: used by the
    /// provider only if they are the conversation's own (not a copy that
    /// differs).
    pub fn memo(&self) -> MemoRef {
        MemoRef {
            memo: self.memo.clone(),
            messages: self.messages.clone(),
            from: self.after_prompt,
        }
    }

    /// Adds `message` at the end.
    pub fn push(&mut self, message: Message) {
        Arc::make_mut(&mut self.messages).push(message);
    }

    /// Adds `messages` at the end.
    pub fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        Arc::make_mut(&mut self.messages).extend(messages);
    }

    /// The turn's own messages, from its user message on (what the
    /// session's history gains), and the history to give back to the store
    /// once they are committed (if it was lent).
    pub fn into_own(mut self) -> (Vec<Message>, Option<Borrowed>) {
        let loan = self.loan.take();
        let mut messages = match Arc::try_unwrap(std::mem::take(&mut self.messages)) {
            Ok(messages) => messages,
            Err(shared) => return (shared[self.turn_start..].to_vec(), None),
        };
        let own = messages.split_off(self.turn_start);
        let borrowed = loan.map(|loan| {
            // The system prompt is the turn's, not the history's.
            messages.drain(..self.start);
            Borrowed {
                loan,
                history: messages,
            }
        });
        (own, borrowed)
    }

    /// Where the latest round of tool calls starts (the model answers it
    /// now): the last assistant message.
    fn latest_round(messages: &[Message]) -> usize {
        (messages.iter())
            .rposition(|m| matches!(m, Message::Assistant { .. }))
            .unwrap_or(messages.len())
    }
}

impl Drop for Conversation {
    /// A turn that ends without its answer (it failed, or was stopped)
    /// commits none of its messages: the history goes back to the store as
    /// it was lent, so the next turn does not read it from the table.
    fn drop(&mut self) {
        let Some(loan) = self.loan.take() else { return };
        // Shared (a request still holds it): the loan is void.
        let Some(messages) = Arc::get_mut(&mut self.messages) else {
            return;
        };
        messages.truncate(self.turn_start);
        messages.drain(..self.start);
        loan.give_back(std::mem::take(messages));
    }
}

/// A request's messages, fitted, and what was counted.
pub(super) struct Fitted {
    pub messages: Arc<Vec<Message>>,
    pub tokens: u64,
    pub window: Option<u64>,
    /// Tool results were left out: the provider's count is not of the
    /// conversation.
    pub shortened: bool,
}

impl Turn {
    fn budget(&self, convo: &Conversation, tools: &OfferedTools) -> Option<Budget> {
        let window = convo.learned_window.or(self.spec.config().context.window)?;
        Some(Budget::new(
            window,
            self.spec.config().max_tokens,
            tools.tokens,
        ))
    }

    /// The context step before a model call: compaction past the
    /// threshold, then the request's messages shaped to the window.
    pub(super) async fn fit(
        &mut self,
        convo: &mut Conversation,
        tools: &OfferedTools,
    ) -> Result<Fitted, Failure> {
        let context = &self.spec.config().context;
        let (enabled, threshold) = (context.enabled, context.threshold);
        let shaped = self.capped(convo.messages.clone(), convo, tools);
        if let Some(budget) = self.budget(convo, tools)
            && enabled
            && convo.counted.count(&shaped, tools.tokens) > budget.threshold(threshold)
            && self.compact(convo, tools, "threshold").await?
        {
            return Ok(self.shape(convo, tools, 0));
        }
        Ok(self.shortened(convo, tools, shaped, 0))
    }

    /// `messages` with their long tool results cut (copied only if one
    /// is).
    fn capped(
        &self,
        mut messages: Arc<Vec<Message>>,
        convo: &Conversation,
        tools: &OfferedTools,
    ) -> Arc<Vec<Message>> {
        if let Some(budget) = self.budget(convo, tools) {
            let fraction = self.spec.config().context.tool_result_fraction;
            let max = budget.tool_result_bytes(fraction);
            if messages.iter().any(|m| too_long(m, max)) {
                cap_tool_results(Arc::make_mut(&mut messages).as_mut_slice(), max);
            }
        }
        messages
    }

    /// The conversation's request: long tool results cut, and still too
    /// long (or `extra` tokens asked to be saved) the largest left out.
    fn shape(&self, convo: &Conversation, tools: &OfferedTools, extra: u64) -> Fitted {
        let capped = self.capped(convo.messages.clone(), convo, tools);
        self.shortened(convo, tools, capped, extra)
    }

    /// `messages` (capped), with the largest tool results left out when
    /// they pass the usable window or `extra` tokens are to be saved.
    fn shortened(
        &self,
        convo: &Conversation,
        tools: &OfferedTools,
        mut messages: Arc<Vec<Message>>,
        extra: u64,
    ) -> Fitted {
        let tokens = convo.counted.count(&messages, tools.tokens);
        let budget = self.budget(convo, tools);
        let need = budget
            .map_or(0, |b| tokens.saturating_sub(b.usable))
            .max(extra);
        let shortened = need > 0;
        let tokens = if shortened {
            let recent = Conversation::latest_round(&messages);
            middle_out(
                Arc::make_mut(&mut messages).as_mut_slice(),
                &convo.messages,
                recent,
                need,
            );
            estimate_all(&messages) + tools.tokens
        } else {
            tokens
        };
        Fitted {
            messages,
            tokens,
            window: budget.map(|b| b.window),
            shortened,
        }
    }

    /// After the provider said the request (of `tokens`, counted here) was
    /// too long, with `reason`: the fitted request to try next, or the
    /// turn's failure. `stage` counts the tries (0 before the first).
    pub(super) async fn recover(
        &mut self,
        convo: &mut Conversation,
        tools: &OfferedTools,
        stage: &mut u32,
        tokens: u64,
        reason: &str,
    ) -> Result<Fitted, Failure> {
        let (size, window) = overflow_sizes(reason);
        if window.is_some() {
            convo.learned_window = window;
        }
        convo.counted.forget();
        *stage += 1;
        if *stage == 1 && self.compact(convo, tools, "overflow").await? {
            return Ok(self.shape(convo, tools, 0));
        }
        if *stage <= 2 {
            *stage = 2;
            let fitted = self.shape(convo, tools, 0);
            // The provider counts more than this estimate: save what its
            // count passes the window by (the output kept free), or half the
            // request when the sizes are not known.
            let room = self
                .budget(convo, tools)
                .map(|b| b.window - b.output.min(b.window));
            let need = match (size, room) {
                (Some(size), Some(room)) => size.saturating_sub(room),
                _ => fitted.tokens / 2,
            };
            return Ok(self.shape(convo, tools, need.max(1)));
        }
        let size = size.map_or(format!("about {tokens} tokens (counted here)"), |s| {
            format!("{s} tokens")
        });
        let window = (convo.learned_window.or(self.spec.config().context.window))
            .map_or("its context window".to_string(), |w| {
                format!("its context window of {w} tokens")
            });
        Err(Failure::error(
            TurnErrorKind::ContextTooLong,
            format!(
                "the request was {size}, more than the model takes ({window}), even after compacting \
                 the history and leaving out the largest tool results; the provider said: {reason}"
            ),
        ))
    }

    /// Compacts what the turn may summarize (see the module's doc), with
    /// its events: whether the conversation was replaced.
    pub(super) async fn compact(
        &mut self,
        convo: &mut Conversation,
        tools: &OfferedTools,
        reason: &'static str,
    ) -> Result<bool, Failure> {
        let config = &self.spec.config().context;
        let range = match convo.view {
            Some(_) => history_range(
                &convo.messages,
                convo.start,
                convo.turn_start,
                config.keep_user_turns,
            ),
            None => child_range(&convo.messages, convo.start),
        };
        let Some(range) = range else {
            return Ok(false);
        };
        let tokens_before = convo.counted.count(
            &self.capped(convo.messages.clone(), convo, tools),
            tools.tokens,
        );
        let profile = self.spec.profile.clone();
        let step = Compaction {
            bus: &self.agent.bus,
            scope: &self.scope,
            chain: &profile.chain,
            config: &profile.config.context,
            budget: self.budget(convo, tools),
            reason,
        };
        let started = step.begin(range.len(), tokens_before);
        let mut ended = Ended {
            summarized: range.len(),
            kept: convo.messages.len() - range.end,
            tokens_before,
            tokens_after: tokens_before,
        };
        let summary = match step.summarize(&convo.messages[range.clone()]).await {
            Ok(summary) => summary,
            Err(e) => {
                step.end(
                    started,
                    ended,
                    None,
                    Some(format!("the summarizing call failed: {e}")),
                );
                return Ok(false);
            }
        };
        self.usage += summary.usage;
        (self.control.usage).add_own(summary.usage.input_tokens + summary.usage.output_tokens);
        let mut after = convo.messages.clone();
        Arc::make_mut(&mut after).splice(range.clone(), [summary_message(&summary.text)]);
        let tokens_after = estimate_all(&self.capped(after.clone(), convo, tools)) + tools.tokens;
        ended.tokens_after = tokens_after;
        if let Some(view) = &convo.view
            && let Err(e) = self
                .store_record(
                    view,
                    convo.start,
                    &range,
                    &summary.text,
                    tokens_before,
                    tokens_after,
                )
                .await
        {
            ended.tokens_after = tokens_before;
            step.end(started, ended, Some(&summary), Some(format!("{e:#}")));
            return Ok(false);
        }
        if let Some(view) = &mut convo.view {
            view.first_idx = view
                .idx_of(range.end - 1 - convo.start)
                .expect("not the summary")
                + 1;
            view.summarized = true;
        }
        convo.messages = after;
        // The history lent is no longer what the conversation holds (the
        // store forgets it at the compaction's commit anyway), nor is the
        // memo.
        convo.loan = None;
        convo.memo = Arc::default();
        if range.end <= convo.turn_start {
            // A SubTurn's range is after its task, where its turn starts.
            convo.turn_start -= range.len() - 1;
        }
        convo.counted.forget();
        step.end(started, ended, Some(&summary), None);
        Ok(true)
    }

    /// Stores the compaction of `range` (positions of the conversation,
    /// whose history starts at `start`) as the session's record.
    async fn store_record(
        &self,
        view: &HistoryView,
        start: usize,
        range: &Range<usize>,
        summary: &str,
        tokens_before: u64,
        tokens_after: u64,
    ) -> anyhow::Result<()> {
        let last = range.end - 1 - start;
        let record = CompactionRecord::covering(view, last, summary, tokens_before, tokens_after);
        self.agent.store.compact(&self.session, record).await
    }
}
