//! The scheduler: many sessions at once, one turn at a time per session.
//!
//! Every front end submits [`Op`]s here, through [`crate::core::Core`]. The scheduler keeps a table of
//! sessions (each with its policy, its running turn and its queue of
//! follow-ups) and of running turns by id, so every steer and interrupt
//! reaches the turn it names, never "whichever turn is active".
//!
//! - A session's turns run strictly in arrival order, one at a time: the
//!   first message of an idle session starts a task that runs its turns until
//!   the queue is empty.
//! - Different sessions run in parallel, at most
//!   [`SchedulerConfig::max_parallel`] turns at once; the others wait for a
//!   slot, first come first served.
//! - A message for a busy session steers its running turn (policy `steer`,
//!   the default) or waits as a follow-up turn (policy `follow_up`). Steering
//!   a turn that is already ending, or winding down after a graceful
//!   interrupt, queues the message instead. Queues are bounded; a full one
//!   refuses the message, so nothing is dropped silently.
//! - Steering a turn never took in (it ended at its iteration limit, or
//!   failed) runs as follow-ups, first in the queue.
//! - A hard interrupt drops the session's queued follow-ups with the turn and
//!   says which in `interrupt_received`.
//!
//! Lock order: the session table, then a session's state, then a turn's
//! control, then the turn table. No lock is held across an await.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, Semaphore};

use crate::agent::control::{Closed, TurnControl, new_turn_id};
use crate::agent::turn::Turn;
use crate::agent::{Agent, SessionHooks};
use crate::bus::Scope;
use crate::llm::{Message, Usage};
use crate::protocol::{
    Accepted, EventBody, FollowUpQueued, InterruptMode, Op, Policy, Refused, Target, TurnEnd,
    TurnStatus,
};
use crate::store::TurnRecord;

/// Limits of the scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Turns that run at the same time, across sessions.
    pub max_parallel: usize,
    /// Follow-up messages a session may have waiting.
    pub queue_capacity: usize,
    /// Steering messages a running turn may have waiting.
    pub steering_capacity: usize,
}

pub const DEFAULT_MAX_PARALLEL: usize = 256;
pub const DEFAULT_QUEUE_CAPACITY: usize = 64;

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_parallel: DEFAULT_MAX_PARALLEL,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            steering_capacity: DEFAULT_QUEUE_CAPACITY,
        }
    }
}

/// Runs the turns of every session. Cheap to clone: clones share the tables.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Arc<Agent>,
    config: SchedulerConfig,
    slots: Semaphore,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    turns: Mutex<HashMap<String, Arc<TurnControl>>>,
    /// Sessions that are not idle.
    busy: AtomicUsize,
    /// Notified whenever a session becomes idle.
    went_idle: Notify,
    /// Set by [`Scheduler::close`]: no new turn starts.
    closed: AtomicBool,
}

struct Session {
    key: String,
    state: Mutex<SessionState>,
}

#[derive(Default)]
struct SessionState {
    policy: Policy,
    /// A task runs this session's turns.
    busy: bool,
    /// SubTurns of this session still running (their results may start
    /// turns).
    subturns: usize,
    /// The turn that takes steering and interrupts, until it ends.
    active: Option<Arc<TurnControl>>,
    /// Follow-up messages, each a turn of its own, in order.
    queue: VecDeque<Queued>,
}

/// A follow-up message and the id its turn will have.
struct Queued {
    turn_id: String,
    content: String,
}

/// A running turn and its running SubTurns, as [`Scheduler::live`]
/// shows them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LiveTurn {
    pub turn_id: String,
    pub depth: u32,
    pub critical: bool,
    /// `running`, `winding_down` or `ending`.
    pub phase: &'static str,
    pub children: Vec<LiveTurn>,
}

impl LiveTurn {
    fn of(turn: &TurnControl) -> LiveTurn {
        LiveTurn {
            turn_id: turn.id.clone(),
            depth: turn.lineage.depth,
            critical: turn.critical,
            phase: turn.phase(),
            children: turn.children().iter().map(|c| LiveTurn::of(c)).collect(),
        }
    }
}

