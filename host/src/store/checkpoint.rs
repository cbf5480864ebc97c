//! Checkpoints of the write-ahead log, off the store's connection.
//!
//! SQLite's automatic checkpoint runs inside whichever commit makes the log
//! cross 1,000 pages, with its fsyncs, while that commit holds the store's
//! one connection: every turn then waits for the disk (half a second was
//! seen). The store turns it off and this thread checkpoints instead, on a
//! connection of its own, in `PASSIVE` mode, which never waits for the
//! writer: commits go on while the log is copied back and synced.
//!
//! The thread checkpoints after writes, at most once a second, and sleeps
//! without waking while nothing is written: an idle host costs it nothing,
//! and a busy one wakes it once per checkpoint, not once per write.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::Connection;

/// The shortest time between two checkpoints.
const EVERY: Duration = Duration::from_secs(1);

/// The log is trimmed to this size (by the store's writing connection)
/// once a checkpoint has emptied it, if it grew past it.
pub const LOG_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Tells the checkpoint thread that the log has grown; the thread runs
/// until this (and every clone of it) is dropped, then checkpoints once
/// more.
#[derive(Clone)]
pub struct Checkpoints {
    written: mpsc::SyncSender<()>,
}

impl Checkpoints {
    /// Something was committed: a checkpoint is due (within a second).
    pub fn written(&self) {
        // Full: one is due already.
        let _ = self.written.try_send(());
    }
}

/// Starts checkpointing the database at `path` after writes.
pub fn spawn(path: &Path) -> Result<Checkpoints> {
    let conn = Connection::open(path)
        .with_context(|| format!("opening {} for checkpoints", path.display()))?;
    let (written, writes) = mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("wasmclaw-checkpoint".into())
        .spawn(move || run(&conn, &writes))
        .context("starting the checkpoint thread")?;
    Ok(Checkpoints { written })
}

fn run(conn: &Connection, writes: &mpsc::Receiver<()>) {
    let checkpoint = || {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!("session store checkpoint: {e}");
        }
    };
    let mut last: Option<Instant> = None;
    loop {
        // Asleep until something is written.
        if writes.recv().is_err() {
            return checkpoint();
        }
        // At most one checkpoint a second: the rest of the second is slept
        // out. Writes meanwhile find the channel full (it holds one) and do
        // not wake the thread; the checkpoint takes them in.
        if let Some(until) = last.map(|at| at + EVERY) {
            if let Some(left) = until.checked_duration_since(Instant::now()) {
                std::thread::sleep(left);
            }
            if let Err(mpsc::TryRecvError::Disconnected) = writes.try_recv() {
                return checkpoint();
            }
        }
        checkpoint();
        last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::super::tests::delta;

    #[tokio::test]
    async fn the_log_is_copied_back_without_a_commit_waiting_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let store = Store::open(&path).unwrap();
        let size = || std::fs::metadata(&path).unwrap().len();
        let before = size();
        let events: Vec<_> = (1..=2000).map(|seq| delta(seq, Some("s"))).collect();
        store.append_events(&events).await.unwrap();
        // The commit left everything in the log (no automatic checkpoint);
        // the thread copies it into the database within a second or two.
        let mut grown = false;
        for _ in 0..100 {
            if size() > before + 100_000 {
                grown = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(grown, "the database file stayed at {} bytes", size());
    }
}
