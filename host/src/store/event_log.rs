//! The event-log writer: drains the bus's lossless subscription into the
//! store's events table.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Store;
use crate::protocol::Event;

/// Most events written in one transaction.
const BATCH: usize = 256;

/// How long the writer lets events gather after the first of a burst: a
/// turn publishes tens of events within a few milliseconds, and one
/// transaction for all of them costs far less than one each.
const GATHER: Duration = Duration::from_millis(5);

/// How long to wait before retrying a failed batch.
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// Drains a lossless subscription into the store in batches (up to 256
/// events, or what arrived within 5 ms of the first), one transaction per
/// batch.
///
/// A batch that fails to write is logged and retried once; if that fails too
/// it is dropped with an error naming how many events were lost, and the
/// writer goes on. The writer ends when the channel closes.
pub struct EventLog {
    /// The highest `seq` the writer is done with (written, or dropped after
    /// its retry failed); starts at the store's last seq.
    written: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl EventLog {
    /// Starts the writer on the current Tokio runtime.
    pub fn spawn(store: Store, mut events: mpsc::UnboundedReceiver<Arc<Event>>) -> EventLog {
        let start = store.last_seq().unwrap_or_else(|e| {
            tracing::error!("event log: {e:#}");
            0
        });
        let (done, written) = watch::channel(start);
        let task = tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            while events.recv_many(&mut batch, BATCH).await > 0 {
                if batch.len() < BATCH {
                    tokio::time::sleep(GATHER).await;
                    while batch.len() < BATCH
                        && let Ok(event) = events.try_recv()
                    {
                        batch.push(event);
                    }
                }
                write(&store, &batch).await;
                let last = batch.iter().map(|e| e.seq).max().unwrap_or(0);
                done.send_modify(|seq| *seq = (*seq).max(last));
                batch.clear();
            }
        });
        EventLog { written, task }
    }

    /// Waits until every event up to and including `seq` is written (or the
    /// writer has stopped).
    pub async fn flush(&self, seq: u64) {
        let mut written = self.written.clone();
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

/// Writes one batch, retrying once; drops it if the retry fails too.
async fn write(store: &Store, batch: &[Arc<Event>]) {
    let Err(e) = store.append_events(batch).await else {
        return;
    };
    tracing::error!("event log: {e:#}; retrying once");
    tokio::time::sleep(RETRY_DELAY).await;
    if let Err(e) = store.append_events(batch).await {
        let (first, last) = (batch[0].seq, batch[batch.len() - 1].seq);
        tracing::error!(
            "event log: {e:#}; {} events lost (seq {first} to {last})",
            batch.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::lock;
    use super::super::tests::delta;
    use super::*;

    #[tokio::test]
    async fn flush_waits_for_every_event_to_be_written() {
        let store = Store::open_in_memory().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let log = EventLog::spawn(store.clone(), rx);
        // Nothing published yet: flushing up to the stored last seq is immediate.
        log.flush(0).await;

        for seq in 1..=1000 {
            let session = if seq % 3 == 0 { None } else { Some("s") };
            tx.send(delta(seq, session)).unwrap();
        }
        log.flush(1000).await;
        assert_eq!(store.last_seq().unwrap(), 1000);
        let events = store.events(None, 0, usize::MAX).await.unwrap();
        assert_eq!(events.len(), 1000);
        assert!(events.iter().zip(1..).all(|(e, seq)| e.seq == seq));

        tx.send(delta(1001, Some("s"))).unwrap();
        log.flush(1001).await;
        assert_eq!(store.last_seq().unwrap(), 1001);

        // Once the channel closes the writer ends, and flush no longer waits.
        drop(tx);
        log.flush(5000).await;
        log.join().await;
    }

    #[tokio::test]
    async fn numbering_continues_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        {
            let store = Store::open(&path).unwrap();
            let (tx, rx) = mpsc::unbounded_channel();
            let log = EventLog::spawn(store, rx);
            for seq in 1..=3 {
                tx.send(delta(seq, Some("s"))).unwrap();
            }
            log.flush(3).await;
        }
        let store = Store::open(&path).unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let log = EventLog::spawn(store.clone(), rx);
        // Already written before the restart.
        tokio::time::timeout(Duration::from_secs(1), log.flush(3))
            .await
            .unwrap();
        tx.send(delta(4, Some("s"))).unwrap();
        log.flush(4).await;
        assert_eq!(store.events(Some("s"), 0, 10).await.unwrap().len(), 4);
    }

    #[tokio::test]
    async fn a_batch_that_cannot_be_written_is_dropped_and_the_writer_goes_on() {
        let store = Store::open_in_memory().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let log = EventLog::spawn(store.clone(), rx);
        lock(&store.conn)
            .execute_batch("ALTER TABLE events RENAME TO events_away")
            .unwrap();
        tx.send(delta(1, Some("s"))).unwrap();
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
