//! The table of live turns and the bounded session table: a SubTurn is
//! interrupted by its id like a top-level turn; idle sessions are let go
//! and rebuilt from the store.
//!
//! A turn that panics, and a turn whose task is aborted, end with exactly
//! one `turn_end`: those are unit tests of `agent/task.rs`, which spawn such
//! turns through the function every turn is spawned with (no turn of the
//! real agent can be made to panic from outside without a test-only seam).

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::Subscription;
use wasmclaw::llm::{Chain, Message, Provider, ProviderConfig};
use wasmclaw::protocol::{
    Accepted, Event, EventBody, InterruptMode, Op, Policy, Refused, SubturnEnd, SubturnSpawn,
    Target, ToolCallEnd, TurnEnd, TurnStatus,
};
use wasmclaw::scheduler::{Scheduler, SchedulerConfig};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent_with, drain, kinds, openai, quick_retries, until};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder, ToolCallReply};
use wasmclaw_tests::gate::{ToolGates, gate_args, gate_output};
use wasmclaw_tests::server::{Setup as ServerSetup, TestServer};

const LIMIT: Duration = Duration::from_secs(30);

fn message(session: &str, content: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: None,
    }
}

/// The first user message of a request body (a turn's input, a child's task),
/// and the contents of its tool results.
fn read(body: &Value) -> (String, Vec<String>) {
    let messages = body["messages"].as_array().unwrap();
    let first = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let results = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    (first, results)
}

