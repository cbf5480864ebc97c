//! Named agents: sessions of different agents at once (each request with
//! its agent's prompt, model and tools), a session keeping its agent, a
//! SubTurn run as another agent within its parent's tools, a session's
//! model override, and a reload that running turns do not see.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::AgentConfig;
use wasmclaw::agent::profile::Profile;
use wasmclaw::config::ToolFilter;
use wasmclaw::core::Core;
use wasmclaw::protocol::{
    Accepted, ConfigReloaded, EventBody, Op, Refused, SubturnSpawn, TurnErrorKind, TurnStatus,
};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{core_of_agents, profile, profiles};
use wasmclaw_tests::fake_model::{
    FakeModel, Gate, Options, Recorded, Reply, Responder, after_tool_result, roles_and_texts,
};

const LIMIT: Duration = Duration::from_secs(60);

fn message(session: &str, content: &str, agent: Option<&str>) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: agent.map(String::from),
    }
}

fn with_prompt(prompt: &str, tools: ToolFilter) -> AgentConfig {
    AgentConfig {
        system_prompt: Some(prompt.to_string()),
        tools,
        ..AgentConfig::default()
    }
}

fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
    ToolFilter {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    }
}

/// The system prompt of a recorded OpenAI request.
fn system(body: &Value) -> String {
    roles_and_texts(body)
        .into_iter()
        .find(|(role, _)| role == "system")
        .map(|(_, text)| text)
        .unwrap_or_default()
}

