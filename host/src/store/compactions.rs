//! Compaction records: a session's summaries of its older history, and the
//! history as a turn reads it.
//!
//! A compaction never deletes a message. It is one row of `compactions`:
//! the `idx` of the last message it covers, the summary text, the tokens
//! of the conversation before and after. The history a turn reads is the
//! latest summary, as one system message ([`summary_message`]), followed
//! by the messages after the `idx` it covers; every original message stays
//! in `messages`, where the full-text search and the event log find it.
//!
//! Writing a record is one transaction; the cached history of a held
//! session is replaced right after it commits, under the store's
//! connection (see `store/history.rs`), so no turn reads a mix.

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use super::history::Histories;
use crate::llm::Message;

/// What the summary message of a compacted history starts with.
pub const SUMMARY_HEADING: &str =
    "Summary of the earlier conversation (its messages are kept in the session's store):\n\n";

/// One compaction of a session, as the table keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactionRecord {
    /// The `idx` of the last message the summary covers: the history goes
    /// on from the next one.
    pub upto_idx: i64,
    pub summary: String,
    /// The conversation's tokens (counted) before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// RFC 3339.
    pub created_at: String,
}

impl CompactionRecord {
    /// A record made now: `summary` covers `view`'s messages up to the one
    /// at `last` (a position of [`HistoryView::messages`], not the summary).
    pub fn covering(
        view: &HistoryView,
        last: usize,
        summary: &str,
        tokens_before: u64,
        tokens_after: u64,
    ) -> CompactionRecord {
        CompactionRecord {
            upto_idx: view.idx_of(last).expect("a compaction covers a message"),
            summary: summary.to_string(),
            tokens_before,
            tokens_after,
            created_at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        }
    }
}

/// A session's history as a turn reads it, and where it stands in the
/// messages table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryView {
    /// The latest summary (if any) first, then the messages after it.
    pub messages: Vec<Message>,
    /// Whether `messages[0]` is a summary.
    pub summarized: bool,
    /// The `idx` of the first message after the summary (0 without one).
    pub first_idx: i64,
}

impl HistoryView {
    /// The `idx` of the message at `position` of [`HistoryView::messages`]
    /// (None for the summary).
    pub fn idx_of(&self, position: usize) -> Option<i64> {
        let after = position.checked_sub(usize::from(self.summarized))?;
        Some(self.first_idx + after as i64)
    }
}

/// The message a summary is given to the model as.
pub fn summary_message(summary: &str) -> Message {
    Message::system(format!("{SUMMARY_HEADING}{summary}"))
}

/// The latest compaction of a session.
pub(super) const LATEST: &str =
    "SELECT upto_idx, summary FROM compactions WHERE session = ?1 ORDER BY seq DESC LIMIT 1";

/// A session's messages after an idx.
pub(super) const AFTER: &str =
    "SELECT idx, json FROM messages WHERE session = ?1 AND idx > ?2 ORDER BY idx";

/// The latest compaction of `session`: the `idx` it covers up to, and its
/// summary.
fn latest(conn: &Connection, session: &str) -> Result<Option<(i64, String)>> {
    Ok(conn
        .prepare_cached(LATEST)?
        .query_row([session], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?)
}

/// Reads the history of `session` as a turn sees it, and the `idx` its
/// next message gets.
pub(super) fn read(conn: &Connection, session: &str) -> Result<(HistoryView, i64)> {
    let latest = latest(conn, session)?;
    let after = latest.as_ref().map_or(-1, |(upto, _)| *upto);
    let mut view = HistoryView {
        first_idx: after + 1,
        ..HistoryView::default()
    };
    if let Some((_, summary)) = &latest {
        view.messages.push(summary_message(summary));
        view.summarized = true;
    }
    let mut stmt = conn.prepare_cached(AFTER)?;
    let rows = stmt.query_map(params![session, after], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut next_idx = after + 1;
    for row in rows {
        let (idx, json) = row?;
        let message = serde_json::from_str(&json)
            .with_context(|| format!("message {idx} is not a valid message"))?;
        view.messages.push(message);
        next_idx = idx + 1;
    }
    Ok((view, next_idx))
}

/// Every original message of `session`, compacted or not, in order.
pub(super) fn originals(conn: &Connection, session: &str) -> Result<Vec<Message>> {
    let mut stmt =
        conn.prepare_cached("SELECT idx, json FROM messages WHERE session = ?1 ORDER BY idx")?;
    let rows = stmt.query_map([session], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
    })?;
    rows.map(|row| {
        let (idx, json) = row?;
        serde_json::from_str(&json).with_context(|| format!("message {idx} is not a valid message"))
    })
    .collect()
}

/// Every compaction of `session`, oldest first.
pub(super) fn list(conn: &Connection, session: &str) -> Result<Vec<CompactionRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT upto_idx, summary, tokens_before, tokens_after, created_at
         FROM compactions WHERE session = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([session], |row| {
        Ok(CompactionRecord {
            upto_idx: row.get(0)?,
            summary: row.get(1)?,
            tokens_before: row.get::<_, i64>(2)? as u64,
            tokens_after: row.get::<_, i64>(3)? as u64,
            created_at: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Inserts `record` for `session` in one transaction, then replaces the
/// cached history. Refused (nothing written) when the record covers
/// messages the session does not have, or fewer than its latest one.
pub(super) fn insert(
    conn: &mut Connection,
    histories: &Histories,
    session: &str,
    record: &CompactionRecord,
) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let last: Option<i64> = tx
        .prepare_cached("SELECT max(idx) FROM messages WHERE session = ?1")?
        .query_row([session], |row| row.get(0))?;
    let covered = latest(&tx, session)?.map_or(-1, |(upto, _)| upto);
    if last.is_none_or(|last| record.upto_idx > last) || record.upto_idx <= covered {
        bail!(
            "a compaction up to message {} does not fit the history (its last message is {}, \
             the latest compaction covers up to {covered})",
            record.upto_idx,
            last.map_or("none".to_string(), |l| l.to_string()),
        );
    }
    tx.prepare_cached(
        "INSERT INTO compactions
             (session, seq, upto_idx, summary, tokens_before, tokens_after, created_at)
         VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM compactions WHERE session = ?1),
                 ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        session,
        record.upto_idx,
        record.summary,
        record.tokens_before as i64,
        record.tokens_after as i64,
        record.created_at,
    ])?;
    tx.commit()?;
    histories.compacted(session, record.upto_idx, summary_message(&record.summary));
    Ok(())
}
