//! The core: the one seam every front end uses.
//!
//! The CLI (`run`, `chat`), the HTTP API, the OpenAI-compatible endpoint and
//! the tests hold a [`Core`] and nothing else of the host: no front end
//! reaches into the agent, the bus or the store. A [`Core`] owns the agent,
//! the scheduler that runs its sessions, and the event log writer. It
//! offers:
//!
//! - **Ops in**: [`Core::submit`] does what an [`Op`] asks (importing a
//!   history included, which waits for the store).
//! - **Events out**: [`Core::subscribe`] (and [`Core::subscribe_bounded`])
//!   give the live events, and with `after_seq` first the stored events
//!   after that seq, then the live ones, with no gap and no duplicate.
//! - **Waiting for a turn**: [`Core::submit_watched`] and [`Core::run`]
//!   subscribe before they submit, so the turn's `turn_end` cannot be
//!   missed; [`Core::wait_turn`] waits for any turn by id, also one that has
//!   already ended (it looks in the event log).
//! - **What a session holds and does**: [`Core::history`],
//!   [`Core::turns`], [`Core::sessions`], [`Core::live`],
//!   [`Core::active_turn`], [`Core::busy_sessions`].
//! - **Named agents**: [`Core::profiles`] (the agents of the configuration
//!   current now), [`Core::default_agent`], [`Core::agent_tools`] (what an
//!   agent offers), [`Core::reload`] (a new configuration for turns that
//!   start from now on, announced as `config_reloaded`) and
//!   [`Core::reject_config`] (`config_rejected`).
//! - **Plugins and observers**: [`Core::plugins`], [`Core::tool_names`],
//!   [`Core::announce_plugins`], [`Core::watch_plugins`],
//!   [`Core::observer_stats`], [`Core::events_dropped`].
//! - **Shutdown**: [`Core::close`], [`Core::interrupt_all`], waiting for
//!   idleness, and [`Core::shut_down`], which does all of it in order and
//!   flushes the event log.
//!
//! # Waiting for a turn's end without a race
//!
//! Every turn id handed out gets exactly one `turn_end`, also a queued turn
//! dropped before it ran. A front end that subscribes *after* submitting
//! could miss it, so:
//!
//! - [`Core::submit_watched`] subscribes to the session's `turn_end`s, then
//!   submits: the end comes after the subscription exists.
//! - [`Core::wait_turn`] subscribes, learns the `seq` of the last event
//!   published before the subscription, waits until the event log holds
//!   every event up to it, and looks the turn's end up there. An end
//!   published before the subscription is in the log; one published after
//!   reaches the subscription.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::agent::approval::PendingApproval;
use crate::agent::profile::{ProfileError, Profiles};
use crate::agent::turn::TurnSpec;
use crate::agent::{Agent, TurnOutcome};
use crate::bus::{Delivery, Filter, Received, Scope, Subscription};
use crate::hooks::ObserverStats;
use crate::llm::Message;
use crate::llm::ToolDef;
use crate::plugin::watch::WatchHandle;
use crate::protocol::{
    Accepted, ConfigRejected, ConfigReloaded, Event, EventBody, EventKind, InterruptMode, Op,
    Refused, Target, TurnEnd,
};
use crate::scheduler::{LiveSession, Scheduler, SchedulerConfig};
use crate::store::{EventLog, SessionInfo, TurnRecord};

/// Stored events read per query while replaying.
const PAGE: usize = 512;

/// The host as a front end sees it. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Core {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Arc<Agent>,
    scheduler: Scheduler,
    log: EventLog,
}

impl Core {
    /// The core over `agent`: starts the event log writer (every event
    /// published from now on is stored) and the scheduler that runs the
    /// agent's sessions. Call within a Tokio runtime, before the agent
    /// publishes anything.
    pub fn new(agent: Arc<Agent>, config: SchedulerConfig) -> Core {
        let log = EventLog::spawn(agent.store.clone(), agent.bus.subscribe_all_lossless());
        let scheduler = Scheduler::new(agent.clone(), config);
        Core {
            inner: Arc::new(Inner {
                agent,
                scheduler,
                log,
            }),
        }
    }

