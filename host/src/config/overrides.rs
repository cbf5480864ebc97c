//! The command line's part in the configuration: the flags that override
//! the file, and the environment variables read for values that have one.
//!
//! A flag is `None` when not given: the defaults are the resolver's, so the
//! file can sit between the environment and them. The variables are read
//! by the resolver too (through the `env` it is given), not by clap, so it
//! can tell `flag --model` from `env WASMCLAW_MODEL` from the file.

use std::path::PathBuf;

use clap::Args;

/// `--config FILE`: the configuration file, which must then exist.
pub const CONFIG_VAR: &str = "WASMCLAW_CONFIG";
/// `--agent NAME`: the agent of sessions that name none.
pub const AGENT_VAR: &str = "WASMCLAW_AGENT";
/// `--model`.
pub const MODEL_VAR: &str = "WASMCLAW_MODEL";
/// `--llm-deadline`.
pub const LLM_DEADLINE_VAR: &str = "WASMCLAW_LLM_DEADLINE";
/// `--max-retry-wait`.
pub const MAX_RETRY_WAIT_VAR: &str = "WASMCLAW_MAX_RETRY_WAIT";
/// `--max-reply-text`.
pub const MAX_REPLY_TEXT_VAR: &str = "WASMCLAW_MAX_REPLY_TEXT";
/// `--max-reply-arguments`.
pub const MAX_REPLY_ARGUMENTS_VAR: &str = "WASMCLAW_MAX_REPLY_ARGUMENTS";
/// `--max-plugin-mib`.
pub const MAX_PLUGIN_MIB_VAR: &str = "WASMCLAW_MAX_PLUGIN_MIB";
/// `--compile-timeout`.
pub const COMPILE_TIMEOUT_VAR: &str = "WASMCLAW_COMPILE_TIMEOUT";
/// `--compile-memory-mib`.
pub const COMPILE_MEMORY_MIB_VAR: &str = "WASMCLAW_COMPILE_MEMORY_MIB";
/// `--max-instances`.
pub const MAX_INSTANCES_VAR: &str = "WASMCLAW_MAX_INSTANCES";
/// The default of `[server] token_env`: the HTTP API's token.
pub const API_TOKEN_VAR: &str = "WASMCLAW_API_TOKEN";

/// Every variable the configuration reads by a fixed name (besides the
/// providers' own, [`crate::llm::PROVIDER_ENV`], and those the file names).
pub const ENV: [&str; 12] = [
    CONFIG_VAR,
    AGENT_VAR,
    MODEL_VAR,
    LLM_DEADLINE_VAR,
    MAX_RETRY_WAIT_VAR,
    MAX_REPLY_TEXT_VAR,
    MAX_REPLY_ARGUMENTS_VAR,
    MAX_PLUGIN_MIB_VAR,
    COMPILE_TIMEOUT_VAR,
    COMPILE_MEMORY_MIB_VAR,
    MAX_INSTANCES_VAR,
    API_TOKEN_VAR,
];

/// Every flag that overrides the configuration.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub plugins: PluginFlags,
    pub agent: AgentFlags,
    pub server: ServerFlags,
    /// The command is `serve`: defaults sized for many sessions.
    pub serving: bool,
}

/// `[plugins]`: flags of every command.
#[derive(Args, Debug, Clone, Default)]
pub struct PluginFlags {
    /// The plugin directory; default HOME/plugins.
    #[arg(long = "plugins", global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Largest plugin file loaded, in MiB (or WASMCLAW_MAX_PLUGIN_MIB;
    /// default 128); a larger one is refused before it is read.
    #[arg(long, global = true, value_name = "MIB")]
    pub max_plugin_mib: Option<u64>,
    /// Longest the compilation of one plugin may take (or
    /// WASMCLAW_COMPILE_TIMEOUT; default 120).
    #[arg(long, global = true, value_name = "SECONDS")]
    pub compile_timeout: Option<f64>,
    /// Memory the compilation of one plugin may take, in MiB (or
    /// WASMCLAW_COMPILE_MEMORY_MIB; default 2048).
    #[arg(long, global = true, value_name = "MIB")]
    pub compile_memory_mib: Option<u64>,
    /// Plugin instances alive at once: every call in flight, tools and
    /// hooks, of every session; a call past it fails, retryable (or
    /// WASMCLAW_MAX_INSTANCES; default 1000 for `serve`, 64 otherwise).
    /// The engine reserves their slots at start, so fewer start faster.
    #[arg(long, global = true, value_name = "N")]
    pub max_instances: Option<u64>,
}

