//! Checkpoints of the write-ahead log, off the store's connection.
//!
//! SQLite's automatic checkpoint runs inside whichever commit makes the log
//! cross 1,000 pages, with its fsyncs, while that commit holds the store's
//! one connection: every turn then waits for the disk (half a second was
//! seen). The store turns it off and this thread checkpoints instead, once a
//! second, on a connection of its own, in `PASSIVE` mode, which never waits
//! for the writer: commits go on while the log is copied back and synced.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::Connection;

/// How often the log is checkpointed.
const EVERY: Duration = Duration::from_secs(1);

/// The log is trimmed to this size (by the store's writing connection)
/// once a checkpoint has emptied it, if it grew past it.
pub const LOG_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Checkpoints the database at `path` until the returned sender (and every
/// clone of it) is dropped, then once more.
pub fn spawn(path: &Path) -> Result<mpsc::Sender<()>> {
    let conn = Connection::open(path)
        .with_context(|| format!("opening {} for checkpoints", path.display()))?;
    let (keep, stop) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("wasmclaw-checkpoint".into())
        .spawn(move || {
            loop {
                let last = match stop.recv_timeout(EVERY) {
                    Err(mpsc::RecvTimeoutError::Timeout) | Ok(()) => false,
                    Err(mpsc::RecvTimeoutError::Disconnected) => true,
                };
                if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::warn!("session store checkpoint: {e}");
                }
                if last {
                    return;
                }
            }
        })
        .context("starting the checkpoint thread")?;
    Ok(keep)
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
