//! Checkpoints of the write-ahead log, off the store's connection.
//!
//! SQLite's automatic checkpoint runs inside whichever commit makes the log
//! cross 1,000 pages, with its fsyncs, while that commit holds the store's
//! one connection: every turn then waits for the disk (half a second was
//! seen). The store turns it off and this thread checkpoints instead, on a
//! connection of its own, in `PASSIVE` mode, which never waits for the
//! writer: commits go on while the log is copied back and synced.
//!
//! The thread checkpoints once the log holds [`DUE_AT`] pages (SQLite's
//! own threshold for its automatic checkpoint), at most once a second, and
//! sleeps without waking until then. The store's connection tells it the
//! log's length after each commit (SQLite's WAL hook); only the commit that
//! finds the log past the threshold wakes it. An idle host costs it
//! nothing, and a turn costs it a thousandth of a checkpoint of a thousand
//! pages, not a checkpoint a second (with a model that takes its time,
//! those had been a tenth of a turn's CPU).
//!
//! The process's first commit wakes it too, whatever the log's length: the
//! log the last process left is copied back early, off every commit's path,
//! and the thread's connection then has the log open, so the store's
//! connection is never the last to close it. SQLite checkpoints in the
//! close of the last connection, on the closer's path: a one-shot `wasmclaw
//! run` waited for that at its exit, and its next run restarted the emptied
//! log on its first commit, with two `fsync`s (the log's header and its
//! folder).

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::Connection;

/// The shortest time between two checkpoints.
const EVERY: Duration = Duration::from_secs(1);

/// The log's length, in pages, at which a checkpoint is due.
pub const DUE_AT: i32 = 1000;

/// The log is trimmed to this size (by the store's writing connection)
/// once a checkpoint has emptied it, if it grew past it.
pub const LOG_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Tells the checkpoint thread that the log has grown; the thread runs
/// until this is dropped, then checkpoints once more.
pub struct Checkpoints {
    due: mpsc::SyncSender<()>,
    /// No commit has been made yet.
    first: bool,
}

impl Checkpoints {
    /// A commit left the log `pages` long: at the first commit, or past
    /// [`DUE_AT`], a checkpoint is due (within a second).
    pub fn written(&mut self, pages: i32) {
        if std::mem::take(&mut self.first) || pages >= DUE_AT {
            // Full: one is due already.
            let _ = self.due.try_send(());
        }
    }
}

/// Starts checkpointing the database at `path` when its log is long.
pub fn spawn(path: &Path) -> Result<Checkpoints> {
    let conn = Connection::open(path)
        .with_context(|| format!("opening {} for checkpoints", path.display()))?;
    let (due, dues) = mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("wasmclaw-checkpoint".into())
        .spawn(move || run(&conn, &dues))
        .context("starting the checkpoint thread")?;
    Ok(Checkpoints { due, first: true })
}

fn run(conn: &Connection, dues: &mpsc::Receiver<()>) {
    let checkpoint = || {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!("session store checkpoint: {e}");
        }
    };
    let mut last: Option<Instant> = None;
    loop {
        // Asleep until the log is long.
        if dues.recv().is_err() {
            return checkpoint();
        }
        // At most one checkpoint a second: the rest of the second is slept
        // out. Commits meanwhile find the channel full (it holds one) and
        // do not wake the thread; the checkpoint takes them in.
        if let Some(until) = last.map(|at| at + EVERY) {
            if let Some(left) = until.checked_duration_since(Instant::now()) {
                std::thread::sleep(left);
            }
            if let Err(mpsc::TryRecvError::Disconnected) = dues.try_recv() {
                return checkpoint();
            }
        }
        checkpoint();
        last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::Store;
    use super::super::tests::delta;

    /// Whether the file at `path` grows past `size` bytes within `limit`.
    async fn grows(path: &std::path::Path, size: u64, limit: Duration) -> bool {
        let end = std::time::Instant::now() + limit;
        while std::time::Instant::now() < end {
            if std::fs::metadata(path).unwrap().len() > size {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    #[tokio::test]
    async fn the_first_commit_and_a_long_log_are_copied_back_without_a_commit_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let size = || std::fs::metadata(&path).unwrap().len();
        // The first commit is copied back at once, however short.
        let opened = size();
        let first: Vec<_> = (1..=1000).map(|seq| delta(seq, Some("s"))).collect();
        store.append_events(&first).await.unwrap();
        assert!(
            grows(&path, opened, Duration::from_secs(5)).await,
            "the first commit was not copied back"
        );
        let before = size();
        // About 150 pages more: the log holds them, and no checkpoint is
        // due.
        let events: Vec<_> = (1001..=3000).map(|seq| delta(seq, Some("s"))).collect();
        store.append_events(&events).await.unwrap();
        assert!(
            !grows(&path, before, Duration::from_millis(1500)).await,
            "a short log was copied back"
        );
        // Past a thousand pages: the thread copies the log into the
        // database within a second or two (no commit waits for it).
        for round in 2..11 {
            let events: Vec<_> = (round * 2000 - 999..=round * 2000 + 1000)
                .map(|seq| delta(seq, Some("s")))
                .collect();
            store.append_events(&events).await.unwrap();
        }
        assert!(
            grows(&path, before + 1_000_000, Duration::from_secs(5)).await,
            "the database file stayed at {} bytes",
            size()
        );
    }
}
