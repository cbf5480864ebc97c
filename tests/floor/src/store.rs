//! The floor's store: `serve`'s tables and indexes in one SQLite file, a
//! turn written in one transaction with statements kept prepared.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::Value;

use crate::model::Usage;

/// What the tables hold of a turn, as `serve`'s store declares them.
const SCHEMA: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    PRAGMA foreign_keys = ON;
    CREATE TABLE sessions (key TEXT PRIMARY KEY, created_at TEXT NOT NULL, settings TEXT) STRICT;
    CREATE TABLE turns (
        id TEXT PRIMARY KEY, session TEXT NOT NULL REFERENCES sessions (key),
        parent_turn_id TEXT, input TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status = 'completed' OR status = 'aborted'
            OR status = 'error' OR status = 'budget_exceeded' OR status = 'timed_out'),
        reason TEXT NOT NULL,
        iterations INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        started_at TEXT NOT NULL, ended_at TEXT NOT NULL) STRICT, WITHOUT ROWID;
    CREATE INDEX turns_by_session ON turns (session, started_at, id, ended_at);
    CREATE INDEX turns_by_parent ON turns (parent_turn_id) WHERE parent_turn_id IS NOT NULL;
    CREATE TABLE messages (
        session TEXT NOT NULL REFERENCES sessions (key), idx INTEGER NOT NULL,
        turn_id TEXT NOT NULL REFERENCES turns (id), json TEXT NOT NULL,
        PRIMARY KEY (session, idx)) STRICT, WITHOUT ROWID;
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY, session TEXT, turn_id TEXT, type TEXT NOT NULL,
        json TEXT NOT NULL) STRICT;
    CREATE INDEX events_by_session ON events (session, seq);
    CREATE INDEX turn_ends ON events (turn_id) WHERE type = 'turn_end';";

/// The tables created in the new database `path`.
pub fn open(path: &Path) -> Connection {
    let db = Connection::open(path).expect("opening the database");
    db.execute_batch(SCHEMA).expect("creating the tables");
    db.set_prepared_statement_cache_capacity(64);
    db
}

/// The stored messages of `session`, in order.
pub fn messages(db: &Connection, session: &str) -> rusqlite::Result<Vec<String>> {
    let mut read =
        db.prepare_cached("SELECT json FROM messages WHERE session = ?1 ORDER BY idx")?;
    let rows = read.query_map([session], |row| row.get::<_, String>(0))?;
    rows.collect()
}

/// A turn's row, as the turns table keeps it.
pub struct Turn<'a> {
    pub id: &'a str,
    pub session: &'a str,
    pub input: &'a str,
    pub started_at: &'a str,
    pub iterations: u32,
    pub usage: &'a Usage,
    /// The index of the turn's first message.
    pub from: usize,
}

/// The turn's row, its messages (their stored JSON) and its events, in one
/// transaction.
pub fn commit(
    db: &Connection,
    turn: &Turn,
    messages: &[String],
    events: &[Event],
) -> Result<(), String> {
    let write = || -> rusqlite::Result<()> {
        db.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        for event in events {
            db.prepare_cached(
                "INSERT INTO events (seq, session, turn_id, type, json) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![event.seq as i64, turn.session, turn.id, event.kind, event.json])?;
        }
        db.prepare_cached(
            "INSERT INTO sessions (key, created_at) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
        )?
        .execute(params![turn.session, turn.started_at])?;
        db.prepare_cached(
            "INSERT INTO turns (id, session, parent_turn_id, input, status, reason, iterations,
                input_tokens, output_tokens, started_at, ended_at)
             VALUES (?1, ?2, NULL, ?3, 'completed', 'final_answer', ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            turn.id,
            turn.session,
            turn.input,
            turn.iterations,
            turn.usage.prompt_tokens,
            turn.usage.completion_tokens,
            turn.started_at,
            now(),
        ])?;
        let mut insert = db.prepare_cached(
            "INSERT INTO messages (session, idx, turn_id, json) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (idx, message) in (turn.from..).zip(messages) {
            insert.execute(params![turn.session, idx as i64, turn.id, message])?;
        }
        db.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    };
    write().map_err(|e| {
        let _ = db.execute_batch("ROLLBACK");
        e.to_string()
    })
}

/// One event of a turn, as the events table keeps it.
pub struct Event {
    pub seq: u64,
    pub kind: &'static str,
    pub json: String,
}

/// A turn's events as it goes, numbered from the host-wide `seq`.
pub struct Events<'a> {
    seq: &'a AtomicU64,
    session: &'a str,
    turn_id: &'a str,
    pub written: Vec<Event>,
}

impl<'a> Events<'a> {
    pub fn new(seq: &'a AtomicU64, session: &'a str, turn_id: &'a str) -> Events<'a> {
        Events {
            seq,
            session,
            turn_id,
            written: Vec::with_capacity(16),
        }
    }

    /// The event `kind` with `body`'s fields after the head's, as `serve`
    /// writes them: `{seq, time, session, turn_id, parent_turn_id, type,
    /// ...body}`.
    pub fn push(&mut self, kind: &'static str, body: Value) {
        #[derive(Serialize)]
        struct Head<'a> {
            seq: u64,
            time: String,
            session: &'a str,
            turn_id: &'a str,
            parent_turn_id: Option<&'a str>,
            #[serde(rename = "type")]
            kind: &'a str,
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let head = Head {
            seq,
            time: now(),
            session: self.session,
            turn_id: self.turn_id,
            parent_turn_id: None,
            kind,
        };
        let mut json = serde_json::to_string(&head).expect("JSON");
        json.pop();
        json.push(',');
        json.push_str(&body.to_string()[1..]);
        self.written.push(Event { seq, kind, json });
    }
}

pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}
