//! What a [`Config`] builds: an agent's model chain (its providers made,
//! their keys read from the environment now), and the settings of the
//! agent, the scheduler, the server and the plugins' grants.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::settings::{AgentSettings, Config, ModelRef};
use crate::agent::AgentConfig;
use crate::agent::context::{self, CompactionModel, ContextConfig};
use crate::agent::profile::{Profile, Profiles};
use crate::llm::scripted::ScriptError;
use crate::llm::{Chain, Provider, ProviderConfig, ProviderKind};
use crate::plugin::policy::grants::PluginDefaults;
use crate::scheduler::SchedulerConfig;
use crate::server::ServerConfig;

/// The longest `/model` spec a session may give, and its most candidates.
pub const MAX_OVERRIDE_SPEC: usize = 512;
pub const MAX_OVERRIDE_CANDIDATES: usize = 8;

/// Why an agent's model chain cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(
        "no model configured. Pass --model PROVIDER:MODEL or set WASMCLAW_MODEL, e.g.
  --model openai:gpt-4o-mini          (key from OPENAI_API_KEY; --base-url or OPENAI_BASE_URL for other servers)
  --model anthropic:claude-sonnet-4-5 (key from ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL)
  --model scripted:FILE.json          (replies played from a file, no network; see the README)
Several, comma-separated, form a fallback chain. Or set `model` in [agents.{agent}] of wasmclaw.toml."
    )]
    NoModel { agent: String },
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error("providers.{provider}.headers.{header}: not a valid header")]
    Header { provider: String, header: String },
}

impl Config {
    /// The agent of sessions that name none.
    pub fn running_agent(&self) -> &Arc<AgentSettings> {
        &self.agents[&self.default_agent]
    }

