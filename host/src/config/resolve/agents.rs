//! The agents: the built-in `default` (no model), then each
//! `[agents.NAME]` of the file (which may replace `default`). The agent the
//! process runs (`--agent` or `WASMCLAW_AGENT`; default `default`) must be
//! one of them, and takes the agent flags: `--model` (or `WASMCLAW_MODEL`),
//! `--system`, `--max-iterations`, `--max-refusals`, and, on the providers
//! its chain names, `--base-url`, `--llm-timeout` and `--no-stream`.
//!
//! Every agent starts from the built-in defaults, not from `default`: one
//! agent's settings never leak into another's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::super::document::Step;
use super::super::error::unknown;
use super::super::file::{
    AgentToml, ApprovalsToml, CompactionToml, ModelSpecToml, PolicyToml, SubturnsToml, ToolsToml,
};
use super::super::overrides::{AGENT_VAR, AgentFlags, MODEL_VAR};
use super::super::settings::{
    AgentSettings, ApprovalRule, ApprovalSettings, CompactionSettings, DEFAULT_AGENT,
    LimitsSettings, ModelRef, ProviderSettings, ToolFilter,
};
use super::super::sources::Source;
use super::{Resolver, positive_secs, range, secs};
use crate::agent::subturn::{MAX_TIMEOUT, SubTurnLimits};
use crate::agent::{DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_REPEATED_REFUSALS};
use crate::llm::{ProviderKind, SpecError};
use crate::protocol::Policy;

pub(super) fn resolve(
    r: &mut Resolver,
    file: Option<&BTreeMap<String, AgentToml>>,
    flags: &AgentFlags,
    providers: &mut BTreeMap<String, ProviderSettings>,
    limits: &LimitsSettings,
) -> (BTreeMap<String, Arc<AgentSettings>>, String) {
    let key = [Step::Key("default_agent")];
    let flag = Some(("--agent", flags.agent.clone()));
    let run = r.pick(&key, flag, Some(AGENT_VAR), None, DEFAULT_AGENT.into(), Ok);
    let mut names: Vec<String> = file.into_iter().flatten().map(|(n, _)| n.clone()).collect();
    if !names.iter().any(|n| n == DEFAULT_AGENT) {
        names.push(DEFAULT_AGENT.into());
        names.sort();
    }
    if !names.contains(&run) {
        let source = r.sources.get("default_agent").clone();
        r.fail(&source, &key, unknown("agent", Some(&run), &run, &names));
    }
    let empty = AgentToml::default();
    let mut agents = BTreeMap::new();
    for name in &names {
        let toml = file.and_then(|f| f.get(name)).unwrap_or(&empty);
        let flags = (*name == run).then_some(flags);
        let agent = agent(r, name, toml, flags, providers, limits);
        if let Some(flags) = flags {
            super::providers::apply_flags(r, providers, &agent.model, flags);
        }
        agents.insert(name.clone(), Arc::new(agent));
    }
    (agents, run)
}

fn agent(
    r: &mut Resolver,
    name: &str,
    t: &AgentToml,
    flags: Option<&AgentFlags>,
    providers: &BTreeMap<String, ProviderSettings>,
    limits: &LimitsSettings,
) -> AgentSettings {
    r.check_name("agents", name);
    let at = |key: &'static str| [Step::Key("agents"), Step::Key(name), Step::Key(key)];
    let model = model(r, name, t.model.as_ref(), flags, providers);
    // A count with a flag of the agent run, up to 10,000.
    let mut count = |key, flag: &'static str, given, file, default, min| {
        let flag = flags.map(|_| (flag, given));
        r.pick(&at(key), flag, None, file, default, |v| {
            range(min, 10_000)(v).map(|v| v as u32)
        })
    };
    let given = |f: fn(&AgentFlags) -> Option<u64>| flags.and_then(f);
    let max_iterations = count(
        "max_iterations",
        "--max-iterations",
        given(|f| f.max_iterations),
        t.max_iterations,
        DEFAULT_MAX_ITERATIONS,
        1,
    );
    let max_refusals = count(
        "max_refusals",
        "--max-refusals",
        given(|f| f.max_refusals),
        t.max_refusals,
        DEFAULT_MAX_REPEATED_REFUSALS,
        0,
    );
    let max_tokens = r.file(&at("max_tokens"), t.max_tokens, None, |v| {
        range(1, 10_000_000)(v).map(|v| Some(v as u32))
    });
    if let Some(max) = max_tokens {
        check_output_cap(r, &at("max_tokens"), max, &model, providers);
    }
    let token_budget = r.file(&at("token_budget"), t.token_budget, None, |v| {
        range(1, 1 << 50)(v).map(Some)
    });
    let session_policy = match t.session_policy {
        Some(policy) => {
            r.set_source(&at("session_policy"), r.file_source(&at("session_policy")));
            match policy {
                PolicyToml::Steer => Policy::Steer,
                PolicyToml::FollowUp => Policy::FollowUp,
            }
        }
        None => Policy::Steer,
    };
    if t.commands.is_some() {
        r.set_source(&at("commands"), r.file_source(&at("commands")));
    }
    AgentSettings {
        name: name.to_string(),
        system_prompt: system_prompt(r, name, t, flags),
        tools: tools(r, name, t.tools.as_ref()),
        model,
        max_iterations,
        max_refusals,
        max_tokens,
        token_budget,
        session_policy,
        commands: t.commands.unwrap_or(true),
        subturns: subturns(r, name, t.subturns.as_ref(), limits.max_subturns),
        compaction: compaction(r, name, t.compaction.as_ref(), providers),
        approvals: approvals(r, name, t.approvals.as_ref()),
    }
}

