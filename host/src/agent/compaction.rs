//! Compaction: the older part of a conversation summarized by a model
//! call, the summary stored as a compaction record of the session, and
//! the history read as that summary and the messages after it.
//!
//! A turn compacts between its model calls (see `agent/turn/compact.rs`);
//! [`compact_session`] does it on demand for an idle session (`/compact`,
//! `Op::Compact`, `POST /v1/sessions/{key}/compact`). Either way:
//! - `compaction_begin`, then the summarizing call (the agent's
//!   `[agents.NAME.compaction] model`, else its own chain; no tools), then
//!   `compaction_end` with what was summarized and kept, the tokens before
//!   and after, the summary's length and the time it took;
//! - the record is stored in one transaction before the history is
//!   replaced; a call that fails or is dropped (a hard interrupt) writes
//!   nothing, and the history is as it was;
//! - nothing is deleted: the summarized messages stay in the store.

use std::ops::Range;
use std::time::Instant;

use super::Agent;
use super::context::{Budget, ContextConfig, estimate_all, estimate_text, history_range, truncate};
use super::profile::Profile;
use super::turn::millis;
use crate::bus::{EventBus, Scope};
use crate::llm::{Chain, ChainError, ChatRequest, Message, Usage};
use crate::protocol::{CompactionBegin, CompactionEnd, EventBody};
use crate::store::{CompactionRecord, summary_message};

/// Bytes of the transcript the summarizing call gets when the window is
/// not known.
const UNKNOWN_WINDOW_TRANSCRIPT: usize = 256 << 10;

/// What a summarizing call gave.
pub(crate) struct Summary {
    pub text: String,
    /// The candidate that wrote it.
    pub model: String,
    pub usage: Usage,
}

/// Where a compaction's events go, and what it runs with.
pub(crate) struct Compaction<'a> {
    pub bus: &'a EventBus,
    pub scope: &'a Scope,
    /// The agent's chain (used when the configuration names no model).
    pub chain: &'a Chain,
    pub config: &'a ContextConfig,
    pub budget: Option<Budget>,
    /// `threshold`, `overflow` or `command`.
    pub reason: &'static str,
}

/// How one compaction went, for its `compaction_end`.
pub(crate) struct Ended {
    pub summarized: usize,
    pub kept: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

impl Compaction<'_> {
    pub fn begin(&self, messages: usize, tokens_before: u64) -> Instant {
        self.bus.publish(
            self.scope,
            EventBody::CompactionBegin(CompactionBegin {
                reason: self.reason.to_string(),
                messages,
                tokens_before,
            }),
        );
        Instant::now()
    }

    /// The summary of `messages`, from the compaction model.
    pub async fn summarize(&self, messages: &[Message]) -> Result<Summary, ChainError> {
        let chain = self.config.model.as_ref().map_or(self.chain, |m| &m.0);
        let prompt = Message::system(self.config.prompt.to_string());
        let (transcript_bytes, max_tokens) = match self.budget {
            Some(b) => {
                let summary = (b.usable / 6).clamp(64, 4096);
                let room = b
                    .usable
                    .saturating_sub(summary + estimate_text(&self.config.prompt) + 64);
                ((room as usize).saturating_mul(4), Some(summary as u32))
            }
            None => (UNKNOWN_WINDOW_TRANSCRIPT, Some(2048)),
        };
        let request = ChatRequest {
            messages: vec![
                prompt,
                Message::user(transcript(messages, transcript_bytes)),
            ]
            .into(),
            max_tokens,
            ..Default::default()
        };
        let answered = chain.chat(&request, &mut |_| {}).await?;
        Ok(Summary {
            text: answered.response.text.trim().to_string(),
            model: answered.model,
            usage: answered.response.usage,
        })
    }

    pub fn end(
        &self,
        started: Instant,
        ended: Ended,
        summary: Option<&Summary>,
        error: Option<String>,
    ) {
        self.bus.publish(
            self.scope,
            EventBody::CompactionEnd(CompactionEnd {
                reason: self.reason.to_string(),
                summarized: ended.summarized,
                kept: ended.kept,
                tokens_before: ended.tokens_before,
                tokens_after: ended.tokens_after,
                summary_chars: summary.map_or(0, |s| s.text.chars().count()),
                model: summary.map_or_else(|| self.chain.first_model(None), |s| s.model.clone()),
                usage: summary.map_or_else(Usage::default, |s| s.usage),
                duration_ms: millis(started.elapsed()),
                error,
            }),
        );
    }
}