/// What a session is doing now.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LiveSession {
    /// The running turn and its SubTurns.
    pub active: Option<LiveTurn>,
    /// Follow-up turns waiting, in order: (turn id, message).
    pub queued: Vec<(String, String)>,
    pub policy: Policy,
    /// A turn running or waiting, or a SubTurn running.
    pub busy: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent before any point
    // that could panic, so a poisoned lock's data is still usable.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Session {
    fn state(&self) -> MutexGuard<'_, SessionState> {
        lock(&self.state)
    }
}

impl SessionState {
    /// No turn running or waiting, and no SubTurn running.
    fn idle(&self) -> bool {
        !self.busy && self.subturns == 0
    }
}

impl Scheduler {
    /// Runs `agent`'s turns from now on, and the follow-up turns it asks
    /// for (results of SubTurns whose parent had ended). Must be called
    /// within a tokio runtime.
    pub fn new(agent: Arc<Agent>, config: SchedulerConfig) -> Scheduler {
        let inner = Arc::new(Inner {
            slots: Semaphore::new(config.max_parallel.max(1)),
            agent,
            config,
            sessions: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
            busy: AtomicUsize::new(0),
            went_idle: Notify::new(),
            closed: AtomicBool::new(false),
        });
        inner
            .agent
            .set_session_hooks(Arc::new(Hooks(Arc::downgrade(&inner))));
        Scheduler { inner }
    }

    pub fn agent(&self) -> &Arc<Agent> {
        &self.inner.agent
    }

    /// Does what `op` asks, at once: a turn it starts runs on its own task.
    /// [`Op::ImportHistory`] writes the session store: it is refused here,
    /// and done by [`Scheduler::import_history`] (which
    /// [`crate::core::Core::submit`] calls).
    pub fn submit(&self, op: Op) -> Result<Accepted, Refused> {
        match op {
            Op::ImportHistory { .. } => Err(Refused::Invalid(
                "importing history writes the session store: submit it through the core \
                 (Core::submit), which waits for the store"
                    .into(),
            )),
            Op::UserMessage { session, content } => self.inner.message(&session, content, false),
            Op::Steer { session, content } => self.inner.message(&session, content, true),
            Op::Interrupt { target, mode } => self.inner.interrupt(&target, mode),
            Op::SetPolicy { session, policy } => {
                self.inner.session(&session)?.state().policy = policy;
                Ok(Accepted::PolicySet)
            }
        }
    }

    /// [`Op::ImportHistory`]: `messages` become the history of `session`,
    /// which must have none (no message, no recorded turn) and no turn
    /// running or waiting. They are recorded as one turn, `imported`, that
    /// runs nothing. While the store is written the session counts as busy:
    /// a message that arrives meanwhile waits as a follow-up and runs once
    /// the import is done, so it sees the imported history.
    pub async fn import_history(
        &self,
        session: &str,
        messages: Vec<Message>,
    ) -> Result<Accepted, Refused> {
        if messages.is_empty() {
            return Err(Refused::Invalid(format!(
                "no messages to import into session '{session}'"
            )));
        }
        let reserved = self.inner.reserve_import(session)?;
        let store = &self.inner.agent.store;
        let failed = |e: anyhow::Error| Refused::Failed(format!("{e:#}"));
        let history = store.history(session).await.map_err(failed)?;
        let turns = store.turns(session).await.map_err(failed)?;
        if !history.is_empty() || !turns.is_empty() {
            return Err(Refused::Invalid(format!(
                "session '{session}' already has history ({} messages, {} recorded turns); \
                 history can only be imported into a new session",
                history.len(),
                turns.len()
            )));
        }
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let record = TurnRecord {
            id: new_turn_id(),
            session: session.to_string(),
            parent_turn_id: None,
            input: "(imported history)".into(),
            status: TurnStatus::Completed,
            reason: "imported".into(),
            iterations: 0,
            usage: Usage::default(),
            started_at: now.clone(),
            ended_at: now,
        };
        store
            .commit_turn(&record, &messages)
            .await
            .map_err(failed)?;
        drop(reserved);
        Ok(Accepted::Imported {
            turn_id: record.id,
            messages: messages.len(),
        })
    }