/// `[agents.NAME.compaction]`.
fn compaction(
    r: &mut Resolver,
    agent: &str,
    t: Option<&CompactionToml>,
    providers: &BTreeMap<String, ProviderSettings>,
) -> CompactionSettings {
    let d = CompactionSettings::default();
    let Some(t) = t else { return d };
    let at = |key: &'static str| {
        [
            Step::Key("agents"),
            Step::Key(agent),
            Step::Key("compaction"),
            Step::Key(key),
        ]
    };
    let fraction = |v: f64| {
        if v > 0.0 && v <= 1.0 {
            Ok(v)
        } else {
            Err(format!(
                "expected a number above 0 and at most 1, found {v}"
            ))
        }
    };
    if t.enabled.is_some() {
        r.set_source(&at("enabled"), r.file_source(&at("enabled")));
    }
    let threshold = r.file(&at("threshold"), t.threshold, d.threshold, fraction);
    let keep_user_turns = r.file(
        &at("keep_user_turns"),
        t.keep_user_turns,
        d.keep_user_turns,
        |v| range(0, 1000)(v).map(|v| v as u32),
    );
    let tool_result_fraction = r.file(
        &at("tool_result_fraction"),
        t.tool_result_fraction,
        d.tool_result_fraction,
        fraction,
    );
    let prompt = r.file(&at("prompt"), t.prompt.clone(), d.prompt, |v: String| {
        if v.trim().is_empty() {
            Err("expected the summarizing call's instructions, found an empty text".into())
        } else {
            Ok(v.into())
        }
    });
    let model = t.model.as_ref().and_then(|spec| {
        let key = at("model");
        match parse_chain(spec, providers) {
            Ok(models) if models.len() == 1 => {
                r.set_source(&key, r.file_source(&key));
                models.into_iter().next()
            }
            Ok(_) => {
                r.fail_in_file(&key, format!("expected one PROVIDER:MODEL, found {spec:?}"));
                None
            }
            Err(e) => {
                r.fail_in_file(&key, e);
                None
            }
        }
    });
    CompactionSettings {
        enabled: t.enabled.unwrap_or(d.enabled),
        threshold,
        keep_user_turns,
        model,
        prompt,
        tool_result_fraction,
    }
}

/// `[agents.NAME.approvals]`.
fn approvals(r: &mut Resolver, agent: &str, t: Option<&ApprovalsToml>) -> ApprovalSettings {
    let d = ApprovalSettings::default();
    let Some(t) = t else { return d };
    let at = |key: &'static str| {
        [
            Step::Key("agents"),
            Step::Key(agent),
            Step::Key("approvals"),
            Step::Key(key),
        ]
    };
    if t.default.is_some() {
        r.set_source(&at("default"), r.file_source(&at("default")));
    }
    let timeout = r.file(&at("timeout_secs"), t.timeout_secs, d.timeout, |v| {
        positive_secs(v).and_then(|d| {
            if d <= MAX_TIMEOUT {
                Ok(d)
            } else {
                Err(format!(
                    "expected at most {} seconds, found {v}",
                    MAX_TIMEOUT.as_secs()
                ))
            }
        })
    });
    let mut rules = Vec::new();
    if let Some(list) = &t.rules {
        let key = at("rules");
        r.set_source(&key, r.file_source(&key));
        for (i, rule) in list.iter().enumerate() {
            if !ToolFilter::is_pattern(&rule.tool) {
                let element = [&key[..], &[Step::Index(i), Step::Key("tool")]].concat();
                r.fail_in_file(
                    &element,
                    format!(
                        "expected a tool name or a pattern of one with `*` (letters, digits, `_`, `-`), found {:?}",
                        rule.tool
                    ),
                );
            }
            rules.push(ApprovalRule {
                tool: rule.tool.clone(),
                permission: rule.permission,
            });
        }
    }
    ApprovalSettings {
        rules,
        default: t.default.unwrap_or(d.default),
        timeout,
    }
}

