//! The agent: turns of a session, driven by a model and the plugins' tools.
//!
//! - [`turn`]: one turn, from the user's message to the final answer.
//! - [`tools`]: running the tool calls of one model reply.
//! - [`control`]: how a running turn is steered and interrupted.
//!
//! An [`Agent`] holds what every turn shares: the plugins, the model chain,
//! the event bus and the session store. Front ends submit turns to the
//! [`crate::scheduler::Scheduler`] and follow them on the bus;
//! [`Agent::run_turn`] runs one turn directly, outside any schedule.

pub mod control;
pub mod tools;
pub mod turn;

use std::sync::Arc;

use crate::bus::{EventBus, Scope};
use crate::llm::{Chain, Usage};
use crate::plugin::Plugins;
use crate::plugin::catalog::PluginChange;
use crate::plugin::watch::WatchHandle;
use crate::protocol::{EventBody, TurnStatus};
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
}

pub const DEFAULT_MAX_ITERATIONS: u32 = 50;
pub const DEFAULT_TOOL_CONCURRENCY: usize = 8;

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_iterations: DEFAULT_MAX_ITERATIONS,
            tool_concurrency: DEFAULT_TOOL_CONCURRENCY,
            system_prompt: None,
            max_tokens: None,
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub turn_id: String,
    pub status: TurnStatus,
    pub reason: String,
    pub answer: Option<String>,
    pub iterations: u32,
    pub usage: Usage,
}

pub struct Agent {
    pub(crate) plugins: Arc<Plugins>,
    pub(crate) llm: Arc<Chain>,
    pub(crate) bus: EventBus,
    pub(crate) store: Store,
    pub(crate) config: AgentConfig,
}

impl Agent {
    pub fn new(
        plugins: Arc<Plugins>,
        llm: Arc<Chain>,
        bus: EventBus,
        store: Store,
        config: AgentConfig,
    ) -> Agent {
        Agent {
            plugins,
            llm,
            bus,
            store,
            config,
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
    /// one to steer or interrupt it.
    pub async fn run_turn(&self, session: &str, input: &str) -> TurnOutcome {
        let control = Arc::new(control::TurnControl::new(session, 0));
        turn::Turn::new(self, control, None).run(input).await
    }

    /// Publishes the state of every plugin file: `plugin_loaded` or
    /// `plugin_failed` (at startup, so the event log says what was offered).
    pub fn announce_plugins(&self) {
        for status in &self.plugins.catalog().plugins {
            publish_plugin_change(&self.bus, status.as_change());
        }
    }

    /// Picks up plugins added, replaced or removed while the agent runs, and
    /// publishes each change (`plugin_loaded`, `plugin_failed`,
    /// `plugin_unloaded`). Watching stops when the handle is dropped.
    pub fn watch_plugins(&self) -> anyhow::Result<WatchHandle> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = self.plugins.watch(Some(tx))?;
        let bus = self.bus.clone();
        tokio::spawn(async move {
            while let Some(changes) = rx.recv().await {
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
        PluginChange::Loaded { name, tools } => EventBody::PluginLoaded {
            plugin: name,
            tools,
        },
        PluginChange::Failed { name, file, error } => EventBody::PluginFailed {
            plugin: name,
            file: file.display().to_string(),
            error,
        },
        PluginChange::Unloaded { name } => EventBody::PluginUnloaded { plugin: name },
    };
    bus.publish(&Scope::host(), body);
}
