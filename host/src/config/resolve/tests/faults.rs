//! The exact line of each kind of fault, with its line and column (counted
//! in the inputs here), from the file, the flags and the environment.

use super::super::super::load;
use super::super::super::overrides::{AgentFlags, Overrides, PluginFlags, ServerFlags};
use super::Fixture;
use crate::home::Home;

#[test]
fn faults_of_flags_and_variables_name_them() {
    let fixture = Fixture::new("", &[]);
    let overrides = Overrides {
        agent: AgentFlags {
            max_iterations: Some(0),
            model: Some("gpt-4o,opnai:m".into()),
            llm_timeout: Some(-1.0),
            ..AgentFlags::default()
        },
        server: ServerFlags {
            listen: Some("everywhere".into()),
            ..ServerFlags::default()
        },
        plugins: PluginFlags {
            compile_timeout: Some(0.0),
            max_instances: Some(0),
            ..PluginFlags::default()
        },
        serving: true,
    };
    assert_eq!(
        fixture.errors(
            &overrides,
            &[
                ("WASMCLAW_LLM_DEADLINE", "soon"),
                ("WASMCLAW_MAX_PLUGIN_MIB", "0")
            ]
        ),
        [
            "WASMCLAW_LLM_DEADLINE: expected a number, found \"soon\"",
            "model \"gpt-4o\" is not PROVIDER:MODEL; expected e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5 or scripted:FILE.json",
            "model \"opnai:m\": unknown provider `opnai`; did you mean `openai`? (expected one of: anthropic, ollama, openai, scripted)",
            "--max-iterations: expected 1 to 10000, found 0",
            "--llm-timeout: expected a positive number of seconds, found -1",
            "--listen: expected an address such as \"127.0.0.1:8787\", \"localhost:8787\" or a port such as \"8787\", found \"everywhere\"",
            "WASMCLAW_MAX_PLUGIN_MIB: expected 1 to 1048576, found 0",
            "--compile-timeout: expected a positive number of seconds, found 0",
            "--max-instances: expected 1 to 10000, found 0",
        ]
    );
}

#[test]
fn an_unknown_key_names_its_line_and_the_nearest_valid_key() {
    let text = "[providers.local]\nkind = \"openai\"\n\n[agents.coder]\nmodle = \"local:m\"\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:5:1: agents.coder.modle: unknown key; did you mean `model`? (expected one of: model, system_prompt, system_prompt_file, tools, max_iterations, max_refusals, max_tokens, token_budget, session_policy, commands, subturns, compaction, approvals)"
        ]
    );
    let text = "[limits.retry]\ntries = 2\n  temperature = 0.2\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:3:3: limits.retry.temperature: unknown key (expected one of: tries, backoff_ms, max_backoff_ms, jitter, cooldown_secs, max_retry_wait_secs)"
        ]
    );
    let text = "[limit]\ntool_concurrency = 2\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:1:2: limit: unknown key; did you mean `limits`? (expected one of: providers, agents, limits, server, plugins, hooks, mcp)"
        ]
    );
    let text = "[agents.a.compaction]\nthreshhold = 0.8\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:1: agents.a.compaction.threshhold: unknown key; did you mean `threshold`? (expected one of: enabled, threshold, keep_user_turns, model, prompt, tool_result_fraction)"
        ]
    );
}

#[test]
fn compaction_values_out_of_range_name_the_key_and_what_was_expected() {
    let text = "[agents.a.compaction]\nthreshold = 1.5\nkeep_user_turns = 5000\ntool_result_fraction = 0\nmodel = \"nowhere:m\"\nprompt = \" \"\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:13: agents.a.compaction.threshold: expected a number above 0 and at most 1, found 1.5",
            "wasmclaw.toml:3:19: agents.a.compaction.keep_user_turns: expected 0 to 1000, found 5000",
            "wasmclaw.toml:4:24: agents.a.compaction.tool_result_fraction: expected a number above 0 and at most 1, found 0",
            "wasmclaw.toml:5:9: agents.a.compaction.model: unknown provider `nowhere` (expected one of: anthropic, ollama, openai, scripted)",
            "wasmclaw.toml:6:10: agents.a.compaction.prompt: expected the summarizing call's instructions, found an empty text",
        ]
    );
}

#[test]
fn a_wrong_type_or_an_unknown_value_names_what_was_expected() {
    let text = "[agents.coder]\nmodel = \"openai:m\"\nmax_iterations = \"ten\"\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:3:18: agents.coder.max_iterations: wrong type: expected a whole number, 0 or more, found string \"ten\""
        ]
    );
    let text = "[agents.coder]\nmodel = 5\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:9: agents.coder.model: wrong type: expected a string \"PROVIDER:MODEL\" or an array of them, found integer `5`"
        ]
    );
    let text = "[server]\nmax_body_kib = -1\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:16: server.max_body_kib: expected a whole number, 0 or more, found integer `-1`"
        ]
    );
    let text = "[agents.coder]\n  session_policy = \"stear\"\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:20: agents.coder.session_policy: unknown value `stear`; did you mean `steer`? (expected one of: steer, follow-up)"
        ]
    );
    let text = "[providers.x]\nkind = \"gemini\"\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:8: providers.x.kind: unknown value `gemini` (expected one of: openai, anthropic)"
        ]
    );
}

