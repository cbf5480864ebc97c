//! Plugins built for each version of `wasmclaw:plugin` this host loads,
//! side by side: 0.1.0 (frozen) and 0.2.0 (the newest). The `contract_v*`
//! fixtures are one source built against each version's WIT, and
//! `hooktest_v0_1` is the hook fixture built against 0.1.0; a component of
//! another version, or of two, is refused naming them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use wasmclaw::agent::{Agent, TurnOutcome};
use wasmclaw::bus::Subscription;
use wasmclaw::plugin::call::Spawner;
use wasmclaw::plugin::sandbox::access::SubTurnSpawner;
use wasmclaw::plugin::{CallContext, ErrorKind, PluginStatus, Plugins, ToolError, WitVersion};
use wasmclaw::protocol::{
    Event, EventBody, PluginLoaded, SpawnMode, SubTurnRequest, SubturnSpawn, ToolCallEnd,
    TurnStatus,
};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent, drain, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply, fake_model, roles_and_texts};
use wasmclaw_tests::plugin_log::lines_of;
use wasmclaw_tests::{ctx, load_error};

const LIMIT: Duration = Duration::from_secs(30);

/// The version each loaded plugin of `plugins` was built for, by name.
fn versions(plugins: &Plugins) -> Vec<(String, WitVersion)> {
    plugins
        .catalog()
        .plugins
        .iter()
        .map(|status| match status {
            PluginStatus::Loaded(p) => (p.name.to_string(), p.wit_version),
            PluginStatus::Failed { name, error, .. } => panic!("{name} did not load: {error}"),
        })
        .collect()
}

async fn agent_over(dir: &PluginDir, fake: &FakeModel) -> (Arc<Agent>, Subscription) {
    let plugins = dir.load().await;
    versions(&plugins);
    agent(
        plugins,
        vec![openai(fake, "fake-gpt", false)],
        Store::open_in_memory().unwrap(),
    )
}

