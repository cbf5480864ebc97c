//! The session store: one SQLite file (`sessions.db` under the wasmclaw home)
//! that keeps
//!
//! - each session's **history**: its messages, one row per [`Message`], in
//!   order, each tagged with the turn that wrote it;
//! - each session's **compactions**: summaries of its older history; the
//!   history a turn reads is the latest summary and the messages after it,
//!   and every message stays (`store/compactions.rs`);
//! - each session's **turns**: one row per finished turn, whatever its status
//!   ([`TurnRecord`]);
//! - each session's **settings**, when it has chosen any
//!   ([`SessionSettings`]: its policy for messages that arrive while it is
//!   busy, its named agent, its model; [`Store::set_settings`]): the
//!   scheduler writes them before it lets an idle session go and at
//!   shutdown, and reads them all once, when it starts
//!   ([`Store::settings`]);
//! - approval **decisions kept** beyond one tool call: for the rest of a
//!   session, or always for an agent ([`Store::keep_approval`]);
//! - the **event log**: every [`Event`] the bus published, keyed by its `seq`
//!   (written in batches by [`EventLog`]), so numbering continues across a
//!   restart ([`Store::last_seq`]).
//!
//! # The atomic-turn rule
//!
//! A turn's messages reach the history only when the turn ends, together with
//! the turn's row, in one transaction ([`Store::commit_turn`]). A turn that is
//! aborted or fails passes no messages: its row is recorded and the history is
//! exactly what it was before the turn began. Nothing ever writes half a turn;
//! a crash (even `kill -9`) in the middle of a turn leaves the history as it
//! was before that turn.
//!
//! # Writes
//!
//! While an [`EventLog`] runs, a turn's commit is written by it, in the same
//! transaction as the events published since its last write: a turn costs
//! one write transaction for its commit and its steps' events (see
//! `store/event_log.rs` for when else it writes). Writing is in
//! `store/write.rs`.
//!
//! # Histories in memory
//!
//! A session held with [`Store::hold_history`] (the scheduler holds the
//! sessions of its table) has its history read from SQLite once, then
//! served from memory and kept up to date by every commit, under the same
//! connection, so it is never stale (`store/history.rs`). A turn borrows
//! it rather than copying it ([`Store::lend_history`]), and gives it back
//! after its commit. This assumes the store's clones are the only writers
//! of the file, which the home's lock ensures.
//!
//! # The file
//!
//! The file and its `-wal` and `-shm` files are its owner's only (0600).
//! The database runs in WAL mode with `synchronous=NORMAL`, temporary
//! storage in memory, a 5 s busy timeout and foreign keys on; the
//! write-ahead log is checkpointed by a thread of its own (when: see
//! `store/checkpoint.rs`), so a commit does not wait for the disk, as a
//! rule (the exceptions are below). A commit writes
//! a page of each b-tree it touches (the tests list the indexes there are);
//! a session's row only when the session is made. Its schema is
//! versioned with `PRAGMA user_version`: `MIGRATIONS` is applied in order,
//! the pending ones in one transaction. Statements are prepared once and
//! stay prepared (the query planner's stability guarantee is on).
//!
//! SQLite work is blocking, and runs on the blocking pool, except the
//! writes of events and turns ([`Store::commit_turn`] and the event log's).
//! Those run on the calling task's thread, where the turn's data already
//! is: handing them to another thread and back was a fifth of a turn's CPU
//! when the model takes its time. Such a commit takes tens to hundreds of
//! microseconds and does not sync the disk. A write that would wait goes to
//! the blocking pool instead:
//!
//! - one that finds another connection holding the write lock (someone's
//!   `sqlite3` on the file) waits for it there (`store/write.rs`);
//! - the process's first write (it opens the log, and may create it and
//!   sync its folder), and the first after a checkpoint copied the whole
//!   log back (it starts the log again, syncing its new header; the
//!   checkpoint thread says when, `store/checkpoint.rs`);
//! - every write of a file that is not in WAL mode (a file system that
//!   refuses it), where each commit syncs.

mod approvals;
mod checkpoint;
mod compactions;
mod event_log;
mod history;
mod owner_only;
pub mod search;
mod tree;
mod write;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, Type, ValueRef};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};

pub use approvals::KeptApproval;
pub use compactions::{CompactionRecord, HistoryView, SUMMARY_HEADING, summary_message};
pub use event_log::EventLog;
pub use history::{HistoryHold, Loan};
pub use tree::{TurnNode, forest};

use self::history::Histories;
use self::write::Commit;

use crate::llm::{Message, Usage};
use crate::protocol::{Event, Policy, TurnStatus};

/// How many prepared statements the store's connection keeps (the store
/// has about thirty).
const STATEMENTS: usize = 64;

/// How long a statement waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema, one step per entry; entry `i` takes `user_version` from `i` to
/// `i + 1`. Never edit a released step: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, turns, messages, events.
    "CREATE TABLE sessions (
        key        TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;

    CREATE TABLE turns (
        id             TEXT PRIMARY KEY,
        session        TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        parent_turn_id TEXT,
        input          TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN ('completed', 'aborted', 'error')),
        reason         TEXT NOT NULL,
        iterations     INTEGER NOT NULL,
        input_tokens   INTEGER NOT NULL,
        output_tokens  INTEGER NOT NULL,
        started_at     TEXT NOT NULL,
        ended_at       TEXT NOT NULL
    ) STRICT;
    CREATE INDEX turns_by_session ON turns (session, started_at);

    CREATE TABLE messages (
        session TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        idx     INTEGER NOT NULL,
        turn_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
        json    TEXT NOT NULL,
        PRIMARY KEY (session, idx)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX messages_by_turn ON messages (turn_id);

    CREATE TABLE events (
        seq     INTEGER PRIMARY KEY,
        session TEXT,
        turn_id TEXT,
        type    TEXT NOT NULL,
        json    TEXT NOT NULL
    ) STRICT;
    CREATE INDEX events_by_session ON events (session, seq);",
    // 2: SubTurn statuses. SQLite cannot change a CHECK constraint: the
    // table is rebuilt (foreign keys are off while migrating, so the
    // messages that reference it stay).
    "CREATE TABLE turns_new (
        id             TEXT PRIMARY KEY,
        session        TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        parent_turn_id TEXT,
        input          TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN
                           ('completed', 'aborted', 'error', 'budget_exceeded', 'timed_out')),
        reason         TEXT NOT NULL,
        iterations     INTEGER NOT NULL,
        input_tokens   INTEGER NOT NULL,
        output_tokens  INTEGER NOT NULL,
        started_at     TEXT NOT NULL,
        ended_at       TEXT NOT NULL
    ) STRICT;
    INSERT INTO turns_new SELECT * FROM turns;
    DROP TABLE turns;
    ALTER TABLE turns_new RENAME TO turns;
    CREATE INDEX turns_by_session ON turns (session, started_at);
    CREATE INDEX turns_by_parent ON turns (parent_turn_id);",
    // 3: a turn's `turn_end` found by its id (`Core::wait_turn` for a turn
    // that has already ended), indexing only those events.
    "CREATE INDEX turn_ends ON events (turn_id) WHERE type = 'turn_end';",
    // 4: a session's policy for messages that arrive while it is busy, when
    // not the default (NULL: `steer`).
    "ALTER TABLE sessions ADD COLUMN policy TEXT CHECK (policy IN ('follow_up'));",
    // 5: the sessions that have a policy of their own, read at every start
    // without a scan of every session.
    "CREATE INDEX sessions_with_policy ON sessions (key) WHERE policy IS NOT NULL;",
    // 6: a session's settings (its policy, agent and model) as one JSON
    // object, when it has chosen any; the policy column's values move in.
    "ALTER TABLE sessions ADD COLUMN settings TEXT;
    UPDATE sessions SET settings = json_object('policy', policy) WHERE policy IS NOT NULL;
    DROP INDEX sessions_with_policy;
    ALTER TABLE sessions DROP COLUMN policy;
    CREATE INDEX sessions_with_settings ON sessions (key) WHERE settings IS NOT NULL;",
    // 7: approval decisions kept beyond one call: for a session, or always
    // for an agent (see `store/approvals.rs`).
    "CREATE TABLE approvals (
        scope TEXT NOT NULL CHECK (scope IN ('session', 'always')),
        owner TEXT NOT NULL,
        tool TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
        decided_at TEXT NOT NULL,
        note TEXT,
        PRIMARY KEY (scope, owner, tool)
    ) WITHOUT ROWID;",
    // 8: compaction records: a summary of a session's history up to a
    // message (see `store/compactions.rs`); the messages stay.
    "CREATE TABLE compactions (
        session       TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        seq           INTEGER NOT NULL,
        upto_idx      INTEGER NOT NULL,
        summary       TEXT NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after  INTEGER NOT NULL,
        created_at    TEXT NOT NULL,
        PRIMARY KEY (session, seq)
    ) STRICT, WITHOUT ROWID;",
    // 9: the full-text index of every stored message, for `history_search`
    // (see `store/search.rs`).
    search::MIGRATION,
    // 10: that index filled when a session is searched, not at each commit.
    search::INDEX_WHEN_SEARCHED,
    // 11: the index of turns by parent holds SubTurns only, so a top-level
    // turn's commit does not write a page of it.
    "DROP INDEX turns_by_parent;
    CREATE INDEX turns_by_parent ON turns (parent_turn_id) WHERE parent_turn_id IS NOT NULL;",
    // 12: no index of messages by turn: no query reads one, and nothing
    // deletes a turn (the only use an index on a foreign key's column has),
    // while each message a commit stores wrote a page of it.
    "DROP INDEX messages_by_turn;",
    // 13: two pages fewer for each commit.
    // - Turns keyed by their id, without a rowid: a commit writes the
    //   turn's row where its id leads, not a row and then an index of ids.
    //   Turns that started in the same millisecond are listed by id, where
    //   the rowid (the order of commit) used to decide. Ids are UUIDv7s,
    //   made as a message's turn is queued or started, as an import takes
    //   its session, or as a SubTurn is spawned: a parent now comes before
    //   its SubTurns, as it started first (it used to come after them, as
    //   it ended last). Steering a turn never took in is queued again with
    //   new ids ahead of older ones: those may be listed after a turn that
    //   started in their millisecond.
    //   A row of a table without rowid spills to an overflow page past
    //   about 1 KB (4 KB with a rowid): a turn whose input is 1 to 4 KB
    //   long writes the page a shorter one saves.
    // - The index of turns by session holds the id before the end: the
    //   turns are listed from it in order, and the session list reads
    //   their count and latest end from it alone.
    // - A session's row is written when it is made, not at each commit: the
    //   end of its latest turn (what the session list shows and sorts by)
    //   is read from its turns.
    "CREATE TABLE turns_new (
        id             TEXT PRIMARY KEY,
        session        TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        parent_turn_id TEXT,
        input          TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN
                           ('completed', 'aborted', 'error', 'budget_exceeded', 'timed_out')),
        reason         TEXT NOT NULL,
        iterations     INTEGER NOT NULL,
        input_tokens   INTEGER NOT NULL,
        output_tokens  INTEGER NOT NULL,
        started_at     TEXT NOT NULL,
        ended_at       TEXT NOT NULL
    ) STRICT, WITHOUT ROWID;
    INSERT INTO turns_new SELECT * FROM turns;
    DROP TABLE turns;
    ALTER TABLE turns_new RENAME TO turns;
    CREATE INDEX turns_by_session ON turns (session, started_at, id, ended_at);
    CREATE INDEX turns_by_parent ON turns (parent_turn_id) WHERE parent_turn_id IS NOT NULL;
    ALTER TABLE sessions DROP COLUMN updated_at;",
    // 14: a turn's status is checked against each status in turn. As
    // `status IN (...)`, the check made SQLite build a temporary b-tree of
    // the five statuses at every insert: a fiftieth of a text turn's CPU.
    "CREATE TABLE turns_new (
        id             TEXT PRIMARY KEY,
        session        TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        parent_turn_id TEXT,
        input          TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status = 'completed' OR status = 'aborted'
                           OR status = 'error' OR status = 'budget_exceeded'
                           OR status = 'timed_out'),
        reason         TEXT NOT NULL,
        iterations     INTEGER NOT NULL,
        input_tokens   INTEGER NOT NULL,
        output_tokens  INTEGER NOT NULL,
        started_at     TEXT NOT NULL,
        ended_at       TEXT NOT NULL
    ) STRICT, WITHOUT ROWID;
    INSERT INTO turns_new SELECT * FROM turns;
    DROP TABLE turns;
    ALTER TABLE turns_new RENAME TO turns;
    CREATE INDEX turns_by_session ON turns (session, started_at, id, ended_at);
    CREATE INDEX turns_by_parent ON turns (parent_turn_id) WHERE parent_turn_id IS NOT NULL;",
];

