//! The event bus: every event goes out through here, numbered and stamped.
//!
//! Publishing never blocks: it takes a short lock, gives the event its `seq`,
//! and hands it to each subscriber without waiting. Each subscriber chose its
//! delivery when it subscribed:
//!
//! - [`Delivery::Lossless`]: an unbounded queue; nothing is ever dropped. For
//!   the session store and other consumers that must see everything and keep
//!   up on average.
//! - [`Delivery::Bounded`]: a queue of that many events; when it is full the
//!   newest event is dropped and counted, and the subscriber is told how many
//!   it missed ([`Received::Dropped`]) before its next event. For renderers,
//!   SSE clients and observers that must not make the host hold memory for
//!   them.
//!
//! Events are numbered under the same lock that delivers them, so every
//! subscriber sees them in `seq` order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::mpsc;

use crate::protocol::{Event, EventBody};

/// Where an event comes from: the envelope fields besides `seq` and `time`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    pub session: Option<String>,
    pub turn_id: Option<String>,
    pub parent_turn_id: Option<String>,
}

impl Scope {
    /// Host-wide events (plugins).
    pub fn host() -> Scope {
        Scope::default()
    }
}

/// How a subscriber wants its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Lossless,
    Bounded(usize),
}

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this session's events (host-wide events are not included).
    pub session: Option<String>,
    /// Skip `llm_delta` events.
    pub no_deltas: bool,
}

impl Filter {
    fn wants(&self, event: &Event) -> bool {
        if self.no_deltas && matches!(event.body, EventBody::LlmDelta { .. }) {
            return false;
        }
        match &self.session {
            Some(session) => event.session.as_ref() == Some(session),
            None => true,
        }
    }
}

/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Event(Arc<Event>),
    /// This many events were dropped because the subscriber's queue was full.
    Dropped(u64),
}

enum Sender {
    Lossless(mpsc::UnboundedSender<Arc<Event>>),
    Bounded(mpsc::Sender<Arc<Event>>),
}

struct Subscriber {
    filter: Filter,
    sender: Sender,
    dropped: Arc<AtomicU64>,
}

struct Inner {
    seq: u64,
    subscribers: Vec<Subscriber>,
}

/// The host's one event bus. Cheap to clone.
#[derive(Clone)]
pub struct EventBus {
    inner: Arc<Mutex<Inner>>,
    dropped_total: Arc<AtomicU64>,
}

impl EventBus {
    /// A bus whose first event gets `last_seq + 1`.
    pub fn new(last_seq: u64) -> EventBus {
        EventBus {
            inner: Arc::new(Mutex::new(Inner {
                seq: last_seq,
                subscribers: Vec::new(),
            })),
            dropped_total: Arc::default(),
        }
    }

    /// Numbers, stamps and delivers one event; returns its `seq`.
    pub fn publish(&self, scope: &Scope, body: EventBody) -> u64 {
        let mut inner = self.inner.lock().unwrap();
        inner.seq += 1;
        let event = Arc::new(Event {
            seq: inner.seq,
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            session: scope.session.clone(),
            turn_id: scope.turn_id.clone(),
            parent_turn_id: scope.parent_turn_id.clone(),
            body,
        });
        let dropped_total = &self.dropped_total;
        inner.subscribers.retain(|sub| {
            if !sub.filter.wants(&event) {
                return true;
            }
            match &sub.sender {
                Sender::Lossless(tx) => tx.send(event.clone()).is_ok(),
                Sender::Bounded(tx) => match tx.try_send(event.clone()) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        sub.dropped.fetch_add(1, Ordering::Relaxed);
                        dropped_total.fetch_add(1, Ordering::Relaxed);
                        true
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                },
            }
        });
        inner.seq
    }

    /// The `seq` of the last event published.
    pub fn last_seq(&self) -> u64 {
        self.inner.lock().unwrap().seq
    }

    /// Events dropped for slow subscribers since the host started.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    pub fn subscribe(&self, filter: Filter, delivery: Delivery) -> Subscription {
        let dropped = Arc::new(AtomicU64::new(0));
        let (sender, receiver) = match delivery {
            Delivery::Lossless => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Sender::Lossless(tx), Receiver::Lossless(rx))
            }
            Delivery::Bounded(capacity) => {
                let (tx, rx) = mpsc::channel(capacity.max(1));
                (Sender::Bounded(tx), Receiver::Bounded(rx))
            }
        };
        self.inner.lock().unwrap().subscribers.push(Subscriber {
            filter,
            sender,
            dropped: dropped.clone(),
        });
        Subscription {
            receiver,
            dropped,
            reported: 0,
        }
    }

    /// A lossless subscription to everything, as a plain channel (for the
    /// session store's writer).
    pub fn subscribe_all_lossless(&self) -> mpsc::UnboundedReceiver<Arc<Event>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner.lock().unwrap().subscribers.push(Subscriber {
            filter: Filter::default(),
            sender: Sender::Lossless(tx),
            dropped: Arc::default(),
        });
        rx
    }
}

