//! The host-wide tables: `[limits]` (with `[limits.retry]`), `[server]`,
//! `[plugins]` (with `[plugins.limits]`) and `[hooks]`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use super::super::document::Step;
use super::super::file::{HooksToml, LimitsToml, ListenToml, PluginsToml, RetryToml, ServerToml};
use super::super::overrides::{self as vars, Overrides, PluginFlags, ServerFlags};
use super::super::settings::{LimitsSettings, PluginSettings, ServerSettings};
use super::{Resolver, env_name, positive_secs, range, secs};
use crate::agent::{DEFAULT_TOOL_CONCURRENCY, DEFAULT_WIND_DOWN_IDLE};
use crate::home::Home;
use crate::llm::{CallLimits, RetryPolicy};
use crate::plugin::policy::fields::FieldError;
use crate::plugin::policy::grants::{Limits as PluginLimits, resolve_limits};
use crate::plugin::policy::hook_settings::{HookSettings, HookSettingsToml};
use crate::plugin::sandbox::cache::{CACHE_MAX, LoadLimits};
use crate::scheduler::DEFAULT_MAX_PARALLEL;

/// Plugin instances `serve` allows at once by default: many sessions.
pub const SERVE_INSTANCES: u32 = 1000;
/// Plugin instances the other commands allow at once by default: one
/// session's turn, its tool calls (8 at a time) and a few SubTurns'.
pub const SESSION_INSTANCES: u32 = 64;
use crate::server::{DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, DEFAULT_SHUTDOWN_GRACE};

/// The default of `[limits] max_subturns`: SubTurns alive at once.
pub const DEFAULT_MAX_SUBTURNS: usize = 64;

fn at<'k>(table: &'k str, key: &'k str) -> [Step<'k>; 2] {
    [Step::Key(table), Step::Key(key)]
}

pub(super) fn limits(
    r: &mut Resolver,
    t: Option<&LimitsToml>,
    flags: &Overrides,
) -> LimitsSettings {
    let empty = LimitsToml::default();
    let t = t.unwrap_or(&empty);
    let a = &flags.agent;
    let count = |min, max| move |v| range(min, max)(v).map(|v| v as usize);
    let call = CallLimits::default();
    let bytes = |v| range(1, 1 << 30)(v).map(|v| v as usize);
    LimitsSettings {
        tool_concurrency: r.file(
            &at("limits", "tool_concurrency"),
            t.tool_concurrency,
            DEFAULT_TOOL_CONCURRENCY,
            count(1, 1024),
        ),
        max_parallel_turns: r.pick(
            &at("limits", "max_parallel_turns"),
            Some(("--max-parallel", flags.server.max_parallel)),
            None,
            t.max_parallel_turns,
            DEFAULT_MAX_PARALLEL,
            count(1, 100_000),
        ),
        max_subturns: r.file(
            &at("limits", "max_subturns"),
            t.max_subturns,
            DEFAULT_MAX_SUBTURNS,
            count(1, 100_000),
        ),
        retry: retry(r, t.retry.as_ref(), a.max_retry_wait),
        call: CallLimits {
            max_text: r.pick(
                &at("limits", "max_reply_text"),
                Some(("--max-reply-text", a.max_reply_text)),
                Some(vars::MAX_REPLY_TEXT_VAR),
                t.max_reply_text,
                call.max_text,
                bytes,
            ),
            max_arguments: r.pick(
                &at("limits", "max_reply_arguments"),
                Some(("--max-reply-arguments", a.max_reply_arguments)),
                Some(vars::MAX_REPLY_ARGUMENTS_VAR),
                t.max_reply_arguments,
                call.max_arguments,
                bytes,
            ),
            deadline: r.pick(
                &at("limits", "llm_deadline_secs"),
                Some(("--llm-deadline", a.llm_deadline)),
                Some(vars::LLM_DEADLINE_VAR),
                t.llm_deadline_secs,
                call.deadline,
                positive_secs,
            ),
            ..call
        },
        wind_down_idle: r.file(
            &at("limits", "wind_down_idle_secs"),
            t.wind_down_idle_secs,
            DEFAULT_WIND_DOWN_IDLE,
            positive_secs,
        ),
    }
}

