//! Operator grants: what one plugin may reach.
//!
//! Grants belong to the operator, not the plugin: they live in `NAME.toml` beside
//! `NAME.wasm`. No file means no capabilities at all: no filesystem, no
//! environment, no network, no stdin, and the default limits. The defaults
//! of `[limits]` and `[hooks]` are the configuration's `[plugins.limits]`
//! and `[hooks]` ([`PluginDefaults`]); what a grants file sets wins.
//!
//! ```toml
//! env = ["TZ"]                # environment variables passed through by name
//!
//! [limits]                    # any subset; defaults in `Limits::default`
//! memory_mib = 64
//! timeout_ms = 30000
//! output_kib = 1024
//! log_lines = 1000
//! open_files = 64             # files and directories open at once
//!
//! [[dirs]]
//! host = "../workspace"       # relative to this file's folder; "~/" is the user's home
//! guest = "/workspace"        # where the plugin sees it
//! mode = "read-write"         # or "read-only"
//!
//! [hooks]                     # hook plugins; see `HookSettings`
//! priority = -10              # overrides the plugin's own
//! timeout_ms = 50
//! memory_mib = 16
//! fail = "closed"             # "closed" or "open"; default: closed before, open after
//! queue = 256                 # on-event: events waiting, beyond which they are dropped
//!
//! [approvals]                 # which of its tools' calls wait for a person
//! rules = [{ tool = "write_*", permission = "ask" }]   # first match wins;
//!                             # the stricter of this and the agent's rules applies
//!
//! [config]                    # free-form; what the plugin reads with `config.get`
//! rules = ["..."]
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fields::{FieldError, MAX_MEMORY_MIB, as_millis, check};
pub use super::hook_settings::{FailMode, HookSettings, HookSettingsToml};
use super::network::{CredentialToml, NetworkGrant, NetworkToml};
use super::protected::{Protected, overlap};
use super::secrets::Secrets;
use crate::config::{ApprovalRule, Permission};

/// `NAME.toml` exactly as written; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantsToml {
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub limits: LimitsToml,
    #[serde(default)]
    pub dirs: Vec<DirToml>,
    /// May start sub-agents through `agent.spawn-subturn`.
    #[serde(default)]
    pub spawn_subturn: bool,
    #[serde(default)]
    pub hooks: HookSettingsToml,
    /// What it may reach over `wasi:http`.
    #[serde(default)]
    pub network: NetworkToml,
    #[serde(default)]
    pub credentials: Vec<CredentialToml>,
    /// Approval rules for its tools (`[approvals]`).
    #[serde(default)]
    pub approvals: ApprovalsToml,
    /// The plugin's settings, for `config.get`.
    #[serde(default)]
    pub config: toml::Table,
}

/// `[approvals]` of a grants file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsToml {
    #[serde(default)]
    pub rules: Vec<ApprovalRuleToml>,
}

/// One approval rule as written: a tool name pattern (`*` globs) and what
/// its calls get.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRuleToml {
    pub tool: String,
    pub permission: Permission,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsToml {
    pub memory_mib: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub output_kib: Option<u64>,
    pub log_lines: Option<u32>,
    pub open_files: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirToml {
    pub host: String,
    pub guest: String,
    pub mode: DirMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirMode {
    ReadOnly,
    ReadWrite,
}

/// Per-call limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Linear memory, all memories of the instance together.
    pub memory_bytes: u64,
    /// Wall-clock time for one call.
    #[serde(rename = "timeout_ms", serialize_with = "as_millis")]
    pub timeout: Duration,
    /// Size of the result (or error message) the call may return.
    pub output_bytes: usize,
    /// Lines the call may write through `log`, stdout and stderr together.
    pub log_lines: u32,
    /// Files and directories the call may have open at once (see
    /// `plugin::sandbox::descriptors`).
    pub open_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            timeout: Duration::from_secs(30),
            output_bytes: 1 << 20,
            log_lines: 1000,
            open_files: 64,
        }
    }
}

/// What a plugin gets where its grants file says nothing, and what no
/// grant may pass it: set by the configuration (`[plugins.limits]`,
/// `[hooks]`, the variables that hold its providers' keys and the API
/// token); built-in defaults and no variable without one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginDefaults {
    pub limits: Limits,
    pub hooks: HookSettings,
    /// Variables that hold the host's keys under names the configuration
    /// chose (`api_key_env`, `token_env`): like the host's own variables,
    /// never passed to a plugin.
    pub host_env: Vec<String>,
}

/// A directory the plugin may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirGrant {
    /// Canonical host path.
    pub host: PathBuf,
    /// The path the guest sees.
    pub guest: String,
    pub mode: DirMode,
}

