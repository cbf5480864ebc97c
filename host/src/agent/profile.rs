//! Named agents as turns run them: each [`Profile`] is one agent of the
//! configuration (its model chain, prompt, tools and limits) ready to run,
//! and [`Profiles`] is every agent of one configuration. The agent holds
//! the current [`Profiles`] and a reload replaces it whole; a turn takes
//! the snapshot current when it starts, and its SubTurns resolve other
//! agents in that same snapshot, so a running turn tree never sees a
//! reload.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::llm::Chain;

use super::AgentConfig;

/// The name of the agent that runs when none is named.
pub use crate::config::DEFAULT_AGENT;

/// One named agent, ready to run.
pub struct Profile {
    pub name: String,
    pub chain: Arc<Chain>,
    pub config: AgentConfig,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Builds the model chain of a `PROVIDER:MODEL[,...]` spec against the
/// configuration the profiles came from, keeping `base`'s reply limits and
/// timeouts.
pub type ChainBuilder = dyn Fn(&str, &Profile) -> Result<Chain, String> + Send + Sync;

/// The most session model overrides kept built at once; past it the cache
/// starts over (each is rebuilt on its next use).
const MAX_OVERRIDES: usize = 64;

/// Every agent of one configuration.
pub struct Profiles {
    agents: BTreeMap<String, Arc<Profile>>,
    /// Agents of the configuration that cannot run (no model, a script
    /// that does not read), and why.
    unavailable: BTreeMap<String, String>,
    default: String,
    /// How a session's `/model` override is built; None: overrides are
    /// refused.
    chains: Option<Box<ChainBuilder>>,
    /// Session model overrides built so far, by (agent, spec): a chain
    /// keeps its candidates' cooldowns between turns.
    overrides: Mutex<HashMap<(String, String), Arc<Profile>>>,
}

impl std::fmt::Debug for Profiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiles")
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

/// Why a session's agent or model cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("no agent `{name}` in the configuration (agents: {known})")]
    UnknownAgent { name: String, known: String },
    #[error("model `{spec}`: {reason}")]
    BadModel { spec: String, reason: String },
    #[error("agent `{name}` cannot run: {reason}")]
    Unavailable { name: String, reason: String },
}

impl Profiles {
    /// One agent, the default, with this chain and configuration; a
    /// session's model override builds its chain with `chains`.
    pub fn single(chain: Arc<Chain>, config: AgentConfig) -> Profiles {
        let profile = Profile {
            name: DEFAULT_AGENT.to_string(),
            chain,
            config,
        };
        Profiles::new(vec![profile], DEFAULT_AGENT, None)
    }

    /// `agents` by name, `default` among them (else the first is the
    /// default).
    pub fn new(agents: Vec<Profile>, default: &str, chains: Option<Box<ChainBuilder>>) -> Profiles {
        let agents: BTreeMap<String, Arc<Profile>> = (agents.into_iter())
            .map(|p| (p.name.clone(), Arc::new(p)))
            .collect();
        let default = if agents.contains_key(default) {
            default.to_string()
        } else {
            agents.keys().next().cloned().unwrap_or_default()
        };
        Profiles {
            agents,
            unavailable: BTreeMap::new(),
            default,
            chains,
            overrides: Mutex::default(),
        }
    }

    /// The agent of sessions that name none.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    pub fn default_profile(&self) -> &Arc<Profile> {
        &self.agents[&self.default]
    }

    /// The agents' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Profile>> {
        self.agents.get(name)
    }

    /// Agents of the configuration that cannot run: their turns end in
    /// error with `reason`.
    pub fn with_unavailable(mut self, unavailable: BTreeMap<String, String>) -> Profiles {
        self.unavailable = unavailable;
        self
    }

    /// The agent `name`, or the error that says why it cannot run or lists
    /// the agents.
    pub fn agent(&self, name: &str) -> Result<&Arc<Profile>, ProfileError> {
        if let Some(reason) = self.unavailable.get(name) {
            return Err(ProfileError::Unavailable {
                name: name.to_string(),
                reason: reason.clone(),
            });
        }
        self.agents
            .get(name)
            .ok_or_else(|| ProfileError::UnknownAgent {
                name: name.to_string(),
                known: self.names().collect::<Vec<_>>().join(", "),
            })
    }

    /// What a session runs: its agent (the default when it has none), with
    /// its model override's chain in place of the agent's.
    pub fn for_session(
        &self,
        agent: Option<&str>,
        model: Option<&str>,
    ) -> Result<Arc<Profile>, ProfileError> {
        let base = self.agent(agent.unwrap_or(&self.default))?;
        let Some(spec) = model else {
            return Ok(base.clone());
        };
        let key = (base.name.clone(), spec.to_string());
        let lock = || self.overrides.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(profile) = lock().get(&key) {
            return Ok(profile.clone());
        }
        // Built with no lock held: a slow build holds up no other session.
        let chain = self.build_chain(spec, base)?;
        let profile = Arc::new(Profile {
            name: base.name.clone(),
            chain: Arc::new(chain),
            config: base.config.clone(),
        });
        let mut overrides = lock();
        if overrides.len() >= MAX_OVERRIDES {
            overrides.clear();
        }
        Ok(overrides.entry(key).or_insert(profile).clone())
    }

    /// Checks that `spec` builds a chain for `agent` (before a session
    /// takes it as its model).
    pub fn check_model(&self, agent: Option<&str>, spec: &str) -> Result<(), ProfileError> {
        self.for_session(agent, Some(spec)).map(drop)
    }

    fn build_chain(&self, spec: &str, base: &Profile) -> Result<Chain, ProfileError> {
        let bad = |reason: String| ProfileError::BadModel {
            spec: spec.to_string(),
            reason,
        };
        let Some(build) = &self.chains else {
            return Err(bad("this host takes no model override".to_string()));
        };
        build(spec, base).map_err(bad)
    }
}