fn retry(r: &mut Resolver, t: Option<&RetryToml>, max_retry_wait: Option<f64>) -> RetryPolicy {
    let empty = RetryToml::default();
    let t = t.unwrap_or(&empty);
    let d = RetryPolicy::default();
    let at = |key| [Step::Key("limits"), Step::Key("retry"), Step::Key(key)];
    let ms = |v| range(0, 3_600_000)(v).map(std::time::Duration::from_millis);
    let base_delay = r.file(&at("backoff_ms"), t.backoff_ms, d.base_delay, ms);
    let max_delay = r.file(&at("max_backoff_ms"), t.max_backoff_ms, d.max_delay, |v| {
        let max = ms(v)?;
        if max >= base_delay {
            Ok(max)
        } else {
            Err(format!(
                "expected at least backoff_ms ({}), found {v}",
                base_delay.as_millis()
            ))
        }
    });
    RetryPolicy {
        attempts: r.file(&at("tries"), t.tries, d.attempts, |v| {
            range(1, 100)(v).map(|v| v as u32)
        }),
        base_delay,
        max_delay,
        cooldown: r.file(&at("cooldown_secs"), t.cooldown_secs, d.cooldown, secs),
        max_retry_after: r.pick(
            &at("max_retry_wait_secs"),
            Some(("--max-retry-wait", max_retry_wait)),
            Some(vars::MAX_RETRY_WAIT_VAR),
            t.max_retry_wait_secs,
            d.max_retry_after,
            positive_secs,
        ),
        jitter: r.file(&at("jitter"), t.jitter, d.jitter, |v| {
            if (0.0..=1.0).contains(&v) {
                Ok(v)
            } else {
                Err(format!("expected a number from 0 to 1, found {v}"))
            }
        }),
    }
}

pub(super) fn server(
    r: &mut Resolver,
    t: Option<&ServerToml>,
    flags: &ServerFlags,
) -> ServerSettings {
    let empty = ServerToml::default();
    let t = t.unwrap_or(&empty);
    let default_listen = DEFAULT_LISTEN.to_string();
    ServerSettings {
        listen: r.pick(
            &at("server", "listen"),
            Some(("--listen", flags.listen.clone())),
            None,
            t.listen.clone().map(|ListenToml(l)| l),
            default_listen,
            listen,
        ),
        token_env: r.file(
            &at("server", "token_env"),
            t.token_env.clone(),
            vars::API_TOKEN_VAR.to_string(),
            env_name,
        ),
        max_body_bytes: r.pick(
            &at("server", "max_body_kib"),
            Some(("--max-body-kib", flags.max_body_kib)),
            None,
            t.max_body_kib,
            DEFAULT_MAX_BODY_BYTES,
            |v| range(1, 1 << 20)(v).map(|v| (v as usize) << 10),
        ),
        shutdown_grace: r.pick(
            &at("server", "shutdown_grace_secs"),
            Some(("--shutdown-grace", flags.shutdown_grace)),
            None,
            t.shutdown_grace_secs,
            DEFAULT_SHUTDOWN_GRACE,
            secs,
        ),
    }
}

/// `127.0.0.1:8787`, `[::1]:8787`, a host name and port (`localhost:8787`
/// is 127.0.0.1; another name is looked up when `serve` binds, never here,
/// so a command that does not listen never waits on DNS), or a bare port
/// (`8787`), which is on 127.0.0.1.
pub fn listen(text: String) -> Result<String, String> {
    let text = text.trim();
    let expected = || {
        format!(
            "expected an address such as \"127.0.0.1:8787\", \"localhost:8787\" or a port such as \"8787\", found {text:?}"
        )
    };
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr.to_string());
    }
    let loopback = |port| SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).to_string();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(loopback(port));
    }
    let (host, port) = text.rsplit_once(':').ok_or_else(expected)?;
    let port = port.parse::<u16>().map_err(|_| expected())?;
    let name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    if host.is_empty() || !host.chars().all(name) {
        return Err(expected());
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(loopback(port));
    }
    Ok(format!("{host}:{port}"))
}

