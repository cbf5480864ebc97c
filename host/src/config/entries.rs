//! A [`Config`] as the list of its values, each under its key path and
//! written as TOML writes it: what `config show` prints, what
//! [`Config::diff`] compares, and what the template test holds against the
//! defaults. Key paths are those of the file (`limits.retry.tries`).

use std::time::Duration;

use toml::Value;

use super::document::quoted;
use super::settings::{AgentSettings, Config, ProviderSettings};
use crate::llm::ProviderKind;
use crate::plugin::policy::hook_settings::FailMode;
use crate::protocol::Policy;

/// One value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The table it is in (`providers.openai`); empty at the top.
    pub table: String,
    /// Its key in the table (`base_url`, `tools.allow`).
    pub key: String,
    pub value: Value,
}

impl Entry {
    /// The whole key path: `providers.openai.base_url`.
    pub fn path(&self) -> String {
        match self.table.as_str() {
            "" => self.key.clone(),
            table => format!("{table}.{}", self.key),
        }
    }
}

/// Collects the entries of one table.
struct Table<'e> {
    out: &'e mut Vec<Entry>,
    table: String,
}

impl Table<'_> {
    fn put(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.out.push(Entry {
            table: self.table.clone(),
            key: key.to_string(),
            value: value.into(),
        });
        self
    }

    fn maybe(&mut self, key: &str, value: Option<impl Into<Value>>) -> &mut Self {
        if let Some(value) = value {
            self.put(key, value);
        }
        self
    }

    fn secs(&mut self, key: &str, d: Duration) -> &mut Self {
        self.put(key, seconds(d))
    }
}

/// Whole seconds as an integer, else a float.
fn seconds(d: Duration) -> Value {
    if d.subsec_nanos() == 0 {
        Value::Integer(d.as_secs() as i64)
    } else {
        Value::Float(d.as_secs_f64())
    }
}

fn int(n: impl TryInto<i64>) -> Value {
    Value::Integer(n.try_into().unwrap_or(i64::MAX))
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(|s| Value::String(s.clone())).collect())
}

impl Config {
    /// Every value, table by table.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        open(&mut out, String::new()).put("default_agent", self.default_agent.as_str());
        for provider in self.providers.values() {
            provider_entries(&mut out, provider);
        }
        for agent in self.agents.values() {
            agent_entries(&mut out, agent);
        }
        host_entries(&mut out, self);
        out
    }
}

fn open(out: &mut Vec<Entry>, table: String) -> Table<'_> {
    Table { out, table }
}

fn provider_entries(out: &mut Vec<Entry>, p: &ProviderSettings) {
    let name = format!("providers.{}", quoted(&p.name));
    let kind = match p.kind {
        ProviderKind::OpenAi => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Scripted => "scripted",
    };
    let mut t = open(out, name.clone());
    t.put("kind", kind);
    if p.kind != ProviderKind::Scripted {
        t.put("base_url", p.base_url.as_str())
            .maybe("api_key_env", p.api_key_env.as_deref())
            .secs("timeout_secs", p.timeout)
            .put("stream", p.stream);
    }
    if !p.headers.is_empty() {
        let mut h = open(out, format!("{name}.headers"));
        for (header, value) in &p.headers {
            h.put(&quoted(header), value.as_str());
        }
    }
    for (model, m) in &p.models {
        open(out, format!("{name}.models.{}", quoted(model)))
            .maybe("context_window", m.context_window.map(int))
            .maybe("max_output_tokens", m.max_output_tokens.map(int));
    }
}

