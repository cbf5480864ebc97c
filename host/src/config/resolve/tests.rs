//! Resolution: every key applied to its field, the precedence of the
//! layers, the agent run, and what changed between two configurations;
//! [`faults`]: the exact text of each kind of fault.

mod faults;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::overrides::{AgentFlags, Overrides};
use super::super::{Config, ConfigErrors, ModelRef, ModelSettings, Source, load, needs_restart};
use crate::home::Home;
use crate::llm::ProviderKind;
use crate::plugin::policy::hook_settings::FailMode;
use crate::protocol::Policy;

/// A home holding `text` as its wasmclaw.toml (and `files`, by path).
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(text: &str, files: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wasmclaw.toml"), text).unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        Fixture { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("wasmclaw.toml")
    }

    fn load(&self, overrides: &Overrides, env: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        load(&Home::at(self.dir.path()), None, overrides, &|var| {
            env.get(var).cloned()
        })
    }

    /// The fault lines, with the file's path written as `wasmclaw.toml`.
    fn errors(&self, overrides: &Overrides, env: &[(&str, &str)]) -> Vec<String> {
        let errors = self.load(overrides, env).unwrap_err();
        let prefix = format!("{}:", self.file().display());
        (errors.0.iter())
            .map(|e| e.to_string().replace(&prefix, "wasmclaw.toml:"))
            .collect()
    }
}

const FULL: &str = r#"[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1/"
api_key_env = "LOCAL_KEY"
headers = { "X-Team" = "research" }
timeout_secs = 2.5
stream = false
[providers.local.models."qwen2.5"]
context_window = 32768
max_output_tokens = 8192

[providers.anthropic]
base_url = "http://127.0.0.1:9000"

[agents.coder]
model = ["local:qwen2.5", "anthropic:claude-x"]
system_prompt_file = "prompts/coder.md"
tools = { allow = ["files_*", "add"], deny = ["files_delete"] }
max_iterations = 7
max_refusals = 0
max_tokens = 4000
token_budget = 90000
session_policy = "follow-up"
commands = false
[agents.coder.subturns]
max_depth = 1
per_parent = 2
per_tree = 4
per_call = 0
slot_wait_secs = 0.5
timeout_secs = 30
[agents.coder.compaction]
[agents.coder.approvals]

[limits]
tool_concurrency = 2
max_parallel_turns = 16
max_subturns = 9
max_reply_text = 1000
max_reply_arguments = 2000
llm_deadline_secs = 30
wind_down_idle_secs = 1
[limits.retry]
tries = 5
backoff_ms = 100
max_backoff_ms = 1000
jitter = 0
cooldown_secs = 0
max_retry_wait_secs = 7

[server]
listen = "localhost:9999"
token_env = "MY_TOKEN"
max_body_kib = 64
shutdown_grace_secs = 0

[plugins]
dir = "my-plugins"
max_plugin_mib = 16
compile_timeout_secs = 9
compile_memory_mib = 512
cache_max_mib = 64
[plugins.limits]
memory_mib = 32
timeout_ms = 1500
output_kib = 8
log_lines = 10
open_files = 4

[hooks]
timeout_ms = 20
memory_mib = 8
fail = "open"
queue = 9
"#;