    /// Does what `op` asks. Everything but [`Op::ImportHistory`] and
    /// [`Op::Compact`] is done at once (a turn it starts runs on its own
    /// task); an import or a compaction answers once the store has it.
    pub async fn submit(&self, op: Op) -> Result<Accepted, Refused> {
        match op {
            Op::ImportHistory { session, messages } => {
                self.inner
                    .scheduler
                    .import_history(&session, messages)
                    .await
            }
            Op::Compact { session } => self.inner.scheduler.compact(&session).await,
            op => self.inner.scheduler.submit(op),
        }
    }

    /// [`Core::submit`], and a watch on the end of the turn the answer names
    /// (started, steered, queued or interrupted; none for a policy or an
    /// import). Subscribed before submitting, so the end cannot be missed.
    pub async fn submit_watched(&self, op: Op) -> Result<(Accepted, Option<TurnWatch>), Refused> {
        let session = match &op {
            Op::UserMessage { session, .. } | Op::Steer { session, .. } => Some(session.clone()),
            Op::Interrupt {
                target: Target::Session(session),
                ..
            } => Some(session.clone()),
            _ => None,
        };
        let filter = Filter {
            session,
            no_deltas: true,
            kinds: vec![EventKind::TurnEnd],
        };
        let events = self.inner.agent.bus.subscribe(filter, Delivery::Lossless);
        let accepted = self.submit(op).await?;
        let turn_id = match &accepted {
            Accepted::Started { turn_id }
            | Accepted::Steered { turn_id }
            | Accepted::Queued { turn_id, .. }
            | Accepted::Interrupted { turn_id, .. } => Some(turn_id.clone()),
            Accepted::PolicySet
            | Accepted::SessionSet
            | Accepted::Decided { .. }
            | Accepted::Imported { .. }
            | Accepted::Compacted { .. } => None,
        };
        let watch = turn_id.map(|turn_id| TurnWatch { turn_id, events });
        Ok((accepted, watch))
    }

    /// Submits `op` and waits for the end of the turn its answer names
    /// ([`Core::submit_watched`]); `None` when it names none.
    pub async fn run(&self, op: Op) -> Result<(Accepted, Option<TurnOutcome>), Refused> {
        let (accepted, watch) = self.submit_watched(op).await?;
        let outcome = match watch {
            Some(mut watch) => watch.ended().await,
            None => None,
        };
        Ok((accepted, outcome))
    }

    /// Waits for the end of the turn `turn_id`, whether it has already
    /// ended or not (see the module's docs): it returns once the turn's
    /// `turn_end` is seen, in the event log (an end published before the
    /// wait began) or live (one published after).
    ///
    /// It has no timeout of its own and waits as long as that takes: an id
    /// no turn has (or an import's) never ends. Bound it with
    /// `tokio::time::timeout` (dropping the wait costs nothing).
    ///
    /// An end published after the wait began is seen live whatever the
    /// event log does. One published before it is found only in the log: if
    /// the log dropped the batch holding it (its write failed twice, see
    /// [`EventLog`]), the end is neither stored nor live, and the wait lasts
    /// until the caller's timeout.
    ///
    /// Fails if the event log cannot be read or the host is gone.
    pub async fn wait_turn(&self, turn_id: &str) -> Result<TurnOutcome> {
        let filter = Filter {
            session: None,
            no_deltas: true,
            kinds: vec![EventKind::TurnEnd],
        };
        let (mut live, before) = self
            .inner
            .agent
            .bus
            .subscribe_after(filter, Delivery::Lossless);
        self.inner.log.flush(before).await;
        if let Some(event) = self.inner.agent.store.turn_end(turn_id).await? {
            return turn_ended(&event, turn_id)
                .ok_or_else(|| anyhow!("the stored end of turn {turn_id} is not a turn_end"));
        }
        while let Some(received) = live.recv().await {
            if let Received::Event(event) = received
                && let Some(outcome) = turn_ended(&event, turn_id)
            {
                return Ok(outcome);
            }
        }
        Err(anyhow!("the host stopped before turn {turn_id} ended"))
    }

