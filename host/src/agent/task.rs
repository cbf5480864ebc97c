//! The life of a turn, from its spawn to its one `turn_end`: the only place
//! that starts a turn on a task, top-level and SubTurn alike.
//!
//! [`spawn`] registers the turn's [`TurnControl`] in the [`TurnTable`] (so an
//! interrupt naming its id reaches it from the moment its id is handed out),
//! runs it on one tokio task, and publishes exactly one `turn_end` for it,
//! built from its [`TurnOutcome`] by [`end_event`]. [`run_here`] gives a
//! turn the same life on the caller's task (for a caller that only waits
//! for it):
//!
//! - a normal end: the outcome [`super::turn::Turn::run`] returns;
//! - a panic inside the turn: caught on the task; the turn ends `error` with
//!   `error_kind: internal` (its children are cancelled, the store keeps no
//!   record: the turn's state is lost);
//! - a hard abort of the task ([`TurnHandle::abort`]): a guard dropped with
//!   the turn's future ends it `aborted`.
//!
//! Then, in this order: the turn leaves the table; `turn_end` is published;
//! the starter's `on_end` runs (a SubTurn's delivery to its parent, the
//! scheduler's next turn); the [`TurnHandle`]'s outcome is set, so whoever
//! joins the handle sees everything `on_end` did.
//!
//! A turn that stops with its token cancelled (a hard interrupt, a timeout,
//! a panic) first waits, at most [`CHILD_STOP_GRACE`], for the children it
//! started (they are cancelled with it and end `aborted`), then aborts those
//! still running: nothing of a stopped tree runs on detached.
//!
//! What a turn tells whoever runs its session (follow-up turns, SubTurns
//! started and ended, the end of a top-level turn) goes as an [`InternalOp`]
//! on the queue its control was given ([`TurnControl::reporting_to`]), which
//! the scheduler owns and drains; a turn with no queue (see
//! [`super::Agent::run_turn`]) has no one to tell.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::AbortHandle;

use super::control::TurnControl;
use super::turn::{Turn, TurnSpec};
use super::{Agent, TurnOutcome};
use crate::bus::EventBus;
use crate::llm::Usage;
use crate::protocol::{EventBody, TurnEnd, TurnErrorKind, TurnStatus};

/// How long a stopped turn waits for its cancelled children to end before
/// it aborts their tasks.
pub const CHILD_STOP_GRACE: Duration = Duration::from_secs(2);

/// What a turn tells whoever runs its session: the scheduler drains these
/// from one queue, in the order they were sent.
#[derive(Debug)]
pub enum InternalOp {
    /// `content` runs as a turn of its own on `session` (the result of a
    /// `spawn` child whose parent had ended). Sent before the child's
    /// [`InternalOp::SubturnEnded`], so the session never looks idle in
    /// between.
    FollowUp {
        session: String,
        content: String,
    },
    /// A SubTurn of `session` started: the session is not idle until it ends.
    SubturnStarted {
        session: String,
    },
    SubturnEnded {
        session: String,
    },
    /// A top-level turn the scheduler started has ended (its `turn_end` is
    /// published).
    TurnEnded {
        turn: Arc<TurnControl>,
    },
}

/// Where a turn tree sends its [`InternalOp`]s.
pub type OpSender = mpsc::UnboundedSender<InternalOp>;

/// The turns alive now, top-level and SubTurns, by id: what an interrupt
/// naming a turn looks up. Shared by the agent's turns and the scheduler.
#[derive(Debug, Default)]
pub struct TurnTable {
    turns: Mutex<HashMap<String, Arc<TurnControl>>>,
}

impl TurnTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TurnControl>>> {
        // Inserts and removes only: never half-written.
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The control of the live turn `id`.
    pub fn get(&self, id: &str) -> Option<Arc<TurnControl>> {
        self.lock().get(id).cloned()
    }

    /// Turns alive now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&self, turn: Arc<TurnControl>) {
        self.lock().insert(turn.id.clone(), turn);
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
    }
}

/// A spawned turn. Cheap to clone: clones follow the same task.
#[derive(Debug, Clone)]
pub struct TurnHandle {
    id: String,
    abort: AbortHandle,
    outcome: watch::Receiver<Option<TurnOutcome>>,
}

