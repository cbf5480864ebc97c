//! SubTurns: limits, delivery exactly once, orphans, cascading cancellation,
//! a child's model, tools and budget; against the fake model's HTTP server,
//! which answers each request from what the conversation says.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmclaw::agent::subturn::SubTurnLimits;
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::Subscription;
use wasmclaw::core::Core;
use wasmclaw::protocol::{
    Accepted, Delivery, Event, EventBody, InterruptMode, Op, SpawnMode, SubturnDelivered,
    SubturnOrphan, SubturnSpawn, Target, ToolCallBegin, ToolCallEnd, ToolCallSkipped, TurnBegin,
    TurnEnd, TurnStatus,
};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent_with, drain, openai, until};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder, ToolCallReply};

const LIMIT: Duration = Duration::from_secs(30);

/// What the fake model is answering.
struct Conversation<'a> {
    body: &'a Value,
}

impl Conversation<'_> {
    fn messages(&self) -> &Vec<Value> {
        self.body["messages"].as_array().unwrap()
    }

    /// The first user message: the turn's input (a child's task).
    fn first_user(&self) -> &str {
        self.user_texts().next().unwrap_or_default()
    }

    fn user_texts(&self) -> impl Iterator<Item = &str> {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
    }

    /// The contents of the tool results, in order.
    fn tool_results(&self) -> Vec<&str> {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str())
            .collect()
    }

    fn last_role(&self) -> &str {
        self.messages().last().unwrap()["role"].as_str().unwrap()
    }

    fn model(&self) -> &str {
        self.body["model"].as_str().unwrap()
    }

    fn tools(&self) -> Vec<&str> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect()
    }
}