#[test]
fn every_key_reaches_its_field() {
    let fixture = Fixture::new(FULL, &[("prompts/coder.md", "You write code.")]);
    let config = fixture.load(&Overrides::default(), &[]).unwrap();
    let root = fixture.dir.path();

    let local = &config.providers["local"];
    assert_eq!(
        (
            local.kind,
            local.base_url.as_str(),
            local.api_key_env.as_deref()
        ),
        (
            ProviderKind::OpenAi,
            "http://127.0.0.1:8080/v1",
            Some("LOCAL_KEY")
        )
    );
    assert_eq!(local.headers["X-Team"], "research");
    assert_eq!(
        (local.timeout, local.stream),
        (Duration::from_millis(2500), false)
    );
    assert_eq!(
        local.models["qwen2.5"],
        ModelSettings {
            context_window: Some(32768),
            max_output_tokens: Some(8192)
        }
    );
    // A table named like a built-in replaces it, kind and key variable kept.
    let anthropic = &config.providers["anthropic"];
    assert_eq!(
        (
            anthropic.kind,
            anthropic.base_url.as_str(),
            anthropic.api_key_env.as_deref()
        ),
        (
            ProviderKind::Anthropic,
            "http://127.0.0.1:9000",
            Some("ANTHROPIC_API_KEY")
        )
    );
    assert_eq!(
        config.providers.keys().collect::<Vec<_>>(),
        ["anthropic", "local", "ollama", "openai", "scripted"]
    );

    let coder = &config.agents["coder"];
    assert_eq!(
        coder.model,
        [
            ModelRef {
                provider: "local".into(),
                model: "qwen2.5".into()
            },
            ModelRef {
                provider: "anthropic".into(),
                model: "claude-x".into()
            },
        ]
    );
    assert_eq!(coder.system_prompt.as_deref(), Some("You write code."));
    assert_eq!(coder.tools.allow, ["files_*", "add"]);
    assert_eq!(coder.tools.deny, ["files_delete"]);
    assert_eq!(
        (
            coder.max_iterations,
            coder.max_refusals,
            coder.max_tokens,
            coder.token_budget
        ),
        (7, 0, Some(4000), Some(90000))
    );
    assert_eq!(
        (coder.session_policy, coder.commands),
        (Policy::FollowUp, false)
    );
    let s = &coder.subturns;
    assert_eq!(
        (s.max_depth, s.per_parent, s.per_tree, s.per_call, s.total),
        (1, 2, 4, 0, 9)
    );
    assert_eq!(
        (s.slot_wait, s.default_timeout),
        (Duration::from_millis(500), Duration::from_secs(30))
    );
    // `default` is there too, untouched by coder.
    assert_eq!(
        config.agents.keys().collect::<Vec<_>>(),
        ["coder", "default"]
    );
    assert_eq!(config.agents["default"].max_iterations, 50);

    let l = &config.limits;
    assert_eq!(
        (l.tool_concurrency, l.max_parallel_turns, l.max_subturns),
        (2, 16, 9)
    );
    assert_eq!((l.call.max_text, l.call.max_arguments), (1000, 2000));
    assert_eq!(
        (l.call.deadline, l.wind_down_idle),
        (Duration::from_secs(30), Duration::from_secs(1))
    );
    let r = &l.retry;
    assert_eq!(
        (
            r.attempts,
            r.base_delay,
            r.max_delay,
            r.jitter,
            r.cooldown,
            r.max_retry_after
        ),
        (
            5,
            Duration::from_millis(100),
            Duration::from_secs(1),
            0.0,
            Duration::ZERO,
            Duration::from_secs(7)
        )
    );

    assert_eq!(config.server.listen.to_string(), "127.0.0.1:9999");
    assert_eq!(config.server.token_env, "MY_TOKEN");
    assert_eq!(config.server.max_body_bytes, 64 << 10);
    assert_eq!(config.server.shutdown_grace, Duration::ZERO);

    let p = &config.plugins;
    assert_eq!(p.dir, root.join("my-plugins"));
    assert_eq!(
        (
            p.load.max_file_bytes,
            p.load.compile_timeout,
            p.load.compile_memory_bytes
        ),
        (16 << 20, Duration::from_secs(9), 512 << 20)
    );
    assert_eq!(p.cache_max_bytes, 64 << 20);
    assert_eq!(
        (
            p.limits.memory_bytes,
            p.limits.timeout,
            p.limits.output_bytes,
            p.limits.log_lines,
            p.limits.open_files
        ),
        (32 << 20, Duration::from_millis(1500), 8 << 10, 10, 4)
    );
    let h = &config.hooks;
    assert_eq!(
        (h.timeout, h.memory_bytes, h.fail, h.queue, h.priority),
        (
            Duration::from_millis(20),
            8 << 20,
            Some(FailMode::Open),
            9,
            None
        )
    );

    // What the configuration builds from them.
    let agent = config.agent_config(coder);
    assert_eq!(
        (
            agent.max_iterations,
            agent.max_repeated_refusals,
            agent.max_tokens,
            agent.tool_concurrency
        ),
        (7, 0, Some(4000), 2)
    );
    assert_eq!(agent.system_prompt.as_deref(), Some("You write code."));
    assert_eq!(
        (agent.subturns.total, agent.wind_down_idle),
        (9, Duration::from_secs(1))
    );
    assert_eq!(config.scheduler_config().max_parallel, 16);
    let server = config.server_config("t".into());
    assert_eq!(
        (server.max_body_bytes, server.shutdown_grace),
        (64 << 10, Duration::ZERO)
    );
    let defaults = config.plugin_defaults();
    assert_eq!(
        (defaults.limits, defaults.hooks),
        (p.limits.clone(), h.clone())
    );
    assert_eq!(
        defaults.host_env,
        [
            "ANTHROPIC_API_KEY",
            "LOCAL_KEY",
            "MY_TOKEN",
            "OPENAI_API_KEY"
        ]
    );
    let env = |var: &str| (var == "LOCAL_KEY").then(|| "sk-local".to_string());
    let candidate = config.candidate(&coder.model[0], &env).unwrap();
    assert_eq!(
        (
            candidate.name(),
            candidate.base_url.as_str(),
            candidate.api_key.as_deref()
        ),
        (
            "openai:qwen2.5".to_string(),
            "http://127.0.0.1:8080/v1",
            Some("sk-local")
        )
    );
    assert_eq!(candidate.headers["x-team"], "research");
    assert_eq!(
        (candidate.stream, candidate.timeout),
        (false, Duration::from_millis(2500))
    );
    assert_eq!(
        (candidate.limits.max_text, candidate.limits.deadline),
        (1000, Duration::from_secs(30))
    );
    assert_eq!(
        config.chain(coder, &env).unwrap().models(),
        ["openai:qwen2.5", "anthropic:claude-x"]
    );
}