/// A parent that runs one `subagent` child, which waits at gate `child`;
/// the parent answers with the child's tool result.
async fn delegating_model() -> FakeModel {
    let respond = |body: &Value| {
        let (first, results) = read(body);
        match (first.as_str(), results.first()) {
            ("delegate", None) => Reply::ToolCalls {
                text: String::new(),
                calls: vec![ToolCallReply {
                    id: "p1".into(),
                    name: "subagent".into(),
                    arguments: json!({"task": "wait here", "label": "waiter"}),
                }],
            },
            ("delegate", Some(result)) => Reply::text(format!("child said: {result}")),
            ("wait here", None) => Reply::tool("c1", "wait_gate", gate_args("child")),
            ("wait here", Some(result)) => {
                // After a graceful interrupt: the last call, without tools.
                assert_eq!(body["tool_choice"], "none", "{body}");
                Reply::text(format!("partial: {result}"))
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

struct Setup {
    scheduler: Scheduler,
    events: Subscription,
    gates: ToolGates,
    _dir: PluginDir,
}

async fn setup(fake: &FakeModel) -> Setup {
    let dir = PluginDir::new();
    let gates = ToolGates::new();
    dir.add("hostile");
    dir.grants(
        "hostile",
        &format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants()),
    );
    let (agent, events) = agent_with(
        dir.load().await,
        vec![openai(fake, "m", true)],
        Store::open_in_memory().unwrap(),
        AgentConfig::default(),
    );
    let scheduler = Scheduler::new(agent, SchedulerConfig::default());
    Setup {
        scheduler,
        events,
        gates,
        _dir: dir,
    }
}

/// Starts "delegate" on session `s` and waits until its child runs its
/// tool, at the gate; the parent's id, the child's id and the events so far.
async fn until_the_child_waits(setup: &mut Setup) -> (String, String, Vec<Arc<Event>>) {
    let Accepted::Started { turn_id: parent } =
        setup.scheduler.submit(message("s", "delegate")).unwrap()
    else {
        panic!("no turn started")
    };
    let seen = until(&mut setup.events, LIMIT, |e| {
        e.body.kind().as_str() == "subturn_spawn"
    })
    .await;
    let EventBody::SubturnSpawn(SubturnSpawn { subturn_id, .. }) = &seen.last().unwrap().body
    else {
        unreachable!()
    };
    let child = subturn_id.clone();
    setup.gates.wait_started("child", LIMIT).await;
    // The SubTurn is live, under its parent.
    let live = setup.scheduler.live("s").unwrap();
    let active = live.active.unwrap();
    assert_eq!(active.turn_id, parent);
    assert_eq!(active.children.len(), 1);
    assert_eq!(active.children[0].turn_id, child);
    assert_eq!(active.children[0].depth, 1);
    (parent, child, seen)
}

fn of_turn(events: &[Arc<Event>], id: &str) -> Vec<Arc<Event>> {
    events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(id))
        .cloned()
        .collect()
}

async fn idle(scheduler: &Scheduler) {
    tokio::time::timeout(LIMIT, scheduler.until_all_idle())
        .await
        .expect("every session went idle in time");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_interrupt_of_a_subturn_by_its_id_aborts_it_and_its_parent_goes_on() {
    let fake = delegating_model().await;
    let mut setup = setup(&fake).await;
    let (parent, child, mut seen) = until_the_child_waits(&mut setup).await;
    seen.extend(drain(&mut setup.events));
    let before = seen.len();

    assert_eq!(
        setup.scheduler.submit(Op::Interrupt {
            target: Target::Turn(child.clone()),
            mode: InterruptMode::Hard,
        }),
        Ok(Accepted::Interrupted {
            turn_id: child.clone(),
            discarded: vec![],
        })
    );
    seen.extend(
        until(&mut setup.events, LIMIT, |e| {
            e.body.kind().as_str() == "turn_end" && e.turn_id.as_deref() == Some(parent.as_str())
        })
        .await,
    );
    idle(&setup.scheduler).await;
    seen.extend(drain(&mut setup.events));
    let after = &seen[before..];

    // The child: stopped at once, its tool call cancelled.
    let child_events = of_turn(after, &child);
    assert_eq!(
        kinds(&child_events),
        ["interrupt_received", "tool_call_end", "turn_end"]
    );
    assert!(matches!(
        &child_events[1].body,
        EventBody::ToolCallEnd(ToolCallEnd { ok: false, .. })
    ));
    assert!(matches!(
        &child_events[2].body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Aborted, reason, .. }) if reason == "interrupted"
    ));
    // The parent: sees the child's end as its tool's result and answers.
    let parent_events = of_turn(after, &parent);
    assert_eq!(
        kinds(&parent_events),
        [
            "subturn_end",
            "subturn_delivered",
            "tool_call_end",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end"
        ]
    );
    assert!(matches!(
        &parent_events[0].body,
        EventBody::SubturnEnd(SubturnEnd { subturn_id, status: TurnStatus::Aborted, .. }) if *subturn_id == child
    ));
    let EventBody::TurnEnd(TurnEnd {
        status: TurnStatus::Completed,
        answer: Some(answer),
        ..
    }) = &parent_events.last().unwrap().body
    else {
        panic!("{:?}", parent_events.last())
    };
    assert!(
        answer.starts_with("child said: error (upstream): sub-agent 'waiter'")
            && answer.ends_with("ended aborted: interrupted"),
        "{answer}"
    );
    // Gone from the table: a second interrupt finds nothing.
    assert!(matches!(
        setup.scheduler.submit(Op::Interrupt {
            target: Target::Turn(child.clone()),
            mode: InterruptMode::Hard,
        }),
        Err(Refused::NoActiveTurn(_))
    ));
    setup.gates.open("child");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_interrupt_of_a_subturn_lets_its_tool_finish_and_its_parent_gets_its_last_answer()
 {
    let fake = delegating_model().await;
    let mut setup = setup(&fake).await;
    let (parent, child, mut seen) = until_the_child_waits(&mut setup).await;

    assert_eq!(
        setup.scheduler.submit(Op::Interrupt {
            target: Target::Turn(child.clone()),
            mode: InterruptMode::Graceful,
        }),
        Ok(Accepted::Interrupted {
            turn_id: child.clone(),
            discarded: vec![],
        })
    );
    // The running tool is not stopped: it ends when its gate opens.
    setup.gates.open("child");
    seen.extend(
        until(&mut setup.events, LIMIT, |e| {
            e.body.kind().as_str() == "turn_end" && e.turn_id.as_deref() == Some(parent.as_str())
        })
        .await,
    );
    idle(&setup.scheduler).await;

    let child_events = of_turn(&seen, &child);
    assert!(child_events.iter().any(|e| matches!(
        &e.body,
        EventBody::ToolCallEnd(ToolCallEnd { ok: true, output, .. }) if *output == gate_output("child")
    )));
    let last_answer = format!("partial: {}", gate_output("child"));
    assert!(matches!(
        &child_events.last().unwrap().body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Completed, reason, answer: Some(a), .. })
            if reason == "interrupted" && *a == last_answer
    ));
    let parent_events = of_turn(&seen, &parent);
    assert!(matches!(
        &parent_events.last().unwrap().body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Completed, answer: Some(a), .. })
            if *a == format!("child said: {last_answer}")
    ));
    // The parent itself was not interrupted.
    assert!(
        !parent_events
            .iter()
            .any(|e| e.body.kind().as_str() == "interrupt_received")
    );
}