fn tool_names(body: &Value) -> BTreeSet<String> {
    (body["tools"].as_array().into_iter().flatten())
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn model(respond: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakeModel {
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

async fn ended(core: &Core, op: Op) -> wasmclaw::agent::TurnOutcome {
    let (_, outcome) = tokio::time::timeout(LIMIT, core.run(op))
        .await
        .expect("the turn ends in time")
        .unwrap();
    outcome.expect("a turn started")
}

fn requests_with(fake: &FakeModel, prompt: &str) -> Vec<Recorded> {
    (fake.requests().into_iter())
        .filter(|r| system(&r.body) == prompt)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_agents_run_at_once_each_with_its_prompt_model_and_tools() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let agents = vec![
        profile(
            "default",
            &fake,
            "m-default",
            with_prompt(
                "You are the default agent.",
                filter(&["*"], &["fail", "log", "count"]),
            ),
        ),
        profile(
            "coder",
            &fake,
            "m-coder",
            with_prompt("You are the coder.", filter(&["add", "echo"], &[])),
        ),
    ];
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let turns = (0..40).map(|i| {
        let core = core.clone();
        async move {
            let agent = (i % 2 == 1).then_some("coder");
            let outcome = ended(&core, message(&format!("s{i}"), "hi", agent)).await;
            assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:?}");
        }
    });
    futures_util::future::join_all(turns).await;

    let coder = requests_with(&fake, "You are the coder.");
    let default = requests_with(&fake, "You are the default agent.");
    assert_eq!((coder.len(), default.len()), (20, 20));
    for request in &coder {
        assert_eq!(request.body["model"], "m-coder");
        assert_eq!(tool_names(&request.body), names(&["add", "echo"]));
    }
    for request in &default {
        assert_eq!(request.body["model"], "m-default");
        let expected = names(&[
            "add",
            "context",
            "echo",
            "history_search",
            "spawn",
            "subagent",
        ]);
        assert_eq!(tool_names(&request.body), expected);
    }
    for i in 0..40 {
        let live = core.live(&format!("s{i}")).unwrap();
        let agent = (i % 2 == 1).then(|| "coder".to_string());
        assert_eq!(live.settings.agent, agent, "s{i}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_keeps_its_agent_until_it_is_switched() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let agents = vec![
        profile(
            "default",
            &fake,
            "m",
            with_prompt("default", ToolFilter::default()),
        ),
        profile(
            "coder",
            &fake,
            "m",
            with_prompt("coder", ToolFilter::default()),
        ),
    ];
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    ended(&core, message("s", "one", Some("coder"))).await;
    let refused = core.submit(message("s", "two", Some("default"))).await;
    assert_eq!(
        refused,
        Err(Refused::Invalid(
            "session 's' runs agent 'coder', not 'default': a session keeps its agent until it \
             is switched (/agent default)"
                .into()
        ))
    );
    ended(&core, message("s", "three", None)).await;
    let unknown = Op::SetAgent {
        session: "s".into(),
        agent: "nope".into(),
    };
    assert_eq!(
        core.submit(unknown).await,
        Err(Refused::Invalid(
            "no agent `nope` in the configuration (agents: coder, default)".into()
        ))
    );
    let unknown_in_message = core.submit(message("t", "x", Some("nope"))).await;
    assert_eq!(
        unknown_in_message,
        Err(Refused::Invalid(
            "no agent `nope` in the configuration (agents: coder, default)".into()
        ))
    );
    // Refused before the session was even made.
    assert_eq!(core.live("t"), None);
    let switch = Op::SetAgent {
        session: "s".into(),
        agent: "default".into(),
    };
    assert_eq!(core.submit(switch).await, Ok(Accepted::SessionSet));
    ended(&core, message("s", "four", None)).await;

    let prompts: Vec<(String, String)> = (fake.requests().iter())
        .map(|r| {
            let last = roles_and_texts(&r.body).last().unwrap().1.clone();
            (last, system(&r.body))
        })
        .collect();
    let expected = [("one", "coder"), ("three", "coder"), ("four", "default")];
    let expected: Vec<(String, String)> = (expected.iter())
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(prompts, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subturn_runs_as_another_agent_within_its_parents_tools() {
    let fake = model(|body| match system(body).as_str() {
        "You research." => Reply::text("found it"),
        _ if after_tool_result(body) => Reply::text("done"),
        _ => {
            let last = roles_and_texts(body).last().unwrap().1.clone();
            let agent = if last == "unknown" {
                "nobody"
            } else {
                "researcher"
            };
            Reply::tool(
                "c1",
                "subagent",
                json!({"task": "look it up", "agent": agent}),
            )
        }
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let agents = vec![
        profile(
            "default",
            &fake,
            "m-parent",
            with_prompt("You lead.", filter(&["*"], &["context"])),
        ),
        profile(
            "researcher",
            &fake,
            "m-research",
            with_prompt("You research.", filter(&["echo", "context", "add"], &[])),
        ),
    ];
    let (core, mut events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let outcome = ended(&core, message("s", "go", None)).await;
    assert_eq!(outcome.answer.as_deref(), Some("done"), "{outcome:?}");

    let child = requests_with(&fake, "You research.");
    assert_eq!(child.len(), 1);
    assert_eq!(child[0].body["model"], "m-research");
    // The researcher's tools, within the parent's (which has no `context`).
    assert_eq!(tool_names(&child[0].body), names(&["add", "echo"]));
    let seen = wasmclaw_tests::agents::drain(&mut events);
    let spawn = seen
        .iter()
        .find_map(|e| match &e.body {
            EventBody::SubturnSpawn(SubturnSpawn { agent, tools, .. }) => {
                Some((agent.clone(), tools.clone()))
            }
            _ => None,
        })
        .expect("a subturn_spawn");
    assert_eq!(spawn.0, "researcher");

    // An agent the configuration does not have: a tool error the model reads.
    let outcome = ended(&core, message("u", "unknown", None)).await;
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    let last = fake.requests().last().unwrap().body.clone();
    let result = roles_and_texts(&last).last().unwrap().1.clone();
    assert!(
        result.contains(
            "agent: no agent `nobody` in the configuration (agents: default, researcher)"
        ),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_model_override_applies_to_its_next_turns() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let agents = vec![profile("default", &fake, "m-agent", AgentConfig::default())];
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let set = |model: Option<&str>| Op::SetModel {
        session: "s".into(),
        model: model.map(String::from),
    };
    ended(&core, message("s", "a", None)).await;
    assert_eq!(
        core.submit(set(Some("fake:big"))).await,
        Ok(Accepted::SessionSet)
    );
    ended(&core, message("s", "b", None)).await;
    ended(&core, message("s", "c", None)).await;
    assert_eq!(
        core.submit(set(Some("nonsense"))).await,
        Err(Refused::Invalid(
            "model `nonsense`: expected fake:MODEL".into()
        ))
    );
    assert_eq!(core.submit(set(None)).await, Ok(Accepted::SessionSet));
    ended(&core, message("s", "d", None)).await;
    let models: Vec<Value> = (fake.requests().iter())
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(models, ["m-agent", "big", "big", "m-agent"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_while_fifty_sessions_run_applies_only_to_turns_that_start_after_it() {
    let gate = Gate::default();
    let held = gate.clone();
    // Each turn: a tool call (its reply held at the gate), then an answer.
    let fake = model(move |body| {
        if after_tool_result(body) {
            Reply::text("done")
        } else {
            let call = Reply::tool("c1", "echo", json!({"text": "x"}));
            Reply::Gated(held.clone(), Box::new(call))
        }
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let agents = |prompt: &str| {
        vec![profile(
            "default",
            &fake,
            "m",
            with_prompt(prompt, ToolFilter::default()),
        )]
    };
    let (core, mut events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents("v1"), "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let mut before = Vec::new();
    for i in 0..50 {
        let (accepted, watch) = core
            .submit_watched(message(&format!("s{i}"), "first", None))
            .await
            .unwrap();
        assert!(matches!(accepted, Accepted::Started { .. }), "{accepted:?}");
        before.push(watch.unwrap());
    }
    assert!(
        wasmclaw_tests::eventually(LIMIT, || fake.requests().len() == 50).await,
        "every turn asked the model"
    );
    let reloaded = ConfigReloaded {
        file: "wasmclaw.toml".into(),
        changed: vec!["agents.default.system_prompt".into()],
        restart_needed: Vec::new(),
    };
    core.reload(profiles(&fake, agents("v2"), "default"), reloaded.clone());
    gate.open();
    for mut watch in before {
        let outcome = tokio::time::timeout(LIMIT, watch.ended())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:?}");
    }
    // Every request of the turns started before the reload: v1, both calls.
    assert_eq!(requests_with(&fake, "v1").len(), 100);
    assert_eq!(requests_with(&fake, "v2").len(), 0);
    let after = (0..50).map(|i| {
        let core = core.clone();
        async move { ended(&core, message(&format!("s{i}"), "second", None)).await }
    });
    for outcome in futures_util::future::join_all(after).await {
        assert_eq!(outcome.status, TurnStatus::Completed);
    }
    assert_eq!(requests_with(&fake, "v1").len(), 100);
    assert_eq!(requests_with(&fake, "v2").len(), 100);
    let seen = wasmclaw_tests::agents::drain(&mut events);
    let announced: Vec<&ConfigReloaded> = (seen.iter())
        .filter_map(|e| match &e.body {
            EventBody::ConfigReloaded(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(announced, [&reloaded]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_whose_agent_a_reload_removed_ends_its_next_turn_with_a_config_error() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let both = || {
        vec![
            profile("default", &fake, "m", AgentConfig::default()),
            profile("coder", &fake, "m", AgentConfig::default()),
        ]
    };
    let store_dir = tempfile::tempdir().unwrap();
    let path = store_dir.path().join("sessions.db");
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(&fake, both(), "default"),
        Store::open(&path).unwrap(),
        SchedulerConfig::default(),
    );
    ended(&core, message("s", "one", Some("coder"))).await;
    let only_default: Vec<Profile> = vec![profile("default", &fake, "m", AgentConfig::default())];
    let reloaded = ConfigReloaded {
        file: "wasmclaw.toml".into(),
        changed: vec!["agents.coder".into()],
        restart_needed: Vec::new(),
    };
    core.reload(profiles(&fake, only_default, "default"), reloaded);
    let outcome = ended(&core, message("s", "two", None)).await;
    assert_eq!(outcome.status, TurnStatus::Error);
    assert_eq!(outcome.error_kind, Some(TurnErrorKind::Config));
    assert_eq!(
        outcome.reason,
        "no agent `coder` in the configuration (agents: default)"
    );
    assert_eq!(fake.requests().len(), 1, "the failed turn asked no model");

    // The session's agent outlasts the process: kept at shutdown, read at
    // the next start.
    tokio::time::timeout(LIMIT, core.shut_down(Duration::ZERO))
        .await
        .expect("shutdown hung");
    drop(core);
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(&fake, both(), "default"),
        Store::open(&path).unwrap(),
        SchedulerConfig::default(),
    );
    let live = core.live("s").expect("kept settings");
    assert_eq!(live.settings.agent.as_deref(), Some("coder"));
    let outcome = ended(&core, message("s", "three", None)).await;
    assert_eq!(outcome.status, TurnStatus::Completed);
}

#[test]
fn profiles_resolve_agents_and_fall_back_to_the_first_as_default() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fake = runtime.block_on(FakeModel::start([]));
    let _guard = runtime.enter();
    let p = profiles(
        &fake,
        vec![
            profile("b", &fake, "m", AgentConfig::default()),
            profile("a", &fake, "m", AgentConfig::default()),
        ],
        "missing",
    );
    assert_eq!(p.default_name(), "a");
    assert_eq!(p.names().collect::<Vec<_>>(), ["a", "b"]);
    assert!(p.get("b").is_some() && p.get("missing").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_of_a_tool_the_agent_does_not_offer_is_an_error_the_model_reads() {
    let fake = model(|body| {
        if after_tool_result(body) {
            Reply::text("done")
        } else {
            Reply::tool("c1", "context", json!({}))
        }
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let agents = vec![profile(
        "coder",
        &fake,
        "m",
        with_prompt("coder", filter(&["add", "echo"], &[])),
    )];
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "coder"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let outcome = ended(&core, message("s", "go", None)).await;
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    let last = fake.requests().last().unwrap().body.clone();
    assert_eq!(
        roles_and_texts(&last).last().unwrap().1,
        "error (not-found): tool 'context' is not among the tools of agent 'coder' in this turn"
    );
}