#[test]
fn max_tokens_defaults_to_the_least_output_cap_and_may_not_pass_one() {
    let text = "[providers.local]\nkind = \"openai\"\n[providers.local.models.a]\nmax_output_tokens = 900\n[providers.local.models.b]\nmax_output_tokens = 300\n[agents.default]\nmodel = [\"local:a\", \"local:b\"]\n";
    let fixture = Fixture::new(text, &[]);
    let config = fixture.load(&Overrides::default(), &[]).unwrap();
    assert_eq!(
        config.agent_config(config.running_agent()).max_tokens,
        Some(300)
    );

    let fixture = Fixture::new(&format!("{text}max_tokens = 500\n"), &[]);
    assert_eq!(
        fixture.errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:9:14: agents.default.max_tokens: expected at most 300, the max_output_tokens of model local:b (providers.local.models), found 500"
        ]
    );
}

fn flags(model: Option<&str>, llm_deadline: Option<f64>, max_iterations: Option<u64>) -> Overrides {
    Overrides {
        agent: AgentFlags {
            model: model.map(String::from),
            llm_deadline,
            max_iterations,
            ..AgentFlags::default()
        },
        ..Overrides::default()
    }
}

#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let text = "[agents.default]\nmodel = \"openai:from-file\"\nmax_iterations = 9\n[limits]\nllm_deadline_secs = 40\n[providers.openai]\nbase_url = \"http://file:1/v1\"\n";
    let fixture = Fixture::new(text, &[]);
    let empty = Fixture::new("", &[]);
    let env = [
        ("WASMCLAW_MODEL", "openai:from-env"),
        ("WASMCLAW_LLM_DEADLINE", "50"),
        ("OPENAI_BASE_URL", "http://env:1/v1"),
    ];
    let all = flags(Some("openai:from-flag"), Some(60.0), Some(11));
    let none = Overrides::default();
    let file = |line, column| {
        Source::File(super::super::error::Position {
            file: fixture.file(),
            line,
            column,
        })
    };
    type Row = (String, f64, u32, String, Source, Source, Source, Source);
    let row = |config: Config| -> Row {
        let agent = config.running_agent();
        let model = format!("{}:{}", agent.model[0].provider, agent.model[0].model);
        let get = |key: &str| config.sources.get(key).clone();
        (
            model,
            config.limits.call.deadline.as_secs_f64(),
            agent.max_iterations,
            config.providers["openai"].base_url.clone(),
            get("agents.default.model"),
            get("limits.llm_deadline_secs"),
            get("agents.default.max_iterations"),
            get("providers.openai.base_url"),
        )
    };
    // Flags over all: `--max-iterations` has no variable; a base URL has
    // a variable and (as --base-url) a flag of the agent run.
    let mut all_and_url = all.clone();
    all_and_url.agent.base_url = Some("http://flag:1/v1".into());
    assert_eq!(
        row(fixture.load(&all_and_url, &env).unwrap()),
        (
            "openai:from-flag".into(),
            60.0,
            11,
            "http://flag:1/v1".into(),
            Source::Flag("--model"),
            Source::Flag("--llm-deadline"),
            Source::Flag("--max-iterations"),
            Source::Flag("--base-url"),
        )
    );
    assert_eq!(
        row(fixture.load(&none, &env).unwrap()),
        (
            "openai:from-env".into(),
            50.0,
            9,
            "http://env:1/v1".into(),
            Source::Env("WASMCLAW_MODEL".into()),
            Source::Env("WASMCLAW_LLM_DEADLINE".into()),
            file(3, 18),
            Source::Env("OPENAI_BASE_URL".into()),
        )
    );
    assert_eq!(
        row(fixture.load(&none, &[]).unwrap()),
        (
            "openai:from-file".into(),
            40.0,
            9,
            "http://file:1/v1".into(),
            file(2, 9),
            file(5, 21),
            file(3, 18),
            file(7, 12),
        )
    );
    let defaults = empty
        .load(&flags(Some("openai:m"), None, None), &[])
        .unwrap();
    assert_eq!(
        row(defaults),
        (
            "openai:m".into(),
            600.0,
            50,
            "https://api.openai.com/v1".into(),
            Source::Flag("--model"),
            Source::Default,
            Source::Default,
            Source::Default,
        )
    );
}