fn agent_entries(out: &mut Vec<Entry>, a: &AgentSettings) {
    let name = format!("agents.{}", quoted(&a.name));
    let chain: Vec<String> = (a.model.iter())
        .map(|m| format!("{}:{}", m.provider, m.model))
        .collect();
    let policy = match a.session_policy {
        Policy::Steer => "steer",
        Policy::FollowUp => "follow-up",
    };
    open(out, name.clone())
        .put("model", strings(&chain))
        .maybe("system_prompt", a.system_prompt.as_deref())
        .put("tools.allow", strings(&a.tools.allow))
        .put("tools.deny", strings(&a.tools.deny))
        .put("max_iterations", int(a.max_iterations))
        .put("max_refusals", int(a.max_refusals))
        .maybe("max_tokens", a.max_tokens.map(int))
        .maybe("token_budget", a.token_budget.map(int))
        .put("session_policy", policy)
        .put("commands", a.commands);
    let s = &a.subturns;
    open(out, format!("{name}.subturns"))
        .put("max_depth", int(s.max_depth))
        .put("per_parent", int(s.per_parent))
        .put("per_tree", int(s.per_tree))
        .put("per_call", int(s.per_call))
        .secs("slot_wait_secs", s.slot_wait)
        .secs("timeout_secs", s.default_timeout);
    let c = &a.compaction;
    let model = c
        .model
        .as_ref()
        .map(|m| format!("{}:{}", m.provider, m.model));
    open(out, format!("{name}.compaction"))
        .put("enabled", c.enabled)
        .put("threshold", Value::Float(c.threshold))
        .put("keep_user_turns", int(c.keep_user_turns))
        .maybe("model", model.as_deref())
        .put("prompt", &*c.prompt)
        .put("tool_result_fraction", Value::Float(c.tool_result_fraction));
    let p = &a.approvals;
    let rules: Vec<Value> = (p.rules.iter())
        .map(|r| {
            let mut rule = toml::Table::new();
            rule.insert("tool".into(), Value::String(r.tool.clone()));
            let permission = r.permission.as_str().to_string();
            rule.insert("permission".into(), Value::String(permission));
            Value::Table(rule)
        })
        .collect();
    open(out, format!("{name}.approvals"))
        .put("default", p.default.as_str())
        .secs("timeout_secs", p.timeout)
        .put("rules", Value::Array(rules));
}

fn host_entries(out: &mut Vec<Entry>, c: &Config) {
    let l = &c.limits;
    open(out, "limits".into())
        .put("tool_concurrency", int(l.tool_concurrency))
        .put("max_parallel_turns", int(l.max_parallel_turns))
        .put("max_subturns", int(l.max_subturns))
        .put("max_reply_text", int(l.call.max_text))
        .put("max_reply_arguments", int(l.call.max_arguments))
        .secs("llm_deadline_secs", l.call.deadline)
        .secs("wind_down_idle_secs", l.wind_down_idle);
    let r = &l.retry;
    open(out, "limits.retry".into())
        .put("tries", int(r.attempts))
        .put("backoff_ms", int(r.base_delay.as_millis()))
        .put("max_backoff_ms", int(r.max_delay.as_millis()))
        .put("jitter", r.jitter)
        .secs("cooldown_secs", r.cooldown)
        .secs("max_retry_wait_secs", r.max_retry_after);
    let s = &c.server;
    open(out, "server".into())
        .put("listen", s.listen.to_string())
        .put("token_env", s.token_env.as_str())
        .put("max_body_kib", int(s.max_body_bytes >> 10))
        .secs("shutdown_grace_secs", s.shutdown_grace);
    let p = &c.plugins;
    open(out, "plugins".into())
        .put("dir", p.dir.display().to_string())
        .put("max_plugin_mib", int(p.load.max_file_bytes >> 20))
        .secs("compile_timeout_secs", p.load.compile_timeout)
        .put("compile_memory_mib", int(p.load.compile_memory_bytes >> 20))
        .put("max_instances", int(p.max_instances))
        .put("cache_max_mib", int(p.cache_max_bytes >> 20));
    let pl = &p.limits;
    open(out, "plugins.limits".into())
        .put("memory_mib", int(pl.memory_bytes >> 20))
        .put("timeout_ms", int(pl.timeout.as_millis()))
        .put("output_kib", int(pl.output_bytes >> 10))
        .put("log_lines", int(pl.log_lines))
        .put("open_files", int(pl.open_files));
    let h = &c.hooks;
    let fail = h.fail.map(|f| match f {
        FailMode::Closed => "closed",
        FailMode::Open => "open",
    });
    open(out, "hooks".into())
        .put("timeout_ms", int(h.timeout.as_millis()))
        .put("memory_mib", int(h.memory_bytes >> 20))
        .maybe("fail", fail)
        .put("queue", int(h.queue));
}