impl TurnHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Stops the turn's task at its next await: the turn ends `aborted`
    /// (its `turn_end` is still published, once).
    pub fn abort(&self) {
        self.abort.abort();
    }

    /// How the turn ended; None while it runs.
    pub fn outcome(&self) -> Option<TurnOutcome> {
        self.outcome.borrow().clone()
    }

    pub fn is_finished(&self) -> bool {
        self.outcome.borrow().is_some()
    }

    /// Waits for the turn's end (and its starter's `on_end`).
    pub async fn join(mut self) -> TurnOutcome {
        match self.outcome.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone().expect("waited for"),
            // The guard always sets the outcome before its sender goes; this
            // only answers a task dropped with its runtime.
            Err(_) => outcome(
                &self.id,
                TurnStatus::Aborted,
                "the host stopped".into(),
                None,
            ),
        }
    }
}

/// What runs once a turn's `turn_end` is published.
pub type OnEnd = Box<dyn FnOnce(&TurnOutcome) + Send>;

/// How a turn is started, besides what it runs.
pub struct Start {
    pub control: Arc<TurnControl>,
    /// A slot to hold while the turn runs (the scheduler's parallel turns),
    /// waited for on the turn's task; a turn stopped while it waits runs at
    /// once (and ends at once, aborted).
    pub slot: Option<Arc<Semaphore>>,
    /// Runs once the turn's `turn_end` is published, however it ended.
    pub on_end: Option<OnEnd>,
}

impl Start {
    pub fn new(control: Arc<TurnControl>) -> Start {
        Start {
            control,
            slot: None,
            on_end: None,
        }
    }
}

/// Runs `input` as the turn of `start.control`, with `spec`, on a task of its
/// own.
pub fn spawn(agent: &Arc<Agent>, start: Start, spec: TurnSpec, input: String) -> TurnHandle {
    let (agent2, control) = (agent.clone(), start.control.clone());
    spawn_future(&agent.turns, &agent.bus, start, move || async move {
        Turn::with_spec(agent2, control, spec).run(&input).await
    })
}

/// Ends the turn of `start.control` in error, with `reason`, before it runs
/// (its agent cannot be built from the configuration), with the life every
/// turn has: one `turn_end`, then its starter's `on_end`.
pub fn fail_to_start(
    agent: &Arc<Agent>,
    start: Start,
    kind: TurnErrorKind,
    reason: String,
) -> TurnHandle {
    let id = start.control.id.clone();
    spawn_future(&agent.turns, &agent.bus, start, move || async move {
        outcome(&id, TurnStatus::Error, reason, Some(kind))
    })
}

/// Runs `input` as the turn of `start.control`, with `spec`, on the caller's
/// task, to its end: the same life as [`spawn`] (the table, the panic
/// guard, one `turn_end`; dropping the returned future ends the turn
/// `aborted`), without a task of its own. For [`super::Agent::run_turn`],
/// whose caller waits for the turn anyway.
pub async fn run_here(
    agent: &Arc<Agent>,
    start: Start,
    spec: TurnSpec,
    input: String,
) -> TurnOutcome {
    let control = start.control.clone();
    let (begun, outcome) = begin(&agent.turns, &agent.bus, start);
    let agent = agent.clone();
    begun
        .drive(move || async move { Turn::with_spec(agent, control, spec).run(&input).await })
        .await;
    let ended = outcome.borrow().clone();
    ended.expect("a driven turn has ended")
}

/// [`spawn`] of any future that yields a turn's outcome: what the turn runs
/// is the only difference.
fn spawn_future<F, Fut>(table: &Arc<TurnTable>, bus: &EventBus, start: Start, run: F) -> TurnHandle
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = TurnOutcome> + Send + 'static,
{
    let id = start.control.id.clone();
    let (begun, outcome) = begin(table, bus, start);
    let task = tokio::spawn(begun.drive(run));
    TurnHandle {
        id,
        abort: task.abort_handle(),
        outcome,
    }
}

/// Registers the turn and readies its one end: what a turn has from the
/// moment its id is handed out.
fn begin(
    table: &Arc<TurnTable>,
    bus: &EventBus,
    start: Start,
) -> (Begun, watch::Receiver<Option<TurnOutcome>>) {
    let Start {
        control,
        slot,
        on_end,
    } = start;
    table.insert(control.clone());
    let (tx, rx) = watch::channel(None);
    let ending = Ending {
        table: table.clone(),
        bus: bus.clone(),
        control,
        on_end,
        tx,
        ended: false,
    };
    (Begun { ending, slot }, rx)
}

