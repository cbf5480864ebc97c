//! Checkpoints of the write-ahead log, off the store's connection.
//!
//! SQLite's automatic checkpoint runs inside whichever commit makes the log
//! cross 1,000 pages, with its fsyncs, while that commit holds the store's
//! one connection: every turn then waits for the disk (half a second was
//! seen). The store turns it off and this thread checkpoints instead, on a
//! connection of its own, first in `PASSIVE` mode, which never waits for
//! the writer: commits go on while the log is copied back and synced (then
//! briefly in `RESTART` mode, see "Catching up").
//!
//! # When
//!
//! The store's connection tells the thread the log's length after each
//! commit (SQLite's WAL hook). The thread checkpoints, at most once a
//! second:
//!
//! - once the log holds [`DUE_AT`] pages (SQLite's own threshold for its
//!   automatic checkpoint);
//! - else [`SETTLE`] after the first commit since the last checkpoint. With
//!   `synchronous=NORMAL` a commit reaches the disk at a checkpoint: a crash
//!   of the process loses nothing committed, and this bounds what a crash
//!   of the machine (a power loss) can take back;
//! - at the process's first commit, whatever the log's length: the log the
//!   last process left is copied back early, off every commit's path, and
//!   the thread's connection then has the log open, so that the store's
//!   connection is, as a rule, not the last to close it. SQLite checkpoints
//!   in the close of the last connection, on the closer's path: a one-shot
//!   `wasmclaw run` waited for that at its exit, and its next run restarted
//!   the emptied log on its first commit, with two `fsync`s (the log's
//!   header and its folder);
//! - once more when the store's connection closes.
//!
//! Only the commit that changes what is due wakes the thread: an idle host
//! costs it nothing, and a busy one a checkpoint per thousand pages or per
//! [`SETTLE`], not one a second (with a model that takes its time, those
//! had been a tenth of a turn's CPU).
//!
//! # Catching up
//!
//! The log starts again from its beginning only at a commit that finds all
//! of it copied back; until then it grows. Under a steady stream of
//! commits, a `PASSIVE` checkpoint never gets there: commits come in while
//! it copies and syncs the database, and the log it leaves is longer than
//! what it copied. (The log of a `serve` answering turn after turn grew by
//! 40 KB a turn, without end.) So each checkpoint is two: a `PASSIVE` one
//! copies the log back without holding anything up, then a `RESTART` one
//! takes the writer's lock and, holding it, syncs the log, copies what the
//! commits added meanwhile (a few pages), syncs the database and waits for
//! readers to be done with the log. Commits wait for that second one, two
//! syncs of the disk at most once a second (a commit that finds the lock
//! taken waits on the blocking pool, see the store's docs). It waits
//! [`CATCH_UP_WAIT`] at most for the lock or for a reader, and gives up
//! till the next checkpoint if it must wait longer.
//!
//! # The commit after
//!
//! A checkpoint that copies the whole log back says so (the `emptied` flag
//! it is given): the next commit starts the log again from its beginning,
//! and that commit syncs the log's new header. The store sends that commit
//! to the blocking pool rather than let a runtime thread wait for the disk
//! (see the store's docs).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::Connection;

/// The shortest time between two checkpoints.
const EVERY: Duration = Duration::from_secs(1);

/// The log's length, in pages, at which a checkpoint is due.
pub const DUE_AT: i32 = 1000;

/// The longest a commit waits to be checkpointed while the log stays short.
pub const SETTLE: Duration = Duration::from_secs(10);

/// The longest a checkpoint that catches up waits for the writer's lock or
/// a reader, holding the next commits off meanwhile.
const CATCH_UP_WAIT: Duration = Duration::from_millis(10);

/// The log is trimmed to this size (by the store's writing connection)
/// once a checkpoint has emptied it, if it grew past it.
pub const LOG_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Tells the checkpoint thread of commits; the thread runs until this is
/// dropped, then checkpoints once more.
pub struct Checkpoints {
    shared: Arc<Shared>,
    /// No commit has been made yet.
    first: bool,
}

struct Shared {
    due: Mutex<Due>,
    wake: Condvar,
}