/// Resolved grants of one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grants {
    /// Names of the environment variables passed through; values are read from
    /// the host's environment at each call and never listed.
    pub env: Vec<String>,
    pub dirs: Vec<DirGrant>,
    pub limits: Limits,
    /// May start sub-agents through `agent.spawn-subturn`.
    pub spawn_subturn: bool,
    /// How the plugin's hooks run.
    pub hooks: HookSettings,
    /// Approval rules for its tools, first match first.
    pub approvals: Vec<ApprovalRule>,
    /// What it may reach over `wasi:http`, and the secrets added to it.
    #[serde(serialize_with = "shared")]
    pub network: Arc<NetworkGrant>,
    /// The `[config]` table as a JSON object.
    pub config: serde_json::Value,
    /// `config` as text, handed to every call that asks.
    #[serde(skip)]
    pub config_json: Arc<str>,
    /// The file these came from, if any.
    pub source: Option<PathBuf>,
}

impl Default for Grants {
    fn default() -> Self {
        Grants {
            env: Vec::new(),
            dirs: Vec::new(),
            limits: Limits::default(),
            spawn_subturn: false,
            hooks: HookSettings::default(),
            approvals: Vec::new(),
            network: Arc::default(),
            config: serde_json::Value::Object(Default::default()),
            config_json: "{}".into(),
            source: None,
        }
    }
}

impl Grants {
    /// The sidecar that belongs to a plugin file.
    pub fn sidecar_of(wasm: &Path) -> PathBuf {
        wasm.with_extension("toml")
    }

    /// Reads the sidecar of `wasm`; no sidecar means no capabilities.
    /// Errors name the file, the field and what was expected. No directory
    /// grant may overlap `protected` (the host's own paths: a plugin that
    /// could read or write there could read the operator's secrets or grant
    /// itself anything), whether or not they exist yet.
    pub fn for_plugin(
        wasm: &Path,
        protected: &[Protected],
        secrets: &Secrets,
        defaults: &PluginDefaults,
    ) -> Result<Grants, String> {
        let sidecar = Self::sidecar_of(wasm);
        match std::fs::read_to_string(&sidecar) {
            Ok(text) => Self::parse(&text, &sidecar, protected, secrets, defaults),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Grants {
                limits: defaults.limits.clone(),
                hooks: defaults.hooks.clone(),
                ..Grants::default()
            }),
            Err(e) => Err(format!("{}: cannot read: {e}", sidecar.display())),
        }
    }

    /// Parses and resolves a grants file over `defaults`; relative directory
    /// paths are taken from the file's folder.
    pub fn parse(
        text: &str,
        file: &Path,
        protected: &[Protected],
        secrets: &Secrets,
        defaults: &PluginDefaults,
    ) -> Result<Grants, String> {
        let at = |msg: String| format!("{}: {msg}", file.display());
        let toml: GrantsToml = toml::from_str(text).map_err(|e| at(toml_error(&e)))?;
        let base = file.parent().unwrap_or(Path::new("."));

        for name in &toml.env {
            super::env_grant::check(name, &defaults.host_env)
                .map_err(|e| at(format!("env: {e}")))?;
        }

        let mut dirs = Vec::new();
        for (i, dir) in toml.dirs.iter().enumerate() {
            let field = format!("dirs[{i}]");
            if !dir.guest.starts_with('/') {
                return Err(at(format!(
                    "{field}.guest: expected an absolute path such as \"/workspace\", found {:?}",
                    dir.guest
                )));
            }
            let host = expand_path(&dir.host, base);
            let host = host.canonicalize().map_err(|e| {
                at(format!(
                    "{field}.host: {:?} (resolved to {}) cannot be opened: {e}",
                    dir.host,
                    host.display()
                ))
            })?;
            if !host.is_dir() {
                return Err(at(format!(
                    "{field}.host: {} is not a directory",
                    host.display()
                )));
            }
            if let Some(why) = overlap(&host, protected) {
                return Err(at(format!(
                    "{field}.host: {why}; grant a directory outside it"
                )));
            }
            let overlaps = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
            if let Some((j, other)) = dirs
                .iter()
                .enumerate()
                .find(|(_, d): &(usize, &DirGrant)| overlaps(&host, &d.host))
            {
                return Err(at(format!(
                    "{field}.host: {} overlaps dirs[{j}].host ({}); granted directories must not nest",
                    host.display(),
                    other.host.display()
                )));
            }
            dirs.push(DirGrant {
                host,
                guest: dir.guest.clone(),
                mode: dir.mode,
            });
        }

        let config = serde_json::to_value(&toml.config)
            .map_err(|e| at(format!("config: cannot be turned into JSON: {e}")))?;
        Ok(Grants {
            env: toml.env,
            dirs,
            limits: resolve_limits(&toml.limits, &defaults.limits).map_err(|e| at(e.into()))?,
            spawn_subturn: toml.spawn_subturn,
            hooks: HookSettings::resolve(&toml.hooks, &defaults.hooks).map_err(|e| at(e.into()))?,
            approvals: (toml.approvals.rules.iter())
                .map(|r| ApprovalRule {
                    tool: r.tool.clone(),
                    permission: r.permission,
                })
                .collect(),
            network: Arc::new(
                NetworkGrant::resolve(&toml.network, &toml.credentials, secrets).map_err(at)?,
            ),
            config_json: config.to_string().into(),
            config,
            source: Some(file.to_path_buf()),
        })
    }
}