/// A registered turn that has not run yet.
struct Begun {
    ending: Ending,
    slot: Option<Arc<Semaphore>>,
}

impl Begun {
    /// Waits for the turn's slot, runs it (a panic inside ends it in error),
    /// stops its children if it was stopped, and ends it. Dropped before
    /// that, the turn ends `aborted`.
    async fn drive<F, Fut>(self, run: F)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = TurnOutcome>,
    {
        let Begun { mut ending, slot } = self;
        let _slot = match slot {
            Some(slots) => tokio::select! {
                biased;
                _ = ending.control.cancelled().cancelled() => None,
                slot = slots.acquire_owned() => slot.ok(),
            },
            None => None,
        };
        // Boxed: a turn waiting for its slot holds this pointer, not the
        // whole state of a running turn.
        let outcome = match AssertUnwindSafe(Box::pin(run())).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(panic) => panicked(&ending.bus, &ending.control, &panic_message(&*panic)),
        };
        if ending.control.cancelled().is_cancelled() {
            stop_children(&ending.control).await;
        }
        ending.end(outcome);
    }
}

/// Waits a little for the (cancelled) children of a stopped turn, then
/// aborts those still running. The children's tasks are held by a
/// [`Stopping`], so they are aborted also when the turn's own task is
/// aborted during the wait (its parent's grace ran out first).
async fn stop_children(control: &TurnControl) {
    let stopping = Stopping {
        turn: &control.id,
        children: control.take_child_tasks(),
    };
    let all =
        futures_util::future::join_all(stopping.children.iter().cloned().map(TurnHandle::join));
    let _ = tokio::time::timeout(CHILD_STOP_GRACE, all).await;
}

/// The tasks of a stopped turn's children, taken from its control: dropped,
/// it aborts those still running.
struct Stopping<'a> {
    turn: &'a str,
    children: Vec<TurnHandle>,
}

impl Drop for Stopping<'_> {
    fn drop(&mut self) {
        for child in self.children.iter().filter(|c| !c.is_finished()) {
            tracing::warn!(turn = %self.turn, child = child.id(), "a stopped turn's child did not end; aborting it");
            child.abort();
        }
    }
}

/// Ends the turn exactly once: on the task, or when its future is dropped
/// before it ended (a hard abort).
struct Ending {
    table: Arc<TurnTable>,
    bus: EventBus,
    control: Arc<TurnControl>,
    on_end: Option<OnEnd>,
    tx: watch::Sender<Option<TurnOutcome>>,
    ended: bool,
}

impl Ending {
    fn end(&mut self, outcome: TurnOutcome) {
        self.ended = true;
        self.table.remove(&self.control.id);
        self.bus.publish(&self.control.scope(), end_event(&outcome));
        if let Some(on_end) = self.on_end.take() {
            on_end(&outcome);
        }
        self.tx.send_replace(Some(outcome));
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        tracing::warn!(turn = %self.control.id, "the turn's task was stopped before the turn ended");
        // Its children go with it; nothing of its tree is delivered.
        self.control.cancelled().cancel();
        self.control.end(&self.bus);
        for child in self.control.take_child_tasks() {
            child.abort();
        }
        let outcome = outcome(
            &self.control.id,
            TurnStatus::Aborted,
            "the turn's task was stopped".into(),
            None,
        );
        self.end(outcome);
    }
}

/// The `turn_end` event of a turn that ended with `outcome`: the only place
/// one is built.
pub fn end_event(outcome: &TurnOutcome) -> EventBody {
    EventBody::TurnEnd(TurnEnd {
        status: outcome.status,
        reason: outcome.reason.clone(),
        error_kind: outcome.error_kind,
        iterations: outcome.iterations,
        usage: outcome.usage,
        answer: outcome.answer.clone(),
    })
}

/// The outcome of a turn that did no work (it never ran, or its state was
/// lost).
pub fn outcome(
    turn_id: &str,
    status: TurnStatus,
    reason: String,
    error_kind: Option<TurnErrorKind>,
) -> TurnOutcome {
    TurnOutcome {
        turn_id: turn_id.to_string(),
        status,
        reason,
        error_kind,
        answer: None,
        iterations: 0,
        usage: Usage::default(),
    }
}

