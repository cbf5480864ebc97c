//! `wasmclaw.toml` exactly as written: [`ConfigToml`] mirrors the file,
//! every field optional and every table closed (`deny_unknown_fields`), so
//! a misspelt key is an error, never a setting silently ignored. Numbers
//! are taken as written (`u64`, `f64`) and checked against their ranges
//! when the file is resolved ([`super::resolve`]), where the error can name
//! the bounds.

use crate::config::Permission;
use crate::plugin::policy::grants::ApprovalRuleToml;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::plugin::policy::grants::LimitsToml as PluginLimitsToml;
use crate::plugin::policy::hook_settings::FailMode;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigToml {
    pub providers: Option<BTreeMap<String, ProviderToml>>,
    pub agents: Option<BTreeMap<String, AgentToml>>,
    pub limits: Option<LimitsToml>,
    pub server: Option<ServerToml>,
    pub plugins: Option<PluginsToml>,
    pub hooks: Option<HooksToml>,
    pub mcp: Option<super::mcp::McpToml>,
}

/// `[providers.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderToml {
    pub kind: Option<KindToml>,
    pub base_url: Option<String>,
    /// The name of the environment variable that holds the key.
    pub api_key_env: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub timeout_secs: Option<f64>,
    pub stream: Option<bool>,
    pub models: Option<BTreeMap<String, ModelToml>>,
}

/// The wire format a `[providers.NAME]` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum KindToml {
    #[serde(rename = "openai")]
    OpenAi,
    #[serde(rename = "anthropic")]
    Anthropic,
}

/// `[providers.NAME.models."MODEL"]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelToml {
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
}

/// `[agents.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentToml {
    pub model: Option<ModelSpecToml>,
    pub system_prompt: Option<String>,
    /// Relative to the configuration file's folder.
    pub system_prompt_file: Option<String>,
    pub tools: Option<ToolsToml>,
    pub max_iterations: Option<u64>,
    pub max_refusals: Option<u64>,
    pub max_tokens: Option<u64>,
    pub token_budget: Option<u64>,
    pub session_policy: Option<PolicyToml>,
    pub commands: Option<bool>,
    pub subturns: Option<SubturnsToml>,
    pub compaction: Option<CompactionToml>,
    pub approvals: Option<ApprovalsToml>,
}

/// `[agents.NAME.approvals]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsToml {
    /// What a call of a tool no rule names gets.
    pub default: Option<Permission>,
    pub timeout_secs: Option<f64>,
    /// `[{ tool = "files_*", permission = "ask" }, ...]`, first match wins.
    pub rules: Option<Vec<ApprovalRuleToml>>,
}

/// `model = "PROVIDER:MODEL"` or a list of them (the fallback chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpecToml(pub Vec<String>);

impl<'de> Deserialize<'de> for ModelSpecToml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Spec;
        impl<'de> Visitor<'de> for Spec {
            type Value = ModelSpecToml;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string \"PROVIDER:MODEL\" or an array of them")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ModelSpecToml(vec![v.to_string()]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut all = Vec::new();
                while let Some(spec) = seq.next_element::<String>()? {
                    all.push(spec);
                }
                Ok(ModelSpecToml(all))
            }
        }
        deserializer.deserialize_any(Spec)
    }
}

/// `tools = { allow = [...], deny = [...] }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsToml {
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
}

/// `session_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyToml {
    Steer,
    FollowUp,
}

/// `[agents.NAME.subturns]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubturnsToml {
    pub max_depth: Option<u64>,
    pub per_parent: Option<u64>,
    pub per_tree: Option<u64>,
    pub per_call: Option<u64>,
    pub slot_wait_secs: Option<f64>,
    pub timeout_secs: Option<f64>,
}

/// `[agents.NAME.compaction]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionToml {
    pub enabled: Option<bool>,
    pub threshold: Option<f64>,
    pub keep_user_turns: Option<u64>,
    /// `PROVIDER:MODEL` of the summarizing call.
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub tool_result_fraction: Option<f64>,
}

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsToml {
    pub tool_concurrency: Option<u64>,
    pub max_parallel_turns: Option<u64>,
    pub max_subturns: Option<u64>,
    pub max_reply_text: Option<u64>,
    pub max_reply_arguments: Option<u64>,
    pub llm_deadline_secs: Option<f64>,
    pub wind_down_idle_secs: Option<f64>,
    pub retry: Option<RetryToml>,
}

/// `[limits.retry]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryToml {
    pub tries: Option<u64>,
    pub backoff_ms: Option<u64>,
    pub max_backoff_ms: Option<u64>,
    pub jitter: Option<f64>,
    pub cooldown_secs: Option<f64>,
    pub max_retry_wait_secs: Option<f64>,
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerToml {
    pub listen: Option<ListenToml>,
    pub token_env: Option<String>,
    pub max_body_kib: Option<u64>,
    pub shutdown_grace_secs: Option<f64>,
}

/// `listen = "127.0.0.1:8787"`, or a bare port: `8787` or `"8787"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenToml(pub String);

impl<'de> Deserialize<'de> for ListenToml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Listen;
        impl Visitor<'_> for Listen {
            type Value = ListenToml;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an address such as \"127.0.0.1:8787\" or a port")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ListenToml(v.to_string()))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(ListenToml(v.to_string()))
            }
        }
        deserializer.deserialize_any(Listen)
    }
}

/// `[plugins]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginsToml {
    /// Relative to the configuration file's folder.
    pub dir: Option<String>,
    pub max_plugin_mib: Option<u64>,
    pub compile_timeout_secs: Option<f64>,
    pub compile_memory_mib: Option<u64>,
    pub max_instances: Option<u64>,
    pub cache_max_mib: Option<u64>,
    /// As a grants file's `[limits]`.
    pub limits: Option<PluginLimitsToml>,
}

/// `[hooks]`: as a grants file's `[hooks]`, less `priority` (a plugin's
/// own, or its grants file's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksToml {
    pub timeout_ms: Option<u64>,
    pub memory_mib: Option<u64>,
    pub fail: Option<FailMode>,
    pub queue: Option<u64>,
}