    /// The id of the turn running on `session` (while it can still be
    /// steered or interrupted).
    pub fn active_turn(&self, session: &str) -> Option<String> {
        let session = lock(&self.inner.sessions).get(session).cloned()?;
        let state = session.state();
        state.active.as_ref().map(|turn| turn.id.clone())
    }

    /// What `session` is doing now; None for a session the scheduler has
    /// never seen.
    pub fn live(&self, session: &str) -> Option<LiveSession> {
        let session = lock(&self.inner.sessions).get(session).cloned()?;
        let state = session.state();
        Some(LiveSession {
            active: state.active.as_deref().map(LiveTurn::of),
            queued: state
                .queue
                .iter()
                .map(|q| (q.turn_id.clone(), q.content.clone()))
                .collect(),
            policy: state.policy,
            busy: !state.idle(),
        })
    }

    /// Sessions with a turn running or waiting, or a SubTurn running.
    pub fn busy_sessions(&self) -> usize {
        self.inner.busy.load(Ordering::SeqCst)
    }

    /// Starts no new turn from now on: messages are refused, and the
    /// follow-ups still queued when a turn ends are dropped (and logged).
    /// Running turns go on; interrupt them with [`Scheduler::interrupt_all`].
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
    }

    /// Whether [`Scheduler::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// The refusal a message gets once [`Scheduler::close`] was called.
    pub fn refuse_if_closed(&self) -> Result<(), Refused> {
        self.inner.refuse_if_closed()
    }

    /// Interrupts every running turn; returns how many were reached.
    pub fn interrupt_all(&self, mode: InterruptMode) -> usize {
        let keys: Vec<String> = lock(&self.inner.sessions).keys().cloned().collect();
        keys.into_iter()
            .filter(|key| {
                self.inner
                    .interrupt(&Target::Session(key.clone()), mode)
                    .is_ok()
            })
            .count()
    }

    /// Whether `session` has a turn running or waiting, or a SubTurn
    /// running.
    pub fn is_busy(&self, session: &str) -> bool {
        lock(&self.inner.sessions)
            .get(session)
            .is_some_and(|s| !s.state().idle())
    }

    /// Waits until `session` has no turn running or waiting and no SubTurn
    /// running.
    pub async fn until_idle(&self, session: &str) {
        self.wait_for(|| !self.is_busy(session)).await
    }

    /// Waits until every session is idle.
    pub async fn until_all_idle(&self) {
        self.wait_for(|| self.inner.busy.load(Ordering::SeqCst) == 0)
            .await
    }

    async fn wait_for(&self, done: impl Fn() -> bool) {
        loop {
            let notified = self.inner.went_idle.notified();
            tokio::pin!(notified);
            // Registered before the check, so an idle transition between the
            // check and the wait is not missed.
            notified.as_mut().enable();
            if done() {
                return;
            }
            notified.await;
        }
    }
}

impl Inner {
    /// The session named `key`, created on first use.
    fn session(&self, key: &str) -> Result<Arc<Session>, Refused> {
        if key.trim().is_empty() {
            return Err(Refused::Invalid(
                "the session key is empty; name the session".into(),
            ));
        }
        let mut sessions = lock(&self.sessions);
        Ok(sessions
            .entry(key.to_string())
            .or_insert_with(|| {
                Arc::new(Session {
                    key: key.to_string(),
                    state: Mutex::default(),
                })
            })
            .clone())
    }