    /// The events `filter` wants, every one of them (the subscription is
    /// unbounded: for consumers that keep up on average). With `after_seq`,
    /// first the stored events after that seq, then the live ones.
    pub fn subscribe(&self, filter: Filter, after_seq: Option<u64>) -> Events {
        self.events(filter, after_seq, Delivery::Lossless)
    }

    /// [`Core::subscribe`] holding at most `capacity` events for a consumer
    /// that falls behind: the events it missed are read back from the event
    /// log, so it still gets every one, in order, and memory stays bounded.
    pub fn subscribe_bounded(
        &self,
        filter: Filter,
        after_seq: Option<u64>,
        capacity: usize,
    ) -> Events {
        self.events(filter, after_seq, Delivery::Bounded(capacity))
    }

    fn events(&self, filter: Filter, after_seq: Option<u64>, delivery: Delivery) -> Events {
        // Everything after `upto` reaches `live`; everything up to it is (or
        // will be, once flushed) in the event log.
        let (live, upto) = self
            .inner
            .agent
            .bus
            .subscribe_after(filter.clone(), delivery);
        // A seq past the last event (from another host's log) starts at the
        // next event rather than skipping any.
        let (last, replay) = match after_seq {
            Some(after) if after < upto => (after, Some(upto)),
            _ => (upto, None),
        };
        Events {
            core: self.clone(),
            filter,
            live,
            last,
            replay,
            backlog: VecDeque::new(),
        }
    }

    /// A session's history, in order; empty for a session never seen.
    pub async fn history(&self, session: &str) -> Result<Vec<Message>> {
        self.inner.agent.store.history(session).await
    }

    /// The tokens `session`'s next request would start with, counted as a
    /// turn counts them (its agent's system prompt, its history as
    /// compacted, the tools on offer), and its model's context window.
    pub async fn context_tokens(&self, session: &str) -> Result<(u64, Option<u64>)> {
        use crate::agent::context::estimate_all;
        let history = self.history(session).await?;
        let profiles = self.profiles();
        let profile = profiles.agent(&self.session_agent(session))?.clone();
        let prompt = (profile.config.system_prompt.as_deref()).map(Message::system);
        let spec = TurnSpec::top(profiles, profile.clone());
        let tools = spec.offered(&self.inner.agent);
        let tokens = estimate_all(prompt.as_slice()) + estimate_all(&history) + tools.tokens;
        Ok((tokens, profile.config.context.window))
    }

    /// A session's recorded turns, in order of start.
    pub async fn turns(&self, session: &str) -> Result<Vec<TurnRecord>> {
        self.inner.agent.store.turns(session).await
    }

    /// Every recorded session, most recently updated first.
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>> {
        self.inner.agent.store.sessions().await
    }

    /// What `session` is doing now (its live turn tree, its queue); `None`
    /// for a session not seen since the host started.
    pub fn live(&self, session: &str) -> Option<LiveSession> {
        self.inner.scheduler.live(session)
    }

    /// The id of the turn running on `session`, while it takes steering and
    /// interrupts.
    pub fn active_turn(&self, session: &str) -> Option<String> {
        self.inner.scheduler.active_turn(session)
    }

    /// Sessions with a turn running or waiting, or a SubTurn running.
    pub fn busy_sessions(&self) -> usize {
        self.inner.scheduler.busy_sessions()
    }

    /// Sessions whose state is in memory now: busy ones, and idle ones not
    /// yet let go (see [`SchedulerConfig::session_idle`]).
    pub fn sessions_in_memory(&self) -> usize {
        self.inner.scheduler.sessions_in_memory()
    }

