//! Changes to the files of one folder: what wakes the configuration file's
//! watch and the plugin directory's.
//!
//! On Linux the folder is watched with inotify, read on the async runtime
//! (no thread of its own), for the events that a watch asks for: a file
//! created, deleted, renamed into or out of the folder, its attributes
//! changed, written and closed, and, with [`Writes::Each`], each write.
//! The configuration file's folder is also the session store's, whose log
//! is written many times a turn: its watch asks for [`Writes::OnClose`],
//! so those writes do not wake it. Elsewhere the platform's watcher of the
//! `notify` crate is used, which reports every event.

use std::ffi::OsStr;
use std::path::Path;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

/// Which writes to a file of the folder are a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Every write: a file still being written keeps the folder changing
    /// (the plugin directory, where a plugin may be copied in slowly).
    Each,
    /// A file written and closed; not the writes to a file kept open.
    OnClose,
}

/// Watches while alive; dropping it stops watching.
pub struct FolderWatch {
    #[cfg(target_os = "linux")]
    _reader: tokio_util::task::AbortOnDropHandle<()>,
    #[cfg(target_os = "linux")]
    #[cfg_attr(not(test), allow(dead_code))]
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    #[cfg(not(target_os = "linux"))]
    _watcher: notify::RecommendedWatcher,
}

/// Watches `folder` (which must exist): each change to a file whose name
/// `wants` is sent as `()` on the receiver. Must be called on a Tokio
/// runtime.
pub fn watch(
    folder: &Path,
    writes: Writes,
    wants: impl Fn(&OsStr) -> bool + Send + 'static,
) -> Result<(FolderWatch, mpsc::UnboundedReceiver<()>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let watch = start(folder, writes, wants, tx)
        .with_context(|| format!("watching {}", folder.display()))?;
    Ok((watch, rx))
}

#[cfg(target_os = "linux")]
fn start(
    folder: &Path,
    writes: Writes,
    wants: impl Fn(&OsStr) -> bool + Send + 'static,
    tx: mpsc::UnboundedSender<()>,
) -> Result<FolderWatch> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use futures_util::StreamExt;
    use inotify::{EventMask, Inotify, WatchMask};

    let mut mask = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE;
    if writes == Writes::Each {
        mask |= WatchMask::MODIFY;
    }
    let inotify = Inotify::init().context("starting inotify")?;
    inotify.watches().add(folder, mask)?;
    let mut events = inotify.into_event_stream([0u8; 4096])?;
    let read = Arc::new(AtomicU64::new(0));
    let counted = read.clone();
    let reader = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("a folder watch stopped: {e}");
                    return;
                }
            };
            counted.fetch_add(1, Ordering::Relaxed);
            // An overflow names no file: any may have changed.
            let ours = event.mask.contains(EventMask::Q_OVERFLOW)
                || event.name.as_deref().is_some_and(&wants);
            if ours && tx.send(()).is_err() {
                return;
            }
        }
    });
    Ok(FolderWatch {
        _reader: tokio_util::task::AbortOnDropHandle::new(reader),
        read,
    })
}

#[cfg(not(target_os = "linux"))]
fn start(
    folder: &Path,
    writes: Writes,
    wants: impl Fn(&OsStr) -> bool + Send + 'static,
    tx: mpsc::UnboundedSender<()>,
) -> Result<FolderWatch> {
    use notify::{RecursiveMode, Watcher};
    let _ = writes;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let ours = (event.paths.iter()).any(|p| p.file_name().is_some_and(&wants));
        if ours && !event.kind.is_access() {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(folder, RecursiveMode::NonRecursive)?;
    Ok(FolderWatch { _watcher: watcher })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    /// Writes `file` of `folder` 50 times, kept open, a little apart (so
    /// inotify cannot merge the events), and closes it.
    async fn write_kept_open(folder: &Path, file: &str) {
        let mut log = std::fs::File::create(folder.join(file)).unwrap();
        for i in 0..50 {
            writeln!(log, "frame {i}").unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    #[tokio::test]
    async fn writes_to_a_file_kept_open_beside_the_watched_one_do_not_wake_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let (watch, mut changes) =
            watch(dir.path(), Writes::OnClose, |name| name == "wasmclaw.toml").unwrap();
        write_kept_open(dir.path(), "sessions.db-wal").await;
        std::fs::write(dir.path().join("wasmclaw.toml"), "[host]\n").unwrap();
        tokio::time::timeout(WAIT, changes.recv())
            .await
            .expect("the configuration's change is seen")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The log's creation and close, the file's creation and close: not
        // one event per write. The two of the watched file are sent.
        assert_eq!(watch.read.load(Ordering::Relaxed), 4);
        tokio::time::timeout(WAIT, changes.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(changes.try_recv().is_err());
    }

    #[tokio::test]
    async fn with_each_write_a_file_still_being_written_keeps_changing() {
        let dir = tempfile::tempdir().unwrap();
        let (watch, mut changes) = watch(dir.path(), Writes::Each, |_| true).unwrap();
        write_kept_open(dir.path(), "big.wasm").await;
        let mut seen = 0;
        while tokio::time::timeout(Duration::from_millis(200), changes.recv())
            .await
            .is_ok()
        {
            seen += 1;
        }
        assert!(seen > 10, "{seen} changes seen of 50 writes");
        assert_eq!(watch.read.load(Ordering::Relaxed), seen);
        // Renaming and removing are changes too.
        std::fs::rename(dir.path().join("big.wasm"), dir.path().join("b.wasm")).unwrap();
        std::fs::remove_file(dir.path().join("b.wasm")).unwrap();
        for _ in 0..3 {
            tokio::time::timeout(WAIT, changes.recv())
                .await
                .unwrap()
                .unwrap();
        }
    }
}
