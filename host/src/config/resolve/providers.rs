//! The providers: the built-in `openai`, `anthropic`, `ollama` (a local
//! Ollama server's OpenAI-compatible API, no key) and `scripted`, then
//! each `[providers.NAME]` of the file, which replaces a built-in of the
//! same name.
//!
//! `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` are the base URLs of the
//! providers named `openai` and `anthropic` (built in or not), over the
//! file's `base_url`. A provider's key is read from the variable its
//! `api_key_env` names: by default `OPENAI_API_KEY` for `openai`,
//! `ANTHROPIC_API_KEY` for `anthropic`, and none for a provider of another
//! name, so a key is never sent to a server it was not meant for.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::header::{HeaderName, HeaderValue};

use super::super::document::Step;
use super::super::file::{KindToml, ModelToml, ProviderToml};
use super::super::overrides::AgentFlags;
use super::super::settings::{ModelRef, ModelSettings, ProviderSettings};
use super::super::sources::Source;
use super::{Resolver, env_name, positive_secs, range};
use crate::llm::{self, ProviderKind};

/// The built-in providers, by name.
pub const BUILT_IN: [(&str, ProviderKind); 4] = [
    ("anthropic", ProviderKind::Anthropic),
    ("ollama", ProviderKind::OpenAi),
    ("openai", ProviderKind::OpenAi),
    ("scripted", ProviderKind::Scripted),
];

/// Headers the host sets itself, or that would carry a key (keys never
/// live in the file: `api_key_env` names the variable that holds one).
const RESERVED_HEADERS: [&str; 8] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "content-type",
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
];

pub(super) fn resolve(
    r: &mut Resolver,
    file: Option<&BTreeMap<String, ProviderToml>>,
) -> BTreeMap<String, ProviderSettings> {
    let mut all = BTreeMap::new();
    let empty = ProviderToml::default();
    for (name, _) in BUILT_IN {
        if !file.is_some_and(|f| f.contains_key(name)) {
            all.insert(name.to_string(), provider(r, name, &empty));
        }
    }
    for (name, toml) in file.into_iter().flatten() {
        r.check_name("providers", name);
        all.insert(name.clone(), provider(r, name, toml));
    }
    all
}

fn built_in(name: &str) -> Option<ProviderKind> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
}

fn provider(r: &mut Resolver, name: &str, t: &ProviderToml) -> ProviderSettings {
    let at = |key: &'static str| [Step::Key("providers"), Step::Key(name), Step::Key(key)];
    let kind = match (t.kind, built_in(name)) {
        (Some(kind), _) => {
            r.set_source(&at("kind"), r.file_source(&at("kind")));
            match kind {
                KindToml::OpenAi => ProviderKind::OpenAi,
                KindToml::Anthropic => ProviderKind::Anthropic,
            }
        }
        (None, Some(kind)) if kind != ProviderKind::Scripted || t.is_empty() => kind,
        (None, _) => {
            r.fail_at_key(
                &[Step::Key("providers"), Step::Key(name)],
                "missing key `kind` (expected one of: openai, anthropic)".into(),
            );
            ProviderKind::OpenAi
        }
    };
    let (url_var, default_url) = match (name, kind) {
        ("openai", _) => (Some(llm::OPENAI_BASE_URL_VAR), llm::OPENAI_BASE_URL),
        ("anthropic", _) => (Some(llm::ANTHROPIC_BASE_URL_VAR), llm::ANTHROPIC_BASE_URL),
        ("ollama", ProviderKind::OpenAi) => (None, llm::OLLAMA_BASE_URL),
        (_, ProviderKind::OpenAi) => (None, llm::OPENAI_BASE_URL),
        (_, ProviderKind::Anthropic) => (None, llm::ANTHROPIC_BASE_URL),
        (_, ProviderKind::Scripted) => (None, ""),
    };
    let base_url = if kind == ProviderKind::Scripted {
        String::new()
    } else {
        let url = t.base_url.clone();
        r.pick(
            &at("base_url"),
            None,
            url_var,
            url,
            default_url.into(),
            base_url,
        )
    };
    // Only the providers named for a service read its key: `ollama` (kind
    // openai) never sends OPENAI_API_KEY to a local server.
    let default_key = match name {
        "openai" | "anthropic" => built_in(name).and_then(ProviderKind::key_var),
        _ => None,
    };
    let api_key_env = match &t.api_key_env {
        Some(var) => r.file(&at("api_key_env"), Some(var.clone()), None, |v| {
            env_name(v).map(Some)
        }),
        None => default_key.map(String::from),
    };
    let timeout = r.file(
        &at("timeout_secs"),
        t.timeout_secs,
        llm::DEFAULT_TIMEOUT,
        positive_secs,
    );
    let stream = t.stream.unwrap_or(true);
    if t.stream.is_some() {
        r.set_source(&at("stream"), r.file_source(&at("stream")));
    }
    ProviderSettings {
        name: name.to_string(),
        kind,
        base_url,
        api_key_env,
        headers: headers(r, name, t.headers.as_ref()),
        timeout,
        stream,
        models: models(r, name, t.models.as_ref()),
    }
}