/// A turn that panicked: its children are cancelled and its life ended.
fn panicked(bus: &EventBus, control: &TurnControl, error: &str) -> TurnOutcome {
    tracing::error!(turn = %control.id, "the turn panicked: {error}");
    control.cancelled().cancel();
    control.end(bus);
    outcome(
        &control.id,
        TurnStatus::Error,
        format!("the turn failed inside the host: {error}"),
        Some(TurnErrorKind::Internal),
    )
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::{Delivery, Filter, Received, Subscription};
    use crate::protocol::Event;

    const LIMIT: Duration = Duration::from_secs(10);

    fn setup() -> (Arc<TurnTable>, EventBus, Subscription) {
        let bus = EventBus::new(0);
        let events = bus.subscribe(Filter::default(), Delivery::Lossless);
        (Arc::new(TurnTable::default()), bus, events)
    }

    fn drain(events: &mut Subscription) -> Vec<Arc<Event>> {
        std::iter::from_fn(|| events.try_recv())
            .map(|r| match r {
                Received::Event(e) => e,
                Received::Dropped(n) => panic!("dropped {n}"),
            })
            .collect()
    }

    fn ends(events: &[Arc<Event>]) -> Vec<(String, TurnEnd)> {
        events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::TurnEnd(end) => Some((e.turn_id.clone().unwrap(), end.clone())),
                _ => None,
            })
            .collect()
    }

    fn completed(id: &str) -> TurnOutcome {
        TurnOutcome {
            answer: Some("done".into()),
            iterations: 1,
            ..outcome(id, TurnStatus::Completed, "final_answer".into(), None)
        }
    }

    /// A start whose `on_end` sends the outcome's status on `tx`.
    fn start(control: &Arc<TurnControl>, tx: &mpsc::UnboundedSender<TurnStatus>) -> Start {
        let tx = tx.clone();
        Start {
            on_end: Some(Box::new(move |o: &TurnOutcome| {
                let _ = tx.send(o.status);
            })),
            ..Start::new(control.clone())
        }
    }

    #[tokio::test]
    async fn a_panicking_turn_ends_once_in_error_internal_and_the_next_turn_runs() {
        let (table, bus, mut events) = setup();
        let (tx, mut ended) = mpsc::unbounded_channel();
        let first = Arc::new(TurnControl::new("s", 0, 5));
        let handle = spawn_future(&table, &bus, start(&first, &tx), || async {
            if true {
                panic!("a bug in the turn");
            }
            completed("never")
        });
        let outcome = tokio::time::timeout(LIMIT, handle.join()).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Error);
        assert_eq!(outcome.error_kind, Some(TurnErrorKind::Internal));
        assert_eq!(
            outcome.reason,
            "the turn failed inside the host: a bug in the turn"
        );
        assert_eq!(ended.recv().await, Some(TurnStatus::Error));
        assert!(first.cancelled().is_cancelled());
        assert!(table.is_empty());

        // What the session runs next still runs.
        let second = Arc::new(TurnControl::new("s", 0, 5));
        let id = second.id.clone();
        let handle = spawn_future(&table, &bus, start(&second, &tx), move || async move {
            completed(&id)
        });
        let outcome = tokio::time::timeout(LIMIT, handle.join()).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
        assert_eq!(ended.recv().await, Some(TurnStatus::Completed));

        let ends = ends(&drain(&mut events));
        assert_eq!(ends.len(), 2, "{ends:?}");
        assert_eq!(ends[0].0, first.id);
        assert_eq!(ends[0].1.status, TurnStatus::Error);
        assert_eq!(ends[0].1.error_kind, Some(TurnErrorKind::Internal));
        assert_eq!(ends[1].0, second.id);
        assert_eq!(ends[1].1.status, TurnStatus::Completed);
    }

    #[tokio::test]
    async fn a_hard_abort_of_the_task_ends_the_turn_once_aborted() {
        let (table, bus, mut events) = setup();
        let (tx, mut ended) = mpsc::unbounded_channel();
        let control = Arc::new(TurnControl::new("s", 0, 5));
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let handle = spawn_future(&table, &bus, start(&control, &tx), move || async move {
            let _ = started_tx.send(());
            std::future::pending::<TurnOutcome>().await
        });
        assert!(table.get(handle.id()).is_some());
        tokio::time::timeout(LIMIT, started).await.unwrap().unwrap();
        assert!(handle.outcome().is_none());
        handle.abort();
        let outcome = tokio::time::timeout(LIMIT, handle.clone().join())
            .await
            .unwrap();
        assert_eq!(outcome.status, TurnStatus::Aborted);
        assert_eq!(ended.recv().await, Some(TurnStatus::Aborted));
        assert_eq!(handle.outcome(), Some(outcome));
        assert!(control.cancelled().is_cancelled());
        assert!(table.is_empty());
        let ends = ends(&drain(&mut events));
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert_eq!(ends[0].1.status, TurnStatus::Aborted);
    }

    #[tokio::test]
    async fn a_stopped_turn_aborts_the_children_that_do_not_end() {
        let (table, bus, mut events) = setup();
        let parent = Arc::new(TurnControl::new("s", 0, 5));
        let child = TurnControl::child(&parent, false, 5);
        // A child that ignores its cancellation.
        let child_handle = spawn_future(&table, &bus, Start::new(child.clone()), || {
            std::future::pending::<TurnOutcome>()
        });
        parent.adopt(child_handle.clone());
        let (p, id) = (parent.clone(), parent.id.clone());
        let handle = spawn_future(
            &table,
            &bus,
            Start::new(parent.clone()),
            move || async move {
                p.cancelled().cancel();
                outcome(&id, TurnStatus::Aborted, "interrupted".into(), None)
            },
        );
        let outcome = tokio::time::timeout(LIMIT, handle.join()).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Aborted);
        let child_outcome = tokio::time::timeout(LIMIT, child_handle.join())
            .await
            .unwrap();
        assert_eq!(child_outcome.status, TurnStatus::Aborted);
        assert!(table.is_empty());
        let ends = ends(&drain(&mut events));
        assert_eq!(ends.len(), 2, "{ends:?}");
    }

    #[tokio::test]
    async fn a_stopped_turn_aborted_while_it_waits_for_its_children_still_aborts_them() {
        let (table, bus, _events) = setup();
        let parent = Arc::new(TurnControl::new("s", 0, 5));
        let child = TurnControl::child(&parent, false, 5);
        // A child that ignores its cancellation.
        let child_handle = spawn_future(&table, &bus, Start::new(child.clone()), || {
            std::future::pending::<TurnOutcome>()
        });
        parent.adopt(child_handle.clone());
        let (stopping_tx, stopping) = tokio::sync::oneshot::channel();
        let (p, id) = (parent.clone(), parent.id.clone());
        let handle = spawn_future(
            &table,
            &bus,
            Start::new(parent.clone()),
            move || async move {
                p.cancelled().cancel();
                let _ = stopping_tx.send(());
                outcome(&id, TurnStatus::Aborted, "interrupted".into(), None)
            },
        );
        tokio::time::timeout(LIMIT, stopping)
            .await
            .unwrap()
            .unwrap();
        // On this one thread, the turn's task has gone on to wait for its
        // child (its grace); its own parent's grace runs out first.
        handle.abort();
        let outcome = tokio::time::timeout(LIMIT, handle.join()).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Aborted);
        let child_outcome = tokio::time::timeout(LIMIT, child_handle.join())
            .await
            .expect("the child is aborted with the turn that stopped it");
        assert_eq!(child_outcome.status, TurnStatus::Aborted);
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn a_child_adopted_after_its_parent_stopped_is_aborted_at_once() {
        let (table, bus, _events) = setup();
        let parent = Arc::new(TurnControl::new("s", 0, 5));
        let child = TurnControl::child(&parent, false, 5);
        // The parent stops and takes its children's tasks: none yet.
        parent.cancelled().cancel();
        assert!(parent.take_child_tasks().is_empty());
        // A tool task that spawned the child just before adopts it now. The
        // child ignores its cancellation.
        let child_handle = spawn_future(&table, &bus, Start::new(child.clone()), || {
            std::future::pending::<TurnOutcome>()
        });
        parent.adopt(child_handle.clone());
        let child_outcome = tokio::time::timeout(LIMIT, child_handle.join())
            .await
            .expect("a child adopted by a stopped turn is aborted");
        assert_eq!(child_outcome.status, TurnStatus::Aborted);
        assert!(table.is_empty());
    }

    #[test]
    fn the_end_event_carries_the_outcome() {
        let mut o = completed("t");
        o.error_kind = Some(TurnErrorKind::Internal);
        assert_eq!(
            end_event(&o),
            EventBody::TurnEnd(TurnEnd {
                status: TurnStatus::Completed,
                reason: "final_answer".into(),
                error_kind: Some(TurnErrorKind::Internal),
                iterations: 1,
                usage: Usage::default(),
                answer: Some("done".into()),
            })
        );
    }
}