pub(super) fn plugins(
    r: &mut Resolver,
    t: Option<&PluginsToml>,
    flags: &PluginFlags,
    serving: bool,
    home: &Home,
) -> PluginSettings {
    let empty = PluginsToml::default();
    let t = t.unwrap_or(&empty);
    let d = LoadLimits::default();
    let folder = r.folder().map(PathBuf::from);
    let dir = match (&flags.dir, &t.dir) {
        (Some(dir), _) => {
            r.set_source(&at("plugins", "dir"), super::Source::Flag("--plugins"));
            dir.clone()
        }
        (None, Some(dir)) => {
            r.set_source(&at("plugins", "dir"), r.file_source(&at("plugins", "dir")));
            folder.unwrap_or_default().join(dir)
        }
        (None, None) => home.plugins_dir(),
    };
    let mib = |v| range(1, 1 << 20)(v).map(|v| v << 20);
    let load = LoadLimits {
        max_file_bytes: r.pick(
            &at("plugins", "max_plugin_mib"),
            Some(("--max-plugin-mib", flags.max_plugin_mib)),
            Some(vars::MAX_PLUGIN_MIB_VAR),
            t.max_plugin_mib,
            d.max_file_bytes,
            mib,
        ),
        compile_timeout: r.pick(
            &at("plugins", "compile_timeout_secs"),
            Some(("--compile-timeout", flags.compile_timeout)),
            Some(vars::COMPILE_TIMEOUT_VAR),
            t.compile_timeout_secs,
            d.compile_timeout,
            positive_secs,
        ),
        compile_memory_bytes: r.pick(
            &at("plugins", "compile_memory_mib"),
            Some(("--compile-memory-mib", flags.compile_memory_mib)),
            Some(vars::COMPILE_MEMORY_MIB_VAR),
            t.compile_memory_mib,
            d.compile_memory_bytes,
            mib,
        ),
    };
    let max_instances = r.pick(
        &at("plugins", "max_instances"),
        Some(("--max-instances", flags.max_instances)),
        Some(vars::MAX_INSTANCES_VAR),
        t.max_instances,
        if serving {
            SERVE_INSTANCES
        } else {
            SESSION_INSTANCES
        },
        |v| range(1, 10_000)(v).map(|v| v as u32),
    );
    let cache_max_bytes = r.pick(
        &at("plugins", "cache_max_mib"),
        None,
        None,
        t.cache_max_mib,
        CACHE_MAX,
        mib,
    );
    let limits = match &t.limits {
        Some(l) => {
            let table = [Step::Key("plugins"), Step::Key("limits")];
            let set = [
                ("memory_mib", l.memory_mib.is_some()),
                ("timeout_ms", l.timeout_ms.is_some()),
                ("output_kib", l.output_kib.is_some()),
                ("log_lines", l.log_lines.is_some()),
                ("open_files", l.open_files.is_some()),
            ];
            mark(r, &table, &set);
            let resolved = resolve_limits(l, &PluginLimits::default());
            settled(r, &[Step::Key("plugins")], resolved)
        }
        None => PluginLimits::default(),
    };
    PluginSettings {
        dir,
        load,
        max_instances,
        cache_max_bytes,
        limits,
    }
}

pub(super) fn hooks(r: &mut Resolver, t: Option<&HooksToml>) -> HookSettings {
    let Some(t) = t else {
        return HookSettings::default();
    };
    let toml = HookSettingsToml {
        priority: None,
        timeout_ms: t.timeout_ms,
        memory_mib: t.memory_mib,
        fail: t.fail,
        queue: t.queue,
    };
    let set = [
        ("timeout_ms", t.timeout_ms.is_some()),
        ("memory_mib", t.memory_mib.is_some()),
        ("fail", t.fail.is_some()),
        ("queue", t.queue.is_some()),
    ];
    mark(r, &[Step::Key("hooks")], &set);
    settled(
        r,
        &[],
        HookSettings::resolve(&toml, &HookSettings::default()),
    )
}

/// Records the file as the source of each key of `table` that is set.
fn mark(r: &mut Resolver, table: &[Step], keys: &[(&str, bool)]) {
    for (key, _) in keys.iter().filter(|(_, set)| *set) {
        let steps = [table, &[Step::Key(key)]].concat();
        r.set_source(&steps, r.file_source(&steps));
    }
}

/// A table the grants code checks: its value, or its error put at its
/// field (`limits.memory_mib` under `prefix`).
fn settled<T: Default>(r: &mut Resolver, prefix: &[Step], resolved: Result<T, FieldError>) -> T {
    match resolved {
        Ok(value) => value,
        Err(FieldError { field, message }) => {
            let steps: Vec<Step> = (prefix.iter().copied())
                .chain(field.split('.').map(Step::Key))
                .collect();
            r.fail_in_file(&steps, message);
            T::default()
        }
    }
}