    /// Whether `session` has a turn running or waiting, or a SubTurn running.
    pub fn is_busy(&self, session: &str) -> bool {
        self.inner.scheduler.is_busy(session)
    }

    /// Waits until `session` has nothing running or waiting.
    pub async fn until_idle(&self, session: &str) {
        self.inner.scheduler.until_idle(session).await
    }

    /// Waits until every session is idle.
    pub async fn until_all_idle(&self) {
        self.inner.scheduler.until_all_idle().await
    }

    /// The tool calls of `session` (its SubTurns' too) waiting for a
    /// person's decision.
    pub fn pending_approvals(&self, session: &str) -> Vec<PendingApproval> {
        self.inner.agent.approvals.pending(session)
    }

    /// Every named agent of the configuration current now.
    pub fn profiles(&self) -> Arc<Profiles> {
        self.inner.agent.profiles()
    }

    /// The agent of sessions that have chosen none.
    pub fn default_agent(&self) -> String {
        self.profiles().default_name().to_string()
    }

    /// The agent `session` runs: its own, or the default when it chose none.
    pub fn session_agent(&self, session: &str) -> String {
        (self.live(session))
            .and_then(|live| live.settings.agent)
            .unwrap_or_else(|| self.default_agent())
    }

    /// The tools the agent `name` offers now (its filter over every tool on
    /// offer), in the order the model sees them.
    pub fn agent_tools(&self, name: &str) -> Result<Vec<ToolDef>, ProfileError> {
        let profiles = self.profiles();
        let profile = profiles.agent(name)?.clone();
        let spec = TurnSpec::top(profiles, profile);
        Ok(spec.tool_defs(&self.inner.agent).as_ref().clone())
    }

    /// Runs one call of `tool` with `arguments` (JSON text) on `session`,
    /// outside a model turn, as the agent `agent` (`None`: the default):
    /// the path a model's call takes, hooks, approvals, events and the
    /// sandbox included (see [`crate::agent::lone_call`]). Dropping the
    /// future cancels the call.
    pub async fn call_tool(
        &self,
        session: &str,
        agent: Option<&str>,
        tool: &str,
        arguments: &str,
    ) -> Result<crate::agent::lone_call::LoneResult, ProfileError> {
        crate::agent::lone_call::call(&self.inner.agent, session, agent, tool, arguments).await
    }

    /// Runs turns that start from now on with `profiles` (a reloaded
    /// configuration: running turns keep the one they started with) and
    /// publishes `config_reloaded` with what changed.
    pub fn reload(&self, profiles: Profiles, reloaded: ConfigReloaded) {
        self.inner.agent.set_profiles(profiles);
        let body = EventBody::ConfigReloaded(reloaded);
        self.inner.agent.bus.publish(&Scope::host(), body);
    }

    /// Publishes `config_rejected`: the configuration `file` changed but
    /// does not load, and the running one stays.
    pub fn reject_config(&self, file: &str, error: &str) {
        let body = EventBody::ConfigRejected(ConfigRejected {
            file: file.to_string(),
            error: error.to_string(),
        });
        self.inner.agent.bus.publish(&Scope::host(), body);
    }

    /// Every file of the plugin directory, as `wasmclaw plugins list
    /// --json` prints it.
    pub fn plugins(&self) -> Vec<serde_json::Value> {
        let catalog = self.inner.agent.plugins.catalog();
        (catalog.plugins.iter())
            .map(|s| serde_json::to_value(s.info()).expect("plugin info serializes"))
            .collect()
    }

    /// Whether the plugin directory has been read (a watch's first pass).
    pub fn plugins_scanned(&self) -> bool {
        self.inner.agent.plugins.is_scanned()
    }

    /// Returns once the plugin directory has been read (a watch's first
    /// pass), as a turn waits for it.
    pub async fn until_plugins_scanned(&self) {
        self.inner.agent.plugins.until_scanned().await
    }