/// The agent the process runs, and its model: flags of `run`, `chat`,
/// `serve` and `config show`. They override `[agents.NAME]` of the agent
/// run (and the providers its model chain names, for `--base-url`,
/// `--llm-timeout` and `--no-stream`).
#[derive(Args, Debug, Clone, Default)]
pub struct AgentFlags {
    /// The agent of sessions that name none (or WASMCLAW_AGENT; default
    /// `default`): one of the file's [agents.NAME].
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// PROVIDER:MODEL (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
    /// scripted:FILE.json, or a provider of the file); several,
    /// comma-separated, form a fallback chain (or WASMCLAW_MODEL).
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,
    /// Base URL of the chain's server, in place of the provider's
    /// (base_url, $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL): with /v1 for
    /// OpenAI-format candidates, without for Anthropic ones. A chain of
    /// both is refused (one URL cannot serve both).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Longest wait for a model's reply to start, and between streamed
    /// chunks (default 120).
    #[arg(long, value_name = "SECONDS")]
    pub llm_timeout: Option<f64>,
    /// Longest one attempt of a model call may take, start to finish (or
    /// WASMCLAW_LLM_DEADLINE; default 600); past it the attempt fails as a
    /// timeout (and is retried).
    #[arg(long, value_name = "SECONDS")]
    pub llm_deadline: Option<f64>,
    /// Longest `retry-after` waited for (or WASMCLAW_MAX_RETRY_WAIT;
    /// default 60); a server asking for longer fails the candidate at once.
    #[arg(long, value_name = "SECONDS")]
    pub max_retry_wait: Option<f64>,
    /// Most bytes of a reply's text (or WASMCLAW_MAX_REPLY_TEXT; default
    /// 1 MiB); past it the call fails (not retried).
    #[arg(long, value_name = "BYTES")]
    pub max_reply_text: Option<u64>,
    /// Most bytes of a reply's tool-call arguments, all calls together (or
    /// WASMCLAW_MAX_REPLY_ARGUMENTS; default 1 MiB); past it the call fails
    /// (not retried).
    #[arg(long, value_name = "BYTES")]
    pub max_reply_arguments: Option<u64>,
    /// Ask for whole replies instead of streamed ones.
    #[arg(long)]
    pub no_stream: bool,
    /// Model calls per turn (default 50).
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u64>,
    /// Identical refused tool calls (same tool, same arguments) that end a
    /// turn with an error; 0: no limit (default 3).
    #[arg(long, value_name = "N")]
    pub max_refusals: Option<u64>,
    /// A system prompt put before the history.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
}

/// `[server]` and `[limits] max_parallel_turns`: flags of `serve` and
/// `config show`.
#[derive(Args, Debug, Clone, Default)]
pub struct ServerFlags {
    /// The address to listen on (default 127.0.0.1:8787; a bare port is on
    /// 127.0.0.1). Anything but loopback exposes the API to the network
    /// (the token still guards it).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Turns that run at the same time, across sessions (default 256).
    #[arg(long, value_name = "N")]
    pub max_parallel: Option<u64>,
    /// Largest request body accepted, in KiB (default 1024).
    #[arg(long, value_name = "KIB")]
    pub max_body_kib: Option<u64>,
    /// At shutdown, how long running turns may take to wind down before
    /// they are stopped (default 10).
    #[arg(long, value_name = "SECONDS")]
    pub shutdown_grace: Option<f64>,
}
