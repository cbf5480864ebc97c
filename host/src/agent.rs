//! The agent: turns of a session, driven by a model and the plugins' tools.
//!
//! - [`task`]: the life of every turn: its task, its place in the table of
//!   live turns, its one `turn_end` (panics and aborts included), and what
//!   it tells the scheduler ([`task::InternalOp`]).
//! - [`turn`]: one turn, from the user's message to the final answer.
//! - [`tools`]: running the tool calls of one model reply.
//! - [`registry`]: every tool on offer, over its sources (the built-ins,
//!   the plugins): precedence, the list the model sees, lookup and calls.
//! - [`builtins`]: the built-in tools `subagent` and `spawn`.
//! - [`approval`]: human approval of tool calls: the gate after the
//!   `before-tool` hooks, and the calls waiting for a decision.
//! - [`arguments`]: a call's arguments before it runs: one JSON object, and
//!   no call of a reply cut at the token limit.
//! - [`profile`]: the named agents of the configuration, as turns run
//!   them: the snapshot a turn takes when it starts.
//! - [`control`]: how a running turn is steered and interrupted, and its
//!   place in the tree of turns.
//! - [`subturn`]: child turns (sub-agents): limits, running, delivery.
//! - [`budget`]: what a turn and its tree have used (tokens, SubTurns
//!   started), counted against their bounds.
//! - [`refusals`]: the loop rule: a turn that repeats a refused tool call.
//! - [`context`]: a request's tokens counted against the model's window,
//!   and shaped to fit it (long tool results cut, the largest left out).
//! - [`compaction`]: the older history summarized by a model call and
//!   stored as a compaction record; on demand for an idle session.
//!
//! An [`Agent`] holds what every turn shares: the plugins, the tool
//! registry over them and the built-ins, the named agents of the current
//! configuration ([`profile`]: each turn takes a snapshot), the event bus,
//! the session store, the table of live turns and the calls waiting for
//! approval. The hooks are built once per
//! plugin set and rebuilt after a reload. Front ends submit turns through
//! [`crate::core::Core`] (which runs them on the
//! [`crate::scheduler::Scheduler`]) and follow them there;
//! [`Agent::run_turn`] runs one turn directly, outside any schedule.
//!
//! The agent never calls the scheduler: a turn tree the scheduler started
//! carries the scheduler's queue in its controls, and what the scheduler must
//! know (follow-ups, SubTurns started and ended, turn ends) is sent there as
//! [`task::InternalOp`]s.

pub mod approval;
pub mod arguments;
pub mod budget;
pub mod builtins;
pub mod compaction;
pub mod context;
pub mod control;
pub mod history_search;
pub mod lone_call;
pub mod profile;
pub mod refusals;
pub mod registry;
pub mod subturn;
pub mod task;
pub mod tools;
pub mod turn;

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::bus::{EventBus, Scope};
use crate::hooks::{HookSet, ObserverStats, Observers};
use crate::llm::{Chain, ToolDef, Usage};
use crate::plugin::Plugins;
use crate::plugin::catalog::{Catalog, PluginChange};

use self::builtins::Builtins;
use self::context::OfferedTools;
use self::profile::Profiles;
use self::registry::Registry;
use crate::config::{ApprovalSettings, ToolFilter};
use crate::plugin::watch::WatchHandle;
use crate::protocol::{
    EventBody, PluginFailed, PluginLoaded, PluginUnloaded, Policy, TurnErrorKind, TurnStatus,
};
use crate::store::Store;

/// How turns run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Model calls per turn, the last one included (it forbids tool calls,
    /// so the turn ends with an answer).
    pub max_iterations: u32,
    /// Tool calls of one reply that run at the same time.
    pub tool_concurrency: usize,
    /// Put before the history in every request.
    pub system_prompt: Option<String>,
    pub max_tokens: Option<u32>,
    pub subturns: subturn::SubTurnLimits,
    /// Identical refused tool calls (same tool, same arguments) that end a
    /// turn with an error; 0: no limit.
    pub max_repeated_refusals: u32,
    /// After a graceful interrupt, how long a model call may stay silent (no
    /// first chunk, no next one) before it is dropped.
    pub wind_down_idle: Duration,
    /// The tools on offer (allow, then deny, by name with `*` globs).
    pub tools: ToolFilter,
    /// Tokens (input and output) a top-level turn and its SubTurns may use.
    pub token_budget: Option<u64>,
    /// What a session does with a message that arrives while its turn runs,
    /// when it has not set a policy of its own.
    pub session_policy: Policy,
    /// Messages that start with `/` are chat commands, not model input.
    pub commands: bool,
    /// Which tool calls wait for a person's decision.
    pub approvals: ApprovalSettings,
    /// The model's window and how the conversation is kept within it.
    pub context: context::ContextConfig,
}

