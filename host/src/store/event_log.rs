//! The event-log writer: drains the bus's lossless subscription into the
//! store's events table, and writes the turns' commits in the same
//! transactions.
//!
//! # When it writes
//!
//! Each write is one transaction, holding every event published since the
//! last one and every turn commit waiting. A write happens:
//!
//! - when a turn commits ([`Store::commit_turn`] hands its commit here): the
//!   commit is written at once, with every event held (the `turn_end`s of
//!   the turns ended since the last write among them), so a turn's steps
//!   cost no transaction of their own;
//! - when someone waits for the log ([`EventLog::flush`]): a replay, a wait
//!   for a turn that has ended, shutdown;
//! - otherwise [`HOLD`] after the first event not yet written: events of a
//!   long model call, and the `turn_end` of a turn no other commit follows
//!   soon, are stored at most that late.
//!
//! The `turn_end` that follows a commit is not written in a transaction of
//! its own at once: with a model that takes its time, that second write
//! (and the three thread wake-ups it costs) was up to a fifth of a turn's
//! CPU.
//!
//! Between writes the writer sleeps: it is not woken by each event, and an
//! idle host wakes it never. A crash (`kill -9`) loses at most the events of
//! the last [`HOLD`], a `turn_end` among them, never a turn's commit that
//! was acknowledged: the turn's history and its row are all in the store or
//! none of it (see the store's atomic-turn rule).
//!
//! # Failures
//!
//! A transaction that fails is done again apart: each commit in a
//! transaction of its own (a turn that cannot be written fails alone, and
//! its error goes back to its turn), then the events, retried
//! once after [`RETRY_DELAY`] and dropped with an error naming how many
//! were lost if that fails too. The writer goes on.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{LogCommit, Store, lock};
use crate::protocol::Event;

/// The longest an event waits to be written.
const HOLD: Duration = Duration::from_secs(1);

/// How long to wait before retrying a failed batch.
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// Writes the bus's events, and the turns' commits, to the store (see the
/// module's docs). The writer ends when the bus's channel closes.
pub struct EventLog {
    /// The highest `seq` the writer is done with (written, or dropped after
    /// its retry failed); starts at the store's last seq.
    written: watch::Receiver<u64>,
    /// Asks the writer to write what it holds now.
    flush: Arc<Notify>,
    task: JoinHandle<()>,
}

impl EventLog {
    /// Starts the writer on the current Tokio runtime. From now on the
    /// store's turn commits go through it.
    pub fn spawn(store: Store, events: mpsc::UnboundedReceiver<Arc<Event>>) -> EventLog {
        let start = store.last_seq().unwrap_or_else(|e| {
            tracing::error!("event log: {e:#}");
            0
        });
        let (done, written) = watch::channel(start);
        let (commits_tx, commits) = mpsc::unbounded_channel();
        *lock(&store.log) = Some(commits_tx);
        let flush = Arc::new(Notify::new());
        let writer = Writer {
            store,
            events,
            commits,
            flush: flush.clone(),
            done,
        };
        EventLog {
            written,
            flush,
            task: tokio::spawn(writer.run()),
        }
    }

    /// Waits until every event up to and including `seq` is written (or the
    /// writer has stopped); the writer writes at once what it holds.
    pub async fn flush(&self, seq: u64) {
        let mut written = self.written.clone();
        if *written.borrow() >= seq {
            return;
        }
        self.flush.notify_one();
        // An error means the writer is gone: nothing more will be written.
        let _ = written.wait_for(|&done| done >= seq).await;
    }

    /// Waits for the writer to end, which it does once the channel closes
    /// (when the bus is dropped).
    pub async fn join(self) {
        if let Err(e) = self.task.await {
            tracing::error!("the event log writer failed: {e}");
        }
    }
}

struct Writer {
    store: Store,
    events: mpsc::UnboundedReceiver<Arc<Event>>,
    commits: mpsc::UnboundedReceiver<LogCommit>,
    flush: Arc<Notify>,
    done: watch::Sender<u64>,
}