/// What a session chose for itself, as the store keeps it: each field None
/// until chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSettings {
    /// What it does with a message that arrives while its turn runs (None:
    /// its agent's `session_policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// The named agent its turns run as (None: the host's default agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model chain its turns use in place of its agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl SessionSettings {
    /// Nothing chosen: nothing to keep.
    pub fn is_empty(&self) -> bool {
        *self == SessionSettings::default()
    }
}

/// One finished turn, as the turns table keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRecord {
    pub id: String,
    pub session: String,
    pub parent_turn_id: Option<String>,
    /// The user message that started the turn.
    pub input: String,
    pub status: TurnStatus,
    /// Why it ended: `final_answer`, `max_iterations`, or the error.
    pub reason: String,
    pub iterations: u32,
    pub usage: Usage,
    /// RFC 3339, as given.
    pub started_at: String,
    /// RFC 3339, as given.
    pub ended_at: String,
}

/// A session as listed by [`Store::sessions`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    pub key: String,
    /// Messages in its history.
    pub messages: u64,
    /// Turns recorded, whatever their status.
    pub turns: u64,
    /// The end of its latest turn, or when it was made if it has none (RFC
    /// 3339).
    pub updated_at: String,
}

/// The session store. Cheap to clone: clones share one connection, the
/// cached histories and the event log's writer.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    /// Writes may run on the caller's thread: the file is in WAL mode (or
    /// in memory), so a commit syncs nothing, as a rule.
    inline: bool,
    /// The next write may sync the disk: it is the process's first (which
    /// opens the log, and may create it), or the first after a checkpoint
    /// copied the whole log back (it starts the log again and syncs its
    /// header). Such a write runs on the blocking pool. Set by the
    /// checkpoint thread.
    may_sync: Arc<AtomicBool>,
    /// One piece of work on the connection at a time: the others wait on
    /// the async side instead of each holding a pool thread (or, for a
    /// write, a runtime thread) that waits for the connection (hundreds of
    /// threads under many sessions).
    gate: Arc<tokio::sync::Semaphore>,
    /// The histories of the sessions held in memory.
    histories: Arc<Histories>,
    /// While an [`EventLog`] runs: where turns' commits go, to be written in
    /// its transactions.
    log: Arc<Mutex<Option<mpsc::UnboundedSender<LogCommit>>>>,
    /// Write transactions committed.
    writes: Arc<AtomicU64>,
}