fn shared<S: serde::Serializer, T: Serialize>(value: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
    value.as_ref().serialize(s)
}

/// `t` over `defaults`: what `t` sets wins. Also the check of the
/// configuration's `[plugins.limits]`.
pub fn resolve_limits(t: &LimitsToml, defaults: &Limits) -> Result<Limits, FieldError> {
    let check = |field: &str, value, min, max| check(&format!("limits.{field}"), value, min, max);
    let d = defaults;
    Ok(Limits {
        memory_bytes: match t.memory_mib {
            Some(v) => check("memory_mib", v, 1, MAX_MEMORY_MIB)? << 20,
            None => d.memory_bytes,
        },
        timeout: match t.timeout_ms {
            Some(v) => Duration::from_millis(check("timeout_ms", v, 1, 3_600_000)?),
            None => d.timeout,
        },
        output_bytes: match t.output_kib {
            // wasmtime copies at most 128 MiB out of a guest in one call.
            Some(v) => (check("output_kib", v, 1, 64 << 10)? << 10) as usize,
            None => d.output_bytes,
        },
        log_lines: match t.log_lines {
            Some(v) => check("log_lines", v.into(), 0, 10_000_000)? as u32,
            None => d.log_lines,
        },
        open_files: match t.open_files {
            Some(v) => check("open_files", v, 1, 4096)? as usize,
            None => d.open_files,
        },
    })
}

/// `~/x` is under the user's home; a relative path is under `base`.
fn expand_path(path: &str, base: &Path) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = crate::home::user_home()
    {
        return home.join(rest);
    }
    base.join(path)
}

