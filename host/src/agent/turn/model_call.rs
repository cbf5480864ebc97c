//! One model call of a turn: the call through the chain, its events, and
//! what a graceful interrupt does to a call in flight.
//!
//! The call publishes `llm_request`, then `llm_delta` as text streams in (the
//! first text of each attempt at once, later text at most every 50 ms: see
//! `deltas.rs`) and `llm_retry` for each failed attempt the chain tries
//! again, then `llm_response`.
//!
//! A graceful interrupt asks the turn to end soon with what it has, so from
//! the moment it arrives (or, for a call made after it, from the call's
//! start) the call is wound down:
//! - it is not tried again: a failed attempt, a retry waiting for its
//!   backoff, or a move to the next candidate drops the call at once;
//! - the attempt in flight may finish while it streams, but once it has
//!   been silent for [`AgentConfig::wind_down_idle`](crate::agent::AgentConfig)
//!   (no first chunk, or no next one) it is dropped.
//!
//! A dropped call is [`Asked::Dropped`], with the text its attempt streamed
//! so far; the turn ends `completed` with reason `interrupted` and that text
//! as its answer (possibly empty: the user stopped the turn before the model
//! said anything). A hard interrupt drops the call through the turn itself.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::deltas::{Deltas, Streamed};
use super::{Failure, Turn, millis};
use crate::hooks::HookSet;
use crate::llm::fallback::Progress;
use crate::llm::{ChainError, ChatRequest, ChatResponse};
use crate::protocol::{EventBody, LlmDelta, LlmRequest, LlmResponse, LlmRetry, ToolCallInfo};

/// What became of a model call.
pub(super) enum Asked {
    /// The reply, and the candidate that gave it (`provider:model`).
    Reply {
        response: ChatResponse,
        model: String,
    },
    /// A graceful interrupt dropped the call: the text its attempt had
    /// streamed (the text of failed attempts is void).
    Dropped { partial: String },
}

/// What the chain reported so far, as the wind-down rule needs it.
struct Attempt {
    /// The text the current attempt streamed.
    partial: String,
    /// When the call last showed life: its start, a chunk, a retry.
    last_activity: Instant,
    /// Failed attempts the chain reported (each to be tried again).
    retries: u32,
    /// When the backoff before the next attempt ends.
    backoff_until: Option<Instant>,
    /// The streamed text held for the next `llm_delta`.
    deltas: Deltas,
}

impl Turn {
    /// `before-llm` hooks done: the model call, the `after-llm` hooks and the
    /// token budget.
    pub(super) async fn call(
        &mut self,
        hooks: &HookSet,
        request: &ChatRequest,
    ) -> Result<Asked, Failure> {
        let (response, model) = match self.ask(request).await? {
            Asked::Reply { response, model } => (response, model),
            dropped => return Ok(dropped),
        };
        let response = hooks.after_llm(&self.hook_scope(), response).await?;
        if let Some(budget) = self.spec.token_budget {
            // Its sub-agents' tokens count against its budget too, and the
            // budgets of those still running.
            let spent = self.control.usage.spent();
            if spent.total() > budget {
                let (used, children) = (spent.used, spent.children);
                let of_which = if children > 0 {
                    format!(" ({children} of them by its sub-agents)")
                } else {
                    String::new()
                };
                let set_aside = if spent.reserved > 0 {
                    format!(
                        " and set aside {} for its sub-agents still running",
                        spent.reserved
                    )
                } else {
                    String::new()
                };
                return Err(Failure::BudgetExceeded(format!(
                    "used {used} tokens{of_which}{set_aside}, over its budget of {budget}"
                )));
            }
        }
        Ok(Asked::Reply { response, model })
    }