    /// A user message: steers the running turn, queues a follow-up or starts
    /// a turn. `steer` overrides a `follow_up` policy.
    fn message(
        self: &Arc<Self>,
        key: &str,
        content: String,
        steer: bool,
    ) -> Result<Accepted, Refused> {
        let session = self.session(key)?;
        let mut state = session.state();
        // Checked under the session's lock, which shutdown's interrupts
        // take too: a turn started here is one they reach or wait for.
        self.refuse_if_closed()?;
        if let Some(turn) = &state.active
            && (steer || state.policy == Policy::Steer)
        {
            match turn.steer(&content) {
                Ok(()) => {
                    return Ok(Accepted::Steered {
                        turn_id: turn.id.clone(),
                    });
                }
                Err(Closed::Full) => {
                    return Err(Refused::QueueFull(format!(
                        "the turn running on session '{key}' already has {} steering messages \
                         waiting, its limit; send again once it has taken them in",
                        self.config.steering_capacity
                    )));
                }
                // Ending or winding down: the message waits for a turn of
                // its own.
                Err(Closed::NoSteering | Closed::Ended) => {}
            }
        }
        if state.busy {
            if state.queue.len() >= self.config.queue_capacity {
                return Err(Refused::QueueFull(format!(
                    "session '{key}' already has {} follow-up messages queued, its limit; \
                     send again when one has run",
                    self.config.queue_capacity
                )));
            }
            let (turn_id, position) = self.enqueue(&session, &mut state, content);
            return Ok(Accepted::Queued { turn_id, position });
        }
        let turn_id = self.start(session.clone(), &mut state, content);
        Ok(Accepted::Started { turn_id })
    }

    /// Marks `key` busy for an import: refused if the host is closed or the
    /// session has a turn running or waiting (or a SubTurn running). The
    /// session is busy until the returned guard is dropped.
    fn reserve_import(self: &Arc<Self>, key: &str) -> Result<ImportGuard, Refused> {
        let session = self.session(key)?;
        let mut state = session.state();
        self.refuse_if_closed()?;
        if !state.idle() {
            return Err(Refused::Invalid(format!(
                "session '{key}' has a turn running or waiting; history can only be imported \
                 into a new session"
            )));
        }
        state.busy = true;
        self.track(true, &state);
        drop(state);
        Ok(ImportGuard {
            inner: self.clone(),
            session,
        })
    }

    /// An import is over (done, refused or dropped): the messages that
    /// arrived meanwhile run, in order; else the session is idle.
    fn end_import(self: &Arc<Self>, session: &Arc<Session>) {
        let mut state = session.state();
        if self.closed.load(Ordering::SeqCst) {
            let dropped: Vec<Queued> = state.queue.drain(..).collect();
            self.not_run(session, dropped, "the host shut down before it ran");
        }
        match state.queue.pop_front() {
            Some(next) => {
                let turn = self.new_turn(session, &mut state, next.turn_id);
                tokio::spawn(self.clone().drive(session.clone(), turn, next.content));
            }
            None => {
                state.busy = false;
                self.track(false, &state);
            }
        }
    }

    fn refuse_if_closed(&self) -> Result<(), Refused> {
        match self.closed.load(Ordering::SeqCst) {
            true => Err(Refused::Closed(
                "the host is shutting down and takes no new messages".into(),
            )),
            false => Ok(()),
        }
    }

    /// A message that runs as a turn of its own, whatever the session's
    /// policy and queue limit (it was accepted elsewhere: a SubTurn's
    /// result).
    fn follow_up(self: &Arc<Self>, key: &str, content: String) {
        let Ok(session) = self.session(key) else {
            return;
        };
        let mut state = session.state();
        if self.closed.load(Ordering::SeqCst) {
            tracing::warn!(
                session = key,
                "the host is shutting down; follow-up not run: {content}"
            );
            return;
        }
        if state.busy {
            self.enqueue(&session, &mut state, content);
            return;
        }
        self.start(session.clone(), &mut state, content);
    }

    /// Queues `content` last as a follow-up turn; its turn id and position.
    fn enqueue(
        &self,
        session: &Session,
        state: &mut SessionState,
        content: String,
    ) -> (String, usize) {
        let turn_id = new_turn_id();
        state.queue.push_back(Queued {
            turn_id: turn_id.clone(),
            content: content.clone(),
        });
        let position = state.queue.len();
        self.queued(session, &turn_id, content, position);
        (turn_id, position)
    }