/// What the commits since the last checkpoint ask of the thread.
#[derive(Default)]
struct Due {
    /// A commit was made.
    written: bool,
    /// A checkpoint is due now.
    now: bool,
    /// The store's connection is closing.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Due> {
        // Flags only: never half-written.
        self.due.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Checkpoints {
    /// A commit left the log `pages` long. Wakes the thread only when that
    /// changes what is due.
    pub fn written(&mut self, pages: i32) {
        let now = std::mem::take(&mut self.first) || pages >= DUE_AT;
        let mut due = self.shared.lock();
        let news = !due.written || (now && !due.now);
        due.written = true;
        due.now |= now;
        if news {
            self.shared.wake.notify_one();
        }
    }
}

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

/// Starts checkpointing the database at `path` (see the module's docs);
/// sets `emptied` after each checkpoint that copies the whole log back.
pub fn spawn(path: &Path, emptied: Arc<AtomicBool>) -> Result<Checkpoints> {
    spawn_settling(path, SETTLE, emptied)
}

/// [`spawn`], with `settle` for [`SETTLE`] (the tests' own).
fn spawn_settling(path: &Path, settle: Duration, emptied: Arc<AtomicBool>) -> Result<Checkpoints> {
    let conn = Connection::open(path)
        .with_context(|| format!("opening {} for checkpoints", path.display()))?;
    conn.busy_timeout(CATCH_UP_WAIT)?;
    let shared = Arc::new(Shared {
        due: Mutex::default(),
        wake: Condvar::new(),
    });
    let thread = shared.clone();
    std::thread::Builder::new()
        .name("wasmclaw-checkpoint".into())
        .spawn(move || run(&conn, &thread, settle, &emptied))
        .context("starting the checkpoint thread")?;
    Ok(Checkpoints {
        shared,
        first: true,
    })
}

/// Copies the log back, and sets `emptied` once all of it is in the
/// database (see the module's docs, "Catching up"). A `RESTART` kept from
/// its end by a reader past [`CATCH_UP_WAIT`] may still have copied all of
/// it: then the next commit starts the log again all the same.
fn checkpoint(conn: &Connection, emptied: &AtomicBool) {
    match copy_back(conn, "PASSIVE").and_then(|_| copy_back(conn, "RESTART")) {
        Ok((log, copied)) if log > 0 && copied == log => emptied.store(true, Ordering::Release),
        Ok(_) => {}
        Err(e) => tracing::warn!("session store checkpoint: {e}"),
    }
}

/// A checkpoint in `mode`: the log's length and how much of it is now in
/// the database, in frames (-1 and -1 when the database is not in WAL
/// mode).
fn copy_back(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        Ok((row.get(1)?, row.get(2)?))
    })
}

