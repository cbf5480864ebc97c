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
//!   it missed ([`Received::Dropped`]) exactly where they are missing: after
//!   the events queued before them, before the first one queued after. For
//!   renderers, SSE clients and observers that must not make the host hold
//!   memory for them.
//!
//! Events are numbered under the same lock that delivers them, so every
//! subscriber sees them in `seq` order. Subscribers to one session are kept
//! by session, so publishing costs the same with one or thousands of them
//! (an SSE client per session).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::mpsc;

use crate::protocol::{Event, EventBody, EventKind};

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
    /// Only these kinds (`turn_end`, ...); empty: every kind.
    pub kinds: Vec<EventKind>,
}

impl Filter {
    /// Whether `event` passes the filter.
    pub fn wants(&self, event: &Event) -> bool {
        if self.no_deltas && matches!(event.body, EventBody::LlmDelta(_)) {
            return false;
        }
        if !self.kinds.is_empty() && !self.kinds.contains(&event.body.kind()) {
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

/// Runs of dropped events, oldest first: (first seq, how many).
type Gaps = Arc<Mutex<VecDeque<(u64, u64)>>>;

struct Subscriber {
    filter: Filter,
    sender: Sender,
    dropped: Arc<AtomicU64>,
    gaps: Gaps,
}

impl Subscriber {
    /// Its subscription was dropped.
    fn is_closed(&self) -> bool {
        match &self.sender {
            Sender::Lossless(tx) => tx.is_closed(),
            Sender::Bounded(tx) => tx.is_closed(),
        }
    }
}

struct Inner {
    seq: u64,
    /// Subscribers to every session.
    everywhere: Vec<Subscriber>,
    /// Subscribers to one session, by its key.
    by_session: HashMap<String, Vec<Subscriber>>,
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
                everywhere: Vec::new(),
                by_session: HashMap::new(),
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
        let seq = inner.seq;
        let Inner {
            everywhere,
            by_session,
            ..
        } = &mut *inner;
        everywhere.retain(|sub| self.deliver(sub, &event));
        if let Some(session) = &event.session
            && let Some(subs) = by_session.get_mut(session)
        {
            subs.retain(|sub| self.deliver(sub, &event));
            if subs.is_empty() {
                by_session.remove(session);
            }
        }
        seq
    }

    /// Hands `event` to `sub` if it wants it; false when `sub` is gone.
    fn deliver(&self, sub: &Subscriber, event: &Arc<Event>) -> bool {
        if sub.is_closed() {
            return false;
        }
        if !sub.filter.wants(event) {
            return true;
        }
        match &sub.sender {
            Sender::Lossless(tx) => tx.send(event.clone()).is_ok(),
            Sender::Bounded(tx) => match tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    sub.dropped.fetch_add(1, Ordering::Relaxed);
                    self.dropped_total.fetch_add(1, Ordering::Relaxed);
                    let mut gaps = sub.gaps.lock().unwrap();
                    match gaps.back_mut() {
                        Some((first, n)) if *first + *n == event.seq => *n += 1,
                        _ => gaps.push_back((event.seq, 1)),
                    }
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
        }
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
        self.subscribe_after(filter, delivery).0
    }

    /// [`EventBus::subscribe`], with the subscriber's drops added to
    /// `dropped` at the moment each is dropped (an observer's count, kept
    /// across the subscriptions of its reloads).
    pub fn subscribe_counted(
        &self,
        filter: Filter,
        delivery: Delivery,
        dropped: Arc<AtomicU64>,
    ) -> Subscription {
        self.subscribe_with(filter, delivery, dropped).0
    }

    /// [`EventBus::subscribe`], and the `seq` of the last event published
    /// before it: every later event reaches the subscription, no earlier
    /// one does (for a reader that takes the earlier ones from the event
    /// log).
    pub fn subscribe_after(&self, filter: Filter, delivery: Delivery) -> (Subscription, u64) {
        self.subscribe_with(filter, delivery, Arc::default())
    }

    fn subscribe_with(
        &self,
        filter: Filter,
        delivery: Delivery,
        dropped: Arc<AtomicU64>,
    ) -> (Subscription, u64) {
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
        let (dropped, gaps, last) = self.add(filter, sender, dropped);
        let subscription = Subscription {
            receiver,
            dropped,
            gaps,
            held: None,
        };
        (subscription, last)
    }

    /// A lossless subscription to everything, as a plain channel (for the
    /// session store's writer).
    pub fn subscribe_all_lossless(&self) -> mpsc::UnboundedReceiver<Arc<Event>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.add(Filter::default(), Sender::Lossless(tx), Arc::default());
        rx
    }

    /// Registers a subscriber; its drop counter, its gap list, and the last
    /// `seq` published before it.
    fn add(
        &self,
        filter: Filter,
        sender: Sender,
        dropped: Arc<AtomicU64>,
    ) -> (Arc<AtomicU64>, Gaps, u64) {
        let gaps = Gaps::default();
        let mut inner = self.inner.lock().unwrap();
        // A subscriber to a session that went quiet is not reached by
        // `publish` again: those that are gone are let go of here.
        inner.everywhere.retain(|sub| !sub.is_closed());
        inner.by_session.retain(|_, subs| {
            subs.retain(|sub| !sub.is_closed());
            !subs.is_empty()
        });
        let list = match &filter.session {
            Some(session) => inner.by_session.entry(session.clone()).or_default(),
            None => &mut inner.everywhere,
        };
        list.push(Subscriber {
            filter,
            sender,
            dropped: dropped.clone(),
            gaps: gaps.clone(),
        });
        (dropped, gaps, inner.seq)
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
    gaps: Gaps,
    /// An event held back while the gap before it is reported.
    held: Option<Arc<Event>>,
}

impl Subscription {
    /// The next event, or how many were dropped at this point; `None` when
    /// the bus is gone.
    pub async fn recv(&mut self) -> Option<Received> {
        let event = match self.held.take().or_else(|| self.try_queue()) {
            Some(event) => event,
            None => {
                // Nothing queued: drops since the last event are reported
                // now, before waiting.
                if let Some(n) = self.gap_before(u64::MAX) {
                    return Some(Received::Dropped(n));
                }
                match &mut self.receiver {
                    Receiver::Lossless(rx) => rx.recv().await?,
                    Receiver::Bounded(rx) => rx.recv().await?,
                }
            }
        };
        Some(self.in_order(event))
    }

    /// Like [`Subscription::recv`] without waiting.
    pub fn try_recv(&mut self) -> Option<Received> {
        match self.held.take().or_else(|| self.try_queue()) {
            Some(event) => Some(self.in_order(event)),
            None => self.gap_before(u64::MAX).map(Received::Dropped),
        }
    }

    /// Events dropped for this subscriber so far (with
    /// [`EventBus::subscribe_counted`], the shared count).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn try_queue(&mut self) -> Option<Arc<Event>> {
        match &mut self.receiver {
            Receiver::Lossless(rx) => rx.try_recv().ok(),
            Receiver::Bounded(rx) => rx.try_recv().ok(),
        }
    }

    /// `event`, or the gap that comes before it (holding the event back).
    fn in_order(&mut self, event: Arc<Event>) -> Received {
        match self.gap_before(event.seq) {
            Some(n) => {
                self.held = Some(event);
                Received::Dropped(n)
            }
            None => Received::Event(event),
        }
    }

    /// Takes the oldest gap if it starts before `seq`.
    fn gap_before(&self, seq: u64) -> Option<u64> {
        let mut gaps = self.gaps.lock().unwrap();
        match gaps.front() {
            Some(&(first, n)) if first < seq => {
                gaps.pop_front();
                Some(n)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{LlmDelta, PluginUnloaded};

    fn turn(session: &str) -> Scope {
        Scope {
            session: Some(session.into()),
            turn_id: Some("t1".into()),
            parent_turn_id: None,
        }
    }

    fn delta(text: &str) -> EventBody {
        EventBody::LlmDelta(LlmDelta {
            iteration: 1,
            text: text.into(),
        })
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
                ..Default::default()
            },
            Delivery::Lossless,
        );
        assert_eq!(bus.publish(&turn("a"), delta("x")), 42);
        assert_eq!(bus.publish(&turn("b"), delta("y")), 43);
        assert_eq!(
            bus.publish(
                &Scope::host(),
                EventBody::PluginUnloaded(PluginUnloaded { plugin: "p".into() })
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
        assert_eq!(seq(slow.recv().await), 1);
        bus.publish(&turn("a"), delta("queued after the gap"));
        bus.publish(&turn("a"), delta("dropped again"));
        // 3, 4 and 5 are missing after 2 and before 6; 7 after 6.
        assert_eq!(seq(slow.recv().await), 2);
        assert_eq!(slow.recv().await, Some(Received::Dropped(3)));
        assert_eq!(seq(slow.recv().await), 6);
        assert_eq!(slow.try_recv(), Some(Received::Dropped(1)));
        assert_eq!(slow.try_recv(), None);
        assert_eq!(slow.dropped(), 4);
        for expected in 1..=7 {
            assert_eq!(store.recv().await.unwrap().seq, expected);
        }
    }

    #[tokio::test]
    async fn a_dropped_subscription_unsubscribes() {
        let bus = EventBus::new(0);
        let only = |session: &str| Filter {
            session: Some(session.into()),
            no_deltas: false,
            ..Default::default()
        };
        let all = bus.subscribe(Filter::default(), Delivery::Bounded(1));
        let a = bus.subscribe(only("a"), Delivery::Bounded(1));
        drop((all, a));
        // Publishing lets go of the subscribers it reaches...
        bus.publish(&turn("a"), delta("x"));
        {
            let inner = bus.inner.lock().unwrap();
            assert!(inner.everywhere.is_empty() && inner.by_session.is_empty());
        }
        // ...and subscribing, of those of sessions that went quiet.
        drop(bus.subscribe(only("quiet"), Delivery::Bounded(1)));
        let _b = bus.subscribe(only("b"), Delivery::Bounded(1));
        let inner = bus.inner.lock().unwrap();
        assert_eq!(inner.by_session.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(bus.dropped_total(), 0);
    }
}
