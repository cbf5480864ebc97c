//! SubTurns have a total bound: per plugin call, per turn tree, and the
//! tokens of a turn's children count against its budget. The hostile
//! fixture's `spawn_loop` starts sub-agents one after another through
//! `agent.spawn-subturn` for as long as the host lets it; its clock stops
//! while it waits for each, so only these bounds stop it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::AgentConfig;
use wasmclaw::agent::subturn::SubTurnLimits;
use wasmclaw::bus::Subscription;
use wasmclaw::core::Core;
use wasmclaw::protocol::{Event, EventBody, Op, SubturnEnd, TurnEnd, TurnStatus};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent_with, drain, openai};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder, ToolCallReply};

const LIMIT: Duration = Duration::from_secs(60);

fn first_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

/// The model: the turn "go" follows `script` (one reply per tool result
/// it has seen, then the results joined); every child answers `done`.
async fn model(script: Vec<Reply>) -> FakeModel {
    let responder = Responder::new(move |body| {
        let task = first_user(body);
        let results = tool_results(body);
        if task.starts_with("child ") {
            return Reply::text(format!("done {task}"));
        }
        script
            .get(results.len())
            .cloned()
            .unwrap_or_else(|| Reply::text(results.join("\n")))
    });
    let options = Options {
        responder: Some(responder),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

struct Setup {
    scheduler: Core,
    events: Subscription,
    _dir: PluginDir,
}

/// hostile, allowed to start sub-agents, under `limits`.
async fn setup(fake: &FakeModel, limits: SubTurnLimits) -> Setup {
    let dir = PluginDir::new();
    dir.add("hostile");
    dir.grants(
        "hostile",
        "spawn_subturn = true\n[limits]\ntimeout_ms = 60000\n",
    );
    let config = AgentConfig {
        subturns: limits,
        ..AgentConfig::default()
    };
    let (agent, events) = agent_with(
        dir.load().await,
        vec![openai(fake, "m", true)],
        Store::open_in_memory().unwrap(),
        config,
    );
    let scheduler = Core::new(agent, SchedulerConfig::default());
    Setup {
        scheduler,
        events,
        _dir: dir,
    }
}

/// Runs the turn "go" to its end; its events.
async fn run(setup: &mut Setup) -> Vec<Arc<Event>> {
    setup
        .scheduler
        .submit(Op::UserMessage {
            session: "s".into(),
            content: "go".into(),
            agent: None,
        })
        .await
        .unwrap();
    tokio::time::timeout(LIMIT, setup.scheduler.until_all_idle())
        .await
        .expect("the session went idle in time");
    drain(&mut setup.events)
}

fn spawn_count(events: &[Arc<Event>]) -> usize {
    events
        .iter()
        .filter(|e| e.body.kind().as_str() == "subturn_spawn")
        .count()
}

/// The answer of the top-level turn.
fn answer(events: &[Arc<Event>]) -> String {
    events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::TurnEnd(TurnEnd {
                status: TurnStatus::Completed,
                answer: Some(a),
                ..
            }) if e.parent_turn_id.is_none() => Some(a.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no completed top-level turn: {events:?}"))
}

fn spawn_loop(count: u64) -> Reply {
    Reply::tool("p1", "spawn_loop", json!({ "count": count }))
}

#[tokio::test(flavor = "multi_thread")]
async fn one_plugin_call_starts_no_more_sub_agents_than_its_per_call_limit() {
    let fake = model(vec![spawn_loop(1000)]).await;
    let mut setup = setup(&fake, SubTurnLimits::default()).await;
    let events = run(&mut setup).await;
    assert_eq!(
        answer(&events),
        "8 answered; then: plugin 'hostile' has started 8 sub-agents in this call, its limit (subturns.per_call); it may start no more"
    );
    assert_eq!(spawn_count(&events), 8);
    // The turn's two model calls and one per child: nothing more was asked.
    assert_eq!(fake.requests().len(), 2 + 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_tree_starts_no_more_sub_agents_than_its_per_tree_limit_by_any_way() {
    // The plugin call uses up the tree's count; the built-in tool then finds
    // none left.
    let fake = model(vec![
        spawn_loop(1000),
        Reply::tool("b1", "subagent", json!({"task": "child late"})),
    ])
    .await;
    let limits = SubTurnLimits {
        per_call: 100,
        per_tree: 5,
        ..SubTurnLimits::default()
    };
    let mut setup = setup(&fake, limits).await;
    let events = run(&mut setup).await;
    let over = "this turn's tree has started 5 sub-agents, its limit (subturns.per_tree); finish the task without more";
    assert_eq!(
        answer(&events),
        format!("5 answered; then: {over}\nerror (denied): {over}")
    );
    assert_eq!(spawn_count(&events), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tokens_of_a_turns_sub_agents_count_against_its_budget() {
    // Every reply uses 15 tokens. The child "b" (budget 30) spends 15 on its
    // own first call, so its first grandchild gets the 15 left; after it,
    // nothing is left for a second, and b's next call puts it over.
    let responder = Responder::new(|body| {
        let task = first_user(body);
        let results = tool_results(body);
        match (task.as_str(), results.len()) {
            ("go", 0) => Reply::tool(
                "b1",
                "subagent",
                json!({"task": "b", "label": "b", "token_budget": 30}),
            ),
            ("go", _) => Reply::text(results.join("\n")),
            ("b", 0) => spawn_loop(1000),
            ("b", _) => Reply::text("b is done"),
            (child, _) => Reply::text(format!("done {child}")),
        }
    });
    let fake = FakeModel::start_with(
        Options {
            responder: Some(responder),
            ..Options::default()
        },
        [],
    )
    .await;
    let mut setup = setup(&fake, SubTurnLimits::default()).await;
    let events = run(&mut setup).await;
    // What b's plugin call reported, as b's model read it.
    let b_results: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| first_user(&r.body) == "b")
        .flat_map(|r| tool_results(&r.body))
        .collect();
    assert_eq!(
        b_results,
        [
            "1 answered; then: this turn has used 30 tokens of its budget of 30 (its sub-agents' included); none are left for a sub-agent"
        ]
    );
    let b_end = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::SubturnEnd(SubturnEnd { status, reason, .. })
                if e.parent_turn_id.is_none() =>
            {
                Some((*status, reason.clone()))
            }
            _ => None,
        })
        .expect("b ended");
    assert_eq!(
        b_end,
        (
            TurnStatus::BudgetExceeded,
            "used 45 tokens (15 of them by its sub-agents), over its budget of 30".to_string()
        )
    );
    // b and its one grandchild.
    assert_eq!(spawn_count(&events), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_agents_started_together_share_what_their_parent_has_left() {
    // Every reply uses 15 tokens. The child "b" (budget 45) spends 15 on its
    // first call, then starts five children at once, each asking for 12: the
    // 30 left go 12, 12 and 6 while they all still run, and the last two are
    // refused.
    let responder = Responder::new(|body| {
        let task = first_user(body);
        let results = tool_results(body);
        match (task.as_str(), results.len()) {
            ("go", 0) => Reply::tool(
                "b1",
                "subagent",
                json!({"task": "b", "label": "b", "token_budget": 45}),
            ),
            ("go", _) => Reply::text(results.join("\n")),
            ("b", 0) => Reply::ToolCalls {
                text: String::new(),
                calls: (1..=5)
                    .map(|n| ToolCallReply {
                        id: format!("s{n}"),
                        name: "spawn".into(),
                        arguments: json!({"task": format!("child {n}"), "token_budget": 12}),
                    })
                    .collect(),
            },
            // After its children have ended.
            ("b", _) => Reply::Delay(
                Duration::from_millis(1500),
                Box::new(Reply::text("b is done")),
            ),
            // Still running when the last spawn is asked for.
            (child, _) => Reply::Delay(
                Duration::from_millis(200),
                Box::new(Reply::text(format!("done {child}"))),
            ),
        }
    });
    let fake = FakeModel::start_with(
        Options {
            responder: Some(responder),
            ..Options::default()
        },
        [],
    )
    .await;
    let mut setup = setup(&fake, SubTurnLimits::default()).await;
    let events = run(&mut setup).await;
    let refused: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| first_user(&r.body) == "b")
        .flat_map(|r| tool_results(&r.body))
        .filter(|r| r.starts_with("error"))
        .collect();
    let none_left = "error (denied): this turn has used 15 tokens of its budget of 45 (its sub-agents' included) and set aside 30 for its sub-agents still running; none are left for a sub-agent";
    assert_eq!(refused, [none_left, none_left]);
    // Each child's budget, as its end tells it (each reply puts it over).
    let mut children: Vec<(TurnStatus, String)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubturnEnd(SubturnEnd { status, reason, .. })
                if e.parent_turn_id.is_some() =>
            {
                Some((*status, reason.clone()))
            }
            _ => None,
        })
        .collect();
    children.sort_by(|a, b| a.1.cmp(&b.1));
    let over = |budget: u64| {
        (
            TurnStatus::BudgetExceeded,
            format!("used 15 tokens, over its budget of {budget}"),
        )
    };
    assert_eq!(children, [over(12), over(12), over(6)]);
    // b and the three children that started.
    assert_eq!(spawn_count(&events), 4);
}