    /// `state` changed from `was_idle`: keeps the count of busy sessions,
    /// and wakes those waiting for idleness.
    fn track(&self, was_idle: bool, state: &SessionState) {
        match (was_idle, state.idle()) {
            (true, false) => {
                self.busy.fetch_add(1, Ordering::SeqCst);
            }
            (false, true) => {
                self.busy.fetch_sub(1, Ordering::SeqCst);
                self.went_idle.notify_waiters();
            }
            _ => {}
        }
    }

    fn subturns_changed(&self, key: &str, started: bool) {
        let Ok(session) = self.session(key) else {
            return;
        };
        let mut state = session.state();
        let was_idle = state.idle();
        if started {
            state.subturns += 1;
        } else {
            state.subturns = state.subturns.saturating_sub(1);
        }
        self.track(was_idle, &state);
    }

    /// Starts a turn on a session with none running.
    fn start(
        self: &Arc<Self>,
        session: Arc<Session>,
        state: &mut SessionState,
        input: String,
    ) -> String {
        let was_idle = state.idle();
        state.busy = true;
        self.track(was_idle, state);
        let turn = self.new_turn(&session, state, new_turn_id());
        let turn_id = turn.id.clone();
        tokio::spawn(self.clone().drive(session, turn, input));
        turn_id
    }

    /// Ends the turns of follow-ups dropped before they ran: each id handed
    /// out gets its `turn_end` (`aborted`, `not run: REASON`), so whoever
    /// waits for it is answered.
    fn not_run(&self, session: &Session, dropped: Vec<Queued>, reason: &str) {
        for q in dropped {
            let scope = Scope {
                session: Some(session.key.clone()),
                turn_id: Some(q.turn_id),
                parent_turn_id: None,
            };
            let end = EventBody::TurnEnd(TurnEnd {
                status: crate::protocol::TurnStatus::Aborted,
                reason: format!("not run: {reason}"),
                error_kind: None,
                iterations: 0,
                usage: crate::llm::Usage::default(),
                answer: None,
            });
            self.agent.bus.publish(&scope, end);
        }
    }

    /// Publishes `follow_up_queued`, with the id the turn will have.
    fn queued(&self, session: &Session, turn_id: &str, content: String, position: usize) {
        let scope = Scope {
            session: Some(session.key.clone()),
            turn_id: Some(turn_id.to_string()),
            parent_turn_id: None,
        };
        self.agent.bus.publish(
            &scope,
            EventBody::FollowUpQueued(FollowUpQueued { content, position }),
        );
    }

    /// Registers the session's next turn (it takes steering and interrupts
    /// from now on, even while it waits for a slot).
    fn new_turn(
        &self,
        session: &Session,
        state: &mut SessionState,
        id: String,
    ) -> Arc<TurnControl> {
        let turn = Arc::new(TurnControl::with_id(
            id,
            &session.key,
            self.config.steering_capacity,
            self.agent.config.subturns.per_parent,
        ));
        state.active = Some(turn.clone());
        lock(&self.turns).insert(turn.id.clone(), turn.clone());
        turn
    }

    /// Runs the session's turns, one after another, until its queue is empty.
    async fn drive(
        self: Arc<Self>,
        session: Arc<Session>,
        mut turn: Arc<TurnControl>,
        mut input: String,
    ) {
        loop {
            {
                // A turn stopped while it waits for a slot runs at once (and
                // ends at once, aborted).
                let _slot = tokio::select! {
                    slot = self.slots.acquire() => Some(slot.expect("never closed")),
                    _ = turn.cancelled().cancelled() => None,
                };
                self.run(&turn, &input).await;
            }
            lock(&self.turns).remove(&turn.id);
            let mut state = session.state();
            // Steering the turn never took in runs next, in order.
            for (i, content) in turn.leftover().into_iter().enumerate() {
                let turn_id = new_turn_id();
                self.queued(&session, &turn_id, content.clone(), i + 1);
                state.queue.insert(i, Queued { turn_id, content });
            }
            state.active = None;
            if self.closed.load(Ordering::SeqCst) {
                let dropped: Vec<Queued> = state.queue.drain(..).collect();
                for q in &dropped {
                    tracing::warn!(
                        session = session.key,
                        turn_id = q.turn_id,
                        "the host is shutting down; follow-up not run: {}",
                        q.content
                    );
                }
                self.not_run(&session, dropped, "the host shut down before it ran");
            }
            let Some(next) = state.queue.pop_front() else {
                state.busy = false;
                self.track(false, &state);
                return;
            };
            turn = self.new_turn(&session, &mut state, next.turn_id);
            input = next.content;
        }
    }