async fn fake_model(respond: impl Fn(&Conversation) -> Reply + Send + Sync + 'static) -> FakeModel {
    let options = Options {
        responder: Some(Responder::new(move |body| respond(&Conversation { body }))),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCallReply {
    ToolCallReply {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

fn calls(calls: Vec<ToolCallReply>) -> Reply {
    Reply::ToolCalls {
        text: String::new(),
        calls,
    }
}

fn delayed(ms: u64, reply: Reply) -> Reply {
    Reply::Delay(Duration::from_millis(ms), Box::new(reply))
}

struct Setup {
    agent: Arc<Agent>,
    scheduler: Core,
    events: Subscription,
    _dir: PluginDir,
}

/// echo and hostile (which may run for a minute per call).
async fn setup(fake: &FakeModel, limits: SubTurnLimits) -> Setup {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("hostile");
    dir.grants("hostile", "[limits]\ntimeout_ms = 60000\n");
    setup_in(dir, fake, limits).await
}

/// An agent over the plugins of `dir`, and its scheduler.
async fn setup_in(dir: PluginDir, fake: &FakeModel, limits: SubTurnLimits) -> Setup {
    let config = AgentConfig {
        subturns: limits,
        ..AgentConfig::default()
    };
    let (agent, events) = agent_with(
        dir.load().await,
        vec![openai(fake, "big", true)],
        Store::open_in_memory().unwrap(),
        config,
    );
    let scheduler = Core::new(agent.clone(), SchedulerConfig::default());
    Setup {
        agent,
        scheduler,
        events,
        _dir: dir,
    }
}

fn message(session: &str, content: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: None,
    }
}

async fn idle(scheduler: &Core) {
    tokio::time::timeout(LIMIT, scheduler.until_all_idle())
        .await
        .expect("every session went idle in time");
}

/// The turn_end of each turn id.
fn ends(events: &[Arc<Event>]) -> HashMap<String, (TurnStatus, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TurnEnd(TurnEnd { status, reason, .. }) => {
                Some((e.turn_id.clone().unwrap(), (*status, reason.clone())))
            }
            _ => None,
        })
        .collect()
}

fn spawned(events: &[Arc<Event>]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnSpawn(SubturnSpawn {
                subturn_id, label, ..
            }) => Some((subturn_id.clone(), label.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subagent_runs_with_the_model_and_tools_it_was_given_and_answers_as_the_tool_result() {
    let fake = fake_model(|c| match (c.first_user(), c.last_role()) {
        ("delegate the sum", "user") => calls(vec![call(
            "p1",
            "subagent",
            json!({"task": "add 2 and 3", "label": "adder", "model": "small", "tools": ["add"]}),
        )]),
        ("delegate the sum", _) => Reply::text(format!("The adder says {}.", c.tool_results()[0])),
        ("add 2 and 3", "user") => calls(vec![call("c1", "add", json!({"a": 2, "b": 3}))]),
        ("add 2 and 3", _) => Reply::text("5"),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        agent,
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    let Accepted::Started { turn_id } = scheduler
        .submit(message("s", "delegate the sum"))
        .await
        .unwrap()
    else {
        panic!()
    };
    idle(&scheduler).await;
    let events = drain(&mut events);

    // The child asked with the model and only the tool it was given.
    let requests: Vec<Value> = fake.requests().into_iter().map(|r| r.body).collect();
    let child_requests: Vec<&Value> = requests
        .iter()
        .filter(|b| Conversation { body: b }.first_user() == "add 2 and 3")
        .collect();
    assert_eq!(child_requests.len(), 2);
    for body in &child_requests {
        let c = Conversation { body };
        assert_eq!((c.model(), c.tools()), ("small", vec!["add"]));
    }
    let parent = Conversation { body: &requests[0] };
    assert_eq!(parent.model(), "big");

    let (child_id, label) = spawned(&events).pop().unwrap();
    assert_eq!(label, "adder");
    let spawn = events
        .iter()
        .find(|e| e.body.kind().as_str() == "subturn_spawn")
        .unwrap();
    assert_eq!(spawn.turn_id.as_deref(), Some(turn_id.as_str()));
    assert!(
        matches!(&spawn.body, EventBody::SubturnSpawn(SubturnSpawn { depth: 1, mode: SpawnMode::Subagent, model: Some(m), tools: Some(t), critical: false, .. }) if m == "small" && t == &["add"])
    );
    let child_begin = events
        .iter()
        .find(|e| {
            e.body.kind().as_str() == "turn_begin"
                && e.turn_id.as_deref() == Some(child_id.as_str())
        })
        .unwrap();
    assert_eq!(
        child_begin.parent_turn_id.as_deref(),
        Some(turn_id.as_str())
    );
    let delivered: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnDelivered(SubturnDelivered { subturn_id, via }) => {
                Some((subturn_id.clone(), *via))
            }
            _ => None,
        })
        .collect();
    assert_eq!(delivered, [(child_id.clone(), Delivery::ToolResult)]);
    let ends = ends(&events);
    assert_eq!(
        ends[&turn_id],
        (TurnStatus::Completed, "final_answer".into())
    );
    assert_eq!(
        ends[&child_id],
        (TurnStatus::Completed, "final_answer".into())
    );
    let last = events
        .iter()
        .rev()
        .find(|e| e.body.kind().as_str() == "turn_end")
        .unwrap();
    assert!(
        matches!(&last.body, EventBody::TurnEnd(TurnEnd { answer: Some(a), .. }) if a == "The adder says 5.")
    );

    // The session's history holds the parent's turn only.
    let history = agent.store().history("s").await.unwrap();
    assert_eq!(history.len(), 4);
    let turns = agent.store().turns("s").await.unwrap();
    assert_eq!(turns.len(), 2);
    assert!(
        turns
            .iter()
            .any(|t| t.parent_turn_id.as_deref() == Some(turn_id.as_str()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn spawned_results_are_taken_in_before_the_next_call_exactly_once() {
    let fake = fake_model(|c| match c.first_user() {
        "fan out" if c.last_role() == "user" && c.tool_results().is_empty() => calls(vec![
            call("p1", "spawn", json!({"task": "find A", "label": "a"})),
            call("p2", "spawn", json!({"task": "find B", "label": "b"})),
        ]),
        // While the children work, one more (slow) step.
        "fan out" if c.tool_results().len() == 2 => delayed(
            400,
            calls(vec![call("p3", "echo", json!({"text": "waiting"}))]),
        ),
        "fan out" => Reply::text(format!(
            "merged: {}",
            c.user_texts().skip(1).collect::<Vec<_>>().join(" | ")
        )),
        "find A" => Reply::text("A is 1"),
        "find B" => delayed(100, Reply::text("B is 2")),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    scheduler.submit(message("s", "fan out")).await.unwrap();
    idle(&scheduler).await;
    let events = drain(&mut events);
    let children = spawned(&events);
    let mut labels: Vec<&str> = children.iter().map(|c| c.1.as_str()).collect();
    labels.sort();
    assert_eq!(labels, ["a", "b"]);
    let delivered: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnDelivered(SubturnDelivered { subturn_id, via }) => {
                Some((subturn_id.clone(), *via))
            }
            _ => None,
        })
        .collect();
    let mut expected: Vec<_> = children
        .iter()
        .map(|c| (c.0.clone(), Delivery::Injected))
        .collect();
    let mut got = delivered.clone();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, expected, "each result delivered once");
    assert!(
        !events
            .iter()
            .any(|e| e.body.kind().as_str() == "subturn_orphan")
    );
    let last = events
        .iter()
        .rev()
        .find(|e| e.body.kind().as_str() == "turn_end")
        .unwrap();
    let EventBody::TurnEnd(TurnEnd {
        answer: Some(answer),
        ..
    }) = &last.body
    else {
        panic!()
    };
    let id = |label: &str| children.iter().find(|c| c.1 == label).unwrap().0.clone();
    let (a, b) = (id("a"), id("b"));
    let mut parts: Vec<&str> = answer.trim_start_matches("merged: ").split(" | ").collect();
    parts.sort();
    assert_eq!(
        parts,
        [
            format!("[Result of sub-agent 'a' ({a})]\nA is 1"),
            format!("[Result of sub-agent 'b' ({b})]\nB is 2"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawned_child_that_outlives_its_parent_becomes_a_follow_up_turn() {
    let fake = fake_model(|c| match c.first_user() {
        "start it" if c.tool_results().is_empty() => calls(vec![call(
            "p1",
            "spawn",
            json!({"task": "slow job", "label": "job"}),
        )]),
        "start it" => Reply::text("Started; I will tell you."),
        "slow job" => delayed(300, Reply::text("job done")),
        result if result.starts_with("[Result of sub-agent 'job'") => {
            Reply::text("The job is done.")
        }
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    let Accepted::Started { turn_id } = scheduler.submit(message("s", "start it")).await.unwrap()
    else {
        panic!()
    };
    let mut seen = until(
        &mut events,
        LIMIT,
        |e| matches!(&e.body, EventBody::TurnBegin(TurnBegin { input, .. }) if input.starts_with("[Result")),
    )
    .await;
    idle(&scheduler).await;
    seen.extend(drain(&mut events));
    let (child, _) = spawned(&seen).pop().unwrap();
    let orphan = seen
        .iter()
        .find(|e| e.body.kind().as_str() == "subturn_orphan")
        .unwrap();
    assert_eq!(orphan.turn_id.as_deref(), Some(turn_id.as_str()));
    assert!(
        matches!(&orphan.body, EventBody::SubturnOrphan(SubturnOrphan { subturn_id }) if *subturn_id == child)
    );
    let inputs: Vec<&str> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TurnBegin(TurnBegin { input, .. }) if e.parent_turn_id.is_none() => {
                Some(input.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs,
        [
            "start it".to_string(),
            format!("[Result of sub-agent 'job' ({child})]\njob done")
        ]
    );
    assert!(
        !seen
            .iter()
            .any(|e| e.body.kind().as_str() == "subturn_delivered")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn spawns_over_a_limit_fail_with_an_error_the_model_reads() {
    // Depth: children may not nest deeper than 1.
    let fake = fake_model(|c| match c.first_user() {
        "nest" if c.tool_results().is_empty() => {
            calls(vec![call("p1", "subagent", json!({"task": "nest again"}))])
        }
        "nest" => Reply::text(c.tool_results()[0].to_string()),
        "nest again" if c.tool_results().is_empty() => {
            calls(vec![call("c1", "subagent", json!({"task": "too deep"}))])
        }
        "nest again" => Reply::text(c.tool_results()[0].to_string()),
        // Per parent: one at a time, a short wait; in total: two.
        "two at once" if c.tool_results().is_empty() => calls(vec![
            call("p1", "spawn", json!({"task": "slow"})),
            call("p2", "spawn", json!({"task": "slow"})),
        ]),
        // The call that lost the race for the one place.
        "two at once" => Reply::text(
            c.tool_results()
                .into_iter()
                .find(|r| r.starts_with("error"))
                .unwrap_or("no error")
                .to_string(),
        ),
        "three sessions" if c.tool_results().is_empty() => {
            calls(vec![call("p1", "subagent", json!({"task": "slow"}))])
        }
        "three sessions" => Reply::text(c.tool_results()[0].to_string()),
        "slow" => delayed(400, Reply::text("slow done")),
        result if result.starts_with("[Result") => Reply::text("noted"),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let limits = SubTurnLimits {
        max_depth: 1,
        per_parent: 1,
        total: 2,
        slot_wait: Duration::from_millis(100),
        ..SubTurnLimits::default()
    };
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, limits).await;
    let answer_of = |events: &[Arc<Event>], session: &str| -> String {
        events
            .iter()
            .filter(|e| e.session.as_deref() == Some(session) && e.parent_turn_id.is_none())
            .find_map(|e| match &e.body {
                EventBody::TurnEnd(TurnEnd { answer, .. }) => answer.clone(),
                _ => None,
            })
            .unwrap()
    };

    scheduler.submit(message("depth", "nest")).await.unwrap();
    scheduler
        .submit(message("per-parent", "two at once"))
        .await
        .unwrap();
    // The first "slow" child outlives its parent: wait for its result.
    let mut seen = until(
        &mut events,
        LIMIT,
        |e| matches!(&e.body, EventBody::TurnBegin(TurnBegin { input, .. }) if input.starts_with("[Result")),
    )
    .await;
    idle(&scheduler).await;
    seen.extend(drain(&mut events));
    assert_eq!(
        answer_of(&seen, "depth"),
        "error (denied): sub-agents nest at most 1 deep, and this turn is at depth 1; do the task yourself"
    );
    assert_eq!(
        answer_of(&seen, "per-parent"),
        "error (denied): this turn already runs 1 sub-agents, its limit, and none finished within 100ms"
    );

    for s in ["t1", "t2", "t3"] {
        scheduler
            .submit(message(s, "three sessions"))
            .await
            .unwrap();
    }
    idle(&scheduler).await;
    let seen = drain(&mut events);
    let answers: Vec<String> = ["t1", "t2", "t3"]
        .iter()
        .map(|s| answer_of(&seen, s))
        .collect();
    let refused = "error (denied): the host already runs 2 sub-agents, its limit; try again when one has finished";
    assert_eq!(
        answers.iter().filter(|a| *a == "slow done").count(),
        2,
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|a| *a == refused).count(),
        1,
        "{answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parents_each_spawning_five_children_lose_no_result() {
    let fake = fake_model(|c| {
        let first = c.first_user();
        if let Some(n) = first.strip_prefix("child ") {
            // Some finish while their parent still runs, some after it ended.
            let ms = n.bytes().map(u64::from).sum::<u64>() % 5 * 40;
            return delayed(ms, Reply::text(format!("answer of {n}")));
        }
        if first.starts_with("[Result") {
            return Reply::text("noted");
        }
        match c.tool_results().len() {
            0 => calls(
                (0..5)
                    .map(|k| {
                        call(
                            &format!("p{k}"),
                            "spawn",
                            json!({"task": format!("child {first}.{k}")}),
                        )
                    })
                    .collect(),
            ),
            _ if c.last_role() == "tool" => delayed(80, Reply::text("done")),
            _ => Reply::text("done again"),
        }
    })
    .await;
    let limits = SubTurnLimits {
        total: 256,
        ..SubTurnLimits::default()
    };
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, limits).await;
    for p in 0..50 {
        scheduler
            .submit(message(&format!("s{p}"), &format!("{p}")))
            .await
            .unwrap();
    }
    // Orphans start follow-up turns after their parents went idle: wait
    // until every child has been accounted for.
    let count = |seen: &[Arc<Event>], kind: &str| {
        seen.iter()
            .filter(|e| e.body.kind().as_str() == kind)
            .count()
    };
    let mut seen = Vec::new();
    let deadline = Instant::now() + LIMIT;
    loop {
        idle(&scheduler).await;
        seen.extend(drain(&mut events));
        let ended = count(&seen, "subturn_end");
        let settled = ended == 250
            && count(&seen, "turn_begin") == count(&seen, "turn_end")
            && count(&seen, "turn_begin") == 300 + count(&seen, "subturn_orphan");
        if settled {
            break;
        }
        assert!(Instant::now() < deadline, "only {ended} children ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let children = spawned(&seen);
    assert_eq!(children.len(), 250);
    let mut deliveries: HashMap<String, Vec<&str>> = HashMap::new();
    for e in &seen {
        match &e.body {
            EventBody::SubturnDelivered(SubturnDelivered { subturn_id, .. }) => deliveries
                .entry(subturn_id.clone())
                .or_default()
                .push("injected"),
            EventBody::SubturnOrphan(SubturnOrphan { subturn_id }) => deliveries
                .entry(subturn_id.clone())
                .or_default()
                .push("orphan"),
            _ => {}
        }
    }
    for (id, _) in &children {
        assert_eq!(
            deliveries.get(id).map(Vec::len),
            Some(1),
            "child {id}: {:?}",
            deliveries.get(id)
        );
    }
    let orphans = deliveries.values().filter(|d| d[0] == "orphan").count();
    let follow_ups = seen
        .iter()
        .filter(
            |e| matches!(&e.body, EventBody::TurnBegin(TurnBegin { input, .. }) if input.starts_with("[Result")),
        )
        .count();
    assert_eq!(follow_ups, orphans, "every orphan ran as a turn");
    assert!(seen.iter().all(|e| !matches!(&e.body, EventBody::TurnEnd(TurnEnd { status, .. }) if *status != TurnStatus::Completed)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_interrupt_of_the_root_cancels_its_grandchildren_at_once() {
    let fake = fake_model(|c| match (c.first_user(), c.tool_results().is_empty()) {
        ("root", true) => calls(vec![call("r1", "subagent", json!({"task": "child"}))]),
        ("child", true) => calls(vec![call("c1", "subagent", json!({"task": "grandchild"}))]),
        ("grandchild", true) => calls(vec![call("g1", "spin", json!({}))]),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        agent,
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    let Accepted::Started { .. } = scheduler.submit(message("s", "root")).await.unwrap() else {
        panic!()
    };
    let mut seen = until(
        &mut events,
        LIMIT,
        |e| matches!(&e.body, EventBody::ToolCallBegin(ToolCallBegin { tool, .. }) if tool == "spin"),
    )
    .await;
    let asked = Instant::now();
    let op = Op::Interrupt {
        target: Target::Session("s".into()),
        mode: InterruptMode::Hard,
    };
    assert!(matches!(
        scheduler.submit(op).await,
        Ok(Accepted::Interrupted { .. })
    ));
    // The root, its child and its grandchild (in a plugin that loops
    // forever) all end.
    let mut ended = 0;
    seen.extend(
        until(&mut events, LIMIT, |e| {
            ended += usize::from(e.body.kind().as_str() == "turn_end");
            ended == 3
        })
        .await,
    );
    let took = asked.elapsed();
    assert!(took < Duration::from_millis(200), "took {took:?}");
    idle(&scheduler).await;
    seen.extend(drain(&mut events));
    let ends = ends(&seen);
    assert_eq!(ends.len(), 3);
    assert!(
        ends.values()
            .all(|e| e == &(TurnStatus::Aborted, "interrupted".to_string())),
        "{ends:?}"
    );
    // Nothing of the tree is delivered anywhere, nor kept.
    assert!(!seen.iter().any(|e| matches!(
        e.body.kind().as_str(),
        "subturn_orphan" | "subturn_delivered"
    )));
    assert_eq!(agent.store().history("s").await.unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_end_winds_down_ordinary_children_and_lets_critical_ones_finish() {
    let sleep = |ms: u64| calls(vec![call("z", "sleep", json!({ "ms": ms }))]);
    let fake = fake_model(move |c| match (c.first_user(), c.tool_results().len()) {
        ("work", 0) => calls(vec![
            call(
                "p1",
                "spawn",
                json!({"task": "critical job", "label": "critical", "critical": true}),
            ),
            call(
                "p2",
                "spawn",
                json!({"task": "ordinary job", "label": "ordinary"}),
            ),
        ]),
        ("work", 2) => sleep(400),
        ("work", _) => Reply::text("Stopping."),
        ("critical job", 0) => sleep(1000),
        ("ordinary job", 0) => sleep(200),
        (job, _) if job.ends_with("job") => Reply::text(format!("{job} finished")),
        (result, _) if result.starts_with("[") => Reply::text("noted"),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    let Accepted::Started { turn_id } = scheduler.submit(message("s", "work")).await.unwrap()
    else {
        panic!()
    };
    // The parent and both children are in their sleep calls.
    let mut begun = 0;
    let mut seen = until(&mut events, LIMIT, |e| {
        begun += usize::from(
            matches!(&e.body, EventBody::ToolCallBegin(ToolCallBegin { tool, .. }) if tool == "sleep"),
        );
        begun == 3
    })
    .await;
    let op = Op::Interrupt {
        target: Target::Turn(turn_id.clone()),
        mode: InterruptMode::Graceful,
    };
    scheduler.submit(op).await.unwrap();
    // Until the critical child's result has started its follow-up turn.
    seen.extend(
        until(
            &mut events,
            LIMIT,
            |e| matches!(&e.body, EventBody::TurnBegin(TurnBegin { input, .. }) if input.starts_with("[Result")),
        )
        .await,
    );
    idle(&scheduler).await;
    seen.extend(drain(&mut events));
    let children: HashMap<String, String> = spawned(&seen)
        .into_iter()
        .map(|(id, label)| (label, id))
        .collect();
    let interrupted: Vec<&str> = seen
        .iter()
        .filter(|e| e.body.kind().as_str() == "interrupt_received")
        .map(|e| e.turn_id.as_deref().unwrap())
        .collect();
    assert_eq!(
        interrupted,
        [turn_id.as_str(), children["ordinary"].as_str()]
    );
    let ends = ends(&seen);
    assert_eq!(
        ends[&turn_id],
        (TurnStatus::Completed, "interrupted".into())
    );
    assert_eq!(
        ends[&children["ordinary"]],
        (TurnStatus::Completed, "interrupted".into())
    );
    assert_eq!(
        ends[&children["critical"]],
        (TurnStatus::Completed, "final_answer".into())
    );
    // The ordinary child wrapped up while its parent still ran; the critical
    // one finished after the parent ended, as a follow-up turn.
    let deliveries: Vec<(&str, &str)> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnDelivered(SubturnDelivered { subturn_id, .. }) => {
                Some((subturn_id.as_str(), "injected"))
            }
            EventBody::SubturnOrphan(SubturnOrphan { subturn_id }) => {
                Some((subturn_id.as_str(), "orphan"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        deliveries,
        [
            (children["ordinary"].as_str(), "injected"),
            (children["critical"].as_str(), "orphan")
        ]
    );
    let critical_result = format!(
        "[Result of sub-agent 'critical' ({})]\ncritical job finished",
        children["critical"]
    );
    assert!(
        seen.iter().any(
            |e| matches!(&e.body, EventBody::TurnBegin(TurnBegin { input, .. }) if *input == critical_result)
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_over_budget_or_failing_does_not_take_its_parent_down() {
    let fake = fake_model(|c| match (c.first_user(), c.tool_results().len()) {
        ("try them", 0) => calls(vec![
            call(
                "p1",
                "subagent",
                json!({"task": "chatty", "token_budget": 10}),
            ),
            call(
                "p2",
                "subagent",
                json!({"task": "broken", "model": "broken"}),
            ),
            call("p3", "subagent", json!({"task": "trap"})),
            call(
                "p4",
                "subagent",
                json!({"task": "nope", "tools": ["rm_rf"]}),
            ),
        ]),
        ("try them", _) => Reply::text(c.tool_results().join("\n")),
        ("chatty", _) => Reply::text("a long answer"),
        ("broken", _) => Reply::Status {
            code: 400,
            message: "no such model".into(),
            retry_after: None,
        },
        ("trap", 0) => calls(vec![call("t1", "trap", json!({}))]),
        ("trap", _) => Reply::text("the tool broke, sorry"),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    scheduler.submit(message("s", "try them")).await.unwrap();
    idle(&scheduler).await;
    let seen = drain(&mut events);
    let ids: HashMap<String, String> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnSpawn(SubturnSpawn {
                subturn_id, task, ..
            }) => Some((task.clone(), subturn_id.clone())),
            _ => None,
        })
        .collect();
    let last = seen
        .iter()
        .rev()
        .find(|e| e.body.kind().as_str() == "turn_end")
        .unwrap();
    let EventBody::TurnEnd(TurnEnd {
        status: TurnStatus::Completed,
        answer: Some(answer),
        ..
    }) = &last.body
    else {
        panic!("{last:?}")
    };
    let label = |task: &str| format!("sub-agent {}", &ids[task][ids[task].len() - 6..]);
    assert_eq!(
        answer.lines().collect::<Vec<_>>(),
        [
            format!(
                "error (upstream): sub-agent '{}' ({}) ended budget_exceeded: used 15 tokens, over its budget of 10",
                label("chatty"),
                ids["chatty"]
            ),
            format!(
                "error (upstream): sub-agent '{}' ({}) ended error: openai:broken: HTTP 400 Bad Request: no such model",
                label("broken"),
                ids["broken"]
            ),
            "the tool broke, sorry".to_string(),
            "error (invalid-input): tools: 'rm_rf' not among this turn's tools (add, alloc, context, count, echo, fail, header_objects, history_search, huge_output, log, log_flood, open_files, print_flood, read_env, read_path, sleep, spawn, spawn_loop, spin, subagent, trap, wait_gate, write_path)".to_string(),
        ]
    );
}

/// The research example plugin (and echo), with `grants`.
async fn research_setup(fake: &FakeModel, grants: &str) -> Setup {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add("research");
    dir.grants("research", grants);
    setup_in(dir, fake, SubTurnLimits::default()).await
}

fn research_model() -> impl Fn(&Conversation) -> Reply + Send + Sync + 'static {
    |c| match c.first_user() {
        "look into it" if c.tool_results().is_empty() => calls(vec![call(
            "p1",
            "research",
            json!({"question": "Is 2 + 2 equal to 4?", "tools": ["add"]}),
        )]),
        "look into it" => Reply::text(c.tool_results()[0].to_string()),
        // Each child takes longer than the plugin's own time limit.
        task if task.starts_with("Answer this question") => {
            delayed(400, Reply::text("Yes: add(2, 2) = 4."))
        }
        task if task.starts_with("Do not answer") => {
            delayed(400, Reply::text("It assumes base 10."))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_runs_sub_agents_through_the_host_and_their_time_is_not_its_own() {
    let fake = fake_model(research_model()).await;
    let grants = "spawn_subturn = true\n[limits]\ntimeout_ms = 300\n";
    let Setup {
        scheduler,
        mut events,
        ..
    } = research_setup(&fake, grants).await;
    scheduler
        .submit(message("s", "look into it"))
        .await
        .unwrap();
    idle(&scheduler).await;
    let seen = drain(&mut events);
    let last = seen
        .iter()
        .rev()
        .find(|e| e.body.kind().as_str() == "turn_end")
        .unwrap();
    assert!(
        matches!(&last.body, EventBody::TurnEnd(TurnEnd { answer: Some(a), .. }) if a == "Research on: Is 2 + 2 equal to 4?\n\n## analyst\nYes: add(2, 2) = 4.\n\n## reviewer\nIt assumes base 10.\n"),
        "{last:?}"
    );
    let spawns: Vec<(String, Option<Vec<String>>, SpawnMode)> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnSpawn(SubturnSpawn {
                label, tools, mode, ..
            }) => Some((label.clone(), tools.clone(), *mode)),
            _ => None,
        })
        .collect();
    assert_eq!(
        spawns,
        [
            (
                "analyst".to_string(),
                Some(vec!["add".to_string()]),
                SpawnMode::Subagent
            ),
            ("reviewer".to_string(), Some(vec![]), SpawnMode::Subagent),
        ]
    );
    // The reviewer was offered no tools at all.
    let reviewer = fake
        .requests()
        .into_iter()
        .find(|r| {
            Conversation { body: &r.body }
                .first_user()
                .starts_with("Do not answer")
        })
        .unwrap();
    assert_eq!(reviewer.body.get("tools"), None);
    let delivered = seen
        .iter()
        .filter(|e| e.body.kind().as_str() == "subturn_delivered")
        .count();
    assert_eq!(delivered, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_without_the_grant_cannot_start_sub_agents() {
    let fake = fake_model(research_model()).await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = research_setup(&fake, "[limits]\ntimeout_ms = 300\n").await;
    scheduler
        .submit(message("s", "look into it"))
        .await
        .unwrap();
    idle(&scheduler).await;
    let seen = drain(&mut events);
    let end = seen
        .iter()
        .find_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd { ok, output, .. }) => Some((*ok, output.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        end,
        (
            false,
            "error (upstream): no sub-agent answered: plugin 'research' may not start sub-agents: its grants do not say spawn_subturn = true".to_string()
        )
    );
    assert!(
        !seen
            .iter()
            .any(|e| e.body.kind().as_str() == "subturn_spawn")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_spawn_arguments_are_tool_errors_and_start_nothing() {
    let fake = fake_model(|c| match c.tool_results().len() {
        0 => calls(vec![
            call("h1", "subagent", json!({"task": "x", "timeout_s": 1e300})),
            call("h2", "spawn", json!({"task": "x", "timeout_s": -1})),
            call("h3", "subagent", json!({"task": "x", "bogus": 1})),
            call("h4", "subagent", json!({"task": 5})),
            call("h5", "spawn", json!({"task": "   "})),
            call("h6", "subagent", json!({"task": "x", "token_budget": 0})),
        ]),
        _ => Reply::text(c.tool_results().join("\n")),
    })
    .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;
    scheduler.submit(message("s", "go")).await.unwrap();
    idle(&scheduler).await;
    let seen = drain(&mut events);
    assert!(
        !seen
            .iter()
            .any(|e| e.body.kind().as_str() == "subturn_spawn")
    );
    let last = seen
        .iter()
        .rev()
        .find(|e| e.body.kind().as_str() == "turn_end")
        .unwrap();
    let EventBody::TurnEnd(TurnEnd {
        status: TurnStatus::Completed,
        answer: Some(answer),
        ..
    }) = &last.body
    else {
        panic!("{last:?}")
    };
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(
        lines[0],
        "error (invalid-input): timeout_s: expected a number of seconds above 0 and at most 86400"
    );
    assert_eq!(
        lines[1],
        "error (invalid-input): timeout_s: expected a number of seconds above 0 and at most 86400"
    );
    assert!(
        lines[2]
            .starts_with("error (invalid-input): arguments of 'subagent': unknown field `bogus`"),
        "{}",
        lines[2]
    );
    assert!(lines[3].starts_with("error (invalid-input): arguments of 'subagent': invalid type: integer `5`, expected a string"), "{}", lines[3]);
    assert_eq!(
        lines[4],
        "error (invalid-input): task: must say what the sub-agent should do"
    );
    assert_eq!(
        lines[5],
        "error (invalid-input): token_budget: expected at least 1"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_interrupt_leaves_no_late_result_and_an_interrupted_turn_starts_no_child() {
    let fake = fake_model(|c| match (c.first_user(), c.tool_results().len()) {
        ("background", 0) => calls(vec![call(
            "p1",
            "spawn",
            json!({"task": "slow job", "critical": true}),
        )]),
        // The parent keeps busy while its child works.
        ("background", 1) => calls(vec![call("p2", "sleep", json!({"ms": 300}))]),
        ("background", _) => Reply::text("done"),
        ("slow job", _) => delayed(150, Reply::text("slow job finished")),
        // Asked once more without tools after it asked for one anyway.
        ("wind down", _) if c.body.get("tools").is_none() => Reply::text("wound down"),
        ("wind down", 0) => calls(vec![call("w1", "sleep", json!({"ms": 300}))]),
        ("wind down", 1) => calls(vec![call("w2", "subagent", json!({"task": "late"}))]),
        ("wind down", _) => Reply::text(c.tool_results().last().unwrap().to_string()),
        other => panic!("unexpected {other:?}"),
    })
    .await;
    let Setup {
        agent,
        scheduler,
        mut events,
        ..
    } = setup(&fake, SubTurnLimits::default()).await;

    // The critical child's result would arrive after the hard interrupt.
    scheduler.submit(message("h", "background")).await.unwrap();
    until(
        &mut events,
        LIMIT,
        |e| matches!(&e.body, EventBody::ToolCallBegin(ToolCallBegin { tool, .. }) if tool == "sleep"),
    )
    .await;
    let op = Op::Interrupt {
        target: Target::Session("h".into()),
        mode: InterruptMode::Hard,
    };
    assert!(matches!(
        scheduler.submit(op).await,
        Ok(Accepted::Interrupted { .. })
    ));
    idle(&scheduler).await;
    let seen = drain(&mut events);
    assert!(
        !seen.iter().any(|e| matches!(
            e.body.kind().as_str(),
            "subturn_orphan" | "subturn_delivered"
        )),
        "{:?}",
        seen.iter()
            .map(|e| e.body.kind().as_str())
            .collect::<Vec<_>>()
    );
    let begins = seen
        .iter()
        .filter(|e| e.body.kind().as_str() == "turn_begin" && e.parent_turn_id.is_none())
        .count();
    assert_eq!(begins, 0, "no follow-up turn");
    assert_eq!(agent.store().history("h").await.unwrap(), vec![]);

    // A graceful interrupt while a tool runs: the next model call has no
    // tools, and a model that asks for a sub-agent anyway gets none.
    let Accepted::Started { turn_id } = scheduler.submit(message("w", "wind down")).await.unwrap()
    else {
        panic!()
    };
    until(&mut events, LIMIT, |e| {
        e.body.kind().as_str() == "tool_call_begin"
    })
    .await;
    let op = Op::Interrupt {
        target: Target::Turn(turn_id),
        mode: InterruptMode::Graceful,
    };
    scheduler.submit(op).await.unwrap();
    idle(&scheduler).await;
    let seen = drain(&mut events);
    assert!(
        !seen
            .iter()
            .any(|e| e.body.kind().as_str() == "subturn_spawn")
    );
    let skipped: Vec<&str> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallSkipped(ToolCallSkipped { tool, reason, .. }) => {
                Some((tool.as_str(), reason.as_str()))
            }
            _ => None,
        })
        .map(|(tool, reason)| {
            assert_eq!(reason, "the user interrupted the turn");
            tool
        })
        .collect();
    assert_eq!(skipped, ["subagent"]);
}