/// toml's messages carry a multi-line source excerpt; keep them on one line.
fn toml_error(e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    match e.span() {
        Some(span) => format!("{msg} (at byte {})", span.start),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Grants, String> {
        Grants::parse(
            text,
            Path::new("/plugins/demo.toml"),
            &[],
            &Secrets::default(),
            &PluginDefaults::default(),
        )
    }

    fn dir_grant(host: &Path, guest: &str) -> String {
        format!("[[dirs]]\nhost = {host:?}\nguest = \"{guest}\"\nmode = \"read-write\"\n")
    }

    #[test]
    fn grants_must_not_nest_or_reach_the_hosts_own_folders() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        std::fs::create_dir_all(data.join("inner")).unwrap();
        let data = data.canonicalize().unwrap();
        let text = dir_grant(&data, "/d") + &dir_grant(&data.join("inner"), "/i");
        let err = parse(&text).unwrap_err();
        assert_eq!(
            err,
            format!(
                "/plugins/demo.toml: dirs[1].host: {}/inner overlaps dirs[0].host ({}); granted directories must not nest",
                data.display(),
                data.display()
            )
        );

        // The plugin directory (or anything above it) is never granted.
        let plugins = data.join("inner");
        let err = Grants::parse(
            &dir_grant(&data, "/d"),
            Path::new("/p/demo.toml"),
            &[Protected::plugin_dir(&plugins)],
            &Secrets::default(),
            &PluginDefaults::default(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            format!(
                "/p/demo.toml: dirs[0].host: {} contains the plugin directory ({}): a plugin that reaches it could replace plugins and rewrite their grants; grant a directory outside it",
                data.display(),
                plugins.display()
            )
        );
    }

    #[test]
    fn empty_file_grants_nothing_and_default_limits() {
        let g = parse("").unwrap();
        assert!(g.env.is_empty() && g.dirs.is_empty());
        assert_eq!(g.limits, Limits::default());
    }

    #[test]
    fn the_configurations_defaults_apply_where_a_grants_file_is_silent() {
        let defaults = PluginDefaults {
            limits: Limits {
                memory_bytes: 8 << 20,
                timeout: Duration::from_secs(2),
                ..Limits::default()
            },
            hooks: HookSettings {
                timeout: Duration::from_millis(10),
                fail: Some(FailMode::Open),
                ..HookSettings::default()
            },
            host_env: vec!["LOCAL_KEY".into()],
        };
        let parse = |text: &str| {
            let file = Path::new("/plugins/demo.toml");
            Grants::parse(text, file, &[], &Secrets::default(), &defaults)
        };
        let g = parse("[limits]\ntimeout_ms = 250\n[hooks]\nfail = \"closed\"\n").unwrap();
        assert_eq!(
            (g.limits.memory_bytes, g.limits.timeout),
            (8 << 20, Duration::from_millis(250))
        );
        assert_eq!(
            (g.hooks.timeout, g.hooks.fail),
            (Duration::from_millis(10), Some(FailMode::Closed))
        );
        // No grants file: the defaults, and still no capabilities.
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("bare.wasm");
        let g = Grants::for_plugin(&wasm, &[], &Secrets::default(), &defaults).unwrap();
        assert_eq!((&g.limits, &g.hooks), (&defaults.limits, &defaults.hooks));
        assert!(g.env.is_empty() && g.dirs.is_empty() && g.source.is_none());
        // A variable the configuration names for a key is never granted.
        let err = parse("env = [\"LOCAL_KEY\"]\n").unwrap_err();
        assert!(
            err.starts_with("/plugins/demo.toml: env: \"LOCAL_KEY\" is a key the host's configuration reads (api_key_env or token_env)"),
            "{err}"
        );
    }

    #[test]
    fn limits_override_defaults() {
        let g = parse("[limits]\nmemory_mib = 16\ntimeout_ms = 250\n").unwrap();
        assert_eq!(g.limits.memory_bytes, 16 << 20);
        assert_eq!(g.limits.timeout, Duration::from_millis(250));
        assert_eq!(g.limits.output_bytes, Limits::default().output_bytes);
    }

    #[test]
    fn hooks_and_config_are_read() {
        let g = parse(
            "[hooks]\npriority = -5\ntimeout_ms = 20\nfail = \"open\"\n[config]\nnotes = \"hi\"\n[[config.deny]]\ntool = \"x\"\n",
        )
        .unwrap();
        assert_eq!(g.hooks.priority, Some(-5));
        assert_eq!(g.hooks.timeout, Duration::from_millis(20));
        assert_eq!(g.hooks.memory_bytes, 16 << 20);
        assert_eq!(g.hooks.fail, Some(FailMode::Open));
        assert_eq!(&*g.config_json, r#"{"deny":[{"tool":"x"}],"notes":"hi"}"#);
        assert_eq!(&*Grants::default().config_json, "{}");
        let err = parse("[hooks]\nfail = \"maybe\"\n").unwrap_err();
        assert!(
            err.contains("unknown variant `maybe`, expected `closed` or `open`"),
            "{err}"
        );
        let err = parse("[hooks]\ntimeout_ms = 0\n").unwrap_err();
        assert_eq!(
            err,
            "/plugins/demo.toml: hooks.timeout_ms: expected 1 to 60000, found 0"
        );
    }

    #[test]
    fn a_secret_cannot_be_granted_as_an_environment_variable() {
        let err = parse("env = [\"wasmclaw_secret_github_token\"]\n").unwrap_err();
        assert_eq!(
            err,
            "/plugins/demo.toml: env: \"wasmclaw_secret_github_token\" holds a secret, which a plugin never gets; name it in [[credentials]] instead"
        );
    }

    #[test]
    fn unknown_field_is_named() {
        let err = parse("[limits]\nmemory_mb = 16\n").unwrap_err();
        assert!(
            err.starts_with("/plugins/demo.toml: unknown field `memory_mb`"),
            "{err}"
        );
    }

    #[test]
    fn out_of_range_limit_is_named() {
        let err = parse("[limits]\nmemory_mib = 4096\n").unwrap_err();
        assert_eq!(
            err,
            "/plugins/demo.toml: limits.memory_mib: expected 1 to 1024, found 4096"
        );
    }

    #[test]
    fn relative_guest_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[[dirs]]\nhost = {:?}\nguest = \"data\"\nmode = \"read-only\"\n",
            dir.path()
        );
        let err = parse(&text).unwrap_err();
        assert_eq!(
            err,
            "/plugins/demo.toml: dirs[0].guest: expected an absolute path such as \"/workspace\", found \"data\""
        );
    }

    #[test]
    fn missing_host_dir_is_named() {
        let err =
            parse("[[dirs]]\nhost = \"nope\"\nguest = \"/d\"\nmode = \"read-only\"\n").unwrap_err();
        assert!(
            err.starts_with(
                "/plugins/demo.toml: dirs[0].host: \"nope\" (resolved to /plugins/nope) cannot be opened"
            ),
            "{err}"
        );
    }

    #[test]
    fn bad_mode_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[[dirs]]\nhost = {:?}\nguest = \"/d\"\nmode = \"rw\"\n",
            dir.path()
        );
        let err = parse(&text).unwrap_err();
        assert!(
            err.contains("unknown variant `rw`, expected `read-only` or `read-write`"),
            "{err}"
        );
    }
}