    /// The candidate `model` of the chain: its provider's settings, the
    /// call limits, and the key read from `env`.
    pub fn candidate(
        &self,
        model: &ModelRef,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, ChainError> {
        let p = &self.providers[&model.provider];
        let mut headers = HeaderMap::new();
        for (name, value) in &p.headers {
            let header = || ChainError::Header {
                provider: p.name.clone(),
                header: name.clone(),
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| header())?;
            let value = HeaderValue::from_str(value).map_err(|_| header())?;
            headers.insert(name, value);
        }
        let key = p.api_key_env.as_deref().and_then(env);
        Ok(ProviderConfig {
            kind: p.kind,
            model: model.model.clone(),
            base_url: p.base_url.clone(),
            api_key: key.filter(|k| !k.trim().is_empty()),
            api_key_env: p.api_key_env.clone(),
            headers,
            stream: p.stream,
            timeout: p.timeout,
            limits: self.limits.call,
        })
    }

    /// The model chain of `agent`, with the retry policy of `[limits.retry]`.
    pub fn chain(
        &self,
        agent: &AgentSettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Chain, ChainError> {
        if agent.model.is_empty() {
            return Err(ChainError::NoModel {
                agent: agent.name.clone(),
            });
        }
        let client = crate::llm::http_client();
        let mut providers = Vec::new();
        for model in &agent.model {
            providers.push(Provider::new(self.candidate(model, env)?, client.clone())?);
        }
        Ok(Chain::new(providers, self.limits.retry.clone()))
    }

    /// How `agent`'s turns run. `max_tokens` unset asks for the least
    /// `max_output_tokens` of the chain's models that declare one.
    pub fn agent_config(&self, agent: &AgentSettings) -> AgentConfig {
        let declared = (agent.model.iter())
            .filter_map(|m| self.providers.get(&m.provider)?.models.get(&m.model))
            .filter_map(|m| m.max_output_tokens)
            .min();
        AgentConfig {
            max_iterations: agent.max_iterations,
            tool_concurrency: self.limits.tool_concurrency,
            system_prompt: agent.system_prompt.as_deref().map(String::from),
            max_tokens: agent.max_tokens.or(declared),
            subturns: agent.subturns.clone(),
            max_repeated_refusals: agent.max_refusals,
            wind_down_idle: self.limits.wind_down_idle,
            tools: agent.tools.clone(),
            token_budget: agent.token_budget,
            session_policy: agent.session_policy,
            commands: agent.commands,
            approvals: agent.approvals.clone(),
            context: self.context_config(agent),
        }
    }

    /// How `agent`'s context is kept in its window: the least context
    /// window of its chain's models (declared, else their family's), and
    /// its `[agents.NAME.compaction]`. The compaction model's chain is
    /// built by [`Config::profiles`].
    pub fn context_config(&self, agent: &AgentSettings) -> ContextConfig {
        let window = (agent.model.iter())
            .map(|m| {
                let declared = self.providers.get(&m.provider)?.models.get(&m.model);
                declared
                    .and_then(|d| d.context_window)
                    .or_else(|| context::family_window(&m.model))
            })
            .collect::<Option<Vec<u64>>>()
            .and_then(|windows| windows.into_iter().min());
        let c = &agent.compaction;
        ContextConfig {
            window,
            threshold: c.threshold,
            keep_user_turns: c.keep_user_turns as usize,
            prompt: c.prompt.clone(),
            tool_result_fraction: c.tool_result_fraction,
            model: None,
            enabled: c.enabled,
        }
    }

    /// Every agent, ready to run, and how a session's model override
    /// (`PROVIDER:MODEL`, comma-separated) is built against these
    /// providers, keys read from `env`. The agent the process runs must
    /// build; another that does not (no model, a script that does not
    /// read) is kept as unavailable, and its turns end in error saying why.
    pub fn profiles(
        self: &Arc<Self>,
        env: fn(&str) -> Option<String>,
    ) -> Result<Profiles, ChainError> {
        let mut agents = Vec::new();
        let mut unavailable = BTreeMap::new();
        for (name, settings) in &self.agents {
            let compaction = (settings.compaction.model.as_ref()).map(|model| {
                let only = AgentSettings {
                    model: vec![model.clone()],
                    ..(**settings).clone()
                };
                self.chain(&only, &env)
            });
            match (self.chain(settings, &env), compaction.transpose()) {
                (Ok(chain), Ok(compaction)) => {
                    let mut config = self.agent_config(settings);
                    config.context.model = compaction.map(|c| CompactionModel(Arc::new(c)));
                    agents.push(Profile {
                        name: name.clone(),
                        chain: Arc::new(chain),
                        config,
                    })
                }
                (Err(e), _) | (_, Err(e)) if *name == self.default_agent => return Err(e),
                (Err(e), _) | (_, Err(e)) => {
                    unavailable.insert(name.clone(), e.to_string());
                }
            }
        }
        let config = self.clone();
        let chains = move |spec: &str, base: &Profile| {
            if spec.len() > MAX_OVERRIDE_SPEC {
                return Err(format!("longer than {MAX_OVERRIDE_SPEC} bytes"));
            }
            let models = super::resolve::parse_chain(spec, &config.providers)?;
            if models.len() > MAX_OVERRIDE_CANDIDATES {
                return Err(format!("more than {MAX_OVERRIDE_CANDIDATES} candidates"));
            }
            // A session's client names the spec: it may not make the host
            // read a file.
            let scripted = models
                .iter()
                .find(|m| config.providers[&m.provider].kind == ProviderKind::Scripted);
            if let Some(m) = scripted {
                return Err(format!(
                    "provider `{}` plays a file: only the configuration may name one",
                    m.provider
                ));
            }
            let mut settings = (*config.agents[&base.name]).clone();
            settings.model = models;
            config.chain(&settings, &env).map_err(|e| e.to_string())
        };
        let profiles = Profiles::new(agents, &self.default_agent, Some(Box::new(chains)));
        Ok(profiles.with_unavailable(unavailable))
    }

    /// The scheduler's limits.
    pub fn scheduler_config(&self) -> SchedulerConfig {
        SchedulerConfig {
            max_parallel: self.limits.max_parallel_turns,
            ..SchedulerConfig::default()
        }
    }

    /// The HTTP API's settings, with its `token`.
    pub fn server_config(&self, token: String) -> ServerConfig {
        ServerConfig {
            max_body_bytes: self.server.max_body_bytes,
            shutdown_grace: self.server.shutdown_grace,
            mcp: self.mcp_server.clone(),
            ..ServerConfig::new(token)
        }
    }

    /// What a plugin gets where its grants file says nothing, and the
    /// variables (keys of providers, the API token) no grant may pass.
    pub fn plugin_defaults(&self) -> PluginDefaults {
        let mut host_env: Vec<String> = (self.providers.values())
            .filter_map(|p| p.api_key_env.clone())
            .chain([self.server.token_env.clone()])
            .collect();
        host_env.sort();
        host_env.dedup();
        PluginDefaults {
            limits: self.plugins.limits.clone(),
            hooks: self.hooks.clone(),
            host_env,
        }
    }
}
