//! Human approval of tool calls: allow, ask and deny by the agent's rules;
//! a call that waits while the others of its reply run; decisions once,
//! for the session and always (kept in the store, revoked); the wait's
//! timeout and interrupts; approvals racing timeouts and interrupts, each
//! with one outcome; and 100 sessions decided over HTTP in random order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::AgentConfig;
use wasmclaw::agent::approval::PendingApproval;
use wasmclaw::bus::Subscription;
use wasmclaw::config::{ApprovalRule, ApprovalSettings, Permission};
use wasmclaw::core::Core;
use wasmclaw::protocol::{
    Accepted, ApprovalDecided, ApprovalDecision, ApprovalScope, DecidedBy, Event, EventBody,
    InterruptMode, Op, Refused, Target, ToolCallEnd, TurnStatus,
};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{core_of_agents, drain, profile, profiles, until};
use wasmclaw_tests::fake_model::{
    FakeModel, Options, Reply, Responder, ToolCallReply, after_tool_result, roles_and_texts,
};
use wasmclaw_tests::server::{Setup, TestServer};

const LIMIT: Duration = Duration::from_secs(60);

fn rules(list: &[(&str, Permission)], timeout: Duration) -> AgentConfig {
    AgentConfig {
        approvals: ApprovalSettings {
            rules: (list.iter())
                .map(|(tool, permission)| ApprovalRule {
                    tool: tool.to_string(),
                    permission: *permission,
                })
                .collect(),
            default: Permission::Allow,
            timeout,
        },
        ..AgentConfig::default()
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCallReply {
    ToolCallReply {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

/// A model that asks for `calls` on a user message and answers `done`
/// after the tool results (or when tools are not allowed).
async fn model(calls: Vec<ToolCallReply>) -> FakeModel {
    let respond = move |body: &Value| {
        if after_tool_result(body) || body["tool_choice"] == "none" {
            Reply::text("done")
        } else {
            Reply::ToolCalls {
                text: String::new(),
                calls: calls.clone(),
            }
        }
    };
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

async fn start(
    fake: &FakeModel,
    config: AgentConfig,
    store: Store,
) -> (Core, Subscription, PluginDir) {
    let dir = PluginDir::new();
    dir.add("echo");
    let agents = vec![profile("default", fake, "m", config)];
    let (core, events) = core_of_agents(
        dir.load().await,
        profiles(fake, agents, "default"),
        store,
        SchedulerConfig::default(),
    );
    (core, events, dir)
}

fn message(session: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: "go".into(),
        agent: None,
    }
}

fn approve(session: &str, call_id: &str, decision: ApprovalDecision, scope: ApprovalScope) -> Op {
    Op::Approve {
        session: session.into(),
        call_id: call_id.into(),
        turn_id: None,
        decision,
        scope,
        note: None,
    }
}

/// Starts a turn on `session`: its id.
async fn started(core: &Core, session: &str) -> String {
    match core.submit(message(session)).await {
        Ok(Accepted::Started { turn_id }) => turn_id,
        other => panic!("not started: {other:?}"),
    }
}

/// How the turn `turn_id` ended (within [`LIMIT`]).
async fn ended_turn(core: &Core, turn_id: &str) -> wasmclaw::agent::TurnOutcome {
    tokio::time::timeout(LIMIT, core.wait_turn(turn_id))
        .await
        .expect("the turn ends in time")
        .unwrap()
}

async fn waiting(core: &Core, session: &str) -> PendingApproval {
    let mut pending = Vec::new();
    let found = wasmclaw_tests::eventually(LIMIT, || {
        pending = core.pending_approvals(session);
        !pending.is_empty()
    })
    .await;
    assert!(found, "no call of {session} waits for approval");
    assert_eq!(pending.len(), 1, "{pending:?}");
    pending.remove(0)
}

fn decided(events: &[Arc<Event>]) -> Vec<(String, ApprovalDecision, ApprovalScope, DecidedBy)> {
    (events.iter())
        .filter_map(|e| match &e.body {
            EventBody::ApprovalDecided(ApprovalDecided {
                call_id,
                decision,
                scope,
                by,
                ..
            }) => Some((call_id.clone(), *decision, *scope, *by)),
            _ => None,
        })
        .collect()
}

/// `tool_call_end` outputs by call id.
fn outputs(events: &[Arc<Event>]) -> HashMap<String, (bool, String)> {
    (events.iter())
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd {
                call_id,
                ok,
                output,
                ..
            }) => Some((call_id.clone(), (*ok, output.clone()))),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_allow_ask_and_deny_and_the_other_calls_run_while_one_waits() {
    let fake = model(vec![
        call("c-add", "add", json!({"a": 2, "b": 3})),
        call("c-echo", "echo", json!({"text": "exactly this"})),
        call(
            "c-fail",
            "fail",
            json!({"kind": "internal", "message": "x"}),
        ),
    ])
    .await;
    let config = rules(
        &[("echo", Permission::Ask), ("f*", Permission::Deny)],
        LIMIT,
    );
    let (core, mut events, _dir) = start(&fake, config, Store::open_in_memory().unwrap()).await;
    let turn_id = started(&core, "s").await;
    let pending = waiting(&core, "s").await;
    assert_eq!(
        pending,
        PendingApproval {
            session: "s".into(),
            turn_id: turn_id.clone(),
            call_id: "c-echo".into(),
            tool: "echo".into(),
            arguments: r#"{"text":"exactly this"}"#.into(),
            asked_by: "agent 'default', rule `echo`".into(),
            expires_at: pending.expires_at.clone(),
        }
    );
    // The other calls ended while this one waits.
    let mut seen = Vec::new();
    while outputs(&seen).len() < 2 {
        seen.extend(
            until(&mut events, LIMIT, |e| {
                matches!(e.body, EventBody::ToolCallEnd(_))
            })
            .await,
        );
    }
    let ended = outputs(&seen);
    assert_eq!(ended["c-add"], (true, "5".to_string()));
    assert_eq!(
        ended["c-fail"],
        (
            false,
            "error (denied): the approval policy denies tool 'fail' (agent 'default', rule `f*`)"
                .to_string()
        )
    );
    assert!(!ended.contains_key("c-echo"));

    let ok = core
        .submit(approve(
            "s",
            "c-echo",
            ApprovalDecision::Allow,
            ApprovalScope::Once,
        ))
        .await;
    assert_eq!(
        ok,
        Ok(Accepted::Decided {
            call_id: "c-echo".into()
        })
    );
    let outcome = ended_turn(&core, &turn_id).await;
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    let all = drain(&mut events);
    let seen: Vec<_> = seen.into_iter().chain(all).collect();
    // The other calls may end before this one reaches the gate, so its request may come
    // after their ends on the stream; it comes once, with the exact arguments.
    let requested: Vec<_> = (seen.iter())
        .filter_map(|e| match &e.body {
            EventBody::ApprovalRequested(r) => Some((r.call_id.as_str(), r.arguments.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(requested, [("c-echo", r#"{"text":"exactly this"}"#)]);
    assert_eq!(outputs(&seen)["c-echo"], (true, "exactly this".to_string()));
    assert_eq!(
        decided(&seen),
        [(
            "c-echo".into(),
            ApprovalDecision::Allow,
            ApprovalScope::Once,
            DecidedBy::User
        )]
    );
    // A second decision, and one for a call that never asked: refused.
    let again = core
        .submit(approve(
            "s",
            "c-echo",
            ApprovalDecision::Deny,
            ApprovalScope::Once,
        ))
        .await;
    assert_eq!(
        again,
        Err(Refused::NotWaiting(
            "no tool call 'c-echo' of session 's' waits for approval: it was decided, timed out \
             or stopped, or never asked"
                .into()
        ))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_and_always_decisions_are_kept_and_always_ones_outlast_the_process() {
    let fake = model(vec![call("c1", "echo", json!({"text": "hi"}))]).await;
    let store_dir = tempfile::tempdir().unwrap();
    let path = store_dir.path().join("sessions.db");
    let config = || rules(&[("echo", Permission::Ask)], LIMIT);
    let (core, mut events, _dir) = start(&fake, config(), Store::open(&path).unwrap()).await;
    let turn = |session: &'static str| {
        let core = core.clone();
        async move {
            let (_, outcome) = core.run(message(session)).await.unwrap();
            outcome.unwrap()
        }
    };
    let decide = |session: &'static str, decision, scope| {
        let core = core.clone();
        async move {
            let pending = waiting(&core, session).await;
            let op = approve(session, &pending.call_id, decision, scope);
            assert!(core.submit(op).await.is_ok());
        }
    };
    // Once: asked again next time.
    let (outcome, ()) = tokio::join!(
        turn("a"),
        decide("a", ApprovalDecision::Allow, ApprovalScope::Once)
    );
    assert_eq!(outcome.status, TurnStatus::Completed);
    // For the session: the next call of "a" is not asked; "b" is.
    let (outcome, ()) = tokio::join!(
        turn("a"),
        decide("a", ApprovalDecision::Deny, ApprovalScope::Session)
    );
    assert_eq!(outcome.status, TurnStatus::Completed);
    let outcome = turn("a").await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    let (_, ()) = tokio::join!(
        turn("b"),
        decide("b", ApprovalDecision::Allow, ApprovalScope::Always)
    );
    // Always, for the agent: "c" and "b" are not asked.
    turn("c").await;
    turn("b").await;
    let seen = drain(&mut events);
    let by: Vec<(ApprovalDecision, ApprovalScope, DecidedBy)> = decided(&seen)
        .into_iter()
        .map(|(_, d, s, b)| (d, s, b))
        .collect();
    use ApprovalDecision::{Allow, Deny};
    use ApprovalScope::{Always, Once, Session};
    use DecidedBy::{Remembered, User};
    assert_eq!(
        by,
        [
            (Allow, Once, User),
            (Deny, Session, User),
            (Deny, Session, Remembered),
            (Allow, Always, User),
            (Allow, Always, Remembered),
            (Allow, Always, Remembered),
        ]
    );
    // The remembered denial's result says why.
    let last_a = fake
        .requests()
        .iter()
        .filter(|r| after_tool_result(&r.body))
        .nth(2)
        .map(|r| roles_and_texts(&r.body).last().unwrap().1.clone())
        .unwrap();
    assert_eq!(
        last_a,
        "error (denied): tool 'echo' was not approved: it was denied before, for every such call"
    );
    tokio::time::timeout(LIMIT, core.shut_down(Duration::ZERO))
        .await
        .unwrap();
    drop(core);

    // Kept: a new process over the same store does not ask; revoked, it does.
    let store = Store::open(&path).unwrap();
    let kept = store
        .kept_approvals(Some(ApprovalScope::Always))
        .await
        .unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (kept[0].owner.as_str(), kept[0].tool.as_str()),
        ("default", "echo")
    );
    let (core, mut events, _dir) = start(&fake, config(), Store::open(&path).unwrap()).await;
    let (_, outcome) = core.run(message("d")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    assert_eq!(decided(&drain(&mut events))[0].3, DecidedBy::Remembered);
    let revoked = store
        .revoke_approvals(ApprovalScope::Always, "default", Some("echo"))
        .await;
    assert_eq!(revoked.unwrap(), 1);
    let turn_id = started(&core, "e").await;
    let pending = waiting(&core, "e").await;
    assert_eq!(pending.tool, "echo");
    core.submit(approve("e", "c1", Allow, Once)).await.unwrap();
    ended_turn(&core, &turn_id).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_ends_denied_at_its_timeout_and_at_an_interrupt() {
    let fake = model(vec![call("c1", "echo", json!({"text": "hi"}))]).await;
    let config = rules(&[("echo", Permission::Ask)], Duration::from_millis(300));
    let (core, mut events, _dir) = start(&fake, config, Store::open_in_memory().unwrap()).await;
    let (_, outcome) = core.run(message("t")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    let seen = drain(&mut events);
    assert_eq!(
        decided(&seen),
        [(
            "c1".into(),
            ApprovalDecision::Deny,
            ApprovalScope::Once,
            DecidedBy::Timeout
        )]
    );
    assert_eq!(
        outputs(&seen)["c1"],
        (
            false,
            "error (denied): tool 'echo' was not approved: nobody approved it in time".into()
        )
    );

    // A long wait, interrupted: hard (the turn is aborted), then graceful
    // (the call is denied, the turn gives a last answer).
    let config = rules(&[("echo", Permission::Ask)], LIMIT);
    let (core, mut events, _dir) = start(&fake, config, Store::open_in_memory().unwrap()).await;
    for (session, mode, status) in [
        ("h", InterruptMode::Hard, TurnStatus::Aborted),
        ("g", InterruptMode::Graceful, TurnStatus::Completed),
    ] {
        let Ok(Accepted::Started { turn_id }) = core.submit(message(session)).await else {
            panic!("not started");
        };
        waiting(&core, session).await;
        let op = Op::Interrupt {
            target: Target::Session(session.into()),
            mode,
        };
        core.submit(op).await.unwrap();
        let outcome = ended_turn(&core, &turn_id).await;
        assert_eq!(outcome.status, status, "{mode:?}: {outcome:?}");
        assert!(core.pending_approvals(session).is_empty());
        let seen = drain(&mut events);
        assert_eq!(
            decided(&seen),
            [(
                "c1".into(),
                ApprovalDecision::Deny,
                ApprovalScope::Once,
                DecidedBy::Interrupt
            )],
            "{mode:?}"
        );
        // The turn's end is its last event: the aborted call's task is gone
        // before it, so its decision is never published after it.
        let position = |f: fn(&EventBody) -> bool| seen.iter().position(|e| f(&e.body));
        let decision = position(|b| matches!(b, EventBody::ApprovalDecided(_)));
        let end = position(|b| matches!(b, EventBody::TurnEnd(_)));
        assert_eq!(end, Some(seen.len() - 1), "{mode:?}: {seen:?}");
        assert!(decision < end, "{mode:?}: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approvals_racing_timeouts_and_interrupts_have_one_outcome_each() {
    let fake = model(vec![call("c1", "echo", json!({"text": "hi"}))]).await;
    let config = rules(&[("echo", Permission::Ask)], Duration::from_millis(60));
    let (core, mut events, _dir) = start(&fake, config, Store::open_in_memory().unwrap()).await;
    let mut outcomes = HashMap::new();
    for i in 0..60 {
        let session = format!("r{i}");
        let Ok(Accepted::Started { turn_id }) = core.submit(message(&session)).await else {
            panic!("not started");
        };
        // The request's event, not a poll of the pending table: under load a
        // poll may come after the 60 ms wait has already timed out.
        let mut seen = until(&mut events, LIMIT, |e| {
            matches!(e.body, EventBody::ApprovalRequested(_))
                && e.session.as_deref() == Some(session.as_str())
        })
        .await;
        // Around the timeout: sometimes before, sometimes after.
        tokio::time::sleep(Duration::from_millis(i % 50 + 20)).await;
        let racing = async {
            if i % 3 == 0 {
                let op = Op::Interrupt {
                    target: Target::Session(session.clone()),
                    mode: InterruptMode::Hard,
                };
                let _ = core.submit(op).await;
            }
        };
        let (approved, ()) = tokio::join!(
            core.submit(approve(
                &session,
                "c1",
                ApprovalDecision::Allow,
                ApprovalScope::Once
            )),
            racing
        );
        let outcome = ended_turn(&core, &turn_id).await;
        seen.extend(drain(&mut events));
        seen.retain(|e| e.session.as_deref() == Some(session.as_str()));
        let decisions = decided(&seen);
        assert_eq!(decisions.len(), 1, "{session}: {decisions:?}");
        let (_, decision, _, by) = decisions[0].clone();
        match approved {
            Ok(_) => assert_eq!((decision, by), (ApprovalDecision::Allow, DecidedBy::User)),
            Err(Refused::NotWaiting(_)) => {
                assert_eq!(decision, ApprovalDecision::Deny, "{session}");
                assert!(matches!(by, DecidedBy::Timeout | DecidedBy::Interrupt));
            }
            Err(other) => panic!("{other:?}"),
        }
        // The tool ran exactly when the call was allowed, unless the turn
        // was stopped first.
        let ran = outputs(&seen).get("c1").is_some_and(|(ok, _)| *ok);
        if outcome.status == TurnStatus::Completed {
            assert_eq!(ran, decision == ApprovalDecision::Allow, "{session}");
        }
        *outcomes.entry(format!("{by:?}")).or_insert(0) += 1;
    }
    assert!(
        outcomes.len() >= 2,
        "the races went one way only: {outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_sessions_wait_and_are_decided_over_http_in_random_order() {
    let fake = model(vec![call("c1", "echo", json!({"text": "hi"}))]).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let config = rules(&[("echo", Permission::Ask)], LIMIT);
    let agents = vec![profile("default", &fake, "m", config)];
    let server = TestServer::start_agents(
        dir.load().await,
        profiles(&fake, agents, "default"),
        Setup::default(),
    )
    .await;
    let client = server.client();
    let mut turns = Vec::new();
    for i in 0..100 {
        let answer: Value = client
            .post(server.at(&format!("/v1/sessions/w{i}/messages")))
            .json(&json!({"content": "go"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        turns.push(answer["turn_id"].as_str().unwrap().to_string());
    }
    for i in 0..100 {
        waiting(&server.core, &format!("w{i}")).await;
    }
    let listed: Value = client
        .get(server.at("/v1/sessions/w7/approvals"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(listed["approvals"][0]["call_id"], "c1");
    assert_eq!(listed["approvals"][0]["arguments"], r#"{"text":"hi"}"#);

    // Without the token, and for another session's call: refused.
    let anonymous = reqwest::Client::new()
        .post(server.at("/v1/sessions/w1/approvals/c1"))
        .json(&json!({"decision": "allow"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = client
        .post(server.at("/v1/sessions/nobody/approvals/c1"))
        .json(&json!({"decision": "allow"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 409);
    let error: Value = wrong.json().await.unwrap();
    assert_eq!(error["error"]["type"], "not_waiting");

    // Decided in a random order (even sessions allowed, odd denied), at once.
    let mut order: Vec<usize> = (0..100).collect();
    let mut seed = 0x2545F4914F6CDD1Du64;
    for i in (1..order.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    let decisions = order.iter().map(|&i| {
        let client = client.clone();
        let url = server.at(&format!("/v1/sessions/w{i}/approvals/c1"));
        async move {
            let decision = if i % 2 == 0 { "allow" } else { "deny" };
            let response = client
                .post(url)
                .json(&json!({"decision": decision, "note": format!("n{i}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "w{i}");
        }
    });
    futures_util::future::join_all(decisions).await;
    for (i, turn_id) in turns.iter().enumerate() {
        let outcome = tokio::time::timeout(LIMIT, server.core.wait_turn(turn_id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed, "w{i}");
        let history = server.core.history(&format!("w{i}")).await.unwrap();
        let result = history
            .iter()
            .find_map(|m| match m {
                wasmclaw::llm::Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .unwrap();
        let expected = if i % 2 == 0 {
            "hi".to_string()
        } else {
            format!("error (denied): tool 'echo' was not approved: it was denied (note: n{i})")
        };
        assert_eq!(result, expected, "w{i}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subturns_call_asks_on_its_root_session_with_the_subturns_turn_id() {
    // The parent starts a sub-agent; the sub-agent calls `echo`, which asks.
    let respond = |body: &Value| {
        let texts = roles_and_texts(body);
        let is_child = texts.iter().any(|(_, t)| t == "echo it");
        if after_tool_result(body) || body["tool_choice"] == "none" {
            Reply::text(if is_child { "echoed" } else { "done" })
        } else if is_child {
            Reply::tool("c-child", "echo", json!({"text": "from the child"}))
        } else {
            Reply::tool("c-parent", "subagent", json!({"task": "echo it"}))
        }
    };
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    let fake = FakeModel::start_with(options, []).await;
    let config = rules(&[("echo", Permission::Ask)], LIMIT);
    let (core, mut events, _dir) = start(&fake, config, Store::open_in_memory().unwrap()).await;
    let turn_id = started(&core, "root").await;
    let pending = waiting(&core, "root").await;
    assert_eq!(pending.call_id, "c-child");
    assert_ne!(pending.turn_id, turn_id, "the SubTurn's own id");
    let seen = until(&mut events, LIMIT, |e| {
        matches!(e.body, EventBody::ApprovalRequested(_))
    })
    .await;
    let requested = seen.last().unwrap();
    assert_eq!(requested.session.as_deref(), Some("root"));
    assert_eq!(requested.turn_id.as_deref(), Some(pending.turn_id.as_str()));
    assert_eq!(requested.parent_turn_id.as_deref(), Some(turn_id.as_str()));
    let op = approve(
        "root",
        "c-child",
        ApprovalDecision::Allow,
        ApprovalScope::Once,
    );
    core.submit(op).await.unwrap();
    let outcome = ended_turn(&core, &turn_id).await;
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    let seen = drain(&mut events);
    assert_eq!(
        outputs(&seen)["c-child"],
        (true, "from the child".to_string())
    );
    assert_eq!(outputs(&seen)["c-parent"], (true, "echoed".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_asks_beside_a_hook_built_for_0_1_and_a_rule_that_denies_needs_no_answer() {
    let fake = model(vec![call(
        "c1",
        "echo",
        json!({"text": "as the model wrote it"}),
    )])
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    // A 0.1.0 hook rewrites the call first; the 0.2.0 one asks.
    dir.add_as("hooktest_v0_1", "old_rewriter");
    dir.grants(
        "old_rewriter",
        "[hooks]\ntimeout_ms = 10000\n[config]\nsubscriptions = [{ point = \"before-tool\", priority = 0 }]\nbefore_tool = { action = \"rewrite\", arguments = { text = \"rewritten by 0.1\" } }\n",
    );
    dir.add_as("hooktest", "asker");
    dir.grants(
        "asker",
        "[hooks]\ntimeout_ms = 10000\n[config]\nsubscriptions = [{ point = \"before-tool\", priority = 10 }]\nbefore_tool = { action = \"ask\", reason = \"it writes\" }\n",
    );
    let agents = |config| vec![profile("default", &fake, "m", config)];
    let (core, mut events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents(rules(&[], LIMIT)), "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let turn_id = started(&core, "k").await;
    let pending = waiting(&core, "k").await;
    assert_eq!(pending.asked_by, "hook asker: it writes");
    assert_eq!(pending.arguments, r#"{"text":"rewritten by 0.1"}"#);
    core.submit(approve(
        "k",
        "c1",
        ApprovalDecision::Allow,
        ApprovalScope::Once,
    ))
    .await
    .unwrap();
    ended_turn(&core, &turn_id).await;
    let seen = drain(&mut events);
    assert_eq!(outputs(&seen)["c1"], (true, "rewritten by 0.1".to_string()));
    let verdicts: Vec<(String, &str)> = (seen.iter())
        .filter_map(|e| match &e.body {
            EventBody::HookDecision(d) => Some((d.hook.clone(), d.decision.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("old_rewriter".to_string(), "rewrite"),
            ("asker".to_string(), "ask")
        ]
    );

    // The operator's rule denies the tool: the hook's ask is not put to
    // anyone.
    let denying = rules(&[("echo", Permission::Deny)], LIMIT);
    core.reload(
        profiles(&fake, agents(denying), "default"),
        wasmclaw::protocol::ConfigReloaded {
            file: "wasmclaw.toml".into(),
            changed: vec!["agents.default.approvals".into()],
            restart_needed: Vec::new(),
        },
    );
    let (_, outcome) = core.run(message("k2")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    let seen = drain(&mut events);
    assert!(decided(&seen).is_empty());
    assert_eq!(
        outputs(&seen)["c1"],
        (
            false,
            "error (denied): the approval policy denies tool 'echo' (agent 'default', rule `echo`)"
                .to_string()
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_grants_may_ask_or_deny_and_the_stricter_rule_applies() {
    let fake = model(vec![
        call("c-echo", "echo", json!({"text": "hi"})),
        call("c-add", "add", json!({"a": 1, "b": 2})),
    ])
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    dir.grants(
        "echo",
        "[approvals]\nrules = [{ tool = \"echo\", permission = \"ask\" }, { tool = \"a*\", permission = \"deny\" }]\n",
    );
    // The agent allows both, by a rule and by default.
    let config = rules(&[("echo", Permission::Allow)], LIMIT);
    let agents = vec![profile("default", &fake, "m", config)];
    let (core, mut events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "default"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let turn_id = started(&core, "g").await;
    let pending = waiting(&core, "g").await;
    assert_eq!(
        (pending.call_id.as_str(), pending.asked_by.as_str()),
        ("c-echo", "the grants of its plugin")
    );
    core.submit(approve(
        "g",
        "c-echo",
        ApprovalDecision::Deny,
        ApprovalScope::Once,
    ))
    .await
    .unwrap();
    ended_turn(&core, &turn_id).await;
    let ended = outputs(&drain(&mut events));
    assert_eq!(
        ended["c-add"],
        (false, "error (denied): the approval policy of tool 'add' denies it (the grants of its plugin)".to_string())
    );
    assert_eq!(
        ended["c-echo"],
        (
            false,
            "error (denied): tool 'echo' was not approved: it was denied".to_string()
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subturn_run_as_another_agent_is_bound_by_its_parents_approval_rules() {
    // The parent (agent `restricted`, which denies `echo`) starts a child as
    // `helper` (which allows everything); the child calls `echo`.
    let respond = |body: &Value| {
        let texts = roles_and_texts(body);
        let is_child = texts.iter().any(|(_, t)| t == "echo it");
        if after_tool_result(body) || body["tool_choice"] == "none" {
            let last = texts.last().unwrap().1.clone();
            Reply::text(if is_child { last } else { "done".to_string() })
        } else if is_child {
            Reply::tool("c-child", "echo", json!({"text": "from the child"}))
        } else {
            Reply::tool(
                "c-parent",
                "subagent",
                json!({"task": "echo it", "agent": "helper"}),
            )
        }
    };
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    let fake = FakeModel::start_with(options, []).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let agents = vec![
        profile(
            "restricted",
            &fake,
            "m",
            rules(&[("echo", Permission::Deny)], LIMIT),
        ),
        profile("helper", &fake, "m", rules(&[], LIMIT)),
    ];
    let (core, mut events) = core_of_agents(
        dir.load().await,
        profiles(&fake, agents, "restricted"),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let (_, outcome) = core.run(message("s")).await.unwrap();
    assert_eq!(outcome.unwrap().answer.as_deref(), Some("done"));
    let ended = outputs(&drain(&mut events));
    let denied =
        "error (denied): the approval policy denies tool 'echo' (agent 'restricted', rule `echo`)";
    assert_eq!(ended["c-child"], (false, denied.to_string()));
    // The child's answer (the denial it read) is the parent's tool result.
    assert_eq!(ended["c-parent"], (true, denied.to_string()));
}