#[test]
fn faults_found_resolving_are_all_reported_in_the_files_order() {
    let text = r#"[agents.coder]
model = ["openai:a", "opnai:b"]
system_prompt = "inline"
system_prompt_file = "coder.md"

[agents.writer]
system_prompt_file = "prompts/missing.md"
tools = { deny = ["files/*"] }

[limits]
max_parallel_turns = 0
[limits.retry]
backoff_ms = 900
max_backoff_ms = 100
"#;
    let fixture = Fixture::new(text, &[]);
    let missing = fixture.dir.path().join("prompts/missing.md");
    assert_eq!(
        fixture.errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:22: agents.coder.model[1]: unknown provider `opnai`; did you mean `openai`? (expected one of: anthropic, ollama, openai, scripted)".to_string(),
            "wasmclaw.toml:4:1: agents.coder.system_prompt_file: set system_prompt or system_prompt_file, not both".into(),
            format!("wasmclaw.toml:7:22: agents.writer.system_prompt_file: cannot read {}: No such file or directory (os error 2)", missing.display()),
            "wasmclaw.toml:8:19: agents.writer.tools.deny[0]: expected a tool name or a pattern of one with `*` (letters, digits, `_`, `-`), found \"files/*\"".into(),
            "wasmclaw.toml:11:22: limits.max_parallel_turns: expected 1 to 100000, found 0".into(),
            "wasmclaw.toml:14:18: limits.retry.max_backoff_ms: expected at least backoff_ms (900), found 100".into(),
        ]
    );
}

#[test]
fn a_missing_provider_and_a_bad_table_are_placed() {
    let text = "[agents.coder]\nmodel = \"local:qwen\"\n\n[providers.\"my:server\"]\nkind = \"openai\"\nheaders = { Authorization = \"Bearer sk\" }\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:2:9: agents.coder.model: unknown provider `local` (expected one of: anthropic, my:server, ollama, openai, scripted)",
            "wasmclaw.toml:4:12: providers.\"my:server\": expected a name of 1 to 64 letters, digits, `_` and `-`",
            "wasmclaw.toml:6:13: providers.\"my:server\".headers.Authorization: header `Authorization` cannot be set here: it would carry a key, and keys never live in this file: name the variable that holds the key in api_key_env",
        ]
    );
}

#[test]
fn an_explicit_file_must_exist_and_a_syntax_error_is_placed() {
    let fixture = Fixture::new("[agents.a]\nmodel = \n", &[]);
    let errors = fixture.errors(&Overrides::default(), &[]);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("wasmclaw.toml:2:"), "{errors:?}");
    assert!(errors[0].contains("invalid TOML: "), "{errors:?}");

    let home = Home::at(fixture.dir.path());
    let missing = fixture.dir.path().join("other.toml");
    let err = load(&home, Some(&missing), &Overrides::default(), &|_| None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: no such file (named by --config or WASMCLAW_CONFIG)",
            missing.display()
        )
    );
    // With none named, a home without the file has the built-in defaults.
    let bare = tempfile::tempdir().unwrap();
    let config = load(&Home::at(bare.path()), None, &Overrides::default(), &|_| {
        None
    })
    .unwrap();
    assert_eq!(config.file, None);
    assert_eq!(config.agents["default"].model, []);
}

#[test]
fn mcp_server_values_name_the_key_and_what_was_expected() {
    let text = "[agents.coder]\nmodel = \"openai:m\"\n\n[mcp.server]\nagents = [\"coder\", \"nobody\"]\nprogress_ms = 5\nallowed_hosts = [\"wasmclaw.lan:8787\", \"http://x/\"]\nallowed_origins = [\"wasmclaw.lan\"]\napprove = \"maybe\"\n";
    assert_eq!(
        Fixture::new(text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:9:11: mcp.server.approve: unknown value `maybe` (expected one of: ask, allow, deny)"
        ]
    );
    let text = text.replace("approve = \"maybe\"\n", "approve = \"deny\"\n");
    assert_eq!(
        Fixture::new(&text, &[]).errors(&Overrides::default(), &[]),
        [
            "wasmclaw.toml:5:20: mcp.server.agents[1]: expected the name of an agent (or a glob), one of: coder, default",
            "wasmclaw.toml:6:15: mcp.server.progress_ms: expected 100 to 3600000, found 5",
            "wasmclaw.toml:7:39: mcp.server.allowed_hosts[1]: expected a host name or address and an optional port, without scheme or path, found \"http://x/\"",
            "wasmclaw.toml:8:20: mcp.server.allowed_origins[0]: expected an origin: http:// or https://, a host and an optional port (`:*` for any), found \"wasmclaw.lan\"",
        ]
    );
    let text = "[agents.coder]\nmodel = \"openai:m\"\n\n[mcp.server]\nagents = [\"*\"]\nprogress_ms = 250\nallowed_hosts = [\"wasmclaw.lan:8787\"]\napprove = \"allow\"\n";
    let config = Fixture::new(text, &[])
        .load(&Overrides::default(), &[])
        .unwrap();
    let server = &config.mcp_server;
    assert_eq!(server.agents, ["coder", "default"]);
    assert_eq!(server.progress, std::time::Duration::from_millis(250));
    assert_eq!(server.approve, crate::config::mcp::McpApprove::Allow);
    assert_eq!(
        server.allowed_hosts,
        ["localhost", "127.0.0.1", "::1", "wasmclaw.lan:8787"]
    );
    assert_eq!(server.allowed_origins.len(), 3);
}
