//! Writing the store: events and turn commits, many in one transaction.
//!
//! [`write`] is the one place the events and turns tables (and the
//! messages) are written: the event log's batches and a turn's commit made
//! without one go through it alike. A transaction is all or nothing: when
//! one commit cannot be written (its id already taken), nothing of the
//! batch is, and the event log writes each commit again in a transaction
//! of its own, then the events, so that one fails alone (see
//! `store/event_log.rs`). The usual write has no savepoint: one would make
//! SQLite copy every page it changes into a statement journal, and the
//! full-text index flush its terms at each.
//!
//! The store begins a write with [`begin_at_once`] on the caller's thread,
//! and only if that finds another connection's write lock does it
//! [`write`] on the blocking pool, waiting there for the lock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{Connection, params};

use super::history::Histories;
use super::{TurnRecord, U64};
use crate::llm::Message;
use crate::protocol::Event;

/// A turn to commit: its row and the messages the history gains.
pub(crate) struct Commit {
    pub turn: TurnRecord,
    pub messages: Vec<Message>,
    /// `messages` as the table keeps them.
    pub jsons: Vec<String>,
}

impl Commit {
    pub fn new(turn: &TurnRecord, messages: &[Message]) -> Result<Commit> {
        let jsons = messages
            .iter()
            .map(serde_json::to_string)
            .collect::<serde_json::Result<Vec<String>>>()
            .with_context(|| context(turn))?;
        Ok(Commit {
            turn: turn.clone(),
            messages: messages.to_vec(),
            jsons,
        })
    }
}

/// What a commit's error says first: which turn.
pub(crate) fn context(turn: &TurnRecord) -> String {
    format!("saving turn {} of session {}", turn.id, turn.session)
}

/// Writes `events` (those whose seq is already stored are skipped and
/// named in a warning) and `commits` in one transaction on `conn`, then
/// brings the cached histories up to date. On an error nothing was
/// written, and the cached histories of the commits' sessions are let go
/// (the next read is the table's, whatever went wrong).
pub(super) fn write(
    conn: &Connection,
    histories: &Histories,
    events: &[Arc<Event>],
    commits: &[Arc<Commit>],
) -> Result<()> {
    write_in(Immediate::begin(conn)?, histories, events, commits)
}

/// Begins a write transaction on `conn` if no other connection holds the
/// database's write lock; None if one does (nothing was begun). `busy` is
/// the connection's busy timeout, set again after the try.
pub(super) fn begin_at_once(conn: &Connection, busy: Duration) -> Result<Option<Immediate<'_>>> {
    conn.busy_timeout(Duration::ZERO)?;
    let begun = Immediate::begin(conn);
    conn.busy_timeout(busy)?;
    match begun {
        Ok(tx) => Ok(Some(tx)),
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// [`write`] in the transaction `tx`, begun on the connection.
pub(super) fn write_in(
    tx: Immediate<'_>,
    histories: &Histories,
    events: &[Arc<Event>],
    commits: &[Arc<Commit>],
) -> Result<()> {
    let written = (|| {
        if !events.is_empty() {
            insert_events(tx.0, events)
                .with_context(|| format!("writing {} events to the event log", events.len()))?;
        }
        // Where each session's history goes on, for a second commit of one
        // session in this transaction.
        let mut next: HashMap<&str, i64> = HashMap::new();
        let mut appended = Vec::new();
        for commit in commits {
            let session = commit.turn.session.as_str();
            let from = match next.get(session) {
                Some(&idx) => idx,
                None if commit.jsons.is_empty() => 0,
                None => match histories.next_idx(session) {
                    Some(idx) => idx,
                    None => stored_next_idx(tx.0, session)?,
                },
            };
            insert_turn(tx.0, &commit.turn, &commit.jsons, from)?;
            if !commit.jsons.is_empty() {
                next.insert(session, from + commit.jsons.len() as i64);
                appended.push((commit, from));
            }
        }
        Ok::<_, anyhow::Error>(appended)
    })();
    // On an error, dropping the transaction rolls it back.
    let committed = written.and_then(|appended| Ok(tx.commit().map(|()| appended)?));
    let appended = committed.inspect_err(|_| {
        for commit in commits {
            histories.unload(&commit.turn.session);
        }
    })?;
    for (commit, from) in appended {
        histories.append(&commit.turn.session, from, &commit.messages);
    }
    Ok(())
}

/// An IMMEDIATE transaction whose `BEGIN`, `COMMIT` and `ROLLBACK` stay
/// prepared: rusqlite's `Transaction` parses them again at each use, which
/// was a twentieth of a turn's commit. Dropped uncommitted (an error, a
/// panic), it rolls back.
pub(super) struct Immediate<'c>(&'c Connection);

