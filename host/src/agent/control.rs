//! The control surface of one running turn: its place in the turn tree, its
//! inbox (steering from the user, results from its SubTurns), and the
//! interrupts it has received.
//!
//! The scheduler and the turn's children write (steering, results,
//! interrupts); the turn reads, at its safe points: before each model call it
//! takes its inbox in, before each tool call it asks whether to skip, and
//! when the model gives a final answer it asks whether it may end. All of
//! that happens under one small lock, so a message, a result or an interrupt
//! that races the turn's end is either seen by the turn or refused to the
//! sender (who then queues it as a follow-up, or is told there is no active
//! turn): never accepted and then ignored.
//!
//! Cancellation cascades down the tree: a child's token is a child of its
//! parent's, so a hard interrupt of any turn cancels every descendant. A
//! graceful interrupt, and the end of a turn, ask its non-critical children
//! to wrap up; critical children run on.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::budget::TurnUsage;
use super::task::{CHILD_STOP_GRACE, InternalOp, OpSender, TurnHandle};
use crate::bus::{EventBus, Scope};
use crate::protocol::{EventBody, InterruptMode, InterruptReceived};

/// A new turn id: a UUIDv7, so ids sort by creation time.
pub fn new_turn_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Where a turn is in its life, as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Takes steering; can be interrupted.
    Running,
    /// A graceful interrupt arrived: no new tool calls, one last answer.
    /// Takes no more steering; a hard interrupt still stops it.
    WindingDown,
    /// Decided to end (or hard-interrupted): takes nothing more.
    Ended,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Accepted, not yet taken in, in arrival order.
    steering: Vec<String>,
    /// Results of asynchronous children, not yet taken in.
    results: Vec<ChildResult>,
    graceful: bool,
    /// The turn's last model call has begun: steering would come too late.
    steering_closed: bool,
    children: Vec<Weak<TurnControl>>,
    /// The tasks of the children it started, so a stopped turn stops them
    /// (see [`super::task`]).
    tasks: Vec<TurnHandle>,
    /// The turn has stopped and taken its children's tasks: a child adopted
    /// from now on (spawned by a tool task just before) is aborted at once.
    stopped: bool,
}

/// What an asynchronous SubTurn hands its parent when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildResult {
    pub subturn_id: String,
    /// The message the parent's model reads (it names the child).
    pub content: String,
}

/// Where a turn sits in its session's tree of turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// None for a top-level turn.
    pub parent_id: Option<String>,
    /// The top-level turn of the tree (its own id for a top-level turn).
    pub root_id: String,
    /// 0 for a top-level turn, 1 for its children, and so on.
    pub depth: u32,
}

/// Why the control refused a message or an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The turn takes no more steering (it is winding down or ending).
    NoSteering,
    /// The turn's steering inbox holds its limit.
    Full,
    /// The turn has ended (or is ending): it cannot be interrupted.
    Ended,
}

#[derive(Debug)]
pub struct TurnControl {
    pub id: String,
    pub session: String,
    pub lineage: Lineage,
    /// A critical child survives its parent's graceful end.
    pub critical: bool,
    steering_capacity: usize,
    state: Mutex<State>,
    cancel: CancellationToken,
    /// Fires on a graceful interrupt (and a hard one): what a model call in
    /// flight waits on to stop retrying.
    winding: CancellationToken,
    /// Places for children running at once (the per-parent limit).
    pub(crate) child_slots: Arc<Semaphore>,
    /// Tokens used, and the SubTurns its tree has started.
    pub(crate) usage: TurnUsage,
    /// The tasks of its tool calls: a stopped turn ends only after the
    /// aborted ones are gone, so that nothing of a call (its approval's
    /// decision, its events) comes after the turn's end.
    pub(crate) calls: TaskTracker,
    /// Where the turn tells whoever runs its session about follow-ups and
    /// SubTurns (its children inherit it); None: no one runs it.
    ops: Option<OpSender>,
}

impl TurnControl {
    /// The control of a new top-level turn with a fresh id.
    pub fn new(session: &str, steering_capacity: usize, max_children: usize) -> TurnControl {
        TurnControl::with_id(new_turn_id(), session, steering_capacity, max_children)
    }