    /// One model call through the chain, with its events; wound down after a
    /// graceful interrupt (see the module's doc).
    pub(super) async fn ask(&mut self, request: &ChatRequest) -> Result<Asked, ChainError> {
        let iteration = self.iterations;
        self.publish(EventBody::LlmRequest(LlmRequest {
            iteration,
            model: self
                .spec
                .profile
                .chain
                .first_model(request.model.as_deref()),
            messages: request.messages.len(),
            tools: request.tools.len(),
            tokens: self.counted.0,
            window: self.counted.1,
        }));
        let started = Instant::now();
        let attempt = Mutex::new(Attempt {
            partial: String::new(),
            last_activity: started,
            retries: 0,
            backoff_until: None,
            deltas: Deltas::default(),
        });
        let retried = Notify::new();
        // Text held for the next delta, for the first time since the last.
        let held = Notify::new();
        let winding = self.control.winding().clone();
        let (bus, scope) = (&self.agent.bus, &self.scope);
        let delta = |text| EventBody::LlmDelta(LlmDelta { iteration, text });
        let mut on_progress = |progress: Progress<'_>| {
            let mut attempt = attempt.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            attempt.last_activity = now;
            let body = match progress {
                Progress::Delta(text) => {
                    attempt.partial.push_str(text);
                    match attempt.deltas.streamed(text, now) {
                        Streamed::Publish(text) => delta(text),
                        Streamed::Held { first } => {
                            if first {
                                held.notify_one();
                            }
                            return;
                        }
                    }
                }
                Progress::Retry(retry) => {
                    // What the failed attempt streamed goes out before the
                    // retry that says whether it is void, and the next
                    // attempt's first text goes out at once.
                    if let Some(text) = std::mem::take(&mut attempt.deltas).take(now) {
                        bus.publish(scope, delta(text));
                    }
                    if retry.discard_partial {
                        attempt.partial.clear();
                    }
                    attempt.retries += 1;
                    attempt.backoff_until = Some(Instant::now() + retry.delay);
                    retried.notify_one();
                    EventBody::LlmRetry(LlmRetry {
                        iteration,
                        model: retry.model,
                        attempt: retry.attempt,
                        error: retry.error,
                        next_model: retry.next_model,
                        delay_ms: retry.delay.as_millis() as u64,
                        discard_partial: retry.discard_partial,
                    })
                }
            };
            bus.publish(scope, body);
        };
        // Publishes the text held, if any.
        let publish_held = || {
            let mut attempt = attempt.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(text) = attempt.deltas.take(Instant::now()) {
                bus.publish(scope, delta(text));
            }
        };
        // A call dropped on the way (a hard interrupt, the turn's deadline)
        // still publishes what it held, before the turn's end.
        scopeguard::defer! { publish_held(); }
        let chat = self.spec.profile.chain.chat(request, &mut on_progress);
        tokio::pin!(chat);
        let answered = loop {
            let due = (attempt.lock().unwrap_or_else(|e| e.into_inner()))
                .deltas
                .due();
            tokio::select! {
                biased;
                answered = &mut chat => break Some(answered),
                _ = winding.cancelled() => break None,
                // Text held since this loop looked: wait for its time.
                _ = held.notified() => {}
                _ = tokio::time::sleep_until(due.unwrap_or(started).into()), if due.is_some() => {
                    publish_held();
                }
            }
        };
        let answered = match answered {
            Some(answered) => answered,
            None => {
                let grace = self.spec.config().wind_down_idle;
                let wound_down = wind_down(
                    chat.as_mut(),
                    &attempt,
                    (&retried, &held),
                    grace,
                    &publish_held,
                )
                .await;
                // A call dropped here publishes what it held on the way out
                // (the guard above); one that answered, below.
                match wound_down {
                    Some(Ok(answered)) => Ok(answered),
                    failed => {
                        if let Some(Err(error)) = failed {
                            tracing::warn!(turn = %self.id, "the model call failed while the turn wound down: {error}");
                        }
                        let partial = std::mem::take(
                            &mut attempt.lock().unwrap_or_else(|e| e.into_inner()).partial,
                        );
                        return Ok(Asked::Dropped { partial });
                    }
                }
            }
        };
        // Whatever the call publishes next, its text comes first.
        publish_held();
        let answered = answered?;
        let response = answered.response;
        self.usage += response.usage;
        self.control
            .usage
            .add_own(response.usage.input_tokens + response.usage.output_tokens);
        self.publish(EventBody::LlmResponse(LlmResponse {
            iteration,
            model: answered.model.clone(),
            text: response.text.clone(),
            tool_calls: response
                .tool_calls
                .iter()
                .map(|c| ToolCallInfo {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            finish_reason: response.finish_reason.clone(),
            usage: response.usage,
            duration_ms: millis(started.elapsed()),
        }));
        Ok(Asked::Reply {
            response,
            model: answered.model,
        })
    }
}

/// Lets the call in flight finish while it streams, after a graceful
/// interrupt: `None` once it was silent for `grace` or the chain began to try
/// again. Text held for a delta goes out in its time, as before the
/// interrupt (`publish_held`; `held` is notified when text is first held).
async fn wind_down<F, T>(
    mut chat: std::pin::Pin<&mut F>,
    attempt: &Mutex<Attempt>,
    (retried, held): (&Notify, &Notify),
    grace: Duration,
    publish_held: &(dyn Fn() + Sync),
) -> Option<T>
where
    F: Future<Output = T>,
{
    let wound_at = Instant::now();
    let retries = {
        let a = attempt.lock().unwrap_or_else(|e| e.into_inner());
        if a.backoff_until.is_some_and(|t| t > wound_at) {
            // A retry waiting for its backoff is not made.
            return None;
        }
        a.retries
    };
    loop {
        let (retried_since, deadline, due) = {
            let a = attempt.lock().unwrap_or_else(|e| e.into_inner());
            let deadline = a.last_activity.max(wound_at) + grace;
            (a.retries > retries, deadline, a.deltas.due())
        };
        if retried_since || Instant::now() >= deadline {
            return None;
        }
        tokio::select! {
            biased;
            answered = chat.as_mut() => return Some(answered),
            _ = retried.notified() => {}
            _ = held.notified() => {}
            _ = tokio::time::sleep_until(due.map_or(deadline, |due| due.min(deadline)).into()) => {
                publish_held();
            }
        }
    }
}