/// `messages` as one text for the summarizing call, in about `max` bytes:
/// each message cut to its share when they are longer together.
fn transcript(messages: &[Message], max: usize) -> String {
    let lines: Vec<String> = messages.iter().map(line).collect();
    let total: usize = lines.iter().map(String::len).sum();
    let share = if total > max {
        (max / lines.len().max(1)).max(200)
    } else {
        usize::MAX
    };
    let lines: Vec<String> = lines.iter().map(|l| truncate(l, share, "")).collect();
    lines.join("\n\n")
}

fn line(message: &Message) -> String {
    match message {
        Message::System { content } => match content.strip_prefix(crate::store::SUMMARY_HEADING) {
            Some(summary) => format!("[summary of what came before]\n{summary}"),
            None => format!("[system] {content}"),
        },
        Message::User { content } => format!("[user] {content}"),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut text = format!("[assistant] {content}");
            for call in tool_calls {
                text.push_str(&format!(
                    "\n[tool call {} {}] {}",
                    call.id, call.name, call.arguments
                ));
            }
            text
        }
        Message::Tool {
            tool_call_id,
            name,
            content,
            is_error,
        } => {
            let failed = if *is_error { " (failed)" } else { "" };
            format!("[tool result {tool_call_id} {name}{failed}] {content}")
        }
    }
}

/// What [`compact_session`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    pub summarized: usize,
    pub kept: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// Why [`compact_session`] did not compact.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// The history is all within the user turns kept verbatim.
    #[error("{0}")]
    Nothing(String),
    /// The summarizing call or the store failed; nothing changed.
    #[error("{0}")]
    Failed(String),
}

/// Compacts the history of the idle `session`, which runs as `profile`:
/// the messages before its last `keep_user_turns` user turns become a
/// summary. The caller keeps the session from starting a turn meanwhile.
pub async fn compact_session(
    agent: &Agent,
    session: &str,
    profile: &Profile,
) -> Result<Compacted, CompactError> {
    let view = (agent.store.history_view(session).await).map_err(|e| {
        CompactError::Failed(format!("could not read the session's history: {e:#}"))
    })?;
    let config = &profile.config.context;
    let messages = &view.messages;
    let range = history_range(messages, 0, messages.len(), config.keep_user_turns).ok_or_else(|| {
        CompactError::Nothing(format!(
            "session '{session}' has nothing to compact: its history ({} messages) is within its last {} user turns",
            messages.len(),
            config.keep_user_turns
        ))
    })?;
    let tool_tokens = agent.offered_tools().tokens;
    let budget = config
        .window
        .map(|w| Budget::new(w, profile.config.max_tokens, tool_tokens));
    let scope = Scope {
        session: Some(session.to_string()),
        ..Scope::default()
    };
    let step = Compaction {
        bus: &agent.bus,
        scope: &scope,
        chain: &profile.chain,
        config,
        budget,
        reason: "command",
    };
    // What every request of the session takes besides its history.
    let fixed = tool_tokens
        + (profile.config.system_prompt.as_deref())
            .map_or(0, |p| estimate_all(&[Message::system(p)]));
    let tokens_before = fixed + estimate_all(messages);
    let started = step.begin(range.len(), tokens_before);
    let result = replace(
        agent,
        session,
        &step,
        &view,
        range.clone(),
        tokens_before,
        fixed,
    )
    .await;
    let kept = messages.len() - range.end;
    let mut ended = Ended {
        summarized: range.len(),
        kept,
        tokens_before,
        tokens_after: tokens_before,
    };
    match result {
        Ok((summary, tokens_after)) => {
            ended.tokens_after = tokens_after;
            step.end(started, ended, Some(&summary), None);
            Ok(Compacted {
                summarized: range.len(),
                kept,
                tokens_before,
                tokens_after,
            })
        }
        Err(error) => {
            step.end(started, ended, None, Some(error.clone()));
            Err(CompactError::Failed(error))
        }
    }
}

/// Summarizes `view.messages[range]` and stores the record: the summary
/// and the tokens after.
async fn replace(
    agent: &Agent,
    session: &str,
    step: &Compaction<'_>,
    view: &crate::store::HistoryView,
    range: Range<usize>,
    tokens_before: u64,
    fixed: u64,
) -> Result<(Summary, u64), String> {
    let summary = (step.summarize(&view.messages[range.clone()]).await)
        .map_err(|e| format!("the summarizing call failed: {e}"))?;
    let tokens_after = fixed
        + estimate_all(&[summary_message(&summary.text)])
        + estimate_all(&view.messages[range.end..]);
    let record = CompactionRecord::covering(
        view,
        range.end - 1,
        &summary.text,
        tokens_before,
        tokens_after,
    );
    (agent.store.compact(session, record).await).map_err(|e| format!("{e:#}"))?;
    Ok((summary, tokens_after))
}