    /// The names of the plugins' tools.
    pub fn tool_names(&self) -> Vec<String> {
        let catalog = self.inner.agent.plugins.catalog();
        catalog.tools().iter().map(|t| t.name.clone()).collect()
    }

    /// Publishes the state of every plugin file (`plugin_loaded` or
    /// `plugin_failed`).
    pub fn announce_plugins(&self) {
        self.inner.agent.announce_plugins()
    }

    /// See [`Agent::announce_mcp`].
    pub fn announce_mcp(&self) {
        self.inner.agent.announce_mcp()
    }

    /// Picks up plugins added, replaced or removed from now on, and
    /// publishes each change. Watching stops when the handle is dropped.
    pub fn watch_plugins(&self) -> Result<WatchHandle> {
        self.inner.agent.watch_plugins()
    }

    /// What each `on-event` hook delivered, dropped and failed.
    pub fn observer_stats(&self) -> Vec<ObserverStats> {
        self.inner.agent.observer_stats()
    }

    /// Events dropped for bounded subscribers since the host started.
    pub fn events_dropped(&self) -> u64 {
        self.inner.agent.bus.dropped_total()
    }

    /// Starts no new turn from now on: messages are refused.
    pub fn close(&self) {
        self.inner.scheduler.close()
    }

    /// Whether [`Core::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.scheduler.is_closed()
    }

    /// The refusal a message gets once [`Core::close`] was called.
    pub fn refuse_if_closed(&self) -> Result<(), Refused> {
        self.inner.scheduler.refuse_if_closed()
    }

    /// Interrupts every running turn; how many were reached.
    pub fn interrupt_all(&self, mode: InterruptMode) -> usize {
        self.inner.scheduler.interrupt_all(mode)
    }

    /// Winds the host down: refuses messages, asks running turns to wind
    /// down, stops those still running after `grace`, lets the `on-event`
    /// hooks take in what is queued for them, and waits until the event log
    /// holds every event published.
    pub async fn shut_down(&self, grace: Duration) {
        self.close();
        let asked = self.interrupt_all(InterruptMode::Graceful);
        if asked > 0 {
            tracing::info!("shutting down: {asked} running turns asked to wind down");
        }
        if tokio::time::timeout(grace, self.until_all_idle())
            .await
            .is_err()
        {
            let stopped = self.interrupt_all(InterruptMode::Hard);
            tracing::warn!(
                "shutting down: {stopped} turns still running after {grace:?} were stopped"
            );
            if tokio::time::timeout(Duration::from_secs(5), self.until_all_idle())
                .await
                .is_err()
            {
                tracing::error!("shutting down: some turns did not end after being stopped");
            }
        }
        self.inner.agent.close_observers().await;
        self.inner.scheduler.keep_settings().await;
        self.flush_events().await;
    }

    /// Waits until the event log holds every event published so far.
    pub async fn flush_events(&self) {
        let last = self.inner.agent.bus.last_seq();
        self.inner.log.flush(last).await;
    }
}

/// How the turn `turn_id` ended, if `event` is its `turn_end`.
pub fn turn_ended(event: &Event, turn_id: &str) -> Option<TurnOutcome> {
    if event.turn_id.as_deref() != Some(turn_id) {
        return None;
    }
    let EventBody::TurnEnd(TurnEnd {
        status,
        reason,
        error_kind,
        iterations,
        usage,
        answer,
    }) = &event.body
    else {
        return None;
    };
    Some(TurnOutcome {
        turn_id: turn_id.to_string(),
        status: *status,
        reason: reason.clone(),
        error_kind: *error_kind,
        answer: answer.clone(),
        iterations: *iterations,
        usage: *usage,
    })
}

/// Waits for the end of one turn ([`Core::submit_watched`]).
pub struct TurnWatch {
    turn_id: String,
    events: Subscription,
}

