//! The resolved configuration: every value the host runs with, defaults,
//! the file, the environment and the flags already applied (see
//! [`super`] for the precedence). A [`Config`] is immutable and shared as
//! an `Arc`: a turn takes the one current when it starts, so a reload never
//! changes a running turn.

use std::collections::BTreeMap;
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
    /// `[mcp.servers]`: the MCP servers whose tools the agents may call.
    pub mcp_client: super::mcp::McpClientSettings,
    /// `[mcp.server]`: what `wasmclaw mcp` and `/mcp` serve.
    pub mcp_server: super::mcp::McpServeSettings,
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

/// `[agents.NAME.compaction]`: when and how the older history is
/// summarized (see `agent/compaction.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionSettings {
    /// Compact automatically (the overflow recovery and `/compact` work
    /// either way).
    pub enabled: bool,
    /// The fraction of the usable window past which a request is compacted.
    pub threshold: f64,
    /// User turns before the current one kept verbatim.
    pub keep_user_turns: u32,
    /// The model that writes summaries (None: the agent's chain).
    pub model: Option<ModelRef>,
    /// The summarizing call's system prompt.
    pub prompt: Arc<str>,
    /// A tool result longer than this fraction of the usable window goes
    /// to the model cut.
    pub tool_result_fraction: f64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        let d = crate::agent::context::ContextConfig::default();
        CompactionSettings {
            enabled: d.enabled,
            threshold: d.threshold,
            keep_user_turns: d.keep_user_turns as u32,
            model: None,
            prompt: d.prompt,
            tool_result_fraction: d.tool_result_fraction,
        }
    }
}

/// `[agents.NAME.approvals]`: which tool calls wait for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// Tool name patterns (`*` globs) and what a call of a matching tool
    /// gets; the first match wins.
    pub rules: Vec<ApprovalRule>,
    /// What a call of a tool no rule names gets.
    pub default: Permission,
    /// How long a call waits for a decision before it is denied.
    pub timeout: Duration,
}

/// One rule of [`ApprovalSettings::rules`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApprovalRule {
    pub tool: String,
    pub permission: Permission,
}

/// What a tool call gets from an approval rule.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// It runs.
    Allow,
    /// It waits for a person's decision.
    Ask,
    /// It is refused; the model reads why.
    Deny,
}

/// The default wait for an approval: 10 minutes.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            rules: Vec::new(),
            default: Permission::Allow,
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        }
    }
}

impl ApprovalSettings {
    /// What a call of `tool` gets, and the rule that said so (None: the
    /// default).
    pub fn permission(&self, tool: &str) -> (Permission, Option<&ApprovalRule>) {
        match self.rules.iter().find(|r| glob_match(&r.tool, tool)) {
            Some(rule) => (rule.permission, Some(rule)),
            None => (self.default, None),
        }
    }
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }
}

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
    /// An address, or a host name and port that `serve` looks up when it
    /// binds.
    pub listen: String,
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
    /// Plugin instances alive at once (all sessions, tools and hooks).
    pub max_instances: u32,
    /// The most the compile cache may hold; the least recently used
    /// entries past it are removed.
    pub cache_max_bytes: u64,
    /// Per-call limits of plugins whose grants file does not set them.
    pub limits: PluginLimits,
}

impl Default for ToolFilter {
    fn default() -> Self {
        ToolFilter {
            allow: vec!["*".to_string()],
            deny: Vec::new(),
        }
    }
}

impl ToolFilter {
    /// Whether `pattern` is a tool name, or one with `*` standing for any
    /// run of characters (`files_*`, `*`).
    pub fn is_pattern(pattern: &str) -> bool {
        let name = pattern.replace('*', "a");
        pattern.len() <= 64 && crate::plugin::tools::is_valid_tool_name(&name)
    }

    /// Whether the tool `name` is on offer: it matches an `allow` pattern
    /// and no `deny` pattern.
    pub fn allows(&self, name: &str) -> bool {
        let matches = |patterns: &[String]| patterns.iter().any(|p| glob_match(p, name));
        matches(&self.allow) && !matches(&self.deny)
    }

    /// Every tool passes: nothing to filter.
    pub fn allows_all(&self) -> bool {
        self.deny.is_empty() && self.allow.iter().any(|p| p == "*")
    }
}

/// `*` matches any run of characters (none included); every other character
/// matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut tail) = name.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        match tail.find(part) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    tail.len() >= last.len() && tail.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_tool_names() {
        for (pattern, name, expected) in [
            ("*", "files_read", true),
            ("files_*", "files_read", true),
            ("files_*", "file", false),
            ("*_read", "files_read", true),
            ("f*s*d", "files_read", true),
            ("f*s*d", "files_readx", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("calc", "calc", true),
            ("calc", "calculator", false),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} {name}");
        }
    }

    #[test]
    fn the_first_matching_approval_rule_wins_else_the_default() {
        let rule = |tool: &str, permission| ApprovalRule {
            tool: tool.into(),
            permission,
        };
        let settings = ApprovalSettings {
            rules: vec![
                rule("files_read", Permission::Allow),
                rule("files_*", Permission::Ask),
                rule("*", Permission::Deny),
            ],
            ..ApprovalSettings::default()
        };
        assert_eq!(settings.permission("files_read").0, Permission::Allow);
        assert_eq!(settings.permission("files_write").0, Permission::Ask);
        let (permission, by) = settings.permission("shell");
        assert_eq!(
            (permission, by.map(|r| r.tool.as_str())),
            (Permission::Deny, Some("*"))
        );
        assert_eq!(
            ApprovalSettings::default().permission("x"),
            (Permission::Allow, None)
        );
    }

    #[test]
    fn deny_wins_over_allow() {
        let filter = ToolFilter {
            allow: vec!["*".into()],
            deny: vec!["files_*".into()],
        };
        assert!(filter.allows("calc"));
        assert!(!filter.allows("files_write"));
        assert!(!filter.allows_all());
        assert!(ToolFilter::default().allows_all());
    }

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
        assert!(
            glob_match("*", "anything")
                && glob_match("a*b*c", "aXbYc")
                && !glob_match("a*b*c", "aXcYb")
        );
        assert!(glob_match("ab*b", "abb") && !glob_match("ab*b", "ab"));
        assert!(ToolFilter::is_pattern("files_*") && ToolFilter::is_pattern("*"));
        assert!(!ToolFilter::is_pattern("files/*") && !ToolFilter::is_pattern(""));
    }
}