#[test]
fn the_agent_run_takes_the_agent_flags_and_must_exist() {
    let text = "[agents.coder]\nmodel = \"openai:c\"\nsystem_prompt = \"coder\"\n[agents.writer]\nmodel = \"anthropic:w\"\n";
    let fixture = Fixture::new(text, &[]);
    let mut overrides = flags(Some("openai:x"), None, Some(4));
    overrides.agent.agent = Some("writer".into());
    overrides.agent.system = Some("be brief".into());
    let config = fixture.load(&overrides, &[]).unwrap();
    assert_eq!(config.default_agent, "writer");
    assert_eq!(
        config.sources.get("default_agent"),
        &Source::Flag("--agent")
    );
    let writer = &config.agents["writer"];
    assert_eq!(
        (writer.model[0].model.as_str(), writer.max_iterations),
        ("x", 4)
    );
    assert_eq!(writer.system_prompt.as_deref(), Some("be brief"));
    // The others keep their own.
    let coder = &config.agents["coder"];
    assert_eq!(
        (coder.model[0].model.as_str(), coder.max_iterations),
        ("c", 50)
    );
    assert_eq!(coder.system_prompt.as_deref(), Some("coder"));

    let config = fixture
        .load(&Overrides::default(), &[("WASMCLAW_AGENT", "coder")])
        .unwrap();
    assert_eq!(config.default_agent, "coder");

    assert_eq!(
        fixture.errors(&Overrides::default(), &[("WASMCLAW_AGENT", "codr")]),
        [
            "WASMCLAW_AGENT: unknown agent `codr`; did you mean `coder`? (expected one of: coder, default, writer)"
        ]
    );
}