/// A commit handed to the event log's writer, and where its result goes.
pub(crate) struct LogCommit {
    commit: Arc<Commit>,
    done: oneshot::Sender<Result<()>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (or creates) the store at `path`, creating its folder, and brings
    /// its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_file(path)
            .with_context(|| format!("opening the session store {}", path.display()))
    }

    fn open_file(path: &Path) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        owner_only::prepare(path)?;
        let store = Store::setup(Connection::open(path)?)?;
        // Checkpoints happen on a thread of their own, not in a commit.
        let mut checkpoints = checkpoint::spawn(path, store.may_sync.clone())?;
        {
            let mut conn = lock(&store.conn);
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
            // The writer trims the log after a checkpoint, to this size.
            conn.pragma_update(None, "journal_size_limit", checkpoint::LOG_SIZE_LIMIT)?;
            // After the pragma, which would replace it: every commit tells
            // the thread how long the log is. The hook owns the
            // `Checkpoints`, so the thread runs as long as the connection.
            conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages| {
                checkpoints.written(pages);
                Ok(())
            }))?;
        }
        Ok(store)
    }

    /// A store that lives and dies with the process (tests, throwaway runs).
    pub fn open_in_memory() -> Result<Store> {
        Connection::open_in_memory()
            .map_err(anyhow::Error::from)
            .and_then(Store::setup)
            .context("opening an in-memory session store")
    }

    fn setup(mut conn: Connection) -> Result<Store> {
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Room for every statement the store keeps prepared (rusqlite
        // keeps 16 by default, fewer than the store has): one read now
        // and then does not push a turn's statements out.
        conn.set_prepared_statement_cache_capacity(STATEMENTS);
        // The same plan whatever values are bound: else SQLite prepares a
        // cached statement again each time its bindings change (which
        // rusqlite's statement cache does on every use).
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        // An in-memory database answers "memory"; a file system that
        // refuses WAL mode leaves the file in another, where each commit
        // syncs the disk.
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        let inline = mode.eq_ignore_ascii_case("wal") || mode.eq_ignore_ascii_case("memory");
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Statement journals and sorts in memory, never in a temporary
        // file opened and deleted for the purpose.
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        // Migrations rebuild tables, which must not cascade: foreign keys
        // (on by default in this build of SQLite) are enforced after them.
        conn.pragma_update(None, "foreign_keys", false)?;
        migrate(&mut conn)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            gate: Arc::new(tokio::sync::Semaphore::new(1)),
            histories: Arc::default(),
            log: Arc::default(),
            writes: Arc::default(),
            inline,
            // The process's first write opens the log, and may create it.
            may_sync: Arc::new(AtomicBool::new(true)),
        })
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let permit = self.gate_permit().await;
        self.on_blocking_pool(permit, f).await
    }

    /// The gate's permit: the connection is this work's until it is
    /// dropped.
    async fn gate_permit(&self) -> OwnedSemaphorePermit {
        (self.gate.clone().acquire_owned())
            .await
            .expect("the gate is never closed")
    }

    /// Runs `f` on the connection on the blocking pool, holding `permit`.
    /// The work keeps the permit until it ends, even if the caller stops
    /// waiting for it: the next piece of work through the gate (a write on
    /// a runtime thread) never finds the connection taken. (Start-up's
    /// reads, `Store::settings` and `Store::last_seq`, lock the connection
    /// without the gate, before anything else uses it.)
    async fn on_blocking_pool<T: Send + 'static>(
        &self,
        permit: OwnedSemaphorePermit,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f(&mut lock(&conn))
        })
        .await
        .context("the session store's worker failed")?
    }

    /// A session's history as the next turn reads it, in order: the latest
    /// summary (if it was compacted) and the messages after it; empty for
    /// a session never seen. From memory while the session is held
    /// ([`Store::hold_history`]) and was read once; else from the table.
    pub async fn history(&self, session: &str) -> Result<Vec<Message>> {
        Ok(self.history_view(session).await?.messages)
    }

    /// [`Store::history`], with where it stands in the messages table.
    pub async fn history_view(&self, session: &str) -> Result<HistoryView> {
        if let Some(view) = self.histories.get(session) {
            return Ok(view);
        }
        Ok(self.read_history(session, false).await?.0)
    }

    /// [`Store::history_view`] for a turn, which takes the messages: lent
    /// from memory if the session is held (no copy; the loan is given back
    /// with the turn's messages after its commit, see `store/history.rs`),
    /// else read from the table, and then lent if the session is held.
    pub async fn lend_history(&self, session: &str) -> Result<(HistoryView, Option<Loan>)> {
        if let Some((view, loan)) = self.histories.lend(session) {
            return Ok((view, Some(loan)));
        }
        self.read_history(session, true).await
    }

    /// Reads the history of `session` from the table, and keeps it in
    /// memory if the session is held: lent to the reader if `lend`.
    async fn read_history(&self, session: &str, lend: bool) -> Result<(HistoryView, Option<Loan>)> {
        let key = session.to_string();
        let histories = self.histories.clone();
        self.with_conn(move |conn| {
            let (view, next_idx) = compactions::read(conn, &key)?;
            // Under the connection: no commit comes between the read and this.
            let loan = if lend {
                histories.fill_lent(&key, &view, next_idx)
            } else {
                histories.fill(&key, &view, next_idx);
                None
            };
            Ok((view, loan))
        })
        .await
        .with_context(|| format!("reading the history of session {session}"))
    }

    /// Every message `session` ever committed, compacted or not.
    pub async fn original_messages(&self, session: &str) -> Result<Vec<Message>> {
        let key = session.to_string();
        self.with_conn(move |conn| compactions::originals(conn, &key))
            .await
            .with_context(|| format!("reading the messages of session {session}"))
    }

    /// The stored messages of `session` matching `query` (words; see
    /// `store/search.rs`), best first, at most `limit`.
    pub async fn search_history(
        &self,
        session: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<search::Hit>> {
        let (key, query, store) = (session.to_string(), query.to_string(), self.clone());
        self.with_conn(move |conn| {
            if search::index_pending(conn, &key).context("indexing its new messages")? {
                store.wrote();
            }
            search::search(conn, &key, &query, limit)
        })
        .await
        .with_context(|| format!("searching the history of session {session}"))
    }

    /// Message `idx` of `session`, as stored.
    pub async fn stored_message(&self, session: &str, idx: i64) -> Result<Option<Message>> {
        let key = session.to_string();
        self.with_conn(move |conn| search::message(conn, &key, idx))
            .await
            .with_context(|| format!("reading message {idx} of session {session}"))
    }

    /// The whole output of tool call `call_id` of `session`.
    pub async fn tool_output(&self, session: &str, call_id: &str) -> Result<Option<String>> {
        let (key, id) = (session.to_string(), call_id.to_string());
        self.with_conn(move |conn| search::tool_output(conn, &key, &id))
            .await
            .with_context(|| format!("reading tool call {call_id} of session {session}"))
    }

    /// The compactions of `session`, oldest first.
    pub async fn compactions(&self, session: &str) -> Result<Vec<CompactionRecord>> {
        let key = session.to_string();
        self.with_conn(move |conn| compactions::list(conn, &key))
            .await
            .with_context(|| format!("reading the compactions of session {session}"))
    }

    /// Keeps `record` as the latest compaction of `session`, in one
    /// transaction: from then on its history reads as the summary and the
    /// messages after `record.upto_idx` (see `store/compactions.rs`).
    pub async fn compact(&self, session: &str, record: CompactionRecord) -> Result<()> {
        let (key, histories, store) = (session.to_string(), self.histories.clone(), self.clone());
        self.with_conn(move |conn| {
            compactions::insert(conn, &histories, &key, &record)?;
            store.wrote();
            Ok(())
        })
        .await
        .with_context(|| format!("keeping a compaction of session {session}"))
    }

    /// Keeps `session`'s history in memory once read, until the hold (and
    /// every other hold of that session) is dropped: the scheduler holds
    /// each session in its table. See `store/history.rs`.
    pub fn hold_history(&self, session: &str) -> HistoryHold {
        self.histories.hold(session)
    }

    /// Write transactions committed so far (events and turns).
    pub fn write_transactions(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Every session's settings kept by [`Store::set_settings`]: what the
    /// scheduler reads once, at its start. A row that does not parse is
    /// skipped with a warning (the session starts with none).
    pub fn settings(&self) -> Result<HashMap<String, SessionSettings>> {
        let conn = lock(&self.conn);
        let mut query =
            conn.prepare("SELECT key, settings FROM sessions WHERE settings IS NOT NULL")?;
        let rows = query.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut out = HashMap::new();
        for row in rows {
            let (key, json) = row?;
            match serde_json::from_str::<SessionSettings>(&json) {
                Ok(settings) if !settings.is_empty() => {
                    out.insert(key, settings);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(session = key, "the session's settings do not read: {e}"),
            }
        }
        Ok(out)
    }

    /// Keeps `settings` for `session` (creating its row if needed); empty
    /// ones are kept as none.
    pub async fn set_settings(&self, session: &str, settings: &SessionSettings) -> Result<()> {
        let (key, store) = (session.to_string(), self.clone());
        let json = (!settings.is_empty())
            .then(|| serde_json::to_string(settings).expect("settings serialize"));
        self.with_conn(move |conn| {
            match json {
                None => {
                    conn.prepare_cached("UPDATE sessions SET settings = NULL WHERE key = ?1")?
                        .execute([&key])?;
                }
                Some(json) => {
                    let now =
                        humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
                    conn.prepare_cached(
                        "INSERT INTO sessions (key, created_at, settings)
                         VALUES (?1, ?2, ?3)
                         ON CONFLICT (key) DO UPDATE SET settings = excluded.settings",
                    )?
                    .execute(params![key, now, json])?;
                }
            }
            store.wrote();
            Ok(())
        })
        .await
        .with_context(|| format!("keeping the settings of session {session}"))
    }

    /// Ends a turn atomically: in ONE transaction, appends `messages` after
    /// the session's existing ones (creating the session row if needed) and
    /// inserts the turn row. An aborted or errored turn passes no messages:
    /// its row is recorded and the history is untouched.
    ///
    /// While an [`EventLog`] runs, the commit is written by it, in the same
    /// transaction as the events published so far; this returns once it is
    /// committed. Fails (writing nothing of this turn) if a turn with this id
    /// was already committed.
    pub async fn commit_turn(&self, turn: &TurnRecord, messages: &[Message]) -> Result<()> {
        let commit = Arc::new(Commit::new(turn, messages)?);
        let sent = {
            let log = lock(&self.log);
            match log.as_ref() {
                Some(log) => {
                    let (done, result) = oneshot::channel();
                    log.send(LogCommit { commit, done })
                        .map(|()| result)
                        .map_err(|unsent| unsent.0.commit)
                }
                None => Err(commit),
            }
        };
        match sent {
            Ok(result) => result.await.unwrap_or_else(|_| {
                Err(anyhow::anyhow!(
                    "the event log's writer stopped before it wrote the turn"
                ))
                .with_context(|| write::context(turn))
            }),
            // No writer (or it has just ended): written here.
            Err(commit) => {
                let context = write::context(&commit.turn);
                self.write(Arc::new([]), Arc::new([commit]))
                    .await
                    .context(context)
            }
        }
    }

    /// Writes `events` and `commits` in one transaction, all or nothing
    /// (see `store/write.rs`): here, on the caller's thread, or on the
    /// blocking pool if it may wait for a lock or the disk (see the
    /// module's docs).
    async fn write(&self, events: Arc<[Arc<Event>]>, commits: Arc<[Arc<Commit>]>) -> Result<()> {
        // Held until the write is done, here or on the pool.
        let permit = self.gate_permit().await;
        if self.inline && !self.may_sync.load(Ordering::Acquire) {
            let conn = lock(&self.conn);
            if let Some(tx) = write::begin_at_once(&conn, BUSY_TIMEOUT)? {
                write::write_in(tx, &self.histories, &events, &commits)?;
                self.wrote();
                return Ok(());
            }
        }
        let (histories, store) = (self.histories.clone(), self.clone());
        self.on_blocking_pool(permit, move |conn| {
            // This write is the one that starts the log again, if one is due.
            store.may_sync.store(false, Ordering::Release);
            write::write(conn, &histories, &events, &commits)?;
            store.wrote();
            Ok(())
        })
        .await
    }

    /// A write transaction was committed: counted (under the connection,
    /// so whoever sees the write sees the count).
    fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// A session's turns, in order of start.
    pub async fn turns(&self, session: &str) -> Result<Vec<TurnRecord>> {
        let key = session.to_string();
        self.with_conn(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, session, parent_turn_id, input, status, reason, iterations,
                        input_tokens, output_tokens, started_at, ended_at
                 FROM turns WHERE session = ?1 ORDER BY started_at, id",
            )?;
            let rows = stmt.query_map([&key], |row| {
                let status: String = row.get(4)?;
                Ok(TurnRecord {
                    id: row.get(0)?,
                    session: row.get(1)?,
                    parent_turn_id: row.get(2)?,
                    input: row.get(3)?,
                    status: TurnStatus::parse(&status).ok_or_else(|| {
                        rusqlite::Error::FromSqlConversionFailure(
                            4,
                            Type::Text,
                            format!("unknown turn status {status:?}").into(),
                        )
                    })?,
                    reason: row.get(5)?,
                    iterations: row.get(6)?,
                    usage: Usage {
                        input_tokens: row.get::<_, U64>(7)?.0,
                        output_tokens: row.get::<_, U64>(8)?.0,
                    },
                    started_at: row.get(9)?,
                    ended_at: row.get(10)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .with_context(|| format!("reading the turns of session {session}"))
    }

    /// Every session, most recently updated first.
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>> {
        self.with_conn(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT s.key, coalesce(t.ended, s.created_at) AS updated_at,
                        (SELECT count(*) FROM messages m WHERE m.session = s.key),
                        coalesce(t.n, 0)
                 FROM sessions s
                 LEFT JOIN (SELECT session, max(ended_at) AS ended, count(*) AS n
                            FROM turns GROUP BY session) t ON t.session = s.key
                 ORDER BY updated_at DESC, s.key",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(SessionInfo {
                    key: row.get(0)?,
                    updated_at: row.get(1)?,
                    messages: row.get::<_, U64>(2)?.0,
                    turns: row.get::<_, U64>(3)?.0,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .context("listing sessions")
    }

    /// The highest event `seq` stored, 0 if none. Blocks briefly: meant for
    /// start-up, to number new events after the stored ones.
    pub fn last_seq(&self) -> Result<u64> {
        let conn = lock(&self.conn);
        let seq: Option<U64> = conn
            .query_row("SELECT max(seq) FROM events", [], |row| row.get(0))
            .optional()
            .context("reading the last event seq")?
            .flatten();
        Ok(seq.map_or(0, |seq| seq.0))
    }

    /// Stores events in one transaction. An event whose `seq` is already
    /// stored is skipped, so a replay does not fail.
    pub async fn append_events(&self, events: &[Arc<Event>]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.write(events.into(), Arc::new([])).await?;
        Ok(())
    }

    /// Up to `limit` stored events with `seq > after_seq`, in ascending
    /// `seq`: every event, or only those of one session (host-wide events
    /// have no session and are then left out).
    pub async fn events(
        &self,
        session: Option<&str>,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let key = session.map(str::to_string);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_conn(move |conn| {
            let mut stmt = match key {
                Some(_) => conn.prepare_cached(
                    "SELECT seq, json FROM events WHERE session = ?1 AND seq > ?2
                     ORDER BY seq LIMIT ?3",
                )?,
                // ?1 (no session) is bound but unused.
                None => conn.prepare_cached(
                    "SELECT seq, json FROM events WHERE seq > ?2 ORDER BY seq LIMIT ?3",
                )?,
            };
            let rows = stmt.query_map(params![key, U64(after_seq), limit], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, json) = row?;
                let event = serde_json::from_str(&json)
                    .with_context(|| format!("event {seq} is not a valid event"))?;
                events.push(event);
            }
            Ok(events)
        })
        .await
        .context("reading the event log")
    }

    /// The stored `turn_end` of the turn `turn_id`, if it has one.
    pub async fn turn_end(&self, turn_id: &str) -> Result<Option<Event>> {
        let id = turn_id.to_string();
        self.with_conn(move |conn| {
            let json: Option<String> = conn
                .prepare_cached(
                    "SELECT json FROM events WHERE turn_id = ?1 AND type = 'turn_end'
                     ORDER BY seq LIMIT 1",
                )?
                .query_row([&id], |row| row.get(0))
                .optional()?;
            json.map(|json| serde_json::from_str(&json).context("not a valid event"))
                .transpose()
        })
        .await
        .with_context(|| format!("reading the end of turn {turn_id}"))
    }
}

/// Holds the store's connection: every piece of work on it waits until the
/// guard is dropped (tests that stop the store in the middle of a write).
/// A write waits for it on its caller's thread: hold it on another thread
/// than the runtime's.
#[cfg(test)]
pub(crate) fn hold(store: &Store) -> MutexGuard<'_, Connection> {
    lock(&store.conn)
}

/// The connection (or the writer's sender), even if a panic poisoned the
/// lock: a panicking closure's transaction was rolled back when it unwound.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A `u64` as SQLite's signed 64-bit integer; out of range is an error
/// either way (rusqlite's own `u64` support is behind a feature).
struct U64(u64);

impl ToSql for U64 {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        let value = i64::try_from(self.0)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(ToSqlOutput::from(value))
    }
}

impl FromSql for U64 {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<U64> {
        let value = value.as_i64()?;
        u64::try_from(value)
            .map(U64)
            .map_err(|_| FromSqlError::OutOfRange(value))
    }
}

/// Brings the schema to the last version of [`MIGRATIONS`].
fn migrate(conn: &mut Connection) -> Result<()> {
    let target = MIGRATIONS.len();
    let version = |conn: &Connection| -> Result<usize> {
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
        Ok(usize::try_from(version)?)
    };
    let current = version(conn)?;
    anyhow::ensure!(
        current <= target,
        "its schema version is {current}, newer than this wasmclaw knows ({target})"
    );
    if current == target {
        return Ok(());
    }
    // Take the write lock before looking again: another process may have
    // migrated in between.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current = version(&tx)?;
    for (step, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.execute_batch(sql)
            .with_context(|| format!("migrating the schema to version {}", step + 1))?;
    }
    if current < target {
        tx.pragma_update(None, "user_version", i64::try_from(target)?)?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::llm::{FinishReason, ToolCall};
    use crate::plugin::ErrorKind;
    use crate::protocol::{
        EventBody, LlmDelta, LlmResponse, PluginLoaded, ToolCallEnd, ToolCallInfo, TurnBegin,
        TurnEnd,
    };

    pub(crate) fn turn(
        session: &str,
        id: &str,
        status: TurnStatus,
        started_at: &str,
    ) -> TurnRecord {
        TurnRecord {
            id: id.to_string(),
            session: session.to_string(),
            parent_turn_id: None,
            input: format!("input of {id}"),
            status,
            reason: match status {
                TurnStatus::Completed => "final_answer".to_string(),
                _ => "something failed".to_string(),
            },
            iterations: 2,
            usage: Usage {
                input_tokens: 20,
                output_tokens: 10,
            },
            started_at: started_at.to_string(),
            ended_at: started_at.replace(".000Z", ".500Z"),
        }
    }

    pub(super) fn event(seq: u64, session: Option<&str>, body: EventBody) -> Arc<Event> {
        Arc::new(Event {
            seq,
            time: "2026-11-30T18:00:00.123Z".to_string(),
            session: session.map(str::to_string),
            turn_id: session.map(|s| format!("t-{s}")),
            parent_turn_id: None,
            body,
        })
    }

    pub(super) fn delta(seq: u64, session: Option<&str>) -> Arc<Event> {
        event(
            seq,
            session,
            EventBody::LlmDelta(LlmDelta {
                iteration: 1,
                text: format!("text {seq}"),
            }),
        )
    }

    fn every_variant() -> Vec<Message> {
        vec![
            Message::system("You are terse."),
            Message::user("What is 40 + 2? ünïcödé \"quoted\"\n"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "c1".into(),
                        name: "add".into(),
                        arguments: r#"{"a":40,"b":2}"#.into(),
                    },
                    ToolCall {
                        id: "c2".into(),
                        name: "echo".into(),
                        arguments: "not json".into(),
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                name: "add".into(),
                content: "42".into(),
                is_error: false,
            },
            Message::Tool {
                tool_call_id: "c2".into(),
                name: "echo".into(),
                content: "invalid arguments".into(),
                is_error: true,
            },
            Message::Assistant {
                content: "The sum is 42.".into(),
                tool_calls: Vec::new(),
            },
        ]
    }

    #[tokio::test]
    async fn commit_then_history_round_trips_every_message_variant() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.history("s").await.unwrap(), []);
        let record = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store.commit_turn(&record, &every_variant()).await.unwrap();
        assert_eq!(store.history("s").await.unwrap(), every_variant());
        assert_eq!(
            store.turns("s").await.unwrap(),
            std::slice::from_ref(&record)
        );

        // The next turn's messages go after the first turn's.
        let second = turn("s", "t2", TurnStatus::Completed, "2026-01-01T00:00:02.000Z");
        store
            .commit_turn(&second, &[Message::user("again"), Message::system("note")])
            .await
            .unwrap();
        let mut expected = every_variant();
        expected.extend([Message::user("again"), Message::system("note")]);
        assert_eq!(store.history("s").await.unwrap(), expected);
        assert_eq!(store.turns("s").await.unwrap(), [record, second]);
    }

    #[tokio::test]
    async fn an_aborted_or_failed_turn_leaves_the_history_but_is_recorded() {
        let store = Store::open_in_memory().unwrap();
        let done = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store
            .commit_turn(&done, &[Message::user("hi"), Message::system("hello")])
            .await
            .unwrap();
        let before = store.history("s").await.unwrap();

        let aborted = turn("s", "t2", TurnStatus::Aborted, "2026-01-01T00:00:02.000Z");
        store.commit_turn(&aborted, &[]).await.unwrap();
        let mut failed = turn("s", "t3", TurnStatus::Error, "2026-01-01T00:00:03.000Z");
        failed.parent_turn_id = Some("t1".into());
        store.commit_turn(&failed, &[]).await.unwrap();

        assert_eq!(store.history("s").await.unwrap(), before);
        let turns = store.turns("s").await.unwrap();
        assert_eq!(turns, [done, aborted, failed]);

        // A turn committed twice is refused whole: no message of it is kept.
        let again = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:04.000Z");
        let err = store
            .commit_turn(&again, &[Message::user("dup")])
            .await
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("saving turn t1 of session s"),
            "{err:#}"
        );
        assert_eq!(store.history("s").await.unwrap(), before);
        assert_eq!(store.turns("s").await.unwrap().len(), 3);
    }

    /// Writes run on the caller's thread, except those that may sync the
    /// disk: the process's first, and the first after a checkpoint copied
    /// the whole log back.
    #[tokio::test(flavor = "current_thread")]
    async fn a_write_that_may_sync_the_disk_runs_on_the_blocking_pool() {
        // In memory: no checkpoint thread sets the flag meanwhile.
        let store = Store::open_in_memory().unwrap();
        // The thread of each commit, as SQLite's commit hook sees it.
        let threads = Arc::new(Mutex::new(Vec::new()));
        let seen = threads.clone();
        lock(&store.conn)
            .commit_hook(Some(move || {
                seen.lock().unwrap().push(std::thread::current().id());
                false
            }))
            .unwrap();
        let commit = |id: &str| {
            let record = turn("s", id, TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
            let store = store.clone();
            async move { store.commit_turn(&record, &[Message::user("hi")]).await }
        };
        commit("t1").await.unwrap();
        commit("t2").await.unwrap();
        // What the checkpoint thread does once it copied the log back.
        store.may_sync.store(true, Ordering::Release);
        commit("t3").await.unwrap();
        commit("t4").await.unwrap();
        let here = std::thread::current().id();
        let inline: Vec<bool> = threads.lock().unwrap().iter().map(|t| *t == here).collect();
        assert_eq!(inline, [false, true, false, true]);
    }

    /// Spawns the commit of `record` with `messages`, which has something
    /// to wait for: checks that the runtime's one thread runs other tasks
    /// meanwhile (five 20 ms timers fire within `limit`) and that the
    /// commit still waits. The commit's task.
    async fn spawn_waiting_commit(
        store: &Store,
        record: TurnRecord,
        messages: Vec<Message>,
        limit: Duration,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let commit = tokio::spawn({
            let store = store.clone();
            async move { store.commit_turn(&record, &messages).await }
        });
        let started = std::time::Instant::now();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            started.elapsed() < limit,
            "the runtime's thread was blocked for {:?}",
            started.elapsed()
        );
        assert!(!commit.is_finished(), "written without waiting");
        commit
    }

    /// A commit is written on the caller's thread, but one that meets
    /// another connection's write lock waits for it on the blocking pool:
    /// the caller's thread (here the runtime's only one) runs other tasks
    /// meanwhile, and the commit is written once the lock is let go.
    #[tokio::test(flavor = "current_thread")]
    async fn a_commit_that_meets_another_writers_lock_waits_off_the_runtime_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let first = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store
            .commit_turn(&first, &[Message::user("hi")])
            .await
            .unwrap();

        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let second = turn("s", "t2", TurnStatus::Completed, "2026-01-01T00:00:02.000Z");
        let messages = vec![Message::user("again")];
        let commit = spawn_waiting_commit(&store, second, messages, Duration::from_secs(2)).await;
        other.execute_batch("COMMIT").unwrap();
        tokio::time::timeout(Duration::from_secs(10), commit)
            .await
            .expect("the commit waited past the lock")
            .unwrap()
            .unwrap();
        assert_eq!(
            store.history("s").await.unwrap(),
            [Message::user("hi"), Message::user("again")]
        );
        assert_eq!(store.turns("s").await.unwrap().len(), 2);
    }

    /// Work on the connection whose caller stopped waiting for it keeps
    /// the connection's turn until it ends: a write after it waits for it
    /// on the async side, and the runtime's thread stays free.
    #[tokio::test(flavor = "current_thread")]
    async fn a_write_after_work_whose_caller_went_away_waits_off_the_runtime_thread() {
        let store = Store::open_in_memory().unwrap();
        let slow = store.with_conn(|_| {
            std::thread::sleep(Duration::from_millis(1500));
            Ok(())
        });
        // The caller goes away while the work runs on the blocking pool.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), slow)
                .await
                .is_err()
        );
        let record = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        let messages = vec![Message::user("hi")];
        let commit = spawn_waiting_commit(&store, record, messages, Duration::from_secs(1)).await;
        tokio::time::timeout(Duration::from_secs(10), commit)
            .await
            .expect("the write waited past the other work")
            .unwrap()
            .unwrap();
        assert_eq!(store.history("s").await.unwrap(), [Message::user("hi")]);
    }

    #[tokio::test]
    async fn turns_are_listed_in_order_of_start() {
        let store = Store::open_in_memory().unwrap();
        // A sub-turn starts after its parent but ends (and commits) first.
        let parent = turn(
            "s",
            "parent",
            TurnStatus::Completed,
            "2026-01-01T00:00:01.000Z",
        );
        let mut child = turn(
            "s",
            "child",
            TurnStatus::Completed,
            "2026-01-01T00:00:02.000Z",
        );
        child.parent_turn_id = Some("parent".into());
        store.commit_turn(&child, &[]).await.unwrap();
        store.commit_turn(&parent, &[]).await.unwrap();
        // Started in the same millisecond: by id (the order they took their
        // session), whatever the order of their ends and commits.
        let same = "2026-01-01T00:00:03.000Z";
        let mut first = turn("s", "same-1", TurnStatus::Completed, same);
        first.ended_at = "2026-01-01T00:00:09.000Z".into();
        for record in [
            turn("s", "same-3", TurnStatus::Completed, same),
            first,
            turn("s", "same-2", TurnStatus::Completed, same),
        ] {
            store.commit_turn(&record, &[]).await.unwrap();
        }
        let ids: Vec<String> = store
            .turns("s")
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["parent", "child", "same-1", "same-2", "same-3"]);
    }

    #[tokio::test]
    async fn a_compaction_replaces_the_held_history_and_keeps_every_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let _hold = store.hold_history("s");
        let mut all = Vec::new();
        for i in 0..3 {
            let messages = [
                Message::user(format!("q{i}")),
                Message::assistant(format!("a{i}")),
            ];
            let record = turn(
                "s",
                &format!("t{i}"),
                TurnStatus::Completed,
                "2026-01-01T00:00:01.000Z",
            );
            store.commit_turn(&record, &messages).await.unwrap();
            all.extend(messages);
        }
        assert_eq!(store.history("s").await.unwrap(), all);
        let record = |upto_idx, summary: &str| CompactionRecord {
            upto_idx,
            summary: summary.into(),
            tokens_before: 100,
            tokens_after: 40,
            created_at: "2026-01-01T00:00:02.000Z".into(),
        };
        store.compact("s", record(1, "first")).await.unwrap();
        let expected = [&[summary_message("first")], &all[2..]].concat();
        assert_eq!(store.history("s").await.unwrap(), expected);
        // A turn after it is appended to the compacted history.
        let late = [Message::user("q3"), Message::assistant("a3")];
        let record3 = turn("s", "t3", TurnStatus::Completed, "2026-01-01T00:00:03.000Z");
        store.commit_turn(&record3, &late).await.unwrap();
        all.extend(late);
        store.compact("s", record(5, "second")).await.unwrap();
        let view = store.history_view("s").await.unwrap();
        assert_eq!(
            view.messages,
            [&[summary_message("second")], &all[6..]].concat()
        );
        assert_eq!((view.summarized, view.first_idx), (true, 6));
        // The cache and the file agree; every message is still there.
        let fresh = Store::open(&path).unwrap();
        assert_eq!(fresh.history_view("s").await.unwrap(), view);
        assert_eq!(store.original_messages("s").await.unwrap(), all);
        let kept: Vec<String> = (store.compactions("s").await.unwrap().into_iter())
            .map(|c| c.summary)
            .collect();
        assert_eq!(kept, ["first", "second"]);
        // A record that does not fit is refused, and nothing changes.
        for bad in [3, 8] {
            let error = store.compact("s", record(bad, "bad")).await.unwrap_err();
            assert!(
                format!("{error:#}").contains("does not fit the history"),
                "{error:#}"
            );
        }
        assert_eq!(store.history_view("s").await.unwrap(), view);
    }

    #[tokio::test]
    async fn the_statements_of_a_turn_stay_prepared() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("sessions.db")).unwrap();
        for i in 0..6 {
            let session = format!("s{}", i % 3);
            let record = turn(
                &session,
                &format!("t{i}"),
                TurnStatus::Completed,
                "2026-01-01T00:00:01.000Z",
            );
            store
                .commit_turn(&record, &[Message::user("q"), Message::assistant("a")])
                .await
                .unwrap();
            store.history(&session).await.unwrap();
            store
                .append_events(&[delta(i + 1, Some(&session))])
                .await
                .unwrap();
        }
        let conn = lock(&store.conn);
        for sql in [
            compactions::LATEST,
            compactions::AFTER,
            "SELECT coalesce(max(idx) + 1, 0) FROM messages WHERE session = ?1",
            "INSERT INTO messages (session, idx, turn_id, json) VALUES (?1, ?2, ?3, ?4)",
            // Each write's transaction.
            "BEGIN IMMEDIATE",
            "COMMIT",
        ] {
            let statement = conn.prepare_cached(sql).unwrap();
            let runs = statement.get_status(rusqlite::StatementStatus::Run);
            assert!(runs >= 6, "{sql}: run {runs} times");
            assert_eq!(
                statement.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "{sql} was prepared again"
            );
        }
    }

    #[test]
    fn the_tables_a_commit_writes_have_these_indexes_and_no_other() {
        let store = Store::open_in_memory().unwrap();
        let conn = lock(&store.conn);
        let indexes: Vec<String> = conn
            .prepare(
                "SELECT tbl_name || ': ' || name FROM sqlite_schema
                 WHERE type = 'index' AND tbl_name IN ('sessions', 'turns', 'messages', 'events')
                 ORDER BY tbl_name, name",
            )
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        // Each is a page a commit may write besides its table's: the
        // partial ones only for the rows they hold (SubTurns, turn_ends,
        // sessions with settings); the keys of messages and turns are their tables.
        assert_eq!(
            indexes,
            [
                "events: events_by_session",
                "events: turn_ends",
                "sessions: sessions_with_settings",
                "sessions: sqlite_autoindex_sessions_1",
                "turns: turns_by_parent",
                "turns: turns_by_session",
            ]
        );
    }

    /// A commit's statements build no temporary b-tree (as a check written
    /// `status IN (...)` did at every turn), and the status is still
    /// checked.
    #[test]
    fn a_commits_statements_build_no_temporary_table() {
        let store = Store::open_in_memory().unwrap();
        let conn = lock(&store.conn);
        for sql in [
            write::INSERT_EVENT,
            write::INSERT_SESSION,
            write::INSERT_TURN,
            write::INSERT_MESSAGE,
        ] {
            let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
            // Unbound parameters are null: the plan is all that is read.
            let mut rows = explain.raw_query();
            let mut opcodes: Vec<String> = Vec::new();
            while let Some(row) = rows.next().unwrap() {
                opcodes.push(row.get(1).unwrap());
            }
            assert!(
                opcodes.iter().any(|op| op == "Insert" || op == "IdxInsert"),
                "{sql}: {opcodes:?}"
            );
            assert!(
                !opcodes.iter().any(|op| op == "OpenEphemeral"),
                "{sql} builds a temporary table: {opcodes:?}"
            );
        }
        // The check still refuses a status no turn has.
        conn.execute(write::INSERT_SESSION, params!["s", "2026-01-01"])
            .unwrap();
        let refused = conn
            .execute(
                write::INSERT_TURN,
                params![
                    "t1",
                    "s",
                    None::<String>,
                    "hi",
                    "finished",
                    "r",
                    1,
                    0,
                    0,
                    "a",
                    "b"
                ],
            )
            .unwrap_err();
        assert!(
            refused.to_string().contains("CHECK constraint failed"),
            "{refused}"
        );
    }

    /// The history as a fresh connection reads it from the file, as JSON.
    fn stored_history(path: &Path, session: &str) -> String {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT json FROM messages WHERE session = ?1 ORDER BY idx")
            .unwrap();
        let rows: Vec<String> = stmt
            .query_map([session], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        format!("[{}]", rows.join(","))
    }

    #[tokio::test]
    async fn a_held_history_is_read_once_then_kept_in_step_with_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let first = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store.commit_turn(&first, &every_variant()).await.unwrap();

        let hold = store.hold_history("s");
        assert_eq!(store.history("s").await.unwrap(), every_variant());
        // Read once: a change made behind the store's back (which the home's
        // lock rules out) does not reach a held history, and shows it is
        // served from memory.
        Connection::open(&path)
            .unwrap()
            .execute("UPDATE messages SET json = '{\"role\":\"user\",\"content\":\"x\"}' WHERE session = 's' AND idx = 0", [])
            .unwrap();
        assert_eq!(store.history("s").await.unwrap(), every_variant());
        Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE messages SET json = ?1 WHERE session = 's' AND idx = 0",
                [serde_json::to_string(&every_variant()[0]).unwrap()],
            )
            .unwrap();

        // Every kind of commit keeps it in step: one with messages, an
        // aborted one (none), one refused (its id taken).
        let second = turn("s", "t2", TurnStatus::Completed, "2026-01-01T00:00:02.000Z");
        store
            .commit_turn(&second, &[Message::user("again"), Message::assistant("ok")])
            .await
            .unwrap();
        let aborted = turn("s", "t3", TurnStatus::Aborted, "2026-01-01T00:00:03.000Z");
        store.commit_turn(&aborted, &[]).await.unwrap();
        let taken = turn("s", "t2", TurnStatus::Completed, "2026-01-01T00:00:04.000Z");
        store
            .commit_turn(&taken, &[Message::user("lost")])
            .await
            .unwrap_err();
        let cached = serde_json::to_string(&store.history("s").await.unwrap()).unwrap();
        assert_eq!(cached, stored_history(&path, "s"));
        assert_eq!(store.histories.usage().1, 1);

        // Let go, the next read is the table's again.
        drop(hold);
        assert_eq!(store.histories.usage(), (0, 0));
        let reopened = Store::open(&path).unwrap();
        assert_eq!(
            store.history("s").await.unwrap(),
            reopened.history("s").await.unwrap()
        );
    }

    /// Where the text of `message` (a system or user message) lives.
    fn text_at(message: &Message) -> *const u8 {
        match message {
            Message::System { content } | Message::User { content } => content.as_ptr(),
            other => panic!("not a system or user message: {other:?}"),
        }
    }

    /// Sets the message `idx` of session `s` behind the store's back (the
    /// home's lock rules that out in use): a read that shows it read the
    /// table.
    fn set_behind_the_back(path: &Path, idx: i64, message: &Message) {
        Connection::open(path)
            .unwrap()
            .execute(
                "UPDATE messages SET json = ?1 WHERE session = 's' AND idx = ?2",
                params![serde_json::to_string(message).unwrap(), idx],
            )
            .unwrap();
    }

    #[tokio::test]
    async fn a_turn_borrows_the_held_history_and_gives_it_back_after_its_commit_uncopied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let first = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store.commit_turn(&first, &every_variant()).await.unwrap();
        let _hold = store.hold_history("s");

        // Read from the table and lent at once: the cache keeps no copy.
        let (view, loan) = store.lend_history("s").await.unwrap();
        let loan = loan.expect("a held session's history is lent");
        assert_eq!(view.messages, every_variant());
        let text = text_at(&view.messages[0]);

        // While it is lent, other readers read the table, and no second
        // loan is made.
        set_behind_the_back(&path, 0, &Message::user("changed"));
        assert_eq!(
            store.history("s").await.unwrap()[0],
            Message::user("changed")
        );
        let (read, none) = store.lend_history("s").await.unwrap();
        assert!(none.is_none());
        assert_eq!(read.messages[0], Message::user("changed"));
        set_behind_the_back(&path, 0, &every_variant()[0]);

        // The turn's commit, then its messages given back with the history.
        let own = vec![Message::user("again"), Message::assistant("ok")];
        let second = turn("s", "t2", TurnStatus::Completed, "2026-01-01T00:00:02.000Z");
        store.commit_turn(&second, &own).await.unwrap();
        let mut history = view.messages;
        history.extend(own);
        loan.give_back(history);

        // Served from memory again (a change behind the back does not show),
        // in step with the table, and the next loan hands over the same
        // messages, not a copy.
        set_behind_the_back(&path, 0, &Message::user("changed"));
        let (view, loan) = store.lend_history("s").await.unwrap();
        assert!(loan.is_some());
        assert_eq!(text_at(&view.messages[0]), text);
        set_behind_the_back(&path, 0, &every_variant()[0]);
        assert_eq!(
            serde_json::to_string(&view.messages).unwrap(),
            stored_history(&path, "s")
        );
    }

    #[tokio::test]
    async fn a_history_given_back_is_kept_without_room_to_spare() {
        let store = Store::open_in_memory().unwrap();
        let _hold = store.hold_history("s");
        let (view, loan) = store.lend_history("s").await.unwrap();
        assert!(view.messages.is_empty());

        // A turn's vector, with room for the messages it might have added.
        let own = vec![Message::user("hi"), Message::assistant("ok")];
        let record = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store.commit_turn(&record, &own).await.unwrap();
        let mut history = Vec::with_capacity(10);
        history.extend(own.clone());
        loan.unwrap().give_back(history);

        // Held idle, the history takes the room of its two messages only.
        let (view, loan) = store.lend_history("s").await.unwrap();
        assert!(loan.is_some(), "served from memory");
        assert_eq!(view.messages, own);
        assert_eq!(view.messages.capacity(), 2);
    }

    #[tokio::test]
    async fn a_loan_is_void_once_the_history_changed_otherwise_than_by_its_commit() {
        let store = Store::open_in_memory().unwrap();
        let _hold = store.hold_history("s");
        let commit = |id: &str, messages: Vec<Message>| {
            let (store, record) = (
                store.clone(),
                turn("s", id, TurnStatus::Completed, "2026-01-01T00:00:01.000Z"),
            );
            async move { store.commit_turn(&record, &messages).await.unwrap() }
        };
        commit("t1", vec![Message::user("one"), Message::assistant("1")]).await;
        let loaded = || store.histories.usage().1;

        // A compaction while lent: the history given back is not kept.
        let (view, loan) = store.lend_history("s").await.unwrap();
        assert_eq!(loaded(), 1);
        let record = CompactionRecord {
            upto_idx: 0,
            summary: "the user said one".into(),
            tokens_before: 10,
            tokens_after: 5,
            created_at: "2026-01-01T00:00:02.000Z".into(),
        };
        store.compact("s", record).await.unwrap();
        loan.unwrap().give_back(view.messages);
        assert_eq!(loaded(), 0);
        let compacted = store.history("s").await.unwrap();
        assert_eq!(compacted[1..], [Message::assistant("1")]);

        // A loan dropped (its turn failed) is not kept either.
        let (_, loan) = store.lend_history("s").await.unwrap();
        assert_eq!(loaded(), 1);
        drop(loan);
        assert_eq!(loaded(), 0);

        // Nor messages that are not the history with the commit: here,
        // without it.
        let (view, loan) = store.lend_history("s").await.unwrap();
        commit("t2", vec![Message::user("two")]).await;
        loan.unwrap().give_back(view.messages);
        assert_eq!(loaded(), 0);

        // The history with the commit is kept, and served from memory.
        let (mut view, loan) = store.lend_history("s").await.unwrap();
        let own = vec![Message::user("three"), Message::assistant("3")];
        commit("t3", own.clone()).await;
        view.messages.extend(own);
        loan.unwrap().give_back(view.messages.clone());
        assert_eq!(loaded(), 1);
        assert_eq!(store.histories.get("s").unwrap(), view);
        assert_eq!(store.read_history("s", false).await.unwrap().0, view);
    }

    /// A store holding sessions a, b and c, each a history of one message
    /// of 1,000 bytes (that message's text).
    async fn three_held_histories() -> (Store, Vec<HistoryHold>, String) {
        let store = Store::open_in_memory().unwrap();
        let long = "x".repeat(1000);
        let holds: Vec<HistoryHold> = ["a", "b", "c"]
            .iter()
            .map(|s| store.hold_history(s))
            .collect();
        for (i, session) in ["a", "b", "c"].iter().enumerate() {
            let record = turn(
                session,
                &format!("t{i}"),
                TurnStatus::Completed,
                "2026-01-01T00:00:01.000Z",
            );
            store
                .commit_turn(&record, &[Message::user(long.clone())])
                .await
                .unwrap();
        }
        (store, holds, long)
    }

    #[tokio::test]
    async fn a_lent_history_is_not_trimmed_to_the_budget() {
        let (store, _holds, long) = three_held_histories().await;
        store.histories.set_budget(2 * 1100);
        // a, the least recently used, is lent: trimming for c drops b
        // (a's turn holds its messages: dropping it would free nothing).
        let (view, loan) = store.lend_history("a").await.unwrap();
        for session in ["b", "c"] {
            store.history(session).await.unwrap();
        }
        loan.unwrap().give_back(view.messages);
        assert_eq!(
            store.histories.get("a").map(|view| view.messages),
            Some(vec![Message::user(long.clone())])
        );
        assert!(store.histories.get("b").is_none());
    }

    #[tokio::test]
    async fn held_histories_keep_to_their_budget_least_recently_used_first() {
        let (store, _holds, long) = three_held_histories().await;
        // Room for two histories: reading a third drops the least recently
        // used ones until a quarter of the budget is free.
        store.histories.set_budget(2 * 1100);
        for session in ["a", "b", "c"] {
            assert_eq!(
                store.history(session).await.unwrap(),
                [Message::user(long.clone())]
            );
        }
        let (bytes, loaded) = store.histories.usage();
        assert!(bytes <= 2 * 1100, "{bytes} bytes");
        assert_eq!(loaded, 1, "a and b dropped to make room for c");
        // A dropped history is read again, whole and right.
        let more = turn("a", "t9", TurnStatus::Completed, "2026-01-01T00:00:09.000Z");
        store
            .commit_turn(&more, &[Message::assistant("more")])
            .await
            .unwrap();
        assert_eq!(
            store.history("a").await.unwrap(),
            [Message::user(long.clone()), Message::assistant("more")]
        );
    }

    #[tokio::test]
    async fn two_sessions_stay_separate() {
        let store = Store::open_in_memory().unwrap();
        let a = turn("a", "ta", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        let b = turn("b", "tb", TurnStatus::Completed, "2026-01-01T00:00:02.000Z");
        store
            .commit_turn(&a, &[Message::user("for a")])
            .await
            .unwrap();
        store
            .commit_turn(&b, &[Message::user("for b"), Message::system("b2")])
            .await
            .unwrap();
        let b_aborted = turn("b", "tb2", TurnStatus::Aborted, "2026-01-01T00:00:03.000Z");
        store.commit_turn(&b_aborted, &[]).await.unwrap();

        assert_eq!(store.history("a").await.unwrap(), [Message::user("for a")]);
        assert_eq!(
            store.history("b").await.unwrap(),
            [Message::user("for b"), Message::system("b2")]
        );
        assert_eq!(store.turns("a").await.unwrap(), [a]);
        assert_eq!(store.turns("b").await.unwrap().len(), 2);
        assert_eq!(store.history("c").await.unwrap(), []);
        assert_eq!(store.turns("c").await.unwrap(), []);

        assert_eq!(
            store.sessions().await.unwrap(),
            [
                SessionInfo {
                    key: "b".into(),
                    messages: 2,
                    turns: 2,
                    updated_at: "2026-01-01T00:00:03.500Z".into(),
                },
                SessionInfo {
                    key: "a".into(),
                    messages: 1,
                    turns: 1,
                    updated_at: "2026-01-01T00:00:01.500Z".into(),
                },
            ]
        );
        // A new turn on "a" makes it the most recent.
        let a2 = turn(
            "a",
            "ta2",
            TurnStatus::Completed,
            "2026-01-01T00:00:04.000Z",
        );
        store
            .commit_turn(&a2, &[Message::user("a again")])
            .await
            .unwrap();
        let keys: Vec<String> = store
            .sessions()
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.key)
            .collect();
        assert_eq!(keys, ["a", "b"]);
    }

    #[tokio::test]
    async fn reopening_the_file_keeps_history_turns_and_last_seq() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home").join("nested").join("sessions.db");
        let record = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        {
            let store = Store::open(&path).unwrap();
            assert_eq!(store.last_seq().unwrap(), 0);
            store.commit_turn(&record, &every_variant()).await.unwrap();
            store
                .append_events(&[delta(1, Some("s")), delta(2, None), delta(3, Some("s"))])
                .await
                .unwrap();
            assert_eq!(store.last_seq().unwrap(), 3);
        }
        // The restart.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.last_seq().unwrap(), 3);
        assert_eq!(store.history("s").await.unwrap(), every_variant());
        assert_eq!(store.turns("s").await.unwrap(), [record]);
        assert_eq!(store.events(None, 0, 10).await.unwrap().len(), 3);

        let conn = lock(&store.conn);
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: bool = conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert!(fk);
    }

    #[tokio::test]
    async fn a_session_without_turns_was_updated_when_it_was_made() {
        let store = Store::open_in_memory().unwrap();
        let follow_up = SessionSettings {
            policy: Some(Policy::FollowUp),
            ..SessionSettings::default()
        };
        store.set_settings("quiet", &follow_up).await.unwrap();
        let listed = store.sessions().await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!((listed[0].messages, listed[0].turns), (0, 0));
        let made = humantime::parse_rfc3339(&listed[0].updated_at).unwrap();
        let age = std::time::SystemTime::now().duration_since(made).unwrap();
        assert!(age < Duration::from_secs(60), "{listed:?}");

        let first = turn(
            "quiet",
            "t1",
            TurnStatus::Completed,
            "2030-01-01T00:00:01.000Z",
        );
        store.commit_turn(&first, &[]).await.unwrap();
        assert_eq!(
            store.sessions().await.unwrap()[0].updated_at,
            "2030-01-01T00:00:01.500Z"
        );
    }

    #[tokio::test]
    async fn a_version_1_store_keeps_its_history_and_takes_subturn_statuses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            tx.execute_batch(MIGRATIONS[0]).unwrap();
            tx.pragma_update(None, "user_version", 1).unwrap();
            tx.commit().unwrap();
        }
        let store = {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "INSERT INTO sessions VALUES ('s', 't', 't');
                 INSERT INTO turns VALUES ('t1', 's', NULL, 'hi', 'completed', 'final_answer', 1, 1, 1, '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:01.000Z');
                 INSERT INTO messages VALUES ('s', 0, 't1', '{\"role\":\"user\",\"content\":\"hi\"}');",
            )
            .unwrap();
            drop(conn);
            Store::open(&path).unwrap()
        };
        assert_eq!(store.history("s").await.unwrap(), [Message::user("hi")]);
        // Every reference still holds after the tables were rebuilt.
        let dangling: Vec<String> = lock(&store.conn)
            .prepare("PRAGMA foreign_key_check")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(dangling.is_empty(), "{dangling:?}");
        // The session's row no longer says when it was updated: the end of
        // its latest turn does.
        assert_eq!(
            store.sessions().await.unwrap(),
            [SessionInfo {
                key: "s".into(),
                messages: 1,
                turns: 1,
                updated_at: "2025-01-01T00:00:01.000Z".into(),
            }]
        );
        let over = turn(
            "s",
            "t2",
            TurnStatus::BudgetExceeded,
            "2026-01-01T00:00:02.000Z",
        );
        store.commit_turn(&over, &[]).await.unwrap();
        let statuses: Vec<_> = store
            .turns("s")
            .await
            .unwrap()
            .iter()
            .map(|t| t.status)
            .collect();
        assert_eq!(
            statuses,
            [TurnStatus::Completed, TurnStatus::BudgetExceeded]
        );
    }

    #[tokio::test]
    async fn settings_are_kept_and_a_version_5_store_keeps_its_policies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v5.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for sql in &MIGRATIONS[..5] {
                tx.execute_batch(sql).unwrap();
            }
            tx.execute_batch(
                "INSERT INTO sessions VALUES ('old', 't', 't', 'follow_up');
                 INSERT INTO sessions VALUES ('plain', 't', 't', NULL);",
            )
            .unwrap();
            tx.pragma_update(None, "user_version", 5).unwrap();
            tx.commit().unwrap();
        }
        let store = Store::open(&path).unwrap();
        let follow_up = SessionSettings {
            policy: Some(Policy::FollowUp),
            ..SessionSettings::default()
        };
        let kept = store.settings().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept.get("old"), Some(&follow_up));

        let coder = SessionSettings {
            policy: Some(Policy::Steer),
            agent: Some("coder".into()),
            model: Some("openai:small".into()),
        };
        store.set_settings("new", &coder).await.unwrap();
        store
            .set_settings("old", &SessionSettings::default())
            .await
            .unwrap();
        store
            .set_settings("never", &SessionSettings::default())
            .await
            .unwrap();
        let kept = store.settings().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept.get("new"), Some(&coder));
        // A session with kept settings still takes turns, and keeps them.
        let record = turn(
            "new",
            "t1",
            TurnStatus::Completed,
            "2026-01-01T00:00:02.000Z",
        );
        store
            .commit_turn(&record, &[Message::user("hi")])
            .await
            .unwrap();
        assert_eq!(store.settings().unwrap().get("new"), Some(&coder));
        assert_eq!(store.history("new").await.unwrap(), [Message::user("hi")]);
    }

    #[test]
    fn errors_name_the_file_and_newer_schemas_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "not a folder").unwrap();
        let path = blocker.join("sessions.db");
        let err = Store::open(&path).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with(&format!("opening the session store {}: ", path.display())),
            "{text}"
        );

        let path = dir.path().join("newer.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        let text = format!("{:#}", Store::open(&path).unwrap_err());
        assert!(text.contains("schema version is 99"), "{text}");
    }

    #[tokio::test]
    async fn events_round_trip_and_filter() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.last_seq().unwrap(), 0);
        let events = vec![
            event(
                1,
                Some("s1"),
                EventBody::TurnBegin(TurnBegin {
                    input: "hi".into(),
                    agent: "default".into(),
                }),
            ),
            event(
                2,
                None,
                EventBody::PluginLoaded(PluginLoaded {
                    plugin: "echo".into(),
                    tools: vec!["echo".into()],
                    wit_version: "0.2.0".into(),
                }),
            ),
            event(
                3,
                Some("s2"),
                EventBody::LlmResponse(LlmResponse {
                    iteration: 1,
                    model: "openai:m".into(),
                    text: String::new(),
                    tool_calls: vec![ToolCallInfo {
                        id: "c1".into(),
                        name: "add".into(),
                        arguments: "{}".into(),
                    }],
                    finish_reason: FinishReason::Other("weird".into()),
                    usage: Usage {
                        input_tokens: 5,
                        output_tokens: 7,
                    },
                    duration_ms: 12.345,
                }),
            ),
            event(
                4,
                Some("s1"),
                EventBody::ToolCallEnd(ToolCallEnd {
                    call_id: "c1".into(),
                    tool: "fail".into(),
                    ok: false,
                    output: "boom".into(),
                    error_kind: Some(ErrorKind::Upstream),
                    duration_ms: 0.41,
                }),
            ),
            event(
                5,
                Some("s1"),
                EventBody::TurnEnd(TurnEnd {
                    status: TurnStatus::Completed,
                    reason: "final_answer".into(),
                    error_kind: None,
                    iterations: 1,
                    usage: Usage::default(),
                    answer: Some("done".into()),
                }),
            ),
            delta(6, Some("s2")),
        ];
        store.append_events(&events).await.unwrap();
        // A replay is ignored, not an error, and changes nothing.
        store.append_events(&events[3..]).await.unwrap();
        store.append_events(&[]).await.unwrap();
        assert_eq!(store.last_seq().unwrap(), 6);

        let all: Vec<Event> = events.iter().map(|e| (**e).clone()).collect();
        assert_eq!(store.events(None, 0, 100).await.unwrap(), all);
        assert_eq!(store.events(None, 4, 100).await.unwrap(), all[4..]);
        assert_eq!(store.events(None, 0, 2).await.unwrap(), all[..2]);
        assert_eq!(store.events(None, 6, 100).await.unwrap(), []);
        assert_eq!(store.events(None, 0, 0).await.unwrap(), []);

        let seqs = |events: Vec<Event>| events.into_iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(store.events(Some("s1"), 0, 100).await.unwrap()),
            [1, 4, 5]
        );
        assert_eq!(seqs(store.events(Some("s1"), 1, 1).await.unwrap()), [4]);
        assert_eq!(seqs(store.events(Some("s2"), 3, 100).await.unwrap()), [6]);
        assert_eq!(
            seqs(store.events(Some("nope"), 0, 100).await.unwrap()),
            [0u64; 0]
        );

        let conn = lock(&store.conn);
        let kind: String = conn
            .query_row("SELECT type FROM events WHERE seq = 4", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kind, "tool_call_end");
    }
}