pub const DEFAULT_MAX_ITERATIONS: u32 = 50;
pub const DEFAULT_TOOL_CONCURRENCY: usize = 8;
pub const DEFAULT_MAX_REPEATED_REFUSALS: u32 = 3;
pub const DEFAULT_WIND_DOWN_IDLE: Duration = Duration::from_secs(5);

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_iterations: DEFAULT_MAX_ITERATIONS,
            tool_concurrency: DEFAULT_TOOL_CONCURRENCY,
            system_prompt: None,
            max_tokens: None,
            subturns: subturn::SubTurnLimits::default(),
            max_repeated_refusals: DEFAULT_MAX_REPEATED_REFUSALS,
            wind_down_idle: DEFAULT_WIND_DOWN_IDLE,
            tools: ToolFilter::default(),
            token_budget: None,
            session_policy: Policy::default(),
            commands: true,
            approvals: ApprovalSettings::default(),
            context: context::ContextConfig::default(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub turn_id: String,
    pub status: TurnStatus,
    pub reason: String,
    /// For `error`: what kind of failure.
    pub error_kind: Option<TurnErrorKind>,
    pub answer: Option<String>,
    pub iterations: u32,
    pub usage: Usage,
}

pub struct Agent {
    pub(crate) plugins: Arc<Plugins>,
    /// Every named agent of the current configuration; a reload replaces
    /// it whole (see [`profile`]).
    profiles: RwLock<Arc<Profiles>>,
    pub(crate) bus: EventBus,
    pub(crate) store: Store,
    /// Places for SubTurns alive at once, host-wide.
    pub(crate) subturn_slots: Arc<Semaphore>,
    /// Every turn alive, by id (see [`task`]).
    pub(crate) turns: Arc<task::TurnTable>,
    /// The tool calls waiting for a person's decision (see [`approval`]).
    pub(crate) approvals: approval::Approvals,
    /// Every tool on offer: the built-ins, then the plugins' tools.
    pub(crate) registry: Registry,
    /// The MCP servers whose tools are in the registry.
    mcp: Vec<Arc<crate::mcp::client::McpServer>>,
    /// The hooks, built once per plugin set.
    built: Mutex<Option<Built>>,
    /// The `on-event` hooks.
    observers: Arc<Observers>,
}

/// What is built from a plugin set besides its tools: the hooks.
struct Built {
    catalog: Arc<Catalog>,
    hooks: Arc<HookSet>,
}

impl Agent {
    /// An agent with one named agent, `default`: this chain and
    /// configuration.
    pub fn new(
        plugins: Arc<Plugins>,
        llm: Arc<Chain>,
        bus: EventBus,
        store: Store,
        config: AgentConfig,
    ) -> Agent {
        let total = config.subturns.total;
        Agent::with_profiles(plugins, Profiles::single(llm, config), bus, store, total)
    }

    /// An agent running the named agents of `profiles`; `max_subturns`
    /// SubTurns may be alive at once in the host.
    pub fn with_profiles(
        plugins: Arc<Plugins>,
        profiles: Profiles,
        bus: EventBus,
        store: Store,
        max_subturns: usize,
    ) -> Agent {
        Agent::with_mcp(plugins, profiles, bus, store, max_subturns, Vec::new())
    }

    /// As [`Agent::with_profiles`], with the MCP servers of
    /// `[mcp.servers]` as tool sources after the plugins.
    pub fn with_mcp(
        plugins: Arc<Plugins>,
        profiles: Profiles,
        bus: EventBus,
        store: Store,
        max_subturns: usize,
        mcp: Vec<Arc<crate::mcp::client::McpServer>>,
    ) -> Agent {
        let sources = (mcp.iter())
            .map(|server| Arc::new(crate::mcp::client::server::Source(server.clone())) as _);
        let observers = Arc::new(Observers::new(bus.clone()));
        observers.refresh(&plugins.catalog());
        Agent {
            registry: Registry::new(
                Arc::new(Builtins),
                std::iter::once(plugins.clone() as Arc<dyn registry::ToolSource>)
                    .chain(sources)
                    .collect(),
            ),
            plugins,
            mcp,
            profiles: RwLock::new(Arc::new(profiles)),
            bus,
            store,
            subturn_slots: Arc::new(Semaphore::new(max_subturns)),
            turns: Arc::default(),
            approvals: approval::Approvals::default(),
            built: Mutex::new(None),
            observers,
        }
    }

