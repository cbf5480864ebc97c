//! The scheduler: many sessions at once, one turn at a time per session.
//!
//! Every front end submits [`Op`]s here, through [`crate::core::Core`]. The
//! scheduler keeps a table of sessions (each with its settings: policy,
//! named agent, model; its running turn and its queue of follow-ups); the
//! turns themselves run through [`crate::agent::task`], which keeps the
//! table of live turns by id (top-level turns and SubTurns), so every steer
//! and interrupt reaches the turn it names, never "whichever turn is
//! active".
//!
//! - A session's turns run strictly in arrival order, one at a time: the
//!   first message of an idle session starts a turn; when it ends, the next
//!   queued one starts, until the queue is empty.
//! - Different sessions run in parallel, at most
//!   [`SchedulerConfig::max_parallel`] turns at once; the others wait for a
//!   slot, first come first served.
//! - A turn runs as its session's named agent (the host's default agent
//!   until the session chooses one, with [`Op::SetAgent`] or a message
//!   naming one), with its session's model override if it has one: the
//!   agent's profile is taken from the configuration current when the turn
//!   starts. A session whose agent is no longer configured has its next
//!   turn end in error (`config`), naming the agents there are.
//! - A message for a busy session steers its running turn (policy `steer`,
//!   the default) or waits as a follow-up turn (policy `follow_up`); a
//!   session that set no policy has its agent's. Steering a turn that is
//!   already ending, or winding down after a graceful interrupt, queues the
//!   message instead. Queues are bounded; a full one
//!   refuses the message, so nothing is dropped silently.
//! - Steering a turn never took in (it ended at its iteration limit, or
//!   failed) runs as follow-ups, first in the queue.
//! - A hard interrupt drops the session's queued follow-ups with the turn and
//!   says which in `interrupt_received`.
//! - An interrupt naming a SubTurn (`Target::Turn(subturn_id)`) acts on it as
//!   on a top-level turn: hard, it is cancelled at once with its own
//!   children and its parent sees it end `aborted`; graceful, it lets its
//!   running tools finish and gives a last answer, which its parent gets. A
//!   SubTurn takes no steering from the user and has no queue of its own:
//!   `Accepted::Interrupted` names the SubTurn and `discarded` is empty; the
//!   session's follow-ups stay queued.
//!
//! What the turns tell the scheduler (a turn ended, a follow-up turn to run,
//! a SubTurn started or ended, which keeps its session busy) comes as
//! [`InternalOp`]s on a queue the scheduler owns, handed to each turn it
//! starts (and inherited by the turn's SubTurns), drained in order by one
//! task: a SubTurn's follow-up is queued before its end is counted, so its
//! session never looks idle in between. The agent never calls the scheduler.
//!
//! The session table is bounded: a session idle (no turn running or queued,
//! no SubTurn running) for [`SchedulerConfig::session_idle`] is let go by one
//! sweeper task, which sleeps until the first of the sessions that went idle
//! is due (it never scans the table). Before a session is let go, its
//! settings are written to the store if they differ from what the store
//! has, and kept in memory too when it has any (the scheduler reads the
//! store's settings once, when it starts): a session used again is rebuilt
//! with them, with no read of the store inside `submit` (its history
//! was always in the store). While a session is in the table its history is
//! held in memory ([`crate::store::Store::hold_history`]): its turns read it
//! from there, not from SQLite; it goes with the session. The queue of idle
//! sessions holds at most one
//! entry per session, ordered by when each is due. A session is let go under
//! the table's lock and its own, and only if it is still idle and unused
//! since; an op that looked it up just before finds it marked and looks
//! again, so it reaches either the old entry before it goes or a fresh one:
//! never neither.
//!
//! Lock order: the session table, then a session's state, then a turn's
//! control, then the turn table, the idle queue or the kept settings. No
//! lock is held across an await.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::agent::approval::Decision;
use crate::agent::compaction::{self, CompactError};
use crate::agent::control::{Closed, TurnControl, new_turn_id};
use crate::agent::profile::ProfileError;
use crate::agent::task::{self, InternalOp, OpSender};
use crate::agent::turn::TurnSpec;
use crate::bus::Scope;
use crate::llm::{Message, Usage};
use crate::protocol::{
    Accepted, FollowUpQueued, InterruptMode, Op, Policy, Refused, Target, TurnErrorKind, TurnStatus,
};
use crate::store::{HistoryHold, SessionSettings, TurnRecord};