fn run(conn: &Connection, shared: &Shared, settle: Duration, emptied: &AtomicBool) {
    let mut last: Option<Instant> = None;
    loop {
        let mut due = shared.lock();
        // Asleep until something is written.
        while !due.written && !due.closed {
            due = shared.wake.wait(due).unwrap_or_else(|e| e.into_inner());
        }
        // Written: the checkpoint waits until it is due, `settle` at most.
        let until = Instant::now() + settle;
        while !due.now && !due.closed {
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                break;
            };
            due = (shared.wake.wait_timeout(due, left))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(due);
        // At most one checkpoint a second: the rest of the second is slept
        // out (commits meanwhile are taken in by the checkpoint).
        if let Some(left) = last.and_then(|at| (at + EVERY).checked_duration_since(Instant::now()))
        {
            std::thread::sleep(left);
        }
        // Commits from here on are the next checkpoint's.
        let closed = {
            let mut due = shared.lock();
            (due.written, due.now) = (false, false);
            due.closed
        };
        checkpoint(conn, emptied);
        if closed {
            return;
        }
        last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use rusqlite::Connection;

    use super::super::Store;
    use super::super::tests::delta;
    use super::{DUE_AT, SETTLE, spawn_settling};

    fn size(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    /// Whether the file at `path` grows past `bytes` within `limit`.
    fn grows(path: &Path, bytes: u64, limit: Duration) -> bool {
        let end = std::time::Instant::now() + limit;
        while std::time::Instant::now() < end {
            if size(path) > bytes {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The size of the file at `path` once it has stopped changing (a
    /// checkpoint writes the database a page at a time).
    fn settled_size(path: &Path) -> u64 {
        let mut seen = size(path);
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = size(path);
            if now == seen {
                return now;
            }
            seen = now;
        }
    }

    /// The pages the write-ahead log of the database at `path` holds.
    fn log_pages(path: &Path) -> u64 {
        let log = std::fs::metadata(path.with_extension("db-wal")).map_or(0, |m| m.len());
        log.saturating_sub(32) / (4096 + 24)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_first_commit_and_a_long_log_are_copied_back_without_a_commit_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let mut seq = 0;
        let mut events = |n: u64| {
            let batch: Vec<_> = (seq + 1..=seq + n).map(|s| delta(s, Some("s"))).collect();
            seq += n;
            batch
        };
        // The first commit is copied back at once, however short.
        let opened = size(&path);
        store.append_events(&events(1000)).await.unwrap();
        assert!(
            grows(&path, opened, Duration::from_secs(5)),
            "the first commit was not copied back"
        );
        let before = settled_size(&path);
        // About a hundred pages more: the log holds them, and no
        // checkpoint is due before `SETTLE`.
        store.append_events(&events(2000)).await.unwrap();
        assert!(
            !grows(&path, before, Duration::from_millis(1500)),
            "a short log was copied back"
        );
        // Past a thousand pages: the thread copies the log into the
        // database within a second or two (no commit waits for it).
        while log_pages(&path) < DUE_AT as u64 + 200 {
            store.append_events(&events(2000)).await.unwrap();
        }
        assert!(
            grows(&path, before + 1_000_000, Duration::from_secs(5)),
            "the database file stayed at {} bytes",
            size(&path)
        );
    }

    /// A database at `path` in WAL mode with a table `t`, checkpointed by
    /// no one but the thread.
    fn database(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        // As the store's: a commit does not sync the disk.
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        conn
    }

    /// Stores about `pages` pages in `t`.
    fn write(conn: &Connection, pages: usize) {
        for _ in 0..pages {
            conn.execute("INSERT INTO t VALUES (randomblob(3500))", [])
                .unwrap();
        }
    }

    /// A thread with `settle` whose first checkpoint is done, and a short
    /// log written since: the database file's size before it is copied.
    struct ShortLog {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        checkpoints: super::Checkpoints,
        before: u64,
    }

    fn short_log(settle: Duration) -> ShortLog {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let conn = database(&path);
        let mut checkpoints = spawn_settling(&path, settle, Arc::default()).unwrap();
        write(&conn, 5);
        checkpoints.written(1);
        assert!(grows(&path, 0, Duration::from_secs(5)), "the first commit");
        let before = settled_size(&path);
        write(&conn, 5);
        checkpoints.written(1);
        ShortLog {
            _dir: dir,
            path,
            checkpoints,
            before,
        }
    }

    /// Whether `flag` is set within `limit`.
    fn set_within(flag: &AtomicBool, limit: Duration) -> bool {
        let end = std::time::Instant::now() + limit;
        while !flag.load(Ordering::Acquire) {
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// A checkpoint says it emptied the log only when it copied all of it
    /// back: not while a reader holds a snapshot older than its end.
    #[test]
    fn a_checkpoint_says_when_it_copied_the_whole_log_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let conn = database(&path);
        let emptied = Arc::new(AtomicBool::new(false));
        let mut checkpoints =
            spawn_settling(&path, Duration::from_millis(100), emptied.clone()).unwrap();
        // A reader's snapshot from before the pages written next.
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        write(&conn, 5);
        checkpoints.written(1);
        assert!(
            grows(&path, 0, Duration::from_secs(5)),
            "the checkpoint copied nothing"
        );
        settled_size(&path);
        assert!(
            !emptied.load(Ordering::Acquire),
            "the log was not all copied"
        );
        // The reader done, the next checkpoint copies the rest.
        reader.execute_batch("COMMIT").unwrap();
        write(&conn, 1);
        checkpoints.written(1);
        assert!(
            set_within(&emptied, Duration::from_secs(5)),
            "never said the log was copied back"
        );
    }

    /// How many times the log of the database at `path` started again
    /// from its beginning (its header's checkpoint sequence).
    fn restarts(path: &Path) -> u32 {
        use std::io::Read;
        let mut header = [0; 16];
        (std::fs::File::open(path.with_extension("db-wal")).unwrap())
            .read_exact(&mut header)
            .unwrap();
        u32::from_be_bytes(header[12..16].try_into().unwrap())
    }

    #[test]
    fn the_log_starts_again_while_commits_never_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let conn = database(&path);
        let mut checkpoints = spawn_settling(&path, SETTLE, Arc::default()).unwrap();
        write(&conn, 1);
        checkpoints.written(DUE_AT);
        let first = restarts(&path);
        // A commit every half millisecond, each making a checkpoint due:
        // every checkpoint (its copy and its two syncs) has commits coming
        // in while it runs.
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while restarts(&path) < first + 2 && std::time::Instant::now() < end {
            write(&conn, 1);
            checkpoints.written(DUE_AT);
            std::thread::sleep(Duration::from_micros(500));
        }
        assert!(
            restarts(&path) >= first + 2,
            "the log started again {} times in 10 s of commits, and is {} pages long",
            restarts(&path) - first,
            log_pages(&path)
        );
    }

    #[test]
    fn a_short_log_is_copied_back_once_it_has_settled() {
        // Short, but not for longer than `settle` (and the second between
        // checkpoints).
        let log = short_log(Duration::from_millis(300));
        assert!(
            grows(&log.path, log.before, Duration::from_secs(5)),
            "the database file stayed at {} bytes",
            log.before
        );
    }

    #[test]
    fn a_short_log_is_copied_back_when_the_store_closes() {
        let ShortLog {
            _dir,
            path,
            checkpoints,
            before,
        } = short_log(Duration::from_secs(600));
        drop(checkpoints);
        assert!(
            grows(&path, before, Duration::from_secs(5)),
            "the database file stayed at {before} bytes"
        );
    }
}
