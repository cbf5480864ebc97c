//! The resolved configuration: every value the host runs with, defaults,
//! the file, the environment and the flags already applied (see
//! [`super`] for the precedence). A [`Config`] is immutable and shared as
//! an `Arc`: a turn takes the one current when it starts, so a reload never
//! changes a running turn.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::agent::subturn::SubTurnLimits;
use crate::llm::{CallLimits, ProviderKind, RetryPolicy};
use crate::plugin::policy::grants::Limits as PluginLimits;
use crate::plugin::policy::hook_settings::HookSettings;
use crate::plugin::sandbox::cache::LoadLimits;
use crate::protocol::Policy;

use super::sources::Sources;

/// The agent a session runs when none is named.
pub const DEFAULT_AGENT: &str = "default";

/// Everything the host runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file read, if there was one.
    pub file: Option<PathBuf>,
    /// By name: the built-in `openai`, `anthropic` and `scripted`, then the
    /// file's `[providers.NAME]` (which replace a built-in of the same name).
    pub providers: BTreeMap<String, ProviderSettings>,
    /// By name; `default` is always there.
    pub agents: BTreeMap<String, Arc<AgentSettings>>,
    /// The agent of sessions that name none (`--agent`; default `default`).
    pub default_agent: String,
    pub limits: LimitsSettings,
    pub server: ServerSettings,
    pub plugins: PluginSettings,
    /// Defaults of hook plugins whose grants file does not set them.
    pub hooks: HookSettings,
    /// Where each value came from (`config show`).
    pub sources: Sources,
}

/// `[providers.NAME]`: a server that speaks one wire format.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub name: String,
    pub kind: ProviderKind,
    /// OpenAI: up to and including `/v1`; Anthropic: without `/v1`. Empty
    /// for `scripted`.
    pub base_url: String,
    /// The environment variable that holds the key; the key itself is read
    /// when the provider is built and never stored here.
    pub api_key_env: Option<String>,
    /// Sent with every request (values as written; a header is not a key).
    pub headers: BTreeMap<String, String>,
    /// The longest wait for a reply to start and between streamed chunks.
    pub timeout: Duration,
    pub stream: bool,
    /// `[providers.NAME.models.MODEL]`.
    pub models: BTreeMap<String, ModelSettings>,
}

/// What is known of one model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSettings {
    /// Tokens of input and output together.
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u32>,
}

/// One candidate of an agent's model chain: `PROVIDER:MODEL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// A key of [`Config::providers`].
    pub provider: String,
    /// The model name sent to the server; for `scripted`, the script's path.
    pub model: String,
}

/// `[agents.NAME]`: a prompt, a model chain, tools and how turns run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    pub name: String,
    /// The fallback chain, first candidate first. Empty: no model is
    /// configured (a turn of this agent fails with the hint how to set one).
    pub model: Vec<ModelRef>,
    /// Inline, or read from `system_prompt_file` when the configuration was
    /// loaded.
    pub system_prompt: Option<Arc<str>>,
    pub tools: ToolFilter,
    /// Model calls per turn.
    pub max_iterations: u32,
    /// Identical refused tool calls that end a turn; 0: no limit.
    pub max_refusals: u32,
    /// Output tokens asked for per model call.
    pub max_tokens: Option<u32>,
    /// Tokens (input and output) a turn and its SubTurns may use.
    pub token_budget: Option<u64>,
    /// What a session of this agent does with a message that arrives while
    /// its turn runs (a session's own `SetPolicy` wins).
    pub session_policy: Policy,
    /// Messages that start with `/` are chat commands, not model input.
    pub commands: bool,
    /// SubTurn limits of this agent's turns (`total` is host-wide:
    /// [`LimitsSettings::max_subturns`]).
    pub subturns: SubTurnLimits,
    /// `[agents.NAME.compaction]`: settings of context compaction.
    pub compaction: CompactionSettings,
    /// `[agents.NAME.approvals]`: settings of human approval of tool calls.
    pub approvals: ApprovalSettings,
}

/// Filled by context compaction; no key is accepted yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionSettings {}

/// Filled by tool-call approvals; no key is accepted yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalSettings {}

/// Which tools an agent offers: `allow` (default `["*"]`), then `deny`; both
/// tool names with `*` globs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFilter {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// `[limits]`: host-wide.
#[derive(Debug, Clone)]
pub struct LimitsSettings {
    /// Tool calls of one reply that run at the same time.
    pub tool_concurrency: usize,
    /// Turns that run at the same time, across sessions.
    pub max_parallel_turns: usize,
    /// SubTurns alive at once in the host.
    pub max_subturns: usize,
    /// `[limits.retry]`.
    pub retry: RetryPolicy,
    /// A model call's deadline and its reply's bounds.
    pub call: CallLimits,
    /// After a graceful interrupt, how long a model call may stay silent.
    pub wind_down_idle: Duration,
}

/// `[server]`: `wasmclaw serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub listen: SocketAddr,
    /// The environment variable that holds the API token (default
    /// `WASMCLAW_API_TOKEN`); unset: the token in HOME/api-token.
    pub token_env: String,
    pub max_body_bytes: usize,
    pub shutdown_grace: Duration,
}

/// `[plugins]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSettings {
    /// The plugin directory (relative paths in the file are relative to the
    /// file's folder); default HOME/plugins.
    pub dir: PathBuf,
    /// Bounds on loading a plugin file.
    pub load: LoadLimits,
    /// Per-call limits of plugins whose grants file does not set them.
    pub limits: PluginLimits,
}

impl ToolFilter {
    /// Whether `pattern` is a tool name, or one with `*` standing for any
    /// run of characters (`files_*`, `*`).
    pub fn is_pattern(pattern: &str) -> bool {
        let name = pattern.replace('*', "a");
        pattern.len() <= 64 && crate::plugin::tools::is_valid_tool_name(&name)
    }

    /// Whether `tool` is offered: an `allow` pattern matches it and no
    /// `deny` pattern does.
    pub fn allows(&self, tool: &str) -> bool {
        let matches = |patterns: &[String]| patterns.iter().any(|p| glob(p, tool));
        matches(&self.allow) && !matches(&self.deny)
    }
}

/// Whether `name` matches `pattern`, whose `*` stands for any run of
/// characters.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole name
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_filters_match_names_and_globs() {
        let filter = ToolFilter {
            allow: vec!["files_*".into(), "add".into(), "*_search".into()],
            deny: vec!["files_delete".into()],
        };
        let allowed: Vec<&str> = [
            "files_read",
            "files_delete",
            "add",
            "adder",
            "web_search",
            "x",
        ]
        .into_iter()
        .filter(|t| filter.allows(t))
        .collect();
        assert_eq!(allowed, ["files_read", "add", "web_search"]);
        assert!(glob("*", "anything") && glob("a*b*c", "aXbYc") && !glob("a*b*c", "aXcYb"));
        assert!(glob("ab*b", "abb") && !glob("ab*b", "ab"));
        assert!(ToolFilter::is_pattern("files_*") && ToolFilter::is_pattern("*"));
        assert!(!ToolFilter::is_pattern("files/*") && !ToolFilter::is_pattern(""));
    }
}