/// `POST /v1/sessions/{key}/interrupt` with `turn_id` and its answer.
async fn interrupt_over_http(server: &TestServer, key: &str, body: Value) -> (StatusCode, Value) {
    let response = server
        .client()
        .post(server.at(&format!("/v1/sessions/{key}/interrupt")))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_api_interrupts_a_running_subturn_by_its_id() {
    let fake = delegating_model().await;
    let dir = PluginDir::new();
    let gates = ToolGates::new();
    dir.add("hostile");
    dir.grants(
        "hostile",
        &format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants()),
    );
    let server = TestServer::start(
        dir.load().await,
        vec![openai(&fake, "m", true)],
        ServerSetup::default(),
    )
    .await;
    let Ok(Accepted::Started { turn_id: parent }) =
        server.core.submit(message("s", "delegate")).await
    else {
        panic!("no turn started")
    };
    gates.wait_started("child", LIMIT).await;
    let live = server.core.live("s").unwrap().active.unwrap();
    assert_eq!(live.turn_id, parent);
    let child = live.children[0].turn_id.clone();

    // Another session's SubTurn is not this session's to interrupt.
    let (status, body) =
        interrupt_over_http(&server, "other", json!({"mode": "hard", "turn_id": child})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        json!({"error": {
            "type": "no_active_turn",
            "message": format!("turn '{child}' is not running on session 'other'"),
        }})
    );
    // The SubTurn, by its id: stopped; its parent goes on.
    let (status, body) =
        interrupt_over_http(&server, "s", json!({"mode": "hard", "turn_id": child})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"turn_id": child, "mode": "hard", "discarded": []})
    );
    let child_end = tokio::time::timeout(LIMIT, server.core.wait_turn(&child))
        .await
        .expect("the SubTurn ends")
        .unwrap();
    assert_eq!(child_end.status, TurnStatus::Aborted);
    assert_eq!(child_end.reason, "interrupted");
    let parent_end = tokio::time::timeout(LIMIT, server.core.wait_turn(&parent))
        .await
        .expect("the parent ends")
        .unwrap();
    assert_eq!(parent_end.status, TurnStatus::Completed);
    let answer = parent_end.answer.unwrap();
    assert!(
        answer.starts_with("child said: error (upstream): sub-agent 'waiter'")
            && answer.ends_with("ended aborted: interrupted"),
        "{answer}"
    );
    // Ended: no longer there to interrupt.
    let (status, _) =
        interrupt_over_http(&server, "s", json!({"mode": "hard", "turn_id": child})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    gates.open("child");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_idle_sessions_are_let_go_and_rebuilt_from_the_store() {
    const SESSIONS: usize = 10_000;
    const BATCH: usize = 500;
    let dir = PluginDir::new();
    let plugins = dir.load().await;
    let agent = {
        let script = dir.scratch("script").join("ok.json");
        std::fs::write(&script, r#"{"turns": [{"replies": [{"text": "ok"}]}]}"#).unwrap();
        let config =
            ProviderConfig::parse(&format!("scripted:{}", script.display()), |_| None).unwrap();
        let provider = Provider::new(config, wasmclaw::llm::http_client()).unwrap();
        let store = Store::open_in_memory().unwrap();
        let bus = wasmclaw::bus::EventBus::new(store.last_seq().unwrap());
        Arc::new(Agent::new(
            plugins,
            Arc::new(Chain::new(vec![provider], quick_retries())),
            bus,
            store,
            AgentConfig::default(),
        ))
    };
    let scheduler = Scheduler::new(
        agent.clone(),
        SchedulerConfig {
            session_idle: Duration::from_millis(200),
            ..SchedulerConfig::default()
        },
    );
    // One session keeps a policy of its own.
    scheduler
        .submit(Op::SetPolicy {
            session: "s-0".into(),
            policy: Policy::FollowUp,
        })
        .unwrap();
    for batch in 0..SESSIONS / BATCH {
        for i in batch * BATCH..(batch + 1) * BATCH {
            assert!(matches!(
                scheduler.submit(message(&format!("s-{i}"), "hi")),
                Ok(Accepted::Started { .. })
            ));
        }
        idle(&scheduler).await;
    }
    assert_eq!(agent.store().sessions().await.unwrap().len(), SESSIONS);
    assert!(agent.turns().is_empty());

    let drained = async {
        while scheduler.sessions_in_memory() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(LIMIT, drained)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} sessions still in memory",
                scheduler.sessions_in_memory()
            )
        });
    assert_eq!(scheduler.live("s-1"), None);
    assert_eq!(scheduler.idle_entries(), 0);
    // A session let go still shows the policy kept for it.
    assert_eq!(
        scheduler.live("s-0").map(|live| (live.policy, live.busy)),
        Some((Policy::FollowUp, false))
    );

    // Used again: rebuilt, with its history and its policy.
    let ok = Message::Assistant {
        content: "ok".into(),
        tool_calls: vec![],
    };
    assert_eq!(
        agent.store().history("s-1").await.unwrap(),
        [Message::user("hi"), ok.clone()]
    );
    scheduler.submit(message("s-1", "again")).unwrap();
    assert_eq!(scheduler.live("s-1").unwrap().policy, Policy::Steer);
    idle(&scheduler).await;
    assert_eq!(
        agent.store().history("s-1").await.unwrap(),
        [
            Message::user("hi"),
            ok.clone(),
            Message::user("again"),
            ok.clone()
        ]
    );
    // The rebuilt session acts on its policy: a message while it is busy
    // waits as a follow-up (or starts, if the first turn is already over);
    // it never steers.
    let Accepted::Started { .. } = scheduler.submit(message("s-0", "one")).unwrap() else {
        panic!("no turn started")
    };
    assert_eq!(scheduler.live("s-0").unwrap().policy, Policy::FollowUp);
    let second = scheduler.submit(message("s-0", "two"));
    assert!(
        matches!(
            second,
            Ok(Accepted::Queued { position: 1, .. } | Accepted::Started { .. })
        ),
        "{second:?}"
    );
    idle(&scheduler).await;
    assert_eq!(agent.store().history("s-0").await.unwrap().len(), 6);
}

