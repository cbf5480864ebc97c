//! Talking to models.
//!
//! - [`types`]: the provider-neutral request and reply.
//! - [`error`]: failures, and which of them are worth retrying.
//! - [`openai`] and [`anthropic`]: the two wire formats, over reqwest, streamed
//!   (SSE) or not.
//! - [`http`]: what both share: sending, error bodies, `retry-after`, bodies
//!   within their bound; [`client`]: their HTTP clients, TLS only for https;
//!   [`body`]: request bodies written to bytes, the parts that stay the same
//!   from call to call serialized once.
//! - [`sse`]: the server-sent events layer both streams are read through.
//! - [`limits`]: a call's deadline and the bounds of a reply.
//! - [`scripted`]: replies played from a file, for the offline demo.
//! - [`fallback`]: the chain of candidates with retries, backoff and cooldown.

pub mod anthropic;
pub mod body;
pub mod client;
pub mod error;
pub mod fallback;
pub mod http;
pub mod limits;
pub mod memo;
pub mod openai;
pub mod scripted;
pub mod sse;
pub mod types;

use std::time::Duration;

pub use client::HttpClient;
pub use error::{LlmError, LlmErrorKind};
pub use fallback::{Chain, ChainError, RetryPolicy};
pub use limits::CallLimits;
pub use memo::{MemoRef, WireMemo};
pub use types::{
    ChatRequest, ChatResponse, DeltaSink, FinishReason, ForHistory, Message, ToolCall, ToolDef,
    Usage,
};

/// Which wire format a candidate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
    Scripted,
}

impl ProviderKind {
    /// The variable the built-in provider of this kind reads its key from.
    pub fn key_var(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some(OPENAI_API_KEY_VAR),
            ProviderKind::Anthropic => Some(ANTHROPIC_API_KEY_VAR),
            ProviderKind::Scripted => None,
        }
    }

    pub fn prefix(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Scripted => "scripted",
        }
    }
}

/// One model candidate.
#[derive(Clone)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// The model name sent to the server; for `scripted`, the script's path.
    pub model: String,
    /// OpenAI: up to and including `/v1`; Anthropic: without `/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    /// The variable the key was read from (for the error when it is not
    /// set); `None`: the provider names none.
    pub api_key_env: Option<String>,
    /// Sent with every request, after the wire format's own (so one of the
    /// same name replaces it); never the key, which is `api_key`.
    pub headers: reqwest::header::HeaderMap,
    /// Ask for a streamed (SSE) reply.
    pub stream: bool,
    /// The longest wait for the response to start, and, when streaming, for
    /// each next chunk; without streaming, for the whole reply.
    pub timeout: Duration,
    /// The call's deadline and the reply's bounds.
    pub limits: CallLimits,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key_env", &self.api_key_env)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("stream", &self.stream)
            .field("timeout", &self.timeout)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The environment variables the providers read: each one's base URL and key.
pub const OPENAI_BASE_URL_VAR: &str = "OPENAI_BASE_URL";
pub const OPENAI_API_KEY_VAR: &str = "OPENAI_API_KEY";
pub const ANTHROPIC_BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
pub const ANTHROPIC_API_KEY_VAR: &str = "ANTHROPIC_API_KEY";

/// Every environment variable a provider reads: the host's own settings,
/// which no plugin's grants may pass through.
pub const PROVIDER_ENV: [&str; 4] = [
    OPENAI_BASE_URL_VAR,
    OPENAI_API_KEY_VAR,
    ANTHROPIC_BASE_URL_VAR,
    ANTHROPIC_API_KEY_VAR,
];

pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// A local Ollama server's OpenAI-compatible API (the `ollama` provider).
pub const OLLAMA_BASE_URL: &str = "http://127.0.0.1:11434/v1";

impl ProviderConfig {
    /// `provider:model`, e.g. `openai:gpt-4o-mini`: how a candidate is named
    /// in events and errors.
    pub fn name(&self) -> String {
        format!("{}:{}", self.kind.prefix(), self.model)
    }