    /// The control of a new top-level turn whose id was handed out before
    /// (to the sender of a queued message).
    pub fn with_id(
        id: String,
        session: &str,
        steering_capacity: usize,
        max_children: usize,
    ) -> TurnControl {
        TurnControl {
            lineage: Lineage {
                parent_id: None,
                root_id: id.clone(),
                depth: 0,
            },
            id,
            session: session.to_string(),
            critical: false,
            steering_capacity,
            state: Mutex::new(State {
                phase: Phase::Running,
                steering: Vec::new(),
                results: Vec::new(),
                graceful: false,
                steering_closed: false,
                children: Vec::new(),
                tasks: Vec::new(),
                stopped: false,
            }),
            cancel: CancellationToken::new(),
            winding: CancellationToken::new(),
            child_slots: Arc::new(Semaphore::new(max_children)),
            usage: TurnUsage::default(),
            calls: TaskTracker::new(),
            ops: None,
        }
    }

    /// The control, telling `ops` (the scheduler's queue) about follow-ups
    /// and SubTurns of its tree.
    pub fn reporting_to(mut self, ops: OpSender) -> TurnControl {
        self.ops = Some(ops);
        self
    }

    /// Whether this turn's tree reports to `ops`.
    pub(crate) fn reports_to(&self, ops: &OpSender) -> bool {
        self.ops.as_ref().is_some_and(|o| o.same_channel(ops))
    }

    /// Waits, at most [`CHILD_STOP_GRACE`], until the tasks of its tool calls
    /// are gone. An abort drops a call at its next yield point, which can
    /// come after the turn itself stopped waiting for it.
    pub(crate) async fn calls_gone(&self) {
        self.calls.close();
        if self.calls.is_empty() {
            return;
        }
        if tokio::time::timeout(CHILD_STOP_GRACE, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!(turn = %self.id, "a stopped turn's tool call did not end in time");
        }
    }

    /// Sends `op` to whoever runs the session; gives it back if no one does
    /// (or they are gone).
    pub(crate) fn report(&self, op: InternalOp) -> Result<(), InternalOp> {
        match &self.ops {
            Some(ops) => ops.send(op).map_err(|e| e.0),
            None => Err(op),
        }
    }

    /// The control of a child of `parent`: same session, one level deeper,
    /// cancelled with it. Users steer top-level turns only.
    pub fn child(parent: &TurnControl, critical: bool, max_children: usize) -> Arc<TurnControl> {
        let mut control = TurnControl::new(&parent.session, 0, max_children);
        control.lineage = Lineage {
            parent_id: Some(parent.id.clone()),
            root_id: parent.lineage.root_id.clone(),
            depth: parent.lineage.depth + 1,
        };
        control.critical = critical;
        control.cancel = parent.cancel.child_token();
        control.usage = TurnUsage::in_tree(parent.usage.tree.clone());
        control.ops = parent.ops.clone();
        let control = Arc::new(control);
        let mut state = parent.state();
        state.children.retain(|c| c.strong_count() > 0);
        state.children.push(Arc::downgrade(&control));
        control
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The lock is never held across a panic point that leaves the state
        // half-written, so a poisoned lock's data is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn scope(&self) -> Scope {
        Scope {
            session: Some(self.session.clone()),
            turn_id: Some(self.id.clone()),
            parent_turn_id: self.lineage.parent_id.clone(),
        }
    }