impl TurnWatch {
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// How the turn ended, once it has; `None` if the host is gone first.
    /// Cancel-safe: in a `select!` loop, nothing is lost.
    pub async fn ended(&mut self) -> Option<TurnOutcome> {
        while let Some(received) = self.events.recv().await {
            if let Received::Event(event) = received
                && let Some(outcome) = turn_ended(&event, &self.turn_id)
            {
                return Some(outcome);
            }
        }
        None
    }
}

/// Events from [`Core::subscribe`]: stored ones first (after the seq asked
/// for, or to fill in what a bounded subscription dropped), then live ones;
/// each once, in `seq` order.
pub struct Events {
    core: Core,
    filter: Filter,
    live: Subscription,
    /// The seq of the last event handed out or passed over.
    last: u64,
    /// Events up to this seq are to be read from the event log (once it
    /// holds them).
    replay: Option<u64>,
    /// Stored events read, not yet handed out.
    backlog: VecDeque<Event>,
}

/// The event log could not be read.
struct Unreadable;

impl Events {
    /// The next event; `None` once the host is gone, or if the event log
    /// could not be read for a replay (logged). Cancel-safe.
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        loop {
            if let Some(stored) = self.stored().await {
                return stored.ok();
            }
            let received = self.live.recv().await?;
            if let Some(event) = self.take(received) {
                return Some(event);
            }
        }
    }

    /// The next event already published (read from the event log if it has
    /// to be), without waiting for a new one; `None` when there is none.
    pub async fn try_next(&mut self) -> Option<Arc<Event>> {
        loop {
            if let Some(stored) = self.stored().await {
                return stored.ok();
            }
            let received = self.live.try_recv()?;
            if let Some(event) = self.take(received) {
                return Some(event);
            }
        }
    }

    /// A live event to hand out (one not already read from the store).
    fn take(&mut self, received: Received) -> Option<Arc<Event>> {
        match received {
            Received::Event(event) if event.seq > self.last => {
                self.last = event.seq;
                Some(event)
            }
            // Already handed out from the event log.
            Received::Event(_) => None,
            Received::Dropped(n) => {
                tracing::debug!("a subscriber fell {n} events behind; reading them back");
                self.replay = Some(self.core.inner.agent.bus.last_seq());
                None
            }
        }
    }

    /// The next stored event to hand out: `None` when there is no replay to
    /// do (or it is done).
    async fn stored(&mut self) -> Option<Result<Arc<Event>, Unreadable>> {
        loop {
            while let Some(event) = self.backlog.pop_front() {
                self.last = event.seq;
                if self.filter.wants(&event) {
                    return Some(Ok(Arc::new(event)));
                }
            }
            let upto = self.replay?;
            self.core.inner.log.flush(upto).await;
            let store = &self.core.inner.agent.store;
            let page = match store
                .events(self.filter.session.as_deref(), self.last, PAGE)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::error!("reading events back from the event log: {e:#}");
                    return Some(Err(Unreadable));
                }
            };
            if page.len() < PAGE {
                self.replay = None;
            }
            self.backlog.extend(page);
        }
    }
}

/// Stops the turn `turn_id` (hard) if dropped before [`StopOnDrop::disarm`]:
/// held by whoever waits for a turn on behalf of a client that may go away
/// (an HTTP request, an MCP call).
pub struct StopOnDrop {
    core: Core,
    turn_id: Option<String>,
}

impl StopOnDrop {
    pub fn new(core: &Core, turn_id: &str) -> StopOnDrop {
        StopOnDrop {
            core: core.clone(),
            turn_id: Some(turn_id.to_string()),
        }
    }

    /// The turn it guards.
    pub fn turn_id(&self) -> Option<&str> {
        self.turn_id.as_deref()
    }