impl ProviderToml {
    fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.base_url.is_none()
            && self.api_key_env.is_none()
            && self.headers.is_none()
            && self.timeout_secs.is_none()
            && self.stream.is_none()
            && self.models.is_none()
    }
}

/// An `http://` or `https://` URL, without a trailing `/`.
pub(super) fn base_url(url: String) -> Result<String, String> {
    let trimmed = url.trim().trim_end_matches('/');
    match reqwest::Url::parse(trimmed) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {
            Ok(trimmed.to_string())
        }
        _ => Err(format!(
            "expected an http:// or https:// URL, such as \"http://127.0.0.1:8080/v1\", found {url:?}"
        )),
    }
}

fn headers(
    r: &mut Resolver,
    provider: &str,
    file: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    for (name, value) in file.into_iter().flatten() {
        let key = [
            Step::Key("providers"),
            Step::Key(provider),
            Step::Key("headers"),
            Step::Key(name),
        ];
        let lower = name.to_ascii_lowercase();
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            r.fail_at_key(
                &key,
                "expected a header name (letters, digits and -)".into(),
            );
        } else if RESERVED_HEADERS.contains(&lower.as_str()) {
            let why = match lower.as_str() {
                "authorization" | "proxy-authorization" | "x-api-key" => {
                    "it would carry a key, and keys never live in this file: name the variable that holds the key in api_key_env"
                }
                _ => "the host sets it",
            };
            r.fail_at_key(&key, format!("header `{name}` cannot be set here: {why}"));
        } else if HeaderValue::from_str(value).is_err() {
            r.fail_in_file(
                &key,
                "expected a header value (visible ASCII text, no line breaks)".into(),
            );
        } else {
            r.set_source(&key, r.file_source(&key));
            all.insert(name.clone(), value.clone());
        }
    }
    all
}

fn models(
    r: &mut Resolver,
    provider: &str,
    file: Option<&BTreeMap<String, ModelToml>>,
) -> BTreeMap<String, ModelSettings> {
    let mut all = BTreeMap::new();
    for (model, t) in file.into_iter().flatten() {
        let at = |key: &'static str| {
            [
                Step::Key("providers"),
                Step::Key(provider),
                Step::Key("models"),
                Step::Key(model),
                Step::Key(key),
            ]
        };
        let window = t.context_window;
        let context_window = r.file(&at("context_window"), window, None, |v| {
            range(1, 100_000_000)(v).map(Some)
        });
        let output = t.max_output_tokens;
        let max_output_tokens = r.file(&at("max_output_tokens"), output, None, |v| {
            range(1, 10_000_000)(v).map(|v| Some(v as u32))
        });
        let settings = ModelSettings {
            context_window,
            max_output_tokens,
        };
        all.insert(model.clone(), settings);
    }
    all
}

/// `--base-url`, `--llm-timeout` and `--no-stream`, on the providers the
/// agent's `chain` names.
pub(super) fn apply_flags<'a>(
    r: &mut Resolver,
    providers: &mut BTreeMap<String, ProviderSettings>,
    chain: &'a [ModelRef],
    flags: &AgentFlags,
) {
    let names: BTreeSet<&str> = chain.iter().map(|m| m.provider.as_str()).collect();
    let key = |name: &'a str, key: &'static str| {
        [Step::Key("providers"), Step::Key(name), Step::Key(key)]
    };
    if let Some(url) = &flags.base_url
        && !names.is_empty()
    {
        let kinds = names
            .iter()
            .filter_map(|n| providers.get(*n))
            .map(|p| p.kind);
        match (llm::check_base_url(kinds), base_url(url.clone())) {
            (Err(e), _) => r.fail_elsewhere(e.to_string()),
            (_, Err(e)) => r.fail_elsewhere(format!("--base-url: {e}")),
            (Ok(()), Ok(url)) => {
                for name in &names {
                    if let Some(p) = providers.get_mut(*name)
                        && p.kind != ProviderKind::Scripted
                    {
                        p.base_url = url.clone();
                        r.set_source(&key(name, "base_url"), Source::Flag("--base-url"));
                    }
                }
            }
        }
    }
    if let Some(seconds) = flags.llm_timeout {
        match positive_secs(seconds) {
            Ok(timeout) => {
                for name in &names {
                    if let Some(p) = providers.get_mut(*name) {
                        p.timeout = timeout;
                        r.set_source(&key(name, "timeout_secs"), Source::Flag("--llm-timeout"));
                    }
                }
            }
            Err(e) => r.fail_elsewhere(format!("--llm-timeout: {e}")),
        }
    }
    if flags.no_stream {
        for name in &names {
            if let Some(p) = providers.get_mut(*name) {
                p.stream = false;
                r.set_source(&key(name, "stream"), Source::Flag("--no-stream"));
            }
        }
    }
}