enum Receiver {
    Lossless(mpsc::UnboundedReceiver<Arc<Event>>),
    Bounded(mpsc::Receiver<Arc<Event>>),
}

/// One subscriber's end. Dropping it unsubscribes.
pub struct Subscription {
    receiver: Receiver,
    dropped: Arc<AtomicU64>,
    reported: u64,
}

impl Subscription {
    /// The next event, or how many were dropped since the last report; `None`
    /// when the bus is gone.
    pub async fn recv(&mut self) -> Option<Received> {
        if let Some(gap) = self.unreported() {
            return Some(Received::Dropped(gap));
        }
        let event = match &mut self.receiver {
            Receiver::Lossless(rx) => rx.recv().await,
            Receiver::Bounded(rx) => rx.recv().await,
        };
        event.map(Received::Event)
    }

    /// Like [`Subscription::recv`] without waiting.
    pub fn try_recv(&mut self) -> Option<Received> {
        if let Some(gap) = self.unreported() {
            return Some(Received::Dropped(gap));
        }
        match &mut self.receiver {
            Receiver::Lossless(rx) => rx.try_recv().ok(),
            Receiver::Bounded(rx) => rx.try_recv().ok(),
        }
        .map(Received::Event)
    }

    /// Events dropped for this subscriber so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn unreported(&mut self) -> Option<u64> {
        let now = self.dropped.load(Ordering::Relaxed);
        (now > self.reported).then(|| {
            let gap = now - self.reported;
            self.reported = now;
            gap
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(session: &str) -> Scope {
        Scope {
            session: Some(session.into()),
            turn_id: Some("t1".into()),
            parent_turn_id: None,
        }
    }

    fn delta(text: &str) -> EventBody {
        EventBody::LlmDelta {
            iteration: 1,
            text: text.into(),
        }
    }

    fn seq(received: Option<Received>) -> u64 {
        match received {
            Some(Received::Event(e)) => e.seq,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn numbers_events_from_the_last_seq_and_filters_by_session() {
        let bus = EventBus::new(41);
        let mut all = bus.subscribe(Filter::default(), Delivery::Lossless);
        let mut only_b = bus.subscribe(
            Filter {
                session: Some("b".into()),
                no_deltas: false,
            },
            Delivery::Lossless,
        );
        assert_eq!(bus.publish(&turn("a"), delta("x")), 42);
        assert_eq!(bus.publish(&turn("b"), delta("y")), 43);
        assert_eq!(
            bus.publish(
                &Scope::host(),
                EventBody::PluginUnloaded { plugin: "p".into() }
            ),
            44
        );
        assert_eq!(
            [
                seq(all.recv().await),
                seq(all.recv().await),
                seq(all.recv().await)
            ],
            [42, 43, 44]
        );
        assert_eq!(seq(only_b.recv().await), 43);
        assert!(only_b.try_recv().is_none());
    }

    #[tokio::test]
    async fn a_full_bounded_subscriber_loses_the_newest_and_is_told_how_many() {
        let bus = EventBus::new(0);
        let mut slow = bus.subscribe(Filter::default(), Delivery::Bounded(2));
        let mut store = bus.subscribe_all_lossless();
        for i in 0..5 {
            bus.publish(&turn("a"), delta(&i.to_string()));
        }
        assert_eq!(bus.dropped_total(), 3);
        assert_eq!(slow.recv().await, Some(Received::Dropped(3)));
        assert_eq!(seq(slow.recv().await), 1);
        assert_eq!(seq(slow.recv().await), 2);
        bus.publish(&turn("a"), delta("after"));
        assert_eq!(seq(slow.recv().await), 6);
        for expected in 1..=6 {
            assert_eq!(store.recv().await.unwrap().seq, expected);
        }
    }

    #[tokio::test]
    async fn a_dropped_subscription_unsubscribes() {
        let bus = EventBus::new(0);
        drop(bus.subscribe(Filter::default(), Delivery::Bounded(1)));
        bus.publish(&turn("a"), delta("x"));
        assert!(bus.inner.lock().unwrap().subscribers.is_empty());
        assert_eq!(bus.dropped_total(), 0);
    }
}