    /// The turn ended, or is left to run: dropping does nothing now.
    pub fn disarm(&mut self) {
        self.turn_id = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(turn_id) = self.turn_id.take() {
            let op = Op::Interrupt {
                target: Target::Turn(turn_id),
                mode: InterruptMode::Hard,
            };
            // Refused only if the turn has just ended. An interrupt is done
            // at once: the task only runs the submit.
            let core = self.core.clone();
            tokio::spawn(async move {
                let _ = core.submit(op).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentConfig;
    use crate::bus::EventBus;
    use crate::llm::{Chain, Provider, ProviderConfig, ProviderKind, RetryPolicy};
    use crate::plugin::{Plugins, Runtime, RuntimeConfig};
    use crate::protocol::TurnStatus;
    use crate::store::{Store, hold};
    use std::future::Future;
    use std::task::Poll;

    const LIMIT: Duration = Duration::from_secs(10);

    /// A core with no plugins whose model answers `ok`, over an in-memory
    /// store.
    async fn core(dir: &tempfile::TempDir) -> Core {
        let script = dir.path().join("script.json");
        std::fs::write(&script, r#"{"turns": [{"replies": [{"text": "ok"}]}]}"#).unwrap();
        let config = ProviderConfig {
            kind: ProviderKind::Scripted,
            model: script.display().to_string(),
            base_url: String::new(),
            api_key: None,
            api_key_env: None,
            headers: Default::default(),
            stream: false,
            timeout: Duration::from_secs(10),
            limits: Default::default(),
        };
        let provider = Provider::new(config, crate::llm::http_client()).unwrap();
        let chain = Chain::new(vec![provider], RetryPolicy::default());
        let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
        let plugins_dir = dir.path().join("plugins");
        std::fs::create_dir(&plugins_dir).unwrap();
        let plugins = Plugins::load_dir(runtime, plugins_dir).await;
        let store = Store::open_in_memory().unwrap();
        let bus = EventBus::new(0);
        let agent = Agent::new(plugins, Arc::new(chain), bus, store, AgentConfig::default());
        Core::new(Arc::new(agent), SchedulerConfig::default())
    }

    #[tokio::test]
    async fn an_import_whose_caller_goes_away_still_holds_its_session_until_it_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let core = core(&dir).await;
        let messages = vec![
            Message::user("imported question"),
            Message::assistant("imported answer"),
        ];
        // The store's connection, held on a thread of its own until the test
        // lets it go: the import's work waits for it on the blocking pool.
        let store = core.inner.agent.store.clone();
        let (held_tx, held) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _held = hold(&store);
            held_tx.send(()).unwrap();
            let _ = released.recv();
        });
        held.recv_timeout(LIMIT).unwrap();
        let import = Op::ImportHistory {
            session: "s".into(),
            messages: messages.clone(),
        };
        // The import starts and waits for the store; then its caller goes
        // away.
        let mut submit = Box::pin(core.submit(import));
        let polled = std::future::poll_fn(|cx| Poll::Ready(submit.as_mut().poll(cx))).await;
        assert!(polled.is_pending(), "{polled:?}");
        assert!(core.is_busy("s"));
        drop(submit);
        assert!(core.is_busy("s"), "the import still holds its session");

        // A message meanwhile waits for the import.
        let queued = core.submit(Op::UserMessage {
            session: "s".into(),
            content: "next".into(),
            agent: None,
        });
        let turn_id = match tokio::time::timeout(LIMIT, queued).await.unwrap() {
            Ok(Accepted::Queued { turn_id, .. }) => turn_id,
            other => panic!("expected the message to wait for the import, got {other:?}"),
        };
        drop(release);
        holder.join().unwrap();
        let outcome = tokio::time::timeout(LIMIT, core.wait_turn(&turn_id))
            .await
            .expect("the queued turn runs once the import is stored")
            .unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
        let history = core.history("s").await.unwrap();
        assert_eq!(history[..2], messages[..]);
        assert_eq!(history.len(), 4, "{history:?}");
        let turns = core.turns("s").await.unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].reason, "imported", "{turns:#?}");
        assert_eq!(turns[0].input, "(imported history)");
        assert_eq!(turns[1].id, turn_id);
    }
}