/// The model chain: `--model` or `WASMCLAW_MODEL` for the agent run, else
/// the file's; each candidate naming a provider that exists.
fn model(
    r: &mut Resolver,
    agent: &str,
    file: Option<&ModelSpecToml>,
    flags: Option<&AgentFlags>,
    providers: &BTreeMap<String, ProviderSettings>,
) -> Vec<ModelRef> {
    let key = [Step::Key("agents"), Step::Key(agent), Step::Key("model")];
    let given = match flags {
        Some(f) if f.model.is_some() => f.model.clone().map(|m| (m, Source::Flag("--model"))),
        Some(_) => r.var(MODEL_VAR).map(|m| (m, Source::Env(MODEL_VAR.into()))),
        None => None,
    };
    if let Some((specs, source)) = given {
        r.set_source(&key, source);
        if specs.trim().is_empty() {
            return Vec::new();
        }
        let names: Vec<String> = providers.keys().cloned().collect();
        let mut chain = Vec::new();
        for spec in specs.split(',') {
            match parse(spec, providers) {
                Ok(model) => chain.push(model),
                Err(Fault::Spec(e)) => r.fail_elsewhere(e.to_string()),
                Err(Fault::Provider(p)) => r.fail_elsewhere(format!(
                    "model {:?}: {}",
                    spec.trim(),
                    unknown("provider", Some(&p), &p, &names)
                )),
            }
        }
        return chain;
    }
    let Some(ModelSpecToml(specs)) = file else {
        return Vec::new();
    };
    r.set_source(&key, r.file_source(&key));
    let names: Vec<String> = providers.keys().cloned().collect();
    let mut chain = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let element = [&key[..], &[Step::Index(i)]].concat();
        let element = if specs.len() == 1 && !is_array(r, &key) {
            &key[..]
        } else {
            &element[..]
        };
        match parse(spec, providers) {
            Ok(mut model) => {
                if providers[&model.provider].kind == ProviderKind::Scripted
                    && let Some(folder) = r.folder()
                {
                    model.model = folder.join(&model.model).display().to_string();
                }
                chain.push(model);
            }
            Err(Fault::Spec(e)) => r.fail_in_file(element, e.to_string()),
            Err(Fault::Provider(p)) => {
                r.fail_in_file(element, unknown("provider", Some(&p), &p, &names));
            }
        }
    }
    chain
}

fn is_array(r: &Resolver, key: &[Step]) -> bool {
    r.doc.is_some_and(|doc| doc.is_array(key))
}

enum Fault {
    Spec(SpecError),
    Provider(String),
}

/// A chain spec (`PROVIDER:MODEL`, comma-separated) of providers of
/// `providers`, as a session's model override gives it.
pub fn parse_chain(
    specs: &str,
    providers: &BTreeMap<String, ProviderSettings>,
) -> Result<Vec<ModelRef>, String> {
    let names: Vec<String> = providers.keys().cloned().collect();
    (specs.split(','))
        .map(|spec| match parse(spec, providers) {
            Ok(model) => Ok(model),
            Err(Fault::Spec(e)) => Err(e.to_string()),
            Err(Fault::Provider(p)) => Err(unknown("provider", Some(&p), &p, &names)),
        })
        .collect()
}

/// `PROVIDER:MODEL`, naming a provider of `providers`.
fn parse(spec: &str, providers: &BTreeMap<String, ProviderSettings>) -> Result<ModelRef, Fault> {
    let spec = spec.trim();
    let Some((provider, model)) = spec
        .split_once(':')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
    else {
        return Err(Fault::Spec(SpecError::NotProviderModel {
            spec: spec.into(),
        }));
    };
    if !providers.contains_key(provider) {
        return Err(Fault::Provider(provider.into()));
    }
    Ok(ModelRef {
        provider: provider.into(),
        model: model.into(),
    })
}

/// `max_tokens` may not ask a model for more than it writes.
fn check_output_cap(
    r: &mut Resolver,
    key: &[Step],
    max: u32,
    chain: &[ModelRef],
    providers: &BTreeMap<String, ProviderSettings>,
) {
    for candidate in chain {
        let cap = (providers.get(&candidate.provider))
            .and_then(|p| p.models.get(&candidate.model))
            .and_then(|m| m.max_output_tokens);
        if let Some(cap) = cap.filter(|cap| max > *cap) {
            r.fail_in_file(
                key,
                format!(
                    "expected at most {cap}, the max_output_tokens of model {}:{} (providers.{}.models), found {max}",
                    candidate.provider, candidate.model, candidate.provider
                ),
            );
        }
    }
}