/// A model that answers "ok" to everything.
fn scripted_ok(dir: &PluginDir) -> ProviderConfig {
    let script = dir.scratch("script").join("ok.json");
    std::fs::write(&script, r#"{"turns": [{"replies": [{"text": "ok"}]}]}"#).unwrap();
    ProviderConfig::parse(&format!("scripted:{}", script.display()), |_| None).unwrap()
}

/// However often an idle session is used without starting a turn, it has
/// one place in the queue of sessions to let go, and is let go once its
/// idle time has passed since it was last used.
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_session_used_again_and_again_has_one_place_in_the_idle_queue() {
    let dir = PluginDir::new();
    let (agent, _events) = agent_with(
        dir.load().await,
        vec![scripted_ok(&dir)],
        Store::open_in_memory().unwrap(),
        AgentConfig::default(),
    );
    let scheduler = Scheduler::new(
        agent,
        SchedulerConfig {
            session_idle: Duration::from_millis(300),
            ..SchedulerConfig::default()
        },
    );
    let set = |policy| Op::SetPolicy {
        session: "busy-bee".into(),
        policy,
    };
    for i in 0..10_000 {
        let policy = if i % 2 == 0 {
            Policy::FollowUp
        } else {
            Policy::Steer
        };
        scheduler.submit(set(policy)).unwrap();
    }
    assert_eq!(scheduler.sessions_in_memory(), 1);
    assert_eq!(scheduler.idle_entries(), 1);
    let drained = async {
        while scheduler.sessions_in_memory() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(LIMIT, drained)
        .await
        .expect("the session was never let go");
    assert_eq!(scheduler.idle_entries(), 0);
    // The last policy set (`steer`) is what it comes back with: the
    // session's own choice, kept.
    let kept = scheduler.live("busy-bee").expect("kept settings");
    assert_eq!(kept.settings.policy, Some(Policy::Steer));
    assert!(!kept.busy);
}

/// A policy set on a session still in memory is written at shutdown, so a
/// restart keeps it (a session let go has written its own).
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_survives_a_restart_before_its_session_was_let_go() {
    let dir = PluginDir::new();
    let path = dir.scratch("home").join("sessions.db");
    let (core, _events) = wasmclaw_tests::agents::core_with(
        dir.load().await,
        vec![scripted_ok(&dir)],
        Store::open(&path).unwrap(),
        AgentConfig::default(),
        SchedulerConfig::default(),
    );
    let op = Op::SetPolicy {
        session: "kept".into(),
        policy: Policy::FollowUp,
    };
    assert_eq!(core.submit(op).await, Ok(Accepted::PolicySet));
    tokio::time::timeout(LIMIT, core.shut_down(Duration::ZERO))
        .await
        .expect("shutdown hung");
    let kept = Store::open(&path).unwrap().settings().unwrap();
    assert_eq!(kept["kept"].policy, Some(Policy::FollowUp));
}