/// Limits of the scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Turns that run at the same time, across sessions.
    pub max_parallel: usize,
    /// Follow-up messages a session may have waiting.
    pub queue_capacity: usize,
    /// Steering messages a running turn may have waiting.
    pub steering_capacity: usize,
    /// How long a session stays in memory once idle (no turn running or
    /// queued, no SubTurn running, no op for it). Then it is let go; its
    /// next op rebuilds it from the store (its history always lives there;
    /// its policy is written there before it is let go).
    pub session_idle: Duration,
}

pub const DEFAULT_MAX_PARALLEL: usize = 256;
pub const DEFAULT_QUEUE_CAPACITY: usize = 64;
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_parallel: DEFAULT_MAX_PARALLEL,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            steering_capacity: DEFAULT_QUEUE_CAPACITY,
            session_idle: DEFAULT_SESSION_IDLE,
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
    slots: Arc<Semaphore>,
    /// The sessions in memory: busy, or idle for less than
    /// [`SchedulerConfig::session_idle`].
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The settings of every session let go that has any, as the store
    /// keeps them (read once at the start, then kept in step when a session
    /// is let go): a rebuilt session finds them here, with no read of the
    /// store in `submit`. Only sessions with settings of their own cost
    /// memory here.
    kept: Mutex<HashMap<String, SessionSettings>>,
    /// Sessions that are not idle.
    busy: AtomicUsize,
    /// Notified whenever a session becomes idle.
    went_idle: Notify,
    /// Set by [`Scheduler::close`]: no new turn starts.
    closed: AtomicBool,
    /// The queue this scheduler's turn trees report to; drained by one task.
    ops: OpSender,
    /// The idle sessions, by when they are due to be let go: at most one
    /// entry per session (its [`SessionState::queued`]), so the queue is
    /// bounded by the table however often a session goes idle.
    idle: Mutex<BinaryHeap<IdleEntry>>,
    /// Wakes the sweeper when `idle` gains an entry.
    idle_pushed: Arc<Notify>,
    /// Stops the scheduler's tasks when it is dropped.
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct IdleEntry {
    /// When the session is due to be let go, as of when the entry was made;
    /// a session used since is due later (see [`SessionState::idle_since`]).
    at: Instant,
    session: Weak<Session>,
}

/// The earliest entry first.
impl Ord for IdleEntry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

impl PartialOrd for IdleEntry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for IdleEntry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for IdleEntry {}

struct Session {
    key: String,
    state: Mutex<SessionState>,
    /// Its history stays in memory while the session is in the table.
    _history: HistoryHold,
}