impl Writer {
    async fn run(mut self) {
        let mut batch: Vec<Arc<Event>> = Vec::new();
        let mut commits: Vec<LogCommit> = Vec::new();
        // When the next write is due, if one is.
        let mut due: Option<Instant> = None;
        let mut open = true;
        while open {
            match due {
                // Nothing held: asleep until an event, a commit or a flush.
                None => tokio::select! {
                    biased;
                    Some(commit) = self.commits.recv() => commits.push(commit),
                    _ = self.flush.notified() => {}
                    received = self.events.recv() => match received {
                        Some(event) => {
                            batch.push(event);
                            due = Some(Instant::now() + HOLD);
                            continue;
                        }
                        None => open = false,
                    },
                },
                // Events held: the next commit, a flush or the time takes
                // them; new events meanwhile do not wake the writer.
                Some(at) => tokio::select! {
                    biased;
                    Some(commit) = self.commits.recv() => commits.push(commit),
                    _ = self.flush.notified() => {}
                    _ = tokio::time::sleep_until(at) => {}
                },
            }
            while let Ok(commit) = self.commits.try_recv() {
                commits.push(commit);
            }
            loop {
                match self.events.try_recv() {
                    Ok(event) => batch.push(event),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            if !open {
                // The bus is gone: no more events; commits from now on are
                // written by the store itself.
                *lock(&self.store.log) = None;
                while let Ok(commit) = self.commits.try_recv() {
                    commits.push(commit);
                }
            }
            if !batch.is_empty() || !commits.is_empty() {
                self.write(std::mem::take(&mut batch), std::mem::take(&mut commits))
                    .await;
            }
            due = None;
        }
    }

    /// Writes `events` and `commits` in one transaction; if that fails,
    /// each commit in a transaction of its own (so each turn gets its own
    /// result), then the events alone, retried once.
    async fn write(&self, events: Vec<Arc<Event>>, commits: Vec<LogCommit>) {
        let last = events.iter().map(|e| e.seq).max();
        let (commits, replies): (Vec<_>, Vec<_>) =
            commits.into_iter().map(|c| (c.commit, c.done)).unzip();
        let events: Arc<[_]> = events.into();
        let together = self
            .store
            .write(events.clone(), commits.clone().into())
            .await;
        match together {
            Ok(()) => {
                for reply in replies {
                    let _ = reply.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::error!("event log: {e:#}; writing the events and the turns apart");
                for (commit, reply) in commits.into_iter().zip(replies) {
                    let context = super::write::context(&commit.turn);
                    let alone = self.store.write(Arc::new([]), Arc::new([commit])).await;
                    let _ = reply.send(alone.context(context));
                }
                if !events.is_empty() {
                    self.retry(&events).await;
                }
            }
        }
        if let Some(last) = last {
            self.done.send_modify(|seq| *seq = (*seq).max(last));
        }
    }

    /// Writes a batch of events that failed once, after [`RETRY_DELAY`];
    /// drops it if that fails too.
    async fn retry(&self, batch: &[Arc<Event>]) {
        tokio::time::sleep(RETRY_DELAY).await;
        if let Err(e) = self.store.append_events(batch).await {
            let (first, last) = (batch[0].seq, batch[batch.len() - 1].seq);
            tracing::error!(
                "event log: {e:#}; {} events lost (seq {first} to {last})",
                batch.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lock;
    use super::super::tests::{delta, turn};
    use super::*;
    use crate::llm::Message;
    use crate::protocol::TurnStatus;

    /// Waits (at most `limit`) until the store holds events up to `seq`.
    async fn until_stored(store: &Store, seq: u64, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while store.last_seq().unwrap() < seq {
            if Instant::now() >= end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }

    #[tokio::test]
    async fn a_turns_commit_and_the_events_before_it_are_one_transaction() {
        let store = Store::open_in_memory().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let _log = EventLog::spawn(store.clone(), rx);
        let before = store.write_transactions();
        // A turn's steps: its events, then its commit.
        for seq in 1..=20 {
            tx.send(delta(seq, Some("s"))).unwrap();
        }
        let record = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        let messages = [Message::user("q"), Message::assistant("a")];
        store.commit_turn(&record, &messages).await.unwrap();
        assert_eq!(store.write_transactions(), before + 1);
        assert_eq!(store.last_seq().unwrap(), 20, "written with the commit");
        assert_eq!(store.history("s").await.unwrap(), messages);
        assert_eq!(store.turns("s").await.unwrap(), [record]);

        // The `turn_end` published after the commit waits for the next
        // commit, and is written in its transaction.
        tx.send(delta(21, Some("s"))).unwrap();
        tokio::time::sleep(HOLD / 10).await;
        assert_eq!(store.last_seq().unwrap(), 20, "held for the next commit");
        let next = turn("s", "t2", TurnStatus::Completed, "2026-01-01T00:00:02.000Z");
        store.commit_turn(&next, &messages).await.unwrap();
        assert_eq!(store.write_transactions(), before + 2);
        assert_eq!(
            store.last_seq().unwrap(),
            21,
            "written with the next commit"
        );

        // With no commit after it, within HOLD, in a transaction of its own.
        tx.send(delta(22, Some("s"))).unwrap();
        assert!(until_stored(&store, 22, HOLD * 3).await);
        assert_eq!(store.write_transactions(), before + 3);
    }

    #[tokio::test]
    async fn a_turn_that_cannot_be_written_fails_alone_and_its_batch_is_kept() {
        let store = Store::open_in_memory().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let log = EventLog::spawn(store.clone(), rx);
        let first = turn("a", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        store
            .commit_turn(&first, &[Message::user("q"), Message::assistant("a")])
            .await
            .unwrap();
        let before = store.write_transactions();
        // One batch: events, a turn whose id is taken between two that can
        // be written (all three are waiting when the writer runs).
        for seq in 1..=3 {
            tx.send(delta(seq, Some("b"))).unwrap();
        }
        let (b, taken, c) = (
            turn("b", "t2", TurnStatus::Completed, "2026-01-01T00:00:02.000Z"),
            turn("a", "t1", TurnStatus::Completed, "2026-01-01T00:00:03.000Z"),
            turn("c", "t3", TurnStatus::Completed, "2026-01-01T00:00:04.000Z"),
        );
        let (bm, cm) = (
            [Message::user("b?"), Message::assistant("b!")],
            [Message::user("c?")],
        );
        let lost = [Message::user("lost")];
        let (rb, rt, rc) = tokio::join!(
            store.commit_turn(&b, &bm),
            store.commit_turn(&taken, &lost),
            store.commit_turn(&c, &cm),
        );
        rb.unwrap();
        rc.unwrap();
        let err = format!("{:#}", rt.unwrap_err());
        assert!(
            err.starts_with("saving turn t1 of session a: ") && err.contains("UNIQUE"),
            "{err}"
        );
        log.flush(3).await;
        // The batch failed whole, then each turn was written alone, then
        // the events: nothing of the others was lost.
        assert_eq!(store.write_transactions(), before + 3);
        assert_eq!(store.history("b").await.unwrap(), bm);
        assert_eq!(store.history("c").await.unwrap(), cm);
        let a = store.history("a").await.unwrap();
        assert_eq!(a, [Message::user("q"), Message::assistant("a")]);
        assert_eq!(store.turns("a").await.unwrap(), [first]);
        let seqs: Vec<u64> = (store.events(None, 0, 10).await.unwrap().iter())
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
    }

    #[tokio::test]
    async fn events_wait_to_be_written_until_a_flush_or_their_time() {
        let store = Store::open_in_memory().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let log = EventLog::spawn(store.clone(), rx);
        let before = store.write_transactions();
        tx.send(delta(1, Some("s"))).unwrap();
        tx.send(delta(2, Some("s"))).unwrap();
        assert!(
            !until_stored(&store, 1, HOLD / 10).await,
            "held, not written at once"
        );
        log.flush(2).await;
        assert_eq!(store.last_seq().unwrap(), 2);
        assert_eq!(store.write_transactions(), before + 1);

        // Unflushed, an event is written once it has waited its time.
        let sent = Instant::now();
        tx.send(delta(3, None)).unwrap();
        assert!(until_stored(&store, 3, HOLD * 3).await);
        assert!(sent.elapsed() >= HOLD / 2, "{:?}", sent.elapsed());
        assert_eq!(store.write_transactions(), before + 2);
    }

    #[tokio::test]
    async fn a_batch_that_cannot_be_written_is_dropped_its_commits_kept_and_the_writer_goes_on() {
        let store = Store::open_in_memory().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let log = EventLog::spawn(store.clone(), rx);
        lock(&store.conn)
            .execute_batch("ALTER TABLE events RENAME TO events_away")
            .unwrap();
        tx.send(delta(1, Some("s"))).unwrap();
        // A turn's commit with them is written apart, and kept.
        let record = turn("s", "t1", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        let messages = [Message::user("q"), Message::assistant("a")];
        store.commit_turn(&record, &messages).await.unwrap();
        assert_eq!(store.history("s").await.unwrap(), messages);
        // The batch fails twice and is dropped; flush does not hang.
        tokio::time::timeout(Duration::from_secs(5), log.flush(1))
            .await
            .unwrap();

        lock(&store.conn)
            .execute_batch("ALTER TABLE events_away RENAME TO events")
            .unwrap();
        tx.send(delta(2, Some("s"))).unwrap();
        log.flush(2).await;
        let seqs: Vec<u64> = store
            .events(None, 0, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [2]);
    }
}