fn tool_ends(events: &[Arc<Event>]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd { ok, output, .. }) => Some((*ok, output.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_built_for_0_1_and_0_2_load_side_by_side_and_answer_alike() {
    let dir = PluginDir::new();
    dir.add("echo");
    for plugin in ["contract_v0_1", "contract_v0_2"] {
        dir.add(plugin);
        dir.grants(plugin, "[config]\ngreeting = \"hello\"\n");
    }
    let mut logged = lines_of("contract_v0_1");
    let plugins = dir.load().await;
    assert_eq!(
        versions(&plugins),
        [
            ("contract_v0_1".to_string(), WitVersion::V0_1),
            ("contract_v0_2".to_string(), WitVersion::V0_2),
            ("echo".to_string(), WitVersion::V0_2),
        ]
    );
    let catalog = plugins.catalog();
    let (old, spec) = catalog.tool("contract_v0_1_echo").unwrap();
    assert_eq!(old.wit_version, WitVersion::V0_1);
    assert_eq!(
        (
            spec.description.as_str(),
            spec.input_schema["required"].clone()
        ),
        ("Returns `text`.", json!(["text"]))
    );

    for version in ["contract_v0_1", "contract_v0_2"] {
        let call = |tool: &str, args: &str| {
            let (plugins, name) = (plugins.clone(), format!("{version}_{tool}"));
            let args = args.to_string();
            async move { plugins.call(&ctx(), &name, &args).await }
        };
        assert_eq!(
            call("echo", r#"{"text":"same words"}"#).await,
            Ok("same words".to_string())
        );
        assert_eq!(
            call("fail", "{}").await,
            Err(ToolError::new(ErrorKind::Denied, format!("refused by {version}")).retryable())
        );
        assert_eq!(
            call("config", "{}").await,
            Ok(r#"{"greeting":"hello"}"#.to_string())
        );
        let context: Value = serde_json::from_str(&call("context", "{}").await.unwrap()).unwrap();
        assert_eq!(
            context,
            json!({
                "session_key": "test-session",
                "turn_id": "turn-1",
                "parent_turn_id": null,
                "depth": 0,
                "call_id": "call-1",
                "has_deadline": true,
            })
        );
    }
    // The 0.1 plugin's log line reached the host log.
    let line = tokio::time::timeout(LIMIT, logged.recv()).await.unwrap();
    assert_eq!(line.unwrap().text, "echo: same words");
    // And the newest plugins beside it are unaffected.
    assert_eq!(
        plugins.call(&ctx(), "add", r#"{"a":2,"b":3}"#).await,
        Ok("5".to_string())
    );
}

/// Grants of a hook fixture at `point` doing `behaviour`, with 10 s per
/// call (a decision, not a time limit, is under test).
fn hook_grants(point: &str, priority: i32, behaviour: &str) -> String {
    let key = point.replace('-', "_");
    format!(
        "[hooks]\ntimeout_ms = 10000\n\n[config]\nsubscriptions = [{{ point = \"{point}\", priority = {priority} }}]\n{key} = {behaviour}\n"
    )
}

fn hook(dir: &PluginDir, fixture: &str, name: &str, grants: &str) {
    dir.add_as(fixture, name);
    dir.grants(name, grants);
}

/// One turn over the plugins of `dir` in which the model asks for
/// `add(40, 2)`, then answers "done": the model, the outcome and the events.
async fn adding_turn(dir: &PluginDir) -> (FakeModel, TurnOutcome, Vec<Arc<Event>>) {
    let fake = FakeModel::start([
        Reply::tool("call_1", "add", json!({"a": 40, "b": 2})),
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent_over(dir, &fake).await;
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "add 40 and 2"))
        .await
        .expect("the turn ends");
    (fake, outcome, drain(&mut sub))
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_built_for_0_1_decide_before_the_model_and_before_a_tool() {
    let dir = PluginDir::new();
    dir.add("echo");
    hook(
        &dir,
        "hooktest_v0_1",
        "old_context",
        &hook_grants(
            "before-llm",
            0,
            "{ action = \"replace\", text = \"The operator says: be brief.\" }",
        ),
    );
    hook(
        &dir,
        "hooktest_v0_1",
        "old_gate",
        &hook_grants(
            "before-tool",
            0,
            "{ action = \"deny\", reason = \"no adding today\" }",
        ),
    );
    // A hook of the newest version in the same chains.
    hook(
        &dir,
        "hooktest",
        "new_censor",
        &hook_grants(
            "after-llm",
            0,
            "{ action = \"replace\", text = \"[answer withheld]\", if_contains = \"done\" }",
        ),
    );
    let (fake, outcome, events) = adding_turn(&dir).await;
    assert_eq!(
        (outcome.status, outcome.answer.as_deref()),
        (TurnStatus::Completed, Some("[answer withheld]"))
    );
    assert_eq!(
        tool_ends(&events),
        [(
            false,
            "error (denied): denied by hook 'old_gate': no adding today".to_string()
        )]
    );
    let first = &fake.requests()[0].body;
    assert_eq!(
        roles_and_texts(first),
        [
            ("user".to_string(), "add 40 and 2".to_string()),
            (
                "system".to_string(),
                "The operator says: be brief.".to_string()
            ),
        ]
    );

    // Rewritten arguments, and after-tool results both ways: the first
    // 0.1 hook replaces the result with an error, the second is shown that
    // error and replaces it again.
    let dir = PluginDir::new();
    dir.add("echo");
    hook(
        &dir,
        "hooktest_v0_1",
        "old_rewrite",
        &hook_grants(
            "before-tool",
            0,
            "{ action = \"rewrite\", arguments = { a = 1, b = 2 } }",
        ),
    );
    hook(
        &dir,
        "hooktest_v0_1",
        "old_error",
        &hook_grants(
            "after-tool",
            0,
            "{ action = \"replace_error\", text = \"3 is not allowed\", if_contains = \"3\" }",
        ),
    );
    hook(
        &dir,
        "hooktest_v0_1",
        "old_reader",
        &hook_grants(
            "after-tool",
            10,
            "{ action = \"replace\", text = \"the hook read: not allowed\", if_contains = \"is not allowed\" }",
        ),
    );
    let (_fake, outcome, events) = adding_turn(&dir).await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(
        tool_ends(&events),
        [(true, "the hook read: not allowed".to_string())]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_built_for_0_1_runs_a_subturn_and_reads_its_answer() {
    let fake = fake_model(|last_user, after_tool| match (last_user, after_tool) {
        ("delegate it", false) => Reply::tool(
            "call_1",
            "contract_v0_1_spawn",
            json!({"task": "what is 6 times 7?", "label": "helper", "tools": ["add"]}),
        ),
        ("delegate it", true) => Reply::text("the helper said 42"),
        ("what is 6 times 7?", false) => Reply::text("42"),
        other => panic!("unexpected request {other:?}"),
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("contract_v0_1");
    dir.grants("contract_v0_1", "spawn_subturn = true\n");
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    // The event stream says which version each plugin was built for.
    agent.announce_plugins();
    let loaded: Vec<(String, String)> = drain(&mut sub)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::PluginLoaded(PluginLoaded {
                plugin,
                wit_version,
                ..
            }) => Some((plugin.clone(), wit_version.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        loaded,
        [
            ("contract_v0_1".to_string(), "0.1.0".to_string()),
            ("echo".to_string(), "0.2.0".to_string()),
        ]
    );
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "delegate it"))
        .await
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("the helper said 42"));
    let events = drain(&mut sub);
    let spawns: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnSpawn(SubturnSpawn {
                label,
                task,
                mode,
                tools,
                model,
                critical,
                ..
            }) => Some((
                label.as_str(),
                task.as_str(),
                *mode,
                tools.clone(),
                model.clone(),
                *critical,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        spawns,
        [(
            "helper",
            "what is 6 times 7?",
            SpawnMode::Subagent,
            Some(vec!["add".to_string()]),
            None,
            false
        )]
    );
    assert_eq!(
        tool_ends(&events),
        [(true, "the child answered: 42".to_string())]
    );
}

/// A turn that records what it is asked to start and answers each child
/// itself (or refuses the task `refuse`).
#[derive(Default)]
struct Recorder {
    asked: Mutex<Vec<(String, SubTurnRequest)>>,
}

impl SubTurnSpawner for Recorder {
    fn run(
        &self,
        plugin: &str,
        request: SubTurnRequest,
    ) -> BoxFuture<'static, Result<String, ToolError>> {
        let answer = if request.task == "refuse" {
            Err(ToolError::new(ErrorKind::Denied, "no children today").retryable())
        } else {
            Ok(format!(
                "done as {}",
                request.agent.as_deref().unwrap_or("the parent")
            ))
        };
        self.asked
            .lock()
            .unwrap()
            .push((plugin.to_string(), request));
        Box::pin(async move { answer })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawn_request_carries_an_agent_from_0_2_and_none_from_0_1() {
    let dir = PluginDir::new();
    for plugin in ["contract_v0_1", "contract_v0_2"] {
        dir.add(plugin);
        dir.grants(plugin, "spawn_subturn = true\n");
    }
    let plugins = dir.load().await;
    let recorder = Arc::new(Recorder::default());
    let ctx = CallContext {
        spawner: Some(Spawner(recorder.clone())),
        ..ctx()
    };
    let arguments = json!({
        "task": "review it",
        "label": "review",
        "model": "small",
        "agent": "reviewer",
        "tools": ["add"],
        "critical": true,
        "timeout_ms": 1500,
        "token_budget": 900,
    })
    .to_string();
    let new = plugins.call(&ctx, "contract_v0_2_spawn", &arguments).await;
    let old = plugins.call(&ctx, "contract_v0_1_spawn", &arguments).await;
    assert_eq!(
        (new, old),
        (
            Ok("the child answered: done as reviewer".to_string()),
            Ok("the child answered: done as the parent".to_string())
        )
    );
    let asked = |agent: Option<&str>| SubTurnRequest {
        task: "review it".into(),
        label: Some("review".into()),
        model: Some("small".into()),
        agent: agent.map(str::to_string),
        tools: Some(vec!["add".into()]),
        critical: true,
        timeout_s: Some(1.5),
        token_budget: Some(900),
    };
    assert_eq!(
        *recorder.asked.lock().unwrap(),
        [
            ("contract_v0_2".to_string(), asked(Some("reviewer"))),
            ("contract_v0_1".to_string(), asked(None)),
        ]
    );

    // The host's refusal reaches a 0.1 guest and comes back whole.
    for plugin in ["contract_v0_1", "contract_v0_2"] {
        assert_eq!(
            plugins
                .call(&ctx, &format!("{plugin}_spawn"), r#"{"task":"refuse"}"#)
                .await,
            Err(ToolError::new(ErrorKind::Denied, "no children today").retryable())
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_component_of_another_version_or_of_two_is_refused_naming_them() {
    let dir = PluginDir::new();
    dir.add("wit_v3");
    dir.add("wit_mixed");
    dir.add("contract_v0_1");
    let plugins = dir.load().await;
    assert_eq!(
        load_error(&plugins, "wit_v3"),
        "plugin 'wit_v3' was built for wasmclaw:plugin@0.3.0 (it exports wasmclaw:plugin/tool@0.3.0), which this host does not load; it loads wasmclaw:plugin 0.1.0 and 0.2.0: rebuild the plugin against one of them (wit/plugin.wit is 0.2.0)"
    );
    assert_eq!(
        load_error(&plugins, "wit_mixed"),
        "plugin 'wit_mixed' mixes two versions of wasmclaw:plugin: 0.2.0 (it exports wasmclaw:plugin/tool@0.2.0) and 0.1.0 (it imports wasmclaw:plugin/log@0.1.0); a plugin is built against one version: rebuild it against one of them (wit/plugin.wit is 0.2.0)"
    );
    assert_eq!(
        plugins
            .call(&ctx(), "contract_v0_1_echo", r#"{"text":"still here"}"#)
            .await,
        Ok("still here".to_string())
    );
}