#[derive(Default)]
struct SessionState {
    /// What the session chose: policy, agent, model.
    settings: SessionSettings,
    /// The settings the store keeps for the session.
    stored: SessionSettings,
    /// A turn of this session runs or waits for a slot (the session's turns
    /// run one after another until its queue is empty).
    busy: bool,
    /// SubTurns of this session still running (their results may start
    /// turns).
    subturns: usize,
    /// The turn that takes steering and interrupts, until it ends.
    active: Option<Arc<TurnControl>>,
    /// Follow-up messages, each a turn of its own, in order.
    queue: VecDeque<Queued>,
    /// Times the session went idle (or was used while idle).
    idle_count: u64,
    /// When it last went idle (or was used while idle).
    idle_since: Option<Instant>,
    /// It has an entry in the idle queue.
    queued: bool,
    /// Let go: no longer in the table. Whoever still holds it looks the
    /// session up again (and gets a fresh one).
    evicted: bool,
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
    /// What a message that arrives while its turn runs does: its own
    /// policy, else its agent's.
    pub policy: Policy,
    /// What the session chose (each None until chosen).
    pub settings: SessionSettings,
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
    /// Runs `agent`'s turns from now on, and the follow-up turns they ask
    /// for (results of SubTurns whose parent had ended). Must be called
    /// within a tokio runtime.
    pub fn new(agent: Arc<Agent>, config: SchedulerConfig) -> Scheduler {
        let (ops, queue) = mpsc::unbounded_channel();
        let kept = agent.store.settings().unwrap_or_else(|e| {
            tracing::warn!("could not read the sessions' settings; they start with none: {e:#}");
            HashMap::new()
        });
        let inner = Arc::new(Inner {
            slots: Arc::new(Semaphore::new(config.max_parallel.max(1))),
            agent,
            config,
            sessions: Mutex::new(HashMap::new()),
            kept: Mutex::new(kept),
            busy: AtomicUsize::new(0),
            went_idle: Notify::new(),
            closed: AtomicBool::new(false),
            ops,
            idle: Mutex::new(BinaryHeap::new()),
            idle_pushed: Arc::new(Notify::new()),
            stop: CancellationToken::new(),
        });
        tokio::spawn(drain(Arc::downgrade(&inner), queue));
        tokio::spawn(sweep(
            Arc::downgrade(&inner),
            inner.idle_pushed.clone(),
            inner.stop.clone(),
        ));
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
            Op::ImportHistory { .. } | Op::Compact { .. } => Err(Refused::Invalid(
                "importing history and compacting write the session store: submit them through \
                 the core (Core::submit), which waits for the store"
                    .into(),
            )),
            Op::UserMessage {
                session,
                content,
                agent,
            } => self.inner.message(&session, content, agent, false),
            Op::Steer { session, content } => self.inner.message(&session, content, None, true),
            Op::Interrupt { target, mode } => self.inner.interrupt(&target, mode),
            Op::SetPolicy { session, policy } => self.inner.set(&session, |settings| {
                settings.policy = Some(policy);
                Ok(Accepted::PolicySet)
            }),
            Op::Approve {
                session,
                call_id,
                turn_id,
                decision,
                scope,
                note,
            } => {
                let decided = Decision {
                    decision,
                    scope,
                    note,
                };
                let approvals = &self.inner.agent.approvals;
                (approvals.decide(&session, turn_id.as_deref(), &call_id, decided))
                    .map(|()| Accepted::Decided { call_id })
            }
            Op::SetAgent { session, agent } => {
                self.inner.agent.profiles().agent(&agent).map_err(invalid)?;
                self.inner.set(&session, |settings| {
                    settings.agent = Some(agent);
                    Ok(Accepted::SessionSet)
                })
            }
            Op::SetModel { session, model } => {
                let model = model.filter(|m| !m.trim().is_empty());
                if let Some(spec) = &model {
                    // Built outside the session's lock (it may take a
                    // while), for the agent the session runs now.
                    let agent = self.live(&session).and_then(|l| l.settings.agent);
                    let profiles = self.inner.agent.profiles();
                    profiles
                        .check_model(agent.as_deref(), spec)
                        .map_err(invalid)?;
                }
                self.inner.set(&session, |settings| {
                    settings.model = model;
                    Ok(Accepted::SessionSet)
                })
            }
        }
    }

    /// [`Op::ImportHistory`]: `messages` become the history of `session`,
    /// which must have none (no message, no recorded turn) and no turn
    /// running or waiting. They are recorded as one turn, `imported`, that
    /// runs nothing. While the store is written the session counts as busy:
    /// a message that arrives meanwhile waits as a follow-up and runs once
    /// the import is done, so it sees the imported history. The import runs
    /// to its end also if the caller goes away before its answer.
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
        // Its id is made as it takes the session, like a message's turn as
        // it is queued: ids are in the order turns took their session, which
        // lists turns that started in the same millisecond.
        let turn_id = new_turn_id();
        // The check and the write run on a task of their own that holds the
        // session busy: a caller that goes away meanwhile (the write goes on
        // in that task) does not let the session go idle before the history
        // is stored.
        let import = tokio::spawn(store_import(
            reserved,
            turn_id,
            session.to_string(),
            messages,
        ));
        import.await.unwrap_or_else(|e| {
            Err(Refused::Failed(format!(
                "importing history into session '{session}' failed: {e}"
            )))
        })
    }

    /// [`Op::Compact`]: the older history of the idle `session` summarized
    /// now (see [`crate::agent::compaction::compact_session`]). The session
    /// is held busy meanwhile, as for an import; the compaction runs to its
    /// end also if the caller goes away.
    pub async fn compact(&self, session: &str) -> Result<Accepted, Refused> {
        let settings = self.live(session).unwrap_or_default().settings;
        let profiles = self.inner.agent.profiles();
        let profile = (profiles.for_session(settings.agent.as_deref(), settings.model.as_deref()))
            .map_err(|e| Refused::Invalid(e.to_string()))?;
        let reserved = self.inner.reserve(session, || {
            format!("session '{session}' has a turn running or waiting; compact it once it is idle")
        })?;
        let (agent, key) = (self.inner.agent.clone(), session.to_string());
        let compaction = tokio::spawn(async move {
            let done = compaction::compact_session(&agent, &key, &profile).await;
            drop(reserved);
            done
        });
        match compaction.await {
            Ok(Ok(done)) => Ok(Accepted::Compacted {
                summarized: done.summarized,
                kept: done.kept,
                tokens_before: done.tokens_before,
                tokens_after: done.tokens_after,
            }),
            Ok(Err(CompactError::Nothing(reason))) => Err(Refused::Invalid(reason)),
            Ok(Err(CompactError::Failed(reason))) => Err(Refused::Failed(reason)),
            Err(e) => Err(Refused::Failed(format!(
                "compacting session '{session}' failed: {e}"
            ))),
        }
    }

    /// Entries of the queue of idle sessions waiting to be let go: at most one
    /// per session in memory.
    pub fn idle_entries(&self) -> usize {
        lock(&self.inner.idle).len()
    }

    /// Writes to the store the settings of every session in memory that
    /// the store does not have yet (at shutdown: a session is otherwise
    /// written only when it is let go).
    pub async fn keep_settings(&self) {
        let changed: Vec<(Arc<Session>, SessionSettings)> = lock(&self.inner.sessions)
            .values()
            .filter_map(|session| {
                let state = session.state();
                (state.settings != state.stored).then(|| (session.clone(), state.settings.clone()))
            })
            .collect();
        for (session, settings) in changed {
            match self
                .inner
                .agent
                .store
                .set_settings(&session.key, &settings)
                .await
            {
                Ok(()) => session.state().stored = settings,
                Err(e) => tracing::warn!(
                    session = session.key,
                    "could not keep the session's settings: {e:#}"
                ),
            }
        }
    }

    /// Sessions whose state is in memory now: busy ones, and idle ones not
    /// yet let go.
    pub fn sessions_in_memory(&self) -> usize {
        lock(&self.inner.sessions).len()
    }

    /// The id of the turn running on `session` (while it can still be
    /// steered or interrupted).
    pub fn active_turn(&self, session: &str) -> Option<String> {
        let session = lock(&self.inner.sessions).get(session).cloned()?;
        let state = session.state();
        state.active.as_ref().map(|turn| turn.id.clone())
    }

    /// What `session` is doing now; None for a session not in memory that
    /// has no settings of its own (never seen, or let go with none).
    pub fn live(&self, session: &str) -> Option<LiveSession> {
        let Some(session) = lock(&self.inner.sessions).get(session).cloned() else {
            // Let go (or never seen): idle, with the settings kept for it.
            let settings = lock(&self.inner.kept).get(session).cloned()?;
            return Some(LiveSession {
                policy: self.inner.policy(&settings),
                settings,
                ..LiveSession::default()
            });
        };
        let state = session.state();
        Some(LiveSession {
            active: state.active.as_deref().map(LiveTurn::of),
            queued: state
                .queue
                .iter()
                .map(|q| (q.turn_id.clone(), q.content.clone()))
                .collect(),
            policy: self.inner.policy(&state.settings),
            settings: state.settings.clone(),
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
    /// `f` of the session named `key` and its locked state; the session is
    /// created on first use, and rebuilt from the store once let go.
    fn with_session<T>(
        &self,
        key: &str,
        f: impl FnOnce(&Arc<Session>, &mut SessionState) -> T,
    ) -> Result<T, Refused> {
        if key.trim().is_empty() {
            return Err(Refused::Invalid(
                "the session key is empty; name the session".into(),
            ));
        }
        loop {
            let session = self.session(key);
            let mut state = session.state();
            // Let go between the lookup and the lock: the table has a fresh
            // one (or will have, at the next lookup).
            if state.evicted {
                continue;
            }
            return Ok(f(&session, &mut state));
        }
    }

    /// The session named `key`, from the table, or new (with the settings
    /// the store keeps for it).
    fn session(&self, key: &str) -> Arc<Session> {
        let mut sessions = lock(&self.sessions);
        if let Some(session) = sessions.get(key) {
            return session.clone();
        }
        // A session's settings enter `kept` before it leaves the table,
        // under the table's lock.
        let settings = lock(&self.kept).get(key).cloned().unwrap_or_default();
        let session = Arc::new(Session {
            key: key.to_string(),
            _history: self.agent.store.hold_history(key),
            state: Mutex::new(SessionState {
                stored: settings.clone(),
                settings,
                ..SessionState::default()
            }),
        });
        {
            // Idle from its creation: an op that starts nothing (a policy,
            // a refused message) leaves it to be let go.
            let mut state = session.state();
            self.idle_from_now(&session, &mut state);
        }
        sessions.insert(key.to_string(), session.clone());
        session
    }

    /// `session` is idle from now: it is let go after
    /// [`SchedulerConfig::session_idle`] unless used in between.
    fn idle_from_now(&self, session: &Arc<Session>, state: &mut SessionState) {
        let now = Instant::now();
        state.idle_count += 1;
        state.idle_since = Some(now);
        if !state.queued {
            state.queued = true;
            self.queue_idle(now + self.config.session_idle, Arc::downgrade(session));
        }
    }

    fn queue_idle(&self, at: Instant, session: Weak<Session>) {
        lock(&self.idle).push(IdleEntry { at, session });
        self.idle_pushed.notify_one();
    }

    /// Lets go of the sessions idle for their whole idle time: the entries
    /// of the idle queue that are due, and still current.
    async fn let_go_expired(&self) {
        let now = Instant::now();
        loop {
            let entry = {
                let mut idle = lock(&self.idle);
                match idle.peek() {
                    Some(e) if e.at <= now => idle.pop(),
                    _ => None,
                }
            };
            let Some(entry) = entry else { return };
            let Some(session) = entry.session.upgrade() else {
                continue;
            };
            let (count, write) = {
                let mut state = session.state();
                state.queued = false;
                // Busy: it is queued again when it goes idle.
                if state.evicted || !state.idle() {
                    continue;
                }
                let due = state
                    .idle_since
                    .map_or(now, |since| since + self.config.session_idle);
                if due > now {
                    // Used since the entry was made: due later.
                    state.queued = true;
                    self.queue_idle(due, entry.session);
                    continue;
                }
                let write = (state.settings != state.stored).then(|| state.settings.clone());
                (state.idle_count, write)
            };
            let current =
                |state: &SessionState| !state.evicted && state.idle_count == count && state.idle();
            if let Some(settings) = &write {
                // Written before it is let go: a rebuilt session reads them.
                if let Err(e) = self.agent.store.set_settings(&session.key, settings).await {
                    tracing::warn!(
                        session = session.key,
                        "could not keep the session's settings; it stays in memory: {e:#}"
                    );
                    let mut state = session.state();
                    if current(&state) {
                        self.idle_from_now(&session, &mut state);
                    }
                    continue;
                }
            }
            let mut sessions = lock(&self.sessions);
            let mut state = session.state();
            if let Some(settings) = write {
                state.stored = settings;
            }
            // Used during the write (a new entry stands for it), or not ours.
            if !current(&state)
                || state.settings != state.stored
                || !sessions
                    .get(&session.key)
                    .is_some_and(|s| Arc::ptr_eq(s, &session))
            {
                continue;
            }
            state.evicted = true;
            let mut kept = lock(&self.kept);
            if state.settings.is_empty() {
                kept.remove(&session.key);
            } else {
                kept.insert(session.key.clone(), state.settings.clone());
            }
            drop(kept);
            sessions.remove(&session.key);
        }
    }

    /// Changes the settings of session `key` with `change` (which may
    /// refuse, changing nothing).
    fn set(
        &self,
        key: &str,
        change: impl FnOnce(&mut SessionSettings) -> Result<Accepted, Refused>,
    ) -> Result<Accepted, Refused> {
        self.with_session(key, |session, state| {
            let mut settings = state.settings.clone();
            let accepted = change(&mut settings)?;
            state.settings = settings;
            if state.idle() {
                // Used: its idle time starts again.
                self.idle_from_now(session, state);
            }
            Ok(accepted)
        })?
    }

    /// A user message: steers the running turn, queues a follow-up or starts
    /// a turn. `steer` overrides a `follow_up` policy. A message naming an
    /// `agent` chooses it for a session that has none, and is refused by a
    /// session that runs another.
    fn message(
        &self,
        key: &str,
        content: String,
        agent: Option<String>,
        steer: bool,
    ) -> Result<Accepted, Refused> {
        if let Some(name) = &agent {
            self.agent.profiles().agent(name).map_err(invalid)?;
        }
        self.with_session(key, |session, state| {
            match (&state.settings.agent, agent) {
                (Some(runs), Some(asked)) if *runs != asked => {
                    return Err(Refused::Invalid(format!(
                        "session '{key}' runs agent '{runs}', not '{asked}': a session keeps \
                         its agent until it is switched (/agent {asked})"
                    )));
                }
                (None, Some(asked)) => {
                    state.settings.agent = Some(asked);
                    let accepted = self.message_to(session, state, content, steer);
                    if accepted.is_err() {
                        state.settings.agent = None;
                    }
                    return accepted;
                }
                _ => {}
            }
            self.message_to(session, state, content, steer)
        })?
    }

    /// What a message that arrives while the session's turn runs does: the
    /// session's own policy, else its agent's.
    fn policy(&self, settings: &SessionSettings) -> Policy {
        settings.policy.unwrap_or_else(|| {
            let profiles = self.agent.profiles();
            let name = settings.agent.as_deref().unwrap_or(profiles.default_name());
            profiles
                .get(name)
                .map_or(Policy::default(), |p| p.config.session_policy)
        })
    }

    fn message_to(
        &self,
        session: &Arc<Session>,
        state: &mut SessionState,
        content: String,
        steer: bool,
    ) -> Result<Accepted, Refused> {
        let key = &session.key;
        // Checked under the session's lock, which shutdown's interrupts
        // take too: a turn started here is one they reach or wait for.
        self.refuse_if_closed()?;
        if let Some(turn) = &state.active
            && (steer || self.policy(&state.settings) == Policy::Steer)
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
            let (turn_id, position) = self.enqueue(session, state, content);
            return Ok(Accepted::Queued { turn_id, position });
        }
        let turn_id = self.start(session, state, content);
        Ok(Accepted::Started { turn_id })
    }

    /// Marks `key` busy for an import: refused if the host is closed or the
    /// session has a turn running or waiting (or a SubTurn running). The
    /// session is busy until the returned guard is dropped.
    fn reserve_import(self: &Arc<Self>, key: &str) -> Result<ImportGuard, Refused> {
        self.reserve(key, || {
            format!(
                "session '{key}' has a turn running or waiting; history can only be \
                 imported into a new session"
            )
        })
    }

    /// Holds the idle session `key` busy (a message that arrives meanwhile
    /// waits as a follow-up) until the guard is dropped; refused with
    /// `busy` when a turn runs or waits.
    fn reserve(
        self: &Arc<Self>,
        key: &str,
        busy: impl FnOnce() -> String,
    ) -> Result<ImportGuard, Refused> {
        let session = self.with_session(key, |session, state| {
            // Checked under the session's lock, as for a message.
            self.refuse_if_closed()?;
            if !state.idle() {
                return Err(Refused::Invalid(busy()));
            }
            state.busy = true;
            self.track(session, true, state);
            Ok(session.clone())
        })??;
        Ok(ImportGuard {
            inner: self.clone(),
            session,
        })
    }

    /// An import is over (done, refused or dropped): the messages that
    /// arrived meanwhile run, in order; else the session is idle. A busy
    /// session is never let go, so `session` is still the table's.
    fn end_import(&self, session: &Arc<Session>) {
        let mut state = session.state();
        self.drop_queue_if_closed(session, &mut state);
        match state.queue.pop_front() {
            Some(next) => {
                self.run(session, &mut state, next.turn_id, next.content);
            }
            None => {
                state.busy = false;
                self.track(session, false, &mut state);
            }
        }
    }

    /// Once the host is shutting down, the follow-ups still queued on a
    /// session whose turn (or import) ended do not run: each is logged and
    /// ends `not run`.
    fn drop_queue_if_closed(&self, session: &Session, state: &mut SessionState) {
        if !self.closed.load(Ordering::SeqCst) {
            return;
        }
        let dropped: Vec<Queued> = state.queue.drain(..).collect();
        for q in &dropped {
            tracing::warn!(
                session = session.key,
                turn_id = q.turn_id,
                "the host is shutting down; follow-up not run: {}",
                q.content
            );
        }
        self.not_run(session, dropped, "the host shut down before it ran");
    }

    fn refuse_if_closed(&self) -> Result<(), Refused> {
        match self.closed.load(Ordering::SeqCst) {
            true => Err(Refused::Closed(
                "the host is shutting down and takes no new messages".into(),
            )),
            false => Ok(()),
        }
    }

    /// Does what a turn of this scheduler reported.
    fn internal(&self, op: InternalOp) {
        match op {
            InternalOp::FollowUp { session, content } => self.follow_up(&session, content),
            InternalOp::SubturnStarted { session } => self.subturns_changed(&session, true),
            InternalOp::SubturnEnded { session } => self.subturns_changed(&session, false),
            InternalOp::TurnEnded { turn } => self.turn_ended(&turn),
        }
    }

    /// A message that runs as a turn of its own, whatever the session's
    /// policy and queue limit (it was accepted elsewhere: a SubTurn's
    /// result).
    fn follow_up(&self, key: &str, content: String) {
        let _ = self.with_session(key, |session, state| {
            if self.closed.load(Ordering::SeqCst) {
                tracing::warn!(
                    session = key,
                    "the host is shutting down; follow-up not run: {content}"
                );
                return;
            }
            if state.busy {
                self.enqueue(session, state, content);
                return;
            }
            self.start(session, state, content);
        });
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
    /// wakes those waiting for idleness, and starts the idle time of a
    /// session that went idle.
    fn track(&self, session: &Arc<Session>, was_idle: bool, state: &mut SessionState) {
        match (was_idle, state.idle()) {
            (true, false) => {
                self.busy.fetch_add(1, Ordering::SeqCst);
            }
            (false, true) => {
                self.busy.fetch_sub(1, Ordering::SeqCst);
                self.idle_from_now(session, state);
                self.went_idle.notify_waiters();
            }
            _ => {}
        }
    }

    fn subturns_changed(&self, key: &str, started: bool) {
        let _ = self.with_session(key, |session, state| {
            let was_idle = state.idle();
            if started {
                state.subturns += 1;
            } else {
                state.subturns = state.subturns.saturating_sub(1);
            }
            self.track(session, was_idle, state);
        });
    }

    /// Starts a turn on a session with none running.
    fn start(&self, session: &Arc<Session>, state: &mut SessionState, input: String) -> String {
        let was_idle = state.idle();
        state.busy = true;
        self.track(session, was_idle, state);
        self.run(session, state, new_turn_id(), input)
    }

    /// Starts the session's next turn (it takes steering and interrupts
    /// from now on, even while it waits for a slot). Its end comes back as
    /// [`InternalOp::TurnEnded`].
    fn run(
        &self,
        session: &Session,
        state: &mut SessionState,
        id: String,
        input: String,
    ) -> String {
        let profiles = self.agent.profiles();
        let settings = &state.settings;
        let profile = profiles.for_session(settings.agent.as_deref(), settings.model.as_deref());
        let per_parent = profile.as_ref().map_or(0, |p| p.config.subturns.per_parent);
        let control = TurnControl::with_id(
            id.clone(),
            &session.key,
            self.config.steering_capacity,
            per_parent,
        );
        let turn = Arc::new(control.reporting_to(self.ops.clone()));
        state.active = Some(turn.clone());
        let (ops, ended) = (self.ops.clone(), turn.clone());
        let start = task::Start {
            control: turn,
            slot: Some(self.slots.clone()),
            on_end: Some(Box::new(move |_| {
                let _ = ops.send(InternalOp::TurnEnded { turn: ended });
            })),
        };
        match profile {
            Ok(profile) => {
                task::spawn(&self.agent, start, TurnSpec::top(profiles, profile), input);
            }
            Err(e) => {
                task::fail_to_start(&self.agent, start, TurnErrorKind::Config, e.to_string());
            }
        }
        id
    }

    /// The session's turn `turn` ended: the next one starts, or the session
    /// goes idle.
    fn turn_ended(&self, turn: &Arc<TurnControl>) {
        // A busy session is never let go.
        let Some(session) = lock(&self.sessions).get(&turn.session).cloned() else {
            return;
        };
        let mut state = session.state();
        if !state.active.as_ref().is_some_and(|a| Arc::ptr_eq(a, turn)) {
            return;
        }
        // Steering the turn never took in runs next, in order.
        for (i, content) in turn.leftover().into_iter().enumerate() {
            let turn_id = new_turn_id();
            self.queued(&session, &turn_id, content.clone(), i + 1);
            state.queue.insert(i, Queued { turn_id, content });
        }
        state.active = None;
        self.drop_queue_if_closed(&session, &mut state);
        match state.queue.pop_front() {
            Some(next) => {
                self.run(&session, &mut state, next.turn_id, next.content);
            }
            None => {
                state.busy = false;
                self.track(&session, false, &mut state);
            }
        }
    }

    /// Ends the turns of follow-ups dropped before they ran: each id handed
    /// out gets its `turn_end` (`aborted`, `not run: REASON`), so whoever
    /// waits for it is answered.
    fn not_run(&self, session: &Session, dropped: Vec<Queued>, reason: &str) {
        for q in dropped {
            let scope = Scope {
                session: Some(session.key.clone()),
                turn_id: Some(q.turn_id.clone()),
                parent_turn_id: None,
            };
            let outcome = task::outcome(
                &q.turn_id,
                TurnStatus::Aborted,
                format!("not run: {reason}"),
                None,
            );
            self.agent.bus.publish(&scope, task::end_event(&outcome));
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
            crate::protocol::EventBody::FollowUpQueued(FollowUpQueued { content, position }),
        );
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
                let turn = (self.agent.turns.get(id))
                    .filter(|t| t.reports_to(&self.ops))
                    .ok_or_else(no_active)?;
                if turn.lineage.depth > 0 {
                    // A SubTurn takes no steering and has no queue of its
                    // own: nothing is discarded, and the session's
                    // follow-ups stay (they belong to its top-level turns).
                    let discarded = turn
                        .interrupt(mode, &self.agent.bus, Vec::new)
                        .map_err(|_| no_active())?;
                    return Ok(Accepted::Interrupted {
                        turn_id: turn.id.clone(),
                        discarded,
                    });
                }
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

/// Holds a session busy while its history is imported (on the import's own
/// task); dropping it (the import done or refused) ends the import.
struct ImportGuard {
    inner: Arc<Inner>,
    session: Arc<Session>,
}

impl Drop for ImportGuard {
    fn drop(&mut self) {
        self.inner.end_import(&self.session);
    }
}

/// The import of `messages` into `session`, reserved by `guard` (held until
/// the history is stored or the import refused): see
/// [`Scheduler::import_history`].
async fn store_import(
    guard: ImportGuard,
    turn_id: String,
    session: String,
    messages: Vec<Message>,
) -> Result<Accepted, Refused> {
    let session = session.as_str();
    let store = &guard.inner.agent.store;
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
        id: turn_id,
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
    drop(guard);
    Ok(Accepted::Imported {
        turn_id: record.id,
        messages: messages.len(),
    })
}

/// Drains the queue the scheduler's turns report to, in order, on one task.
/// Weak, so an agent's turns outliving their scheduler do not keep it alive.
async fn drain(inner: Weak<Inner>, mut queue: mpsc::UnboundedReceiver<InternalOp>) {
    while let Some(op) = queue.recv().await {
        match inner.upgrade() {
            Some(inner) => inner.internal(op),
            None => {
                if let InternalOp::FollowUp { session, content } = op {
                    tracing::warn!(
                        session,
                        "the scheduler is gone; follow-up dropped: {content}"
                    );
                }
            }
        }
    }
}

/// Lets go of idle sessions when their idle time is up: it sleeps until the
/// first entry of the idle queue is due, so it never scans the table.
async fn sweep(inner: Weak<Inner>, pushed: Arc<Notify>, stop: CancellationToken) {
    loop {
        let next = match inner.upgrade() {
            Some(inner) => lock(&inner.idle).peek().map(|e| e.at),
            None => return,
        };
        let due = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => pushed.notified().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = due => {}
        }
        let Some(inner) = inner.upgrade() else { return };
        inner.let_go_expired().await;
    }
}

/// A refusal of an op that names what the configuration does not have.
fn invalid(e: ProfileError) -> Refused {
    Refused::Invalid(e.to_string())
}