fn system_prompt(
    r: &mut Resolver,
    agent: &str,
    t: &AgentToml,
    flags: Option<&AgentFlags>,
) -> Option<Arc<str>> {
    let at = |key: &'static str| [Step::Key("agents"), Step::Key(agent), Step::Key(key)];
    if let Some(text) = flags.and_then(|f| f.system.clone()) {
        r.set_source(&at("system_prompt"), Source::Flag("--system"));
        return Some(text.into());
    }
    match (&t.system_prompt, &t.system_prompt_file) {
        (Some(_), Some(_)) => {
            let later = match r.doc {
                Some(doc)
                    if doc.key_at(&at("system_prompt")) > doc.key_at(&at("system_prompt_file")) =>
                {
                    at("system_prompt")
                }
                _ => at("system_prompt_file"),
            };
            r.fail_at_key(
                &later,
                "set system_prompt or system_prompt_file, not both".into(),
            );
            None
        }
        (Some(text), None) => {
            r.set_source(&at("system_prompt"), r.file_source(&at("system_prompt")));
            Some(text.as_str().into())
        }
        (None, Some(file)) => {
            let path = r.folder().unwrap_or(Path::new(".")).join(file);
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    let source = r.file_source(&at("system_prompt_file"));
                    r.set_source(&at("system_prompt"), source);
                    Some(text.into())
                }
                Err(e) => {
                    let message = format!("cannot read {}: {e}", path.display());
                    r.fail_in_file(&at("system_prompt_file"), message);
                    None
                }
            }
        }
        (None, None) => None,
    }
}

/// `allow` and `deny`: tool names, with `*` globs.
fn tools(r: &mut Resolver, agent: &str, t: Option<&ToolsToml>) -> ToolFilter {
    let mut filter = ToolFilter {
        allow: vec!["*".into()],
        deny: Vec::new(),
    };
    let Some(t) = t else { return filter };
    for (list, patterns) in [("allow", &t.allow), ("deny", &t.deny)] {
        let Some(patterns) = patterns else { continue };
        let key = [
            Step::Key("agents"),
            Step::Key(agent),
            Step::Key("tools"),
            Step::Key(list),
        ];
        r.set_source(&key, r.file_source(&key));
        for (i, pattern) in patterns.iter().enumerate() {
            if !ToolFilter::is_pattern(pattern) {
                let element = [&key[..], &[Step::Index(i)]].concat();
                r.fail_in_file(
                    &element,
                    format!(
                        "expected a tool name or a pattern of one with `*` (letters, digits, `_`, `-`), found {pattern:?}"
                    ),
                );
            }
        }
        match list {
            "allow" => filter.allow = patterns.clone(),
            _ => filter.deny = patterns.clone(),
        }
    }
    filter
}

/// `[agents.NAME.subturns]`; `total` is the host's `max_subturns`.
fn subturns(
    r: &mut Resolver,
    agent: &str,
    t: Option<&SubturnsToml>,
    total: usize,
) -> SubTurnLimits {
    let d = SubTurnLimits::default();
    let empty = SubturnsToml::default();
    let t = t.unwrap_or(&empty);
    let at = |key: &'static str| {
        [
            Step::Key("agents"),
            Step::Key(agent),
            Step::Key("subturns"),
            Step::Key(key),
        ]
    };
    let count = |min, max| move |v| range(min, max)(v).map(|v| v as usize);
    SubTurnLimits {
        max_depth: r.file(&at("max_depth"), t.max_depth, d.max_depth, |v| {
            range(0, 32)(v).map(|v| v as u32)
        }),
        per_parent: r.file(
            &at("per_parent"),
            t.per_parent,
            d.per_parent,
            count(1, 1024),
        ),
        total,
        per_tree: r.file(&at("per_tree"), t.per_tree, d.per_tree, count(1, 100_000)),
        per_call: r.file(&at("per_call"), t.per_call, d.per_call, count(0, 1024)),
        slot_wait: r.file(&at("slot_wait_secs"), t.slot_wait_secs, d.slot_wait, secs),
        default_timeout: r.file(
            &at("timeout_secs"),
            t.timeout_secs,
            d.default_timeout,
            |v| {
                positive_secs(v).and_then(|d| {
                    if d <= MAX_TIMEOUT {
                        Ok(d)
                    } else {
                        Err(format!(
                            "expected at most {} seconds, found {v}",
                            MAX_TIMEOUT.as_secs()
                        ))
                    }
                })
            },
        ),
    }
}