    /// Where the turn is in its life: `running`, `winding_down` (a graceful
    /// interrupt arrived) or `ending`.
    pub fn phase(&self) -> &'static str {
        match self.state().phase {
            Phase::Running => "running",
            Phase::WindingDown => "winding_down",
            Phase::Ended => "ending",
        }
    }

    /// The children still running.
    pub fn children(&self) -> Vec<Arc<TurnControl>> {
        self.state()
            .children
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Keeps the task of a child it started, until the child ends; aborts
    /// it at once if the turn has already stopped (its children's tasks
    /// taken): no one else would.
    pub(crate) fn adopt(&self, child: TurnHandle) {
        let mut state = self.state();
        if state.stopped {
            drop(state);
            tracing::warn!(turn = %self.id, child = child.id(), "a child started as its turn stopped; aborting it");
            child.abort();
            return;
        }
        state.tasks.retain(|t| !t.is_finished());
        state.tasks.push(child);
    }

    /// The tasks of its children still running, taken (when it stops, its
    /// token cancelled); a child adopted later is aborted at once.
    pub(crate) fn take_child_tasks(&self) -> Vec<TurnHandle> {
        let mut state = self.state();
        state.stopped = true;
        let mut tasks = std::mem::take(&mut state.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks
    }

    /// Asks the non-critical children to wrap up (a graceful interrupt).
    fn wind_down_children(&self, bus: &EventBus) {
        for child in self.children() {
            if !child.critical {
                let _ = child.interrupt(InterruptMode::Graceful, bus, Vec::new);
            }
        }
    }

    /// Hands the turn a child's result, to be taken in before its next model
    /// call; gives it back when the turn has ended.
    pub fn deliver(&self, result: ChildResult) -> Result<(), ChildResult> {
        let mut state = self.state();
        if state.phase == Phase::Ended {
            return Err(result);
        }
        state.results.push(result);
        Ok(())
    }

    /// Fires on a hard interrupt.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Fires when the turn starts winding down (a graceful interrupt) or is
    /// stopped (a hard one).
    pub(crate) fn winding(&self) -> &CancellationToken {
        &self.winding
    }

    /// Accepts a steering message, to be taken in before the next model call.
    pub fn steer(&self, content: &str) -> Result<(), Closed> {
        let mut state = self.state();
        if state.phase != Phase::Running || state.steering_closed {
            return Err(Closed::NoSteering);
        }
        if state.steering.len() >= self.steering_capacity {
            return Err(Closed::Full);
        }
        state.steering.push(content.to_string());
        Ok(())
    }

    /// Delivers an interrupt and publishes `interrupt_received` (before the
    /// turn can act on it). A hard interrupt ends the turn's life at once and
    /// returns the steering it drops; `queued` are the session's follow-ups
    /// the caller dropped with it, reported in the same event.
    pub fn interrupt(
        &self,
        mode: InterruptMode,
        bus: &EventBus,
        queued: impl FnOnce() -> Vec<String>,
    ) -> Result<Vec<String>, Closed> {
        let mut state = self.state();
        if state.phase == Phase::Ended {
            return Err(Closed::Ended);
        }
        if mode == InterruptMode::Graceful && state.phase == Phase::WindingDown {
            // Already winding down: nothing more to do or say.
            return Ok(Vec::new());
        }
        let discarded = match mode {
            InterruptMode::Graceful => {
                state.graceful = true;
                state.phase = Phase::WindingDown;
                Vec::new()
            }
            InterruptMode::Hard => {
                state.phase = Phase::Ended;
                let mut discarded = std::mem::take(&mut state.steering);
                discarded.extend(queued());
                discarded
            }
        };
        bus.publish(
            &self.scope(),
            EventBody::InterruptReceived(InterruptReceived {
                mode,
                discarded: discarded.clone(),
            }),
        );
        self.winding.cancel();
        match mode {
            InterruptMode::Hard => self.cancel.cancel(),
            InterruptMode::Graceful => {
                drop(state);
                self.wind_down_children(bus);
            }
        }
        Ok(discarded)
    }

    /// What to put before the next model call: children's results, and the
    /// user's steering (none once a graceful interrupt arrived: those wait
    /// for a turn of their own).
    pub(crate) fn take_inbox(&self) -> (Vec<ChildResult>, Vec<String>) {
        let mut state = self.state();
        let results = std::mem::take(&mut state.results);
        let steering = if state.phase == Phase::Running {
            std::mem::take(&mut state.steering)
        } else {
            Vec::new()
        };
        (results, steering)
    }

    /// The turn's last model call begins: later messages wait for a turn of
    /// their own.
    pub(crate) fn close_steering(&self) {
        self.state().steering_closed = true;
    }

    /// Whether the turn should make its next model call the last, without
    /// tools.
    pub(crate) fn winding_down(&self) -> bool {
        self.state().phase != Phase::Running
    }

    /// Why a tool call that has not started yet should not start: the turn
    /// was interrupted, or the user said something new.
    pub(crate) fn skip_reason(&self) -> Option<&'static str> {
        let state = self.state();
        if state.phase != Phase::Running {
            Some("the user interrupted the turn; this call was not run")
        } else if !state.steering.is_empty() {
            Some("the user sent a new message; this call was not run")
        } else {
            None
        }
    }

    /// Asked when the model gave a final answer. `false`: steering or a
    /// child's result is pending, so the turn goes on with it (unless
    /// `may_continue` is false: the turn is at its limit). `true`: the turn
    /// ends; from here it takes nothing more.
    pub(crate) fn try_end(&self, may_continue: bool) -> bool {
        let mut state = self.state();
        let pending = !state.results.is_empty()
            || (state.phase == Phase::Running && !state.steering.is_empty());
        if may_continue && state.phase != Phase::Ended && pending {
            return false;
        }
        state.phase = Phase::Ended;
        true
    }

    /// Whether a graceful interrupt reached the turn.
    pub(crate) fn interrupted_gracefully(&self) -> bool {
        self.state().graceful
    }

    /// Ends the turn's life: from here it takes no steering, result or
    /// interrupt. Its non-critical children are asked to wrap up; returns
    /// the results it never took in, for the caller to deliver elsewhere.
    pub(crate) fn end(&self, bus: &EventBus) -> Vec<ChildResult> {
        let undelivered = {
            let mut state = self.state();
            state.phase = Phase::Ended;
            std::mem::take(&mut state.results)
        };
        if !self.cancel.is_cancelled() {
            // (A hard interrupt has already cancelled them.)
            self.wind_down_children(bus);
        }
        undelivered
    }

    /// The steering an ended turn never took in, for the scheduler to run as
    /// follow-ups.
    pub fn leftover(&self) -> Vec<String> {
        std::mem::take(&mut self.state().steering)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::{Delivery, Filter, Received};

    fn control() -> (TurnControl, EventBus) {
        (TurnControl::new("s", 2, 5), EventBus::new(0))
    }

    #[test]
    fn steering_is_bounded_and_taken_in_order() {
        let (turn, _) = control();
        turn.steer("one").unwrap();
        turn.steer("two").unwrap();
        assert_eq!(turn.steer("three"), Err(Closed::Full));
        assert_eq!(
            turn.skip_reason(),
            Some("the user sent a new message; this call was not run")
        );
        assert_eq!(
            turn.take_inbox(),
            (vec![], vec!["one".into(), "two".into()])
        );
        assert_eq!(turn.skip_reason(), None);
    }

    #[test]
    fn a_final_answer_with_steering_pending_goes_on_unless_at_the_limit() {
        let (turn, _) = control();
        turn.steer("more").unwrap();
        assert!(!turn.try_end(true));
        assert!(turn.try_end(false));
        assert_eq!(turn.steer("late"), Err(Closed::NoSteering));
        assert_eq!(turn.leftover(), ["more"]);
    }

    #[test]
    fn a_graceful_interrupt_stops_steering_and_tools_but_not_a_hard_one() {
        let (turn, bus) = control();
        let mut events = bus.subscribe(Filter::default(), Delivery::Lossless);
        turn.steer("pending").unwrap();
        let discarded = turn.interrupt(InterruptMode::Graceful, &bus, Vec::new);
        assert_eq!(discarded, Ok(vec![]));
        assert!(turn.winding_down() && turn.interrupted_gracefully());
        assert_eq!(turn.take_inbox(), (vec![], vec![]));
        assert_eq!(turn.steer("late"), Err(Closed::NoSteering));
        assert_eq!(
            turn.skip_reason(),
            Some("the user interrupted the turn; this call was not run")
        );
        assert!(!turn.cancelled().is_cancelled());

        let discarded = turn.interrupt(InterruptMode::Hard, &bus, || vec!["queued".into()]);
        assert_eq!(discarded, Ok(vec!["pending".into(), "queued".into()]));
        assert!(turn.cancelled().is_cancelled());
        assert_eq!(
            turn.interrupt(InterruptMode::Hard, &bus, Vec::new),
            Err(Closed::Ended)
        );
        let modes: Vec<_> = std::iter::from_fn(|| events.try_recv())
            .map(|r| match r {
                Received::Event(e) => e.body.clone(),
                Received::Dropped(n) => panic!("dropped {n}"),
            })
            .collect();
        assert_eq!(
            modes,
            [
                EventBody::InterruptReceived(InterruptReceived {
                    mode: InterruptMode::Graceful,
                    discarded: vec![]
                }),
                EventBody::InterruptReceived(InterruptReceived {
                    mode: InterruptMode::Hard,
                    discarded: vec!["pending".into(), "queued".into()]
                }),
            ]
        );
    }

    #[test]
    fn an_ended_turn_refuses_interrupts() {
        let (turn, bus) = control();
        assert!(turn.try_end(true));
        assert_eq!(
            turn.interrupt(InterruptMode::Graceful, &bus, Vec::new),
            Err(Closed::Ended)
        );
    }
}