#[test]
fn diff_names_what_changed_and_what_needs_a_restart() {
    let fixture = Fixture::new(
        "[agents.coder]\nmodel = \"openai:a\"\nmax_iterations = 5\n[limits]\nmax_parallel_turns = 4\n",
        &[],
    );
    let old = fixture.load(&Overrides::default(), &[]).unwrap();
    std::fs::write(
        fixture.file(),
        "[agents.coder]\nmax_iterations = 5\nmodel = \"openai:b\"\nsystem_prompt = \"new\"\n[limits]\nmax_parallel_turns = 8\n[server]\nlisten = \"9000\"\n[providers.local]\nkind = \"anthropic\"\n",
    )
    .unwrap();
    let new = fixture.load(&Overrides::default(), &[]).unwrap();
    let changed = old.diff(&new);
    assert_eq!(
        changed,
        [
            "agents.coder.model",
            "agents.coder.system_prompt",
            "limits.max_parallel_turns",
            "providers.local.base_url",
            "providers.local.kind",
            "providers.local.stream",
            "providers.local.timeout_secs",
            "server.listen",
        ]
    );
    let restart: Vec<&String> = changed.iter().filter(|k| needs_restart(k)).collect();
    assert_eq!(restart, ["limits.max_parallel_turns", "server.listen"]);
    assert!(new.diff(&new).is_empty());
    assert!(needs_restart("plugins.dir") && needs_restart("limits.max_subturns"));
    assert!(!needs_restart("limits.retry.tries") && !needs_restart("serverless"));
}

#[test]
fn a_scripted_model_of_the_file_is_relative_to_its_folder() {
    let fixture = Fixture::new("[agents.default]\nmodel = \"scripted:demo.json\"\n", &[]);
    let config = fixture.load(&Overrides::default(), &[]).unwrap();
    let model = &config.running_agent().model[0];
    assert_eq!(
        Path::new(&model.model),
        fixture.dir.path().join("demo.json")
    );
    // From a flag, it is as given.
    let config = fixture
        .load(&flags(Some("scripted:x.json"), None, None), &[])
        .unwrap();
    assert_eq!(config.running_agent().model[0].model, "x.json");
}

#[test]
fn ollama_is_a_local_openai_compatible_server_without_a_key() {
    let fixture = Fixture::new("", &[]);
    let config = fixture
        .load(&flags(Some("ollama:llama3.2"), None, None), &[])
        .unwrap();
    let model = &config.running_agent().model[0];
    let env = |var: &str| Some(format!("value of {var}"));
    let candidate = config.candidate(model, &env).unwrap();
    assert_eq!(
        (
            candidate.kind,
            candidate.model.as_str(),
            candidate.base_url.as_str(),
            candidate.api_key,
            candidate.api_key_env
        ),
        (
            ProviderKind::OpenAi,
            "llama3.2",
            "http://127.0.0.1:11434/v1",
            None,
            None
        )
    );
    // A file's [providers.ollama] moves it; it is still kind openai.
    let text = "[providers.ollama]\nbase_url = \"http://gpu-box:11434/v1\"\n";
    let config = Fixture::new(text, &[])
        .load(&flags(Some("ollama:qwen3"), None, None), &[])
        .unwrap();
    let candidate = (config.candidate(&config.running_agent().model[0], &env)).unwrap();
    assert_eq!(
        (candidate.kind, candidate.base_url.as_str()),
        (ProviderKind::OpenAi, "http://gpu-box:11434/v1")
    );
}

#[test]
fn plugin_instances_default_to_the_commands_need_and_may_be_set() {
    let fixture = Fixture::new("[plugins]\nmax_instances = 200\n", &[]);
    let empty = Fixture::new("", &[]);
    let serving = Overrides {
        serving: true,
        ..Overrides::default()
    };
    let instances = |f: &Fixture, o: &Overrides, env: &[(&str, &str)]| {
        f.load(o, env).unwrap().plugins.max_instances
    };
    assert_eq!(instances(&empty, &Overrides::default(), &[]), 64);
    assert_eq!(instances(&empty, &serving, &[]), 1000);
    assert_eq!(instances(&fixture, &serving, &[]), 200);
    let env = [("WASMCLAW_MAX_INSTANCES", "300")];
    assert_eq!(instances(&fixture, &serving, &env), 300);
    let mut flag = serving.clone();
    flag.plugins.max_instances = Some(400);
    assert_eq!(instances(&fixture, &flag, &env), 400);
}