impl<'c> Immediate<'c> {
    fn begin(conn: &'c Connection) -> rusqlite::Result<Immediate<'c>> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate(conn))
    }

    fn commit(self) -> rusqlite::Result<()> {
        // On an error the transaction may still be open (SQLite rolls some
        // failures back itself): the drop rolls back what is left.
        self.0.prepare_cached("COMMIT")?.execute([]).map(drop)
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit()
            && let Err(e) = self
                .0
                .prepare_cached("ROLLBACK")
                .and_then(|mut rollback| rollback.execute([]))
        {
            tracing::error!("session store: rolling back a failed write: {e}");
        }
    }
}

/// The statements a write runs for each event, turn and message.
pub(super) const INSERT_EVENT: &str =
    "INSERT OR IGNORE INTO events (seq, session, turn_id, type, json)
     VALUES (?1, ?2, ?3, ?4, ?5)";
pub(super) const INSERT_SESSION: &str =
    "INSERT INTO sessions (key, created_at) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING";
pub(super) const INSERT_TURN: &str =
    "INSERT INTO turns (id, session, parent_turn_id, input, status, reason, iterations,
                        input_tokens, output_tokens, started_at, ended_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
pub(super) const INSERT_MESSAGE: &str =
    "INSERT INTO messages (session, idx, turn_id, json) VALUES (?1, ?2, ?3, ?4)";

/// Inserts `events`; a seq already stored is skipped, and said so.
fn insert_events(conn: &Connection, events: &[Arc<Event>]) -> Result<()> {
    let mut insert = conn.prepare_cached(INSERT_EVENT)?;
    let mut taken = Vec::new();
    for event in events {
        let json = serde_json::to_string(&**event)
            .with_context(|| format!("serializing event {}", event.seq))?;
        let inserted = insert.execute(params![
            U64(event.seq),
            event.session,
            event.turn_id,
            event.body.kind().as_str(),
            json,
        ])?;
        if inserted == 0 {
            taken.push(event.seq);
        }
    }
    // A replay writes the same events again, harmlessly; a second host on
    // the same file numbers its own events from the same seq, and those are
    // not kept: say so.
    if !taken.is_empty() {
        tracing::warn!(
            "event log: {} events not stored because their seq was already taken \
             (seq {:?}); is another wasmclaw using the same home folder?",
            taken.len(),
            taken
        );
    }
    Ok(())
}

/// The `idx` of the next message of `session`, from the table.
pub(super) fn stored_next_idx(conn: &Connection, session: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT coalesce(max(idx) + 1, 0) FROM messages WHERE session = ?1")?
        .query_row([session], |row| row.get(0))?)
}

/// Inserts the turn's row (creating its session's if needed: a session's
/// row is not written again) and its messages, numbered from `from`.
fn insert_turn(conn: &Connection, turn: &TurnRecord, jsons: &[String], from: i64) -> Result<()> {
    conn.prepare_cached(INSERT_SESSION)?
        .execute(params![turn.session, turn.started_at])?;
    conn.prepare_cached(INSERT_TURN)?.execute(params![
        turn.id,
        turn.session,
        turn.parent_turn_id,
        turn.input,
        turn.status.as_str(),
        turn.reason,
        turn.iterations,
        U64(turn.usage.input_tokens),
        U64(turn.usage.output_tokens),
        turn.started_at,
        turn.ended_at,
    ])?;
    if jsons.is_empty() {
        return Ok(());
    }
    let mut insert = conn.prepare_cached(INSERT_MESSAGE)?;
    for (idx, json) in (from..).zip(jsons) {
        insert.execute(params![turn.session, idx, turn.id, json])?;
    }
    Ok(())
}