    /// Every named agent of the current configuration: the snapshot a turn
    /// starting now runs with.
    pub fn profiles(&self) -> Arc<Profiles> {
        self.profiles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces every named agent: turns that start from now on run with
    /// `profiles`; running ones keep theirs.
    pub fn set_profiles(&self, profiles: Profiles) {
        *self.profiles.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(profiles);
    }

    /// Every tool on offer now, as the model sees them: the plugins' tools,
    /// then the built-in ones (which take precedence over any tool of the
    /// same name). Built once per plugin set (see [`registry`]).
    pub fn tool_defs(&self) -> Arc<Vec<ToolDef>> {
        self.registry.defs()
    }

    /// The same, with the tokens they take in a request.
    pub fn offered_tools(&self) -> OfferedTools {
        self.registry.offered()
    }

    /// The tool registry: every tool on offer, and how a call reaches it.
    pub fn tools(&self) -> &Registry {
        &self.registry
    }

    /// The hooks of the current plugin set.
    pub fn hooks(&self) -> Arc<HookSet> {
        self.with_built(|built| built.hooks.clone())
    }

    /// Lets each `on-event` hook take in the events already queued for it
    /// (for at most 5 s), then stops them: before the host exits.
    pub async fn close_observers(&self) {
        self.observers
            .close(std::time::Duration::from_secs(5))
            .await;
    }

    /// What each `on-event` hook delivered, dropped and failed.
    pub fn observer_stats(&self) -> Vec<ObserverStats> {
        self.observers.stats()
    }

    /// `f` of the hooks of the current plugin set, built first if the set
    /// changed.
    fn with_built<T>(&self, f: impl FnOnce(&Built) -> T) -> T {
        let catalog = self.plugins.catalog();
        let mut cache = self.built.lock().unwrap_or_else(|e| e.into_inner());
        match &*cache {
            Some(built) if Arc::ptr_eq(&built.catalog, &catalog) => f(built),
            _ => {
                self.observers.refresh(&catalog);
                let built = cache.insert(Built {
                    hooks: Arc::new(HookSet::build(&catalog)),
                    catalog,
                });
                f(built)
            }
        }
    }

    pub fn bus(&self) -> &EventBus {
        &self.bus
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn plugins(&self) -> &Arc<Plugins> {
        &self.plugins
    }

    /// Runs one top-level turn on `session` for the user's `input`, with no
    /// one to steer it, and waits for its end. It runs on the caller's task
    /// with the life every turn has ([`task::run_here`]): in the table of
    /// turns, one `turn_end`, a panic inside ending it in error. No scheduler
    /// runs the session: a follow-up its SubTurns ask for is logged and
    /// dropped.
    /// It runs as the default agent.
    pub async fn run_turn(self: &Arc<Self>, session: &str, input: &str) -> TurnOutcome {
        let profiles = self.profiles();
        let profile = profiles.default_profile().clone();
        let control = control::TurnControl::new(session, 0, profile.config.subturns.per_parent);
        let start = task::Start::new(Arc::new(control));
        let spec = turn::TurnSpec::top(profiles, profile);
        task::run_here(self, start, spec, input.to_string()).await
    }

    /// The turns alive now, top-level and SubTurns, by id.
    pub fn turns(&self) -> &Arc<task::TurnTable> {
        &self.turns
    }

    /// Publishes the state of every plugin file: `plugin_loaded` or
    /// `plugin_failed` (at startup, so the event log says what was offered).
    pub fn announce_plugins(&self) {
        for status in &self.plugins.catalog().plugins {
            publish_plugin_change(&self.bus, status.as_change());
        }
        self.announce_mcp();
    }

    /// Lets the MCP servers' events (`mcp_server_ready`, `mcp_server_failed`)
    /// out, those held since the start first. A front end calls it once
    /// its consumers are subscribed; `serve` and `wasmclaw mcp`, whose
    /// plugin events come from the directory watch, call it alone.
    pub fn announce_mcp(&self) {
        self.mcp.iter().for_each(|server| server.announce());
    }

    /// Picks up plugins added, replaced or removed while the agent runs, and
    /// publishes each change (`plugin_loaded`, `plugin_failed`,
    /// `plugin_unloaded`). Watching stops when the handle is dropped.
    pub fn watch_plugins(&self) -> anyhow::Result<WatchHandle> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = self.plugins.watch(Some(tx))?;
        let bus = self.bus.clone();
        let (plugins, observers) = (self.plugins.clone(), self.observers.clone());
        tokio::spawn(async move {
            while let Some(changes) = rx.recv().await {
                // Observers of a new plugin see its own `plugin_loaded`.
                observers.refresh(&plugins.catalog());
                for change in changes {
                    publish_plugin_change(&bus, change);
                }
            }
        });
        Ok(handle)
    }
}

/// One change of the plugin set as an event.
pub fn publish_plugin_change(bus: &EventBus, change: PluginChange) {
    let body = match change {
        PluginChange::Loaded {
            name,
            tools,
            wit_version,
        } => EventBody::PluginLoaded(PluginLoaded {
            plugin: name,
            tools,
            wit_version: wit_version.to_string(),
        }),
        PluginChange::Failed { name, file, error } => EventBody::PluginFailed(PluginFailed {
            plugin: name,
            file: file.display().to_string(),
            error,
        }),
        PluginChange::Unloaded { name } => {
            EventBody::PluginUnloaded(PluginUnloaded { plugin: name })
        }
    };
    bus.publish(&Scope::host(), body);
}
