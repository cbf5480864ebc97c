//! What the loader refuses so that a plugin cannot reach past its sandbox:
//! grants of the host's own paths (whether or not they exist yet) and of its
//! own environment variables, tools that take a built-in's name, hook
//! rewrites that break a built-in's schema, and plugin files that are not
//! files.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::plugin::ErrorKind;
use wasmclaw::protocol::{EventBody, HookEffect, HookError, ToolCallEnd};
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent, drain, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, ctx, load_error, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(30);

fn read_only(host: &Path) -> String {
    format!("[[dirs]]\nhost = {host:?}\nguest = \"/d\"\nmode = \"read-only\"\n")
}

/// `wasmclaw plugins list --json` with this home and plugin directory.
fn list(home: &Path, plugins: &Path) -> Vec<Value> {
    let out = Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .args(["--plugins", plugins.to_str().unwrap(), "plugins", "list"])
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_fresh_home_its_paths_and_its_parents_are_never_granted() {
    let dir = PluginDir::new();
    // A home that has just been made: no database, no secrets, no token
    // yet; the plugin directory is elsewhere.
    let above = dir.scratch("above").canonicalize().unwrap();
    let home = above.join("home");
    std::fs::create_dir_all(home.join("notes")).unwrap();
    // Only the cache of the home's own paths is there.
    std::fs::create_dir_all(home.join("cache")).unwrap();
    let holds =
        "it holds the operator's secrets, the session database, the API token and the plugins";
    let refused = [
        (
            "a_home",
            home.clone(),
            format!("is wasmclaw's home ({}): {holds}", home.display()),
        ),
        (
            "b_cache",
            home.join("cache"),
            format!(
                "is the compile cache ({}): the host runs the code it holds without checking it again",
                home.join("cache").display()
            ),
        ),
        (
            "c_above",
            above.clone(),
            format!("contains wasmclaw's home ({}): {holds}", home.display()),
        ),
    ];
    for (name, host, _) in &refused {
        dir.add_as("echo", name);
        dir.grants(name, &read_only(host));
    }
    // A folder of the home's own that none of its paths is in may be granted
    // (the example plugins' workspace lies there).
    dir.add_as("echo", "d_notes");
    dir.grants("d_notes", &read_only(&home.join("notes")));

    let listed = list(&home, &dir.path());
    let errors: Vec<(String, String)> = listed
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["error"].as_str().unwrap_or("loaded").to_string(),
            )
        })
        .collect();
    let mut expected: Vec<(String, String)> = refused
        .iter()
        .map(|(name, host, how)| {
            let sidecar = dir.path().join(format!("{name}.toml"));
            (
                name.to_string(),
                format!(
                    "{}: dirs[0].host: {} {how}; grant a directory outside it",
                    sidecar.display(),
                    host.display()
                ),
            )
        })
        .collect();
    expected.push(("d_notes".into(), "loaded".into()));
    assert_eq!(errors, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_own_environment_variables_are_never_granted() {
    let dir = PluginDir::new();
    for (name, var) in [
        ("a_openai", "OPENAI_API_KEY"),
        ("b_anthropic", "ANTHROPIC_API_KEY"),
        ("c_token", "WASMCLAW_API_TOKEN"),
        ("d_url", "OPENAI_BASE_URL"),
    ] {
        dir.add_as("echo", name);
        dir.grants(name, &format!("env = [\"TZ\", \"{var}\"]\n"));
    }
    let plugins = dir.load().await;
    let what = |name: &str| {
        if name.starts_with("WASMCLAW_") {
            "one of wasmclaw's own settings"
        } else {
            "the host's model provider setting"
        }
    };
    for (name, var) in [
        ("a_openai", "OPENAI_API_KEY"),
        ("b_anthropic", "ANTHROPIC_API_KEY"),
        ("c_token", "WASMCLAW_API_TOKEN"),
        ("d_url", "OPENAI_BASE_URL"),
    ] {
        assert_eq!(
            load_error(&plugins, name),
            format!(
                "{}: env: \"{var}\" is {}, which a plugin never gets; to let the plugin call an API with a key, put the key in a secret and name it in [[credentials]] instead",
                dir.path().join(format!("{name}.toml")).display(),
                what(var)
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_tool_may_not_take_a_built_in_tools_name() {
    let dir = PluginDir::new();
    dir.add("reserved_name");
    let plugins = dir.load().await;
    assert_eq!(
        load_error(&plugins, "reserved_name"),
        "tool name \"spawn\" is reserved: the host's built-in tools (spawn, subagent, history_search) cannot be offered by a plugin; rename it"
    );
    // So no call reaches the plugin's tool of that name.
    let err = plugins.call(&ctx(), "spawn", "{}").await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (
            ErrorKind::NotFound,
            "unknown tool \"spawn\"; available tools: none"
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hooks_rewrite_of_a_built_in_call_is_checked_against_the_built_ins_schema() {
    let dir = PluginDir::new();
    dir.add_as("hooktest", "bad");
    // The rewrite adds a field the built-in's schema does not allow (its
    // argument parser would ignore it).
    dir.grants(
        "bad",
        "[config]\nsubscriptions = [{ point = \"before-tool\", priority = 0 }]\nbefore_tool = { action = \"rewrite\", arguments = { task = \"x\", extra = true } }\n",
    );
    let fake = FakeModel::start([
        Reply::tool("call_1", "subagent", json!({"task": "look"})),
        Reply::text("done"),
    ])
    .await;
    let plugins = dir.load().await;
    let (agent, mut sub) = agent(
        plugins,
        vec![openai(&fake, "fake-gpt", false)],
        Store::open_in_memory().unwrap(),
    );
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "go"))
        .await
        .expect("the turn ends");
    assert_eq!(outcome.answer.as_deref(), Some("done"), "{outcome:?}");
    let events = drain(&mut sub);
    let refused = "its rewritten arguments were refused: invalid arguments for subagent: \
        \"extra\" is not an argument of subagent; expected {\"agent\": string, \"critical\": boolean, \"label\": string, \
        \"model\": string, \"task\": string, \"timeout_s\": number, \"token_budget\": integer, \
        \"tools\": array} (required: task; no other properties)";
    let hook_errors: Vec<(String, HookEffect)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::HookError(HookError { error, effect, .. }) => Some((error.clone(), *effect)),
            _ => None,
        })
        .collect();
    assert_eq!(hook_errors, [(refused.to_string(), HookEffect::Denied)]);
    // No sub-agent ran; the call ended denied.
    assert!(
        !events
            .iter()
            .any(|e| e.body.kind().as_str() == "subturn_spawn")
    );
    let ends: Vec<(bool, String)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd { ok, output, .. }) => Some((*ok, output.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [(
            false,
            format!(
                "error (denied): hook 'bad' failed, and the call is denied (the hook fails closed): {refused}"
            )
        )]
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_named_like_a_plugin_is_listed_as_an_error() {
    let dir = PluginDir::new();
    dir.add("echo");
    std::fs::create_dir(dir.path().join("x.wasm")).unwrap();
    let plugins = dir.load().await;
    assert_eq!(
        load_error(&plugins, "x"),
        "a directory, not a component file: a plugin is one NAME.wasm file; move the directory out of the plugin directory or rename it"
    );
    let echoed = plugins
        .call(&ctx(), "echo", r#"{"text":"still here"}"#)
        .await
        .unwrap();
    assert!(echoed.contains("still here"), "{echoed}");
}