    /// Parses one `PROVIDER:MODEL` spec, filling the base URL and key from
    /// `env` (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL`,
    /// `ANTHROPIC_API_KEY`).
    pub fn parse(
        spec: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, SpecError> {
        let spec = spec.trim();
        let Some((prefix, model)) = spec.split_once(':').filter(|(_, m)| !m.is_empty()) else {
            return Err(SpecError::NotProviderModel {
                spec: spec.to_string(),
            });
        };
        let (kind, url_var, key_var, default_url) = match prefix {
            "openai" => (
                ProviderKind::OpenAi,
                OPENAI_BASE_URL_VAR,
                OPENAI_API_KEY_VAR,
                OPENAI_BASE_URL,
            ),
            "anthropic" => (
                ProviderKind::Anthropic,
                ANTHROPIC_BASE_URL_VAR,
                ANTHROPIC_API_KEY_VAR,
                ANTHROPIC_BASE_URL,
            ),
            "scripted" => (ProviderKind::Scripted, "", "", ""),
            other => {
                return Err(SpecError::UnknownProvider {
                    spec: spec.to_string(),
                    provider: other.to_string(),
                });
            }
        };
        let non_empty = |var: &str| env(var).filter(|v| !v.trim().is_empty());
        Ok(ProviderConfig {
            kind,
            model: model.to_string(),
            base_url: non_empty(url_var)
                .unwrap_or_else(|| default_url.to_string())
                .trim_end_matches('/')
                .to_string(),
            api_key: non_empty(key_var),
            api_key_env: kind.key_var().map(String::from),
            headers: Default::default(),
            stream: true,
            timeout: DEFAULT_TIMEOUT,
            limits: CallLimits::default(),
        })
    }
}

/// A `PROVIDER:MODEL` spec that names no candidate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "model {spec:?} is not PROVIDER:MODEL; expected e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5 or scripted:FILE.json"
    )]
    NotProviderModel { spec: String },
    #[error("model {spec:?} names provider {provider:?}; expected openai, anthropic or scripted")]
    UnknownProvider { spec: String, provider: String },
}

/// `--base-url` given with a chain it cannot apply to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlError {
    #[error(
        "--base-url names one server, but the chain mixes openai: and anthropic: candidates, whose URLs differ (OpenAI's ends with /v1, Anthropic's does not); set OPENAI_BASE_URL and ANTHROPIC_BASE_URL instead"
    )]
    MixedProviders,
    #[error("--base-url has no effect on scripted: candidates, and the chain has no other")]
    NoServer,
}

/// Whether one `--base-url` can serve a chain of candidates of `kinds`:
/// scripted ones have no server, and one URL cannot serve both formats
/// (OpenAI's ends with `/v1`, Anthropic's does not).
pub fn check_base_url(kinds: impl IntoIterator<Item = ProviderKind>) -> Result<(), BaseUrlError> {
    let served: std::collections::BTreeSet<&str> = (kinds.into_iter())
        .filter(|kind| *kind != ProviderKind::Scripted)
        .map(ProviderKind::prefix)
        .collect();
    match served.len() {
        0 => Err(BaseUrlError::NoServer),
        1 => Ok(()),
        _ => Err(BaseUrlError::MixedProviders),
    }
}

/// One candidate, ready to call.
pub enum Provider {
    OpenAi(openai::OpenAi),
    Anthropic(anthropic::Anthropic),
    Scripted(scripted::Scripted),
}

impl Provider {
    /// The candidate `config` describes; only a scripted one can fail (its
    /// script does not read).
    pub fn new(
        config: ProviderConfig,
        client: HttpClient,
    ) -> Result<Provider, scripted::ScriptError> {
        Ok(match config.kind {
            ProviderKind::OpenAi => Provider::OpenAi(openai::OpenAi::new(config, client)),
            ProviderKind::Anthropic => {
                Provider::Anthropic(anthropic::Anthropic::new(config, client))
            }
            ProviderKind::Scripted => Provider::Scripted(scripted::Scripted::load(&config)?),
        })
    }

    /// `provider:model`.
    pub fn name(&self) -> &str {
        match self {
            Provider::OpenAi(p) => p.name(),
            Provider::Anthropic(p) => p.name(),
            Provider::Scripted(p) => p.name(),
        }
    }

    pub async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        match self {
            Provider::OpenAi(p) => p.chat(request, on_delta).await,
            Provider::Anthropic(p) => p.chat(request, on_delta).await,
            Provider::Scripted(p) => p.chat(request, on_delta).await,
        }
    }
}

/// The HTTP clients every candidate shares (connection pools, TLS only for
/// https; see [`client`]).
pub fn http_client() -> HttpClient {
    HttpClient::default()
}
