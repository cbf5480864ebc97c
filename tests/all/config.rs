//! The configuration file as a user meets it: `wasmclaw init`, `config
//! check`, `config show`, and `run` with `--config` and `--agent` against
//! the fake model, which records what each request carried.

use std::path::Path;

use serde_json::Value;
use wasmclaw::llm::ProviderConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent, anthropic, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, run_wasmclaw, split_progress};

async fn wasmclaw(home: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    run_wasmclaw(home, env, args, "").await
}

/// The entry of `key` in `config show --json`.
fn json_entry<'a>(json: &'a Value, key: &str) -> &'a Value {
    (json["values"].as_array().unwrap().iter())
        .find(|v| v["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {json}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn init_writes_a_file_that_checks_and_keeps_it_unless_forced() {
    let dir = PluginDir::new();
    let home = dir.scratch("x").join("home");
    let h = home.display();
    let (code, out, err) = wasmclaw(&home, &[], &["init"]).await;
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        format!(
            "created {h}\ncreated {h}/plugins\ncreated {h}/cache\ncreated {h}/wasmclaw.toml: every setting, commented out at its default (`wasmclaw config check` checks it)\n"
        )
    );
    let text = std::fs::read_to_string(home.join("wasmclaw.toml")).unwrap();
    assert_eq!(text, wasmclaw::config::template::TEMPLATE);
    for table in [
        "#[providers.openai]",
        "#[agents.default.subturns]",
        "#[limits.retry]",
        "#[server]",
        "#[plugins.limits]",
        "#[hooks]",
    ] {
        assert!(text.contains(table), "{table}");
    }

    let (code, out, err) = wasmclaw(&home, &[], &["config", "check"]).await;
    assert_eq!(
        (code, out, err),
        (
            0,
            format!("{h}/wasmclaw.toml: ok (1 agent, 4 providers)\n"),
            String::new()
        )
    );

    let (code, out, err) = wasmclaw(&home, &[], &["init"]).await;
    assert_eq!(
        (code, out, err),
        (
            1,
            String::new(),
            format!("error: {h}/wasmclaw.toml exists; `wasmclaw init --force` writes it anew\n")
        )
    );
    let (code, out, _) = wasmclaw(&home, &[], &["init", "--force"]).await;
    assert_eq!(
        (code, out),
        (
            0,
            format!(
                "rewrote {h}/wasmclaw.toml: every setting, commented out at its default (`wasmclaw config check` checks it)\n"
            )
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_prints_every_fault_of_a_bad_file_and_exits_1() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let file = dir.scratch("etc").join("bad.toml");
    std::fs::write(
        &file,
        "[agents.coder]\nmodel = \"opnai:gpt\"\nmax_iterations = 0\n\n[server]\nlisten = \"everywhere\"\n",
    )
    .unwrap();
    let f = file.display();
    let (code, out, err) = wasmclaw(&home, &[], &["config", "check", file.to_str().unwrap()]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            format!(
                "{f}:2:9: agents.coder.model: unknown provider `opnai`; did you mean `openai`? (expected one of: anthropic, ollama, openai, scripted)"
            ),
            format!("{f}:3:18: agents.coder.max_iterations: expected 1 to 10000, found 0"),
            format!(
                "{f}:6:10: server.listen: expected an address such as \"127.0.0.1:8787\", \"localhost:8787\" or a port such as \"8787\", found \"everywhere\""
            ),
        ]
    );

    // A parse fault stops at the first; any command refuses the file.
    std::fs::write(&file, "[agents.coder]\nmodle = \"openai:m\"\n").unwrap();
    let (code, _, err) = wasmclaw(&home, &[], &["config", "check", file.to_str().unwrap()]).await;
    let line = format!(
        "{f}:2:1: agents.coder.modle: unknown key; did you mean `model`? (expected one of: model, system_prompt, system_prompt_file, tools, max_iterations, max_refusals, max_tokens, token_budget, session_policy, commands, subturns, compaction, approvals)"
    );
    assert_eq!((code, err), (1, format!("{line}\n")));
    let (code, out, err) = wasmclaw(
        &home,
        &[("WASMCLAW_CONFIG", file.to_str().unwrap())],
        &["run", "--model", "openai:m", "-m", "hi"],
    )
    .await;
    assert_eq!(
        (code, out, err),
        (1, String::new(), format!("error: {line}\n"))
    );
}

/// The `config show` line of `key` in `[table]`.
fn shown<'a>(out: &'a str, table: &str, key: &str) -> &'a str {
    let header = format!("[{table}]");
    let mut lines = out.lines().skip_while(|l| *l != header).skip(1);
    lines
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in [{table}]:\n{out}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn config_show_says_where_each_value_came_from() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let file = home.join("wasmclaw.toml");
    std::fs::write(
        &file,
        "[agents.default]\nmodel = \"openai:from-file\"\n\n[limits]\nllm_deadline_secs = 40\n",
    )
    .unwrap();
    let f = file.display();
    let env = [("WASMCLAW_MODEL", "openai:from-env")];
    let cases = [
        (
            &env[..],
            &["--model", "openai:from-flag"][..],
            "model = [\"openai:from-flag\"]  # flag --model".to_string(),
        ),
        (
            &env[..],
            &[][..],
            "model = [\"openai:from-env\"]  # env WASMCLAW_MODEL".to_string(),
        ),
        (
            &[][..],
            &[][..],
            format!("model = [\"openai:from-file\"]  # file {f}:2:9"),
        ),
    ];
    for (env, flags, line) in cases {
        let args = [&["config", "show"][..], flags].concat();
        let (code, out, err) = wasmclaw(&home, env, &args).await;
        assert_eq!((code, err.as_str()), (0, ""));
        assert_eq!(
            out.lines().next(),
            Some(format!("# configuration file: {f}").as_str())
        );
        assert_eq!(shown(&out, "agents.default", "model"), line);
        assert_eq!(
            shown(&out, "agents.default", "max_iterations"),
            "max_iterations = 50  # default"
        );
        assert_eq!(
            shown(&out, "limits", "llm_deadline_secs"),
            format!("llm_deadline_secs = 40  # file {f}:5:21")
        );
    }
    let (_, out, _) = wasmclaw(
        &home,
        &[("WASMCLAW_LLM_DEADLINE", "45")],
        &["config", "show", "--llm-deadline", "50"],
    )
    .await;
    assert_eq!(
        shown(&out, "limits", "llm_deadline_secs"),
        "llm_deadline_secs = 50  # flag --llm-deadline"
    );
    let (_, out, _) = wasmclaw(
        &home,
        &[("WASMCLAW_LLM_DEADLINE", "45")],
        &["config", "show"],
    )
    .await;
    assert_eq!(
        shown(&out, "limits", "llm_deadline_secs"),
        "llm_deadline_secs = 45  # env WASMCLAW_LLM_DEADLINE"
    );

    let bare = dir.scratch("bare");
    let (code, out, _) = wasmclaw(&bare, &[], &["config", "show"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        out.lines().next(),
        Some("# no configuration file: built-in defaults, environment and flags")
    );
    assert_eq!(
        shown(&out, "agents.default", "model"),
        "model = []  # default"
    );
    assert_eq!(
        shown(&out, "limits", "llm_deadline_secs"),
        "llm_deadline_secs = 600  # default"
    );

    let (code, out, _) = wasmclaw(&home, &[], &["config", "show", "--json"]).await;
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        json_entry(&json, "agents.default.model"),
        &serde_json::json!({"key": "agents.default.model", "value": ["openai:from-file"], "source": format!("file {f}:2:9")})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn config_show_never_shows_a_key() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    std::fs::write(
        home.join("wasmclaw.toml"),
        "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"LOCAL_KEY\"\n",
    )
    .unwrap();
    let secrets = [
        ("OPENAI_API_KEY", "sk-openai-secret-1"),
        ("LOCAL_KEY", "sk-local-secret-2"),
        ("WASMCLAW_API_TOKEN", "token-secret-3"),
    ];
    let (code, text, _) = wasmclaw(&home, &secrets, &["config", "show"]).await;
    let (_, json, _) = wasmclaw(&home, &secrets, &["config", "show", "--json"]).await;
    assert_eq!(code, 0);
    for (_, secret) in secrets {
        assert!(
            !text.contains(secret) && !json.contains(secret),
            "{secret} shown"
        );
    }
    assert_eq!(
        shown(&text, "providers.openai", "api_key_env"),
        "api_key_env = \"OPENAI_API_KEY\"  # default; set"
    );
    assert_eq!(
        shown(&text, "providers.anthropic", "api_key_env"),
        "api_key_env = \"ANTHROPIC_API_KEY\"  # default; not set"
    );
    assert!(
        shown(&text, "providers.local", "api_key_env").ends_with(":4:15; set"),
        "{text}"
    );
    assert_eq!(
        shown(&text, "server", "token_env"),
        "token_env = \"WASMCLAW_API_TOKEN\"  # default; set"
    );
    let json: Value = serde_json::from_str(&json).unwrap();
    let local = json_entry(&json, "providers.local.api_key_env");
    assert_eq!(
        (&local["value"], &local["set"]),
        (&Value::from("LOCAL_KEY"), &Value::from(true))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_with_a_config_file_and_an_agent_sends_that_agents_settings() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let etc = dir.scratch("etc");
    std::fs::create_dir_all(etc.join("prompts")).unwrap();
    std::fs::write(etc.join("prompts/coder.md"), "You write careful Rust.").unwrap();
    let fake = FakeModel::start([Reply::text("From coder."), Reply::text("From default.")]).await;
    let file = etc.join("agents.toml");
    std::fs::write(
        &file,
        format!(
            "[providers.fake]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_KEY\"\nheaders = {{ \"X-Team\" = \"research\" }}\n\n[agents.coder]\nmodel = \"fake:coder-model\"\nsystem_prompt_file = \"prompts/coder.md\"\nmax_tokens = 1234\n\n[agents.default]\nmodel = \"fake:default-model\"\n",
            fake.openai_base_url()
        ),
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let env = [("FAKE_KEY", "sk-fake")];
    let args = ["run", "--config", config, "--agent", "coder", "-m", "hi"];
    let (code, out, err) = wasmclaw(&home, &env, &args).await;
    assert_eq!((code, out.as_str(), err.as_str()), (0, "From coder.\n", ""));
    let (code, out, _) = wasmclaw(&home, &env, &["run", "--config", config, "-m", "hello"]).await;
    assert_eq!((code, out.as_str()), (0, "From default.\n"));

    let requests = fake.requests();
    let coder = &requests[0];
    assert_eq!(coder.body["model"], "coder-model");
    assert_eq!(coder.body["max_tokens"], 1234);
    assert_eq!(
        wasmclaw_tests::fake_model::roles_and_texts(&coder.body),
        [
            ("system".into(), "You write careful Rust.".into()),
            ("user".into(), "hi".into())
        ]
    );
    assert_eq!(coder.header("x-team"), Some("research"));
    assert_eq!(coder.header("authorization"), Some("Bearer sk-fake"));
    let default = &requests[1];
    assert_eq!(default.body["model"], "default-model");
    assert_eq!(default.body.get("max_tokens"), None);
    assert_eq!(
        wasmclaw_tests::fake_model::roles_and_texts(&default.body)[0].0,
        "user"
    );

    // An agent that is not there is refused, naming those that are.
    let (code, _, err) = wasmclaw(
        &home,
        &env,
        &["run", "--config", config, "--agent", "codr", "-m", "hi"],
    )
    .await;
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "error: --agent: unknown agent `codr`; did you mean `coder`? (expected one of: coder, default)\n"
        )
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plugin_defaults_of_the_file_reach_plugins_without_a_grants_file() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    dir.add("echo");
    dir.add("time");
    // time's own grants file wins over the configuration's defaults.
    dir.grants("time", "[limits]\ntimeout_ms = 250\n");
    std::fs::write(
        home.join("wasmclaw.toml"),
        format!(
            "[plugins]\ndir = {:?}\n[plugins.limits]\nmemory_mib = 32\ntimeout_ms = 1500\n",
            dir.path()
        ),
    )
    .unwrap();
    let (code, out, err) = wasmclaw(&home, &[], &["plugins", "list"]).await;
    assert_eq!(
        (code, split_progress(&err)),
        (
            0,
            (vec!["echo.wasm".into(), "time.wasm".into()], String::new())
        )
    );
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name}.wasm ")))
            .unwrap_or_else(|| panic!("{name}: {out}"))
            .to_string()
    };
    assert!(
        line("echo")
            .contains("limits: 32 MiB memory, 1500 ms per call, 1 MiB output, 1000 log lines"),
        "{out}"
    );
    assert!(
        line("time")
            .contains("limits: 32 MiB memory, 250 ms per call, 1 MiB output, 1000 log lines"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn extra_headers_reach_both_wire_formats() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([Reply::text("ok")]).await;
        let mut candidate: ProviderConfig = match wire {
            "openai" => openai(&fake, "m", true),
            _ => anthropic(&fake, "m", true),
        };
        candidate
            .headers
            .insert("x-team", "research".parse().unwrap());
        // One of the wire format's own is replaced, not doubled.
        candidate
            .headers
            .insert("anthropic-version", "2099-01-01".parse().unwrap());
        let (agent, _events) = agent(
            PluginDir::new().load().await,
            vec![candidate],
            Store::open_in_memory().unwrap(),
        );
        let outcome = agent.run_turn("s", "hi").await;
        assert_eq!(
            outcome.answer.as_deref(),
            Some("ok"),
            "{wire}: {}",
            outcome.reason
        );
        let request = &fake.requests()[0];
        assert_eq!(request.header("x-team"), Some("research"), "{wire}");
        let versions: Vec<&str> = (request.headers.iter())
            .filter(|(k, _)| k == "anthropic-version")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(versions, ["2099-01-01"], "{wire}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_models_reach_a_local_server_without_the_openai_key() {
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    let fake = FakeModel::start([Reply::text("From a local model.")]).await;
    let file = dir.scratch("etc").join("wasmclaw.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        format!(
            "[providers.ollama]\nbase_url = \"{}\"\n",
            fake.openai_base_url()
        ),
    )
    .unwrap();
    // The OpenAI key is set: it is not for this server, and is not sent.
    let env = [("OPENAI_API_KEY", "sk-not-for-ollama")];
    let config = file.to_str().unwrap();
    let args = [
        "run",
        "--config",
        config,
        "--model",
        "ollama:llama3.2",
        "-m",
        "hi",
    ];
    let (code, out, err) = wasmclaw(&home, &env, &args).await;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "From a local model.\n", "")
    );
    let requests = fake.requests();
    assert_eq!(requests[0].body["model"], "llama3.2");
    assert_eq!(requests[0].header("authorization"), None);
}