#[test]
fn listen_takes_an_address_a_host_name_or_a_port() {
    use super::host::listen;
    for (text, addr) in [
        ("127.0.0.1:8787", "127.0.0.1:8787"),
        ("localhost:9", "127.0.0.1:9"),
        ("LocalHost:0", "127.0.0.1:0"),
        ("8788", "127.0.0.1:8788"),
        ("0", "127.0.0.1:0"),
        ("[::1]:7", "[::1]:7"),
        ("0.0.0.0:80", "0.0.0.0:80"),
        // A name is looked up when serve binds, not here.
        ("gpu-box.lan:8787", "gpu-box.lan:8787"),
    ] {
        assert_eq!(listen(text.into()).unwrap().to_string(), addr);
    }
    let expected = |found: &str| {
        format!(
            "expected an address such as \"127.0.0.1:8787\", \"localhost:8787\" or a port such as \"8787\", found {found:?}"
        )
    };
    for bad in [
        "70000",
        "localhost:x",
        "localhost",
        ":80",
        "a host:80",
        "a/b:1",
    ] {
        assert_eq!(listen(bad.into()), Err(expected(bad)), "{bad}");
    }
}

#[test]
fn approvals_take_a_default_a_timeout_and_rules_in_order() {
    use crate::config::{ApprovalRule, Permission};
    let text = "[agents.default.approvals]\ndefault = \"ask\"\ntimeout_secs = 30\nrules = [\n  { tool = \"files_read\", permission = \"allow\" },\n  { tool = \"shell_*\", permission = \"deny\" },\n]\n";
    let config = Fixture::new(text, &[])
        .load(&Overrides::default(), &[])
        .unwrap();
    let approvals = &config.running_agent().approvals;
    assert_eq!(approvals.default, Permission::Ask);
    assert_eq!(approvals.timeout, Duration::from_secs(30));
    let rule = |tool: &str, permission| ApprovalRule {
        tool: tool.into(),
        permission,
    };
    assert_eq!(
        approvals.rules,
        [
            rule("files_read", Permission::Allow),
            rule("shell_*", Permission::Deny)
        ]
    );
    let bad = "[agents.default.approvals]\nrules = [{ tool = \"a/b\", permission = \"allow\" }]\n";
    assert_eq!(
        Fixture::new(bad, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:19: agents.default.approvals.rules[0].tool: expected a tool name or a pattern of one with `*` (letters, digits, `_`, `-`), found \"a/b\""
        ]
    );
    let unknown =
        "[agents.default.approvals]\nrules = [{ tool = \"x\", permission = \"maybe\" }]\n";
    let errors = Fixture::new(unknown, &[]).errors(&Overrides::default(), &[]);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("wasmclaw.toml:2:"), "{errors:?}");
    assert!(
        errors[0].contains("agents.default.approvals.rules[0].permission"),
        "{errors:?}"
    );
}

#[test]
fn a_session_model_override_names_configured_providers_and_never_a_file() {
    let text = "[agents.default]\nmodel = \"openai:gpt-4o-mini\"\n";
    let config = Fixture::new(text, &[])
        .load(&Overrides::default(), &[])
        .unwrap();
    let profiles = std::sync::Arc::new(config).profiles(|_| None).unwrap();
    assert!(
        profiles
            .check_model(None, "openai:gpt-4o, anthropic:claude-haiku-4-5")
            .is_ok()
    );
    let refused = |spec: &str| profiles.check_model(None, spec).unwrap_err().to_string();
    assert_eq!(
        refused("scripted:/etc/passwd"),
        "model `scripted:/etc/passwd`: provider `scripted` plays a file: only the configuration may name one"
    );
    assert!(
        refused("nope:x").starts_with("model `nope:x`: unknown provider `nope`"),
        "{}",
        refused("nope:x")
    );
    let many = ["openai:m"; 9].join(",");
    assert_eq!(
        refused(&many),
        format!("model `{many}`: more than 8 candidates")
    );
    let long = format!("openai:{}", "m".repeat(600));
    assert!(refused(&long).ends_with(": longer than 512 bytes"));
}