    /// Runs one turn on a task of its own, so a panic inside it ends the turn
    /// in error instead of stopping the session.
    async fn run(&self, turn: &Arc<TurnControl>, input: &str) {
        let agent = self.agent.clone();
        let (control, text) = (turn.clone(), input.to_string());
        let task = tokio::spawn(async move { Turn::new(agent, control).run(&text).await });
        if let Err(e) = task.await {
            crate::agent::turn::panicked(&self.agent, turn, &e.to_string());
        }
    }

    fn interrupt(&self, target: &Target, mode: InterruptMode) -> Result<Accepted, Refused> {
        let no_active = || {
            Refused::NoActiveTurn(match target {
                Target::Session(key) => format!("no active turn on session '{key}'"),
                Target::Turn(id) => {
                    format!("no active turn with id '{id}': it has ended, or never existed")
                }
            })
        };
        let (session, turn) = match target {
            Target::Session(key) => {
                let session = lock(&self.sessions)
                    .get(key)
                    .cloned()
                    .ok_or_else(no_active)?;
                let turn = session.state().active.clone().ok_or_else(no_active)?;
                (session, turn)
            }
            Target::Turn(id) => {
                let turn = lock(&self.turns).get(id).cloned().ok_or_else(no_active)?;
                let session = lock(&self.sessions)
                    .get(&turn.session)
                    .cloned()
                    .ok_or_else(no_active)?;
                (session, turn)
            }
        };
        let mut state = session.state();
        if !state.active.as_ref().is_some_and(|a| Arc::ptr_eq(a, &turn)) {
            return Err(no_active());
        }
        let mut dropped = Vec::new();
        let discarded = turn
            .interrupt(mode, &self.agent.bus, || {
                dropped = state.queue.drain(..).collect();
                dropped.iter().map(|q| q.content.clone()).collect()
            })
            .map_err(|_| no_active())?;
        let reason = format!("a hard interrupt of turn {} discarded it", turn.id);
        self.not_run(&session, dropped, &reason);
        Ok(Accepted::Interrupted {
            turn_id: turn.id.clone(),
            discarded,
        })
    }
}

/// Holds a session busy while its history is imported; dropping it (the
/// import done, refused, or its caller gone) ends the import.
struct ImportGuard {
    inner: Arc<Inner>,
    session: Arc<Session>,
}

impl Drop for ImportGuard {
    fn drop(&mut self) {
        self.inner.end_import(&self.session);
    }
}

/// What the agent tells the scheduler: follow-ups and SubTurns. Weak, so an
/// agent outliving its scheduler does not keep it alive.
struct Hooks(std::sync::Weak<Inner>);

impl SessionHooks for Hooks {
    fn follow_up(&self, session: &str, content: String) {
        match self.0.upgrade() {
            Some(inner) => inner.follow_up(session, content),
            None => tracing::warn!(
                session,
                "the scheduler is gone; follow-up dropped: {content}"
            ),
        }
    }

    fn subturn_started(&self, session: &str) {
        if let Some(inner) = self.0.upgrade() {
            inner.subturns_changed(session, true);
        }
    }

    fn subturn_ended(&self, session: &str) {
        if let Some(inner) = self.0.upgrade() {
            inner.subturns_changed(session, false);
        }
    }
}
