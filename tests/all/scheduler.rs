//! The scheduler with real concurrency: many sessions at once, steering,
//! follow-ups and interrupts, against the fake model's HTTP server and real
//! plugins.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::core::Core;
use wasmclaw::llm::Message;
use wasmclaw::plugin::ErrorKind;
use wasmclaw::protocol::{
    Accepted, Event, EventBody, FollowUpQueued, InterruptMode, Op, Policy, Refused,
    SteeringInjected, Target, ToolCallEnd, ToolCallSkipped, TurnBegin, TurnEnd, TurnStatus,
};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent_with, drain, kinds, openai, until};
use wasmclaw_tests::fake_model::{FakeModel, Gate, Reply, fake_model, roles_and_texts};
use wasmclaw_tests::gate::{ToolGates, gate_args, gate_calls, gate_output};

const LIMIT: Duration = Duration::from_secs(30);

fn message(session: &str, content: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: None,
    }
}

fn interrupt(target: Target, mode: InterruptMode) -> Op {
    Op::Interrupt { target, mode }
}

fn session(key: &str) -> Target {
    Target::Session(key.into())
}

/// The echo and hostile fixtures; hostile may run for a minute per call,
/// and has the gates its `wait_gate` calls wait at.
async fn plugins(dir: &PluginDir, gates: &ToolGates) -> Arc<wasmclaw::plugin::Plugins> {
    dir.add("echo");
    dir.add("hostile");
    dir.grants(
        "hostile",
        &format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants()),
    );
    dir.load().await
}

struct Setup {
    agent: Arc<Agent>,
    scheduler: Core,
    events: wasmclaw::bus::Subscription,
    /// The gates hostile's `wait_gate` calls wait at.
    gates: ToolGates,
    _dir: PluginDir,
}

async fn setup(fake: &FakeModel, config: AgentConfig, limits: SchedulerConfig) -> Setup {
    let dir = PluginDir::new();
    let gates = ToolGates::new();
    let (agent, events) = agent_with(
        plugins(&dir, &gates).await,
        vec![openai(fake, "m", true)],
        Store::open_in_memory().unwrap(),
        config,
    );
    let scheduler = Core::new(agent.clone(), limits);
    Setup {
        agent,
        scheduler,
        events,
        gates,
        _dir: dir,
    }
}

async fn idle(scheduler: &Core) {
    tokio::time::timeout(LIMIT, scheduler.until_all_idle())
        .await
        .expect("every session went idle in time");
}

fn is(kind: &'static str) -> impl Fn(&Event) -> bool {
    move |e| e.body.kind().as_str() == kind
}

/// The request bodies the model received, in order.
fn bodies(fake: &FakeModel) -> Vec<Value> {
    fake.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_sessions_of_three_messages_each_keep_order_and_lose_nothing() {
    let fake =
        fake_model(|_, _| Reply::Delay(Duration::from_millis(20), Box::new(Reply::text("ok"))))
            .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, AgentConfig::default(), SchedulerConfig::default()).await;

    let mut senders = Vec::new();
    for s in 0..200u64 {
        let scheduler = scheduler.clone();
        senders.push(tokio::spawn(async move {
            let key = format!("s{s}");
            // A third of the sessions queue follow-ups; the others steer.
            if s % 3 == 0 {
                let set = Op::SetPolicy {
                    session: key.clone(),
                    policy: Policy::FollowUp,
                };
                assert_eq!(scheduler.submit(set).await, Ok(Accepted::PolicySet));
            }
            let mut acks = Vec::new();
            for m in 0..3 {
                acks.push(
                    scheduler
                        .submit(message(&key, &format!("{key} m{m}")))
                        .await
                        .unwrap(),
                );
                // Some messages land in a running turn, some after it.
                tokio::time::sleep(Duration::from_millis((s % 4) * 15)).await;
            }
            acks
        }));
    }
    let mut acks = Vec::new();
    for sender in senders {
        acks.extend(sender.await.unwrap());
    }
    idle(&scheduler).await;
    let events = drain(&mut events);

    // No gaps: the lossless subscriber saw every seq.
    for pair in events.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "a gap in seq");
    }

    // Every message produced exactly one turn or one steering injection, and
    // each session's messages were taken in the order they were sent.
    let mut taken: HashMap<String, Vec<String>> = HashMap::new();
    let (mut turns, mut injected) = (0, 0);
    for event in &events {
        let content = match &event.body {
            EventBody::TurnBegin(TurnBegin { input, .. }) => {
                turns += 1;
                input
            }
            EventBody::SteeringInjected(SteeringInjected { content, .. }) => {
                injected += 1;
                content
            }
            _ => continue,
        };
        taken
            .entry(event.session.clone().unwrap())
            .or_default()
            .push(content.clone());
    }
    assert_eq!(taken.len(), 200);
    for (key, contents) in &taken {
        let sent: Vec<String> = (0..3).map(|m| format!("{key} m{m}")).collect();
        assert_eq!(contents, &sent, "session {key}");
    }
    let started_or_queued = acks
        .iter()
        .filter(|a| matches!(a, Accepted::Started { .. } | Accepted::Queued { .. }))
        .count();
    assert_eq!(started_or_queued, turns);
    assert_eq!(acks.len() - started_or_queued, injected);
    assert!(
        injected > 0 && turns > 200,
        "{turns} turns, {injected} steered"
    );

    // A session's turns did not overlap; turns of different sessions did;
    // every turn ended, completed.
    let mut open: HashMap<String, String> = HashMap::new();
    let mut most_open = 0;
    for event in &events {
        let key = event.session.clone().unwrap_or_default();
        let turn = event.turn_id.clone().unwrap_or_default();
        match &event.body {
            EventBody::TurnBegin(_) => {
                assert!(!open.contains_key(&key), "two turns at once on {key}");
                open.insert(key, turn);
                most_open = most_open.max(open.len());
            }
            EventBody::TurnEnd(TurnEnd { status, reason, .. }) => {
                assert_eq!(open.remove(&key), Some(turn), "{key}");
                assert_eq!(
                    (*status, reason.as_str()),
                    (TurnStatus::Completed, "final_answer")
                );
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "turns that never ended: {open:?}");
    assert!(most_open > 1, "sessions never ran in parallel");
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_ups_run_as_turns_of_their_own_and_a_full_queue_refuses() {
    // The first turn's answer waits until the follow-ups are in.
    let first_answer = Gate::default();
    let gate = first_answer.clone();
    let fake = fake_model(move |text, _| {
        let answer = Reply::text(format!("answer to {text}"));
        if text == "first" {
            Reply::Gated(gate.clone(), Box::new(answer))
        } else {
            answer
        }
    })
    .await;
    let limits = SchedulerConfig {
        queue_capacity: 2,
        ..SchedulerConfig::default()
    };
    let Setup {
        agent,
        scheduler,
        mut events,
        ..
    } = setup(&fake, AgentConfig::default(), limits).await;
    let set = Op::SetPolicy {
        session: "f".into(),
        policy: Policy::FollowUp,
    };
    scheduler.submit(set).await.unwrap();

    let first = scheduler.submit(message("f", "first")).await.unwrap();
    assert!(matches!(first, Accepted::Started { .. }));
    let mut seen = until(&mut events, LIMIT, is("turn_begin")).await;
    let queued = async |content: &str, expected: usize| match scheduler
        .submit(message("f", content))
        .await
    {
        Ok(Accepted::Queued { turn_id, position }) if position == expected => turn_id,
        other => panic!("{content}: expected queued at {expected}, got {other:?}"),
    };
    let second = queued("second", 1).await;
    let third = queued("third", 2).await;
    // The queued turns' ids are known before they run, and shown live.
    let live = scheduler.live("f").unwrap();
    assert_eq!(
        live.queued,
        [
            (second.clone(), "second".to_string()),
            (third.clone(), "third".to_string())
        ]
    );
    assert_eq!(
        scheduler.submit(message("f", "fourth")).await,
        Err(Refused::QueueFull(
            "session 'f' already has 2 follow-up messages queued, its limit; send again when one has run"
                .into()
        ))
    );
    first_answer.open();
    idle(&scheduler).await;
    seen.extend(drain(&mut events));
    let shown: Vec<String> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::FollowUpQueued(FollowUpQueued { content, position }) => {
                let id = if content == "second" { &second } else { &third };
                assert_eq!(e.turn_id.as_ref(), Some(id));
                Some(format!("queued {content} at {position}"))
            }
            EventBody::TurnBegin(TurnBegin { input, .. }) => {
                // Each follow-up runs under the id its sender was given.
                match input.as_str() {
                    "second" => assert_eq!(e.turn_id.as_ref(), Some(&second)),
                    "third" => assert_eq!(e.turn_id.as_ref(), Some(&third)),
                    _ => {}
                }
                Some(format!("begin {input}"))
            }
            EventBody::TurnEnd(TurnEnd { answer, .. }) => {
                Some(format!("end {}", answer.clone().unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        [
            "begin first",
            "queued second at 1",
            "queued third at 2",
            "end answer to first",
            "begin second",
            "end answer to second",
            "begin third",
            "end answer to third",
        ]
    );
    assert_eq!(agent.store().history("f").await.unwrap().len(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn steering_during_tool_calls_skips_the_calls_not_started() {
    let fake = FakeModel::start([
        gate_calls(&[("c1", "c1"), ("c2", "c2"), ("c3", "c3")]),
        Reply::text("Changed course."),
    ])
    .await;
    let config = AgentConfig {
        tool_concurrency: 1,
        ..AgentConfig::default()
    };
    let Setup {
        agent,
        scheduler,
        mut events,
        gates,
        ..
    } = setup(&fake, config, SchedulerConfig::default()).await;

    let Accepted::Started { turn_id } = scheduler
        .submit(message("t", "sleep thrice"))
        .await
        .unwrap()
    else {
        panic!("no turn started");
    };
    // c1 runs until its gate opens, after the steering is in.
    until(&mut events, LIMIT, is("tool_call_begin")).await;
    let steer = Op::Steer {
        session: "t".into(),
        content: "stop sleeping".into(),
    };
    assert_eq!(
        scheduler.submit(steer).await,
        Ok(Accepted::Steered { turn_id })
    );
    // c2 and c3 would end at once if they ran (and the sequence below
    // would show it).
    for gate in ["c1", "c2", "c3"] {
        gates.open(gate);
    }
    idle(&scheduler).await;
    let rest = drain(&mut events);
    assert_eq!(
        kinds(&rest),
        [
            "tool_call_end",
            "tool_call_skipped",
            "tool_call_skipped",
            "steering_injected",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end"
        ]
    );
    let skip = "the user sent a new message; this call was not run";
    assert!(
        matches!(&rest[1].body, EventBody::ToolCallSkipped(ToolCallSkipped { call_id, reason, .. }) if call_id == "c2" && reason == skip)
    );
    assert!(
        matches!(&rest[3].body, EventBody::SteeringInjected(SteeringInjected { iteration: 2, content }) if content == "stop sleeping")
    );

    // The model saw every call answered (the skipped ones saying why), then
    // the new message.
    let second = roles_and_texts(&bodies(&fake)[1]);
    assert_eq!(
        second[2..],
        [
            ("tool".to_string(), gate_output("c1")),
            ("tool".to_string(), format!("skipped: {skip}")),
            ("tool".to_string(), format!("skipped: {skip}")),
            ("user".to_string(), "stop sleeping".to_string()),
        ]
    );
    let history = agent.store().history("t").await.unwrap();
    assert_eq!(history.len(), 7);
    assert_eq!(history[5], Message::user("stop sleeping"));
}

#[tokio::test(flavor = "multi_thread")]
async fn steering_during_the_reply_keeps_the_turn_going_after_its_answer() {
    // The first answer waits until the steering is in.
    let first_answer = Gate::default();
    let fake = FakeModel::start([
        Reply::Gated(first_answer.clone(), Box::new(Reply::text("First answer."))),
        Reply::text("Second answer."),
    ])
    .await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, AgentConfig::default(), SchedulerConfig::default()).await;

    scheduler.submit(message("r", "question")).await.unwrap();
    until(&mut events, LIMIT, is("llm_request")).await;
    assert!(matches!(
        scheduler.submit(message("r", "and also this")).await,
        Ok(Accepted::Steered { .. })
    ));
    first_answer.open();
    idle(&scheduler).await;
    let rest = drain(&mut events);
    assert_eq!(
        kinds(&rest),
        [
            "llm_delta",
            "llm_response",
            "steering_injected",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end"
        ]
    );
    assert!(matches!(
        &rest.last().unwrap().body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Completed, iterations: 2, answer: Some(a), .. }) if a == "Second answer."
    ));
    let second = roles_and_texts(&bodies(&fake)[1]);
    assert_eq!(
        second,
        [
            ("user".to_string(), "question".to_string()),
            ("assistant".to_string(), "First answer.".to_string()),
            ("user".to_string(), "and also this".to_string()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_interrupt_lets_running_tools_finish_then_asks_for_a_last_answer() {
    // c1 ends first, freeing the slot c3 would have taken; c2 ends last.
    let fake = FakeModel::start([
        gate_calls(&[("c1", "c1"), ("c2", "c2"), ("c3", "c3")]),
        Reply::text("Stopped early."),
        Reply::text("Next one."),
    ])
    .await;
    let config = AgentConfig {
        tool_concurrency: 2,
        ..AgentConfig::default()
    };
    let Setup {
        agent,
        scheduler,
        mut events,
        gates,
        ..
    } = setup(&fake, config, SchedulerConfig::default()).await;

    let Accepted::Started { turn_id } = scheduler
        .submit(message("g", "sleep thrice"))
        .await
        .unwrap()
    else {
        panic!("no turn started");
    };
    let mut begun = 0;
    until(&mut events, LIMIT, |e| {
        begun += usize::from(e.body.kind().as_str() == "tool_call_begin");
        begun == 2
    })
    .await;
    assert_eq!(
        scheduler
            .submit(interrupt(session("g"), InterruptMode::Graceful))
            .await,
        Ok(Accepted::Interrupted {
            turn_id: turn_id.clone(),
            discarded: vec![]
        })
    );
    // The turn is winding down: a new message waits for a turn of its own.
    assert!(matches!(
        scheduler.submit(message("g", "next")).await,
        Ok(Accepted::Queued { position: 1, .. })
    ));
    // c1 and c2 hold their slots until both ops are in; then c1 ends, and
    // what takes its slot (c3's skip) comes before c2 ends.
    let mut rest = until(&mut events, LIMIT, is("follow_up_queued")).await;
    gates.open("c1");
    rest.extend(
        until(&mut events, LIMIT, |e| {
            matches!(
                e.body.kind().as_str(),
                "tool_call_skipped" | "tool_call_begin"
            )
        })
        .await,
    );
    // c3 would end at once if it ran (and the sequence below would show it).
    gates.open("c3");
    gates.open("c2");
    rest.extend(until(&mut events, LIMIT, is("turn_end")).await);
    assert_eq!(
        kinds(&rest),
        [
            "interrupt_received",
            "follow_up_queued",
            "tool_call_end",
            "tool_call_skipped",
            "tool_call_end",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end"
        ]
    );
    assert!(
        matches!(&rest[2].body, EventBody::ToolCallEnd(ToolCallEnd { ok: true, call_id, .. }) if call_id == "c1")
    );
    assert!(
        matches!(&rest[3].body, EventBody::ToolCallSkipped(ToolCallSkipped { call_id, .. }) if call_id == "c3")
    );
    assert!(
        matches!(&rest[4].body, EventBody::ToolCallEnd(ToolCallEnd { ok: true, call_id, .. }) if call_id == "c2")
    );
    assert!(matches!(
        &rest.last().unwrap().body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Completed, reason, answer: Some(a), .. })
            if reason == "interrupted" && a == "Stopped early."
    ));
    // The last call offered no tool choice and said why.
    let last = &bodies(&fake)[1];
    assert_eq!(last["tool_choice"], "none");
    let texts = roles_and_texts(last);
    assert_eq!(
        texts.last().unwrap(),
        &(
            "system".to_string(),
            "The user interrupted this turn. Do not call tools; answer now, briefly, with what you have."
                .to_string()
        )
    );
    idle(&scheduler).await;
    let history = agent.store().history("g").await.unwrap();
    assert_eq!(
        history.len(),
        6 + 2,
        "the interrupted turn is kept whole, then the next"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_interrupt_stops_a_spinning_plugin_at_once_and_rolls_the_turn_back() {
    let fake = fake_model(|text, after_tool| match (text, after_tool) {
        ("spin", false) => Reply::tool("c1", "spin", json!({})),
        ("slow", false) => Reply::tool("c2", "wait_gate", gate_args("slow")),
        (_, true) => Reply::text("slow done"),
        _ => Reply::text("hello"),
    })
    .await;
    let Setup {
        agent,
        scheduler,
        mut events,
        gates,
        ..
    } = setup(&fake, AgentConfig::default(), SchedulerConfig::default()).await;

    scheduler.submit(message("a", "hi")).await.unwrap();
    idle(&scheduler).await;
    let before = agent.store().history("a").await.unwrap();
    assert_eq!(before.len(), 2);
    drain(&mut events);

    let Accepted::Started { turn_id } = scheduler.submit(message("a", "spin")).await.unwrap()
    else {
        panic!("no turn started");
    };
    scheduler.submit(message("b", "slow")).await.unwrap();
    // Both sessions are in their tool calls; b's waits at its gate until a
    // has been interrupted.
    let (mut a_begun, mut b_begun) = (false, false);
    until(&mut events, LIMIT, |e| {
        if e.body.kind().as_str() == "tool_call_begin" {
            a_begun |= e.session.as_deref() == Some("a");
            b_begun |= e.session.as_deref() == Some("b");
        }
        a_begun && b_begun
    })
    .await;
    gates.wait_started("slow", LIMIT).await;
    // Pending steering goes with the turn, and says so.
    assert!(matches!(
        scheduler.submit(message("a", "never mind")).await,
        Ok(Accepted::Steered { .. })
    ));
    let asked = Instant::now();
    assert_eq!(
        scheduler
            .submit(interrupt(
                Target::Turn(turn_id.clone()),
                InterruptMode::Hard
            ))
            .await,
        Ok(Accepted::Interrupted {
            turn_id: turn_id.clone(),
            discarded: vec!["never mind".into()]
        })
    );
    let seen = until(&mut events, LIMIT, |e| {
        e.body.kind().as_str() == "turn_end" && e.session.as_deref() == Some("a")
    })
    .await;
    let took = asked.elapsed();
    assert!(took < Duration::from_millis(200), "aborted after {took:?}");

    let a: Vec<_> = seen
        .iter()
        .filter(|e| e.session.as_deref() == Some("a"))
        .cloned()
        .collect();
    assert_eq!(
        kinds(&a),
        ["interrupt_received", "tool_call_end", "turn_end"]
    );
    assert!(matches!(
        &a[1].body,
        EventBody::ToolCallEnd(ToolCallEnd { ok: false, error_kind: Some(ErrorKind::Cancelled), output, .. })
            if output == "error (cancelled): the turn was aborted while the call ran"
    ));
    assert!(matches!(
        &a[2].body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Aborted, reason, .. }) if reason == "interrupted"
    ));
    assert_eq!(agent.store().history("a").await.unwrap(), before);

    // The other session was untouched, and this one works again.
    gates.open("slow");
    idle(&scheduler).await;
    let rest = drain(&mut events);
    let b: Vec<_> = seen
        .iter()
        .chain(&rest)
        .filter(|e| e.session.as_deref() == Some("b"))
        .cloned()
        .collect();
    assert!(matches!(
        &b.last().unwrap().body,
        EventBody::TurnEnd(TurnEnd { status: TurnStatus::Completed, answer: Some(a), .. }) if a == "slow done"
    ));
    assert!(!kinds(&b).contains(&"interrupt_received"));
    scheduler.submit(message("a", "hi again")).await.unwrap();
    idle(&scheduler).await;
    assert_eq!(agent.store().history("a").await.unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_without_an_active_turn_says_so() {
    let fake = fake_model(|_, _| Reply::text("done")).await;
    let Setup { scheduler, .. } =
        setup(&fake, AgentConfig::default(), SchedulerConfig::default()).await;
    let no_active = async |op: Op| match scheduler.submit(op).await {
        Err(Refused::NoActiveTurn(message)) => message,
        other => panic!("expected no active turn, got {other:?}"),
    };
    assert_eq!(
        no_active(interrupt(session("nobody"), InterruptMode::Hard)).await,
        "no active turn on session 'nobody'"
    );
    let Accepted::Started { turn_id } = scheduler.submit(message("done", "hi")).await.unwrap()
    else {
        panic!("no turn started");
    };
    idle(&scheduler).await;
    assert_eq!(
        no_active(interrupt(session("done"), InterruptMode::Graceful)).await,
        "no active turn on session 'done'"
    );
    assert_eq!(
        no_active(interrupt(
            Target::Turn(turn_id.clone()),
            InterruptMode::Hard
        ))
        .await,
        format!("no active turn with id '{turn_id}': it has ended, or never existed")
    );
    assert_eq!(
        scheduler.submit(message(" ", "hi")).await,
        Err(Refused::Invalid(
            "the session key is empty; name the session".into()
        ))
    );
}

/// Waits for the point in a turn's life where the racing op is sent; the
/// events seen on the way. By round: after the model's request (before the
/// turn's end), after its answer and at once (racing the end), and after
/// the `turn_end` (past it), so both sides of the race are reached however
/// fast or slow the machine (on a loaded one, every op once landed).
async fn race_point(events: &mut wasmclaw::bus::Subscription, round: usize) -> Vec<Arc<Event>> {
    match round % 4 {
        0 => until(events, LIMIT, is("llm_request")).await,
        1 => until(events, LIMIT, is("llm_response")).await,
        2 => {
            tokio::task::yield_now().await;
            Vec::new()
        }
        _ => until(events, LIMIT, is("turn_end")).await,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_racing_the_end_of_a_turn_either_lands_or_is_refused() {
    let fake = fake_model(|_, _| Reply::text("done")).await;
    let Setup {
        agent,
        scheduler,
        mut events,
        ..
    } = setup(&fake, AgentConfig::default(), SchedulerConfig::default()).await;
    let mut outcomes: HashMap<&str, usize> = HashMap::new();
    for round in 0..100 {
        let key = format!("i{round}");
        let mode = if round % 2 == 0 {
            InterruptMode::Graceful
        } else {
            InterruptMode::Hard
        };
        scheduler.submit(message(&key, "hi")).await.unwrap();
        let mut all = race_point(&mut events, round).await;
        let ack = scheduler.submit(interrupt(session(&key), mode)).await;
        idle(&scheduler).await;
        all.extend(drain(&mut events));
        let ends: Vec<_> = all
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::TurnEnd(TurnEnd { status, reason, .. }) => {
                    Some((*status, reason.as_str()))
                }
                _ => None,
            })
            .collect();
        let history = agent.store().history(&key).await.unwrap().len();
        let outcome = match (&ack, mode) {
            (Ok(Accepted::Interrupted { .. }), InterruptMode::Graceful) => {
                assert_eq!(
                    ends,
                    [(TurnStatus::Completed, "interrupted")],
                    "round {round}"
                );
                assert_eq!(history, 2);
                "graceful landed"
            }
            (Ok(Accepted::Interrupted { .. }), InterruptMode::Hard) => {
                assert_eq!(
                    ends,
                    [(TurnStatus::Aborted, "interrupted")],
                    "round {round}"
                );
                assert_eq!(history, 0);
                "hard landed"
            }
            (Err(Refused::NoActiveTurn(_)), _) => {
                assert_eq!(
                    ends,
                    [(TurnStatus::Completed, "final_answer")],
                    "round {round}"
                );
                assert!(!kinds(&all).contains(&"interrupt_received"));
                assert_eq!(history, 2);
                "refused"
            }
            other => panic!("round {round}: unexpected {other:?}"),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    // Both sides of the race were exercised.
    let landed =
        outcomes.get("graceful landed").unwrap_or(&0) + outcomes.get("hard landed").unwrap_or(&0);
    assert!(
        landed > 0 && outcomes.contains_key("refused"),
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn steering_racing_the_end_of_a_turn_is_answered_exactly_once() {
    let fake = fake_model(|text, _| Reply::text(format!("re: {text}"))).await;
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, AgentConfig::default(), SchedulerConfig::default()).await;
    let mut outcomes: HashMap<&str, usize> = HashMap::new();
    for round in 0..100 {
        let key = format!("s{round}");
        scheduler.submit(message(&key, "first")).await.unwrap();
        let mut all = race_point(&mut events, round).await;
        let steer = Op::Steer {
            session: key.clone(),
            content: "late".into(),
        };
        let ack = scheduler.submit(steer).await.unwrap();
        idle(&scheduler).await;
        all.extend(drain(&mut events));
        let begins: Vec<_> = all
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::TurnBegin(TurnBegin { input, .. }) => Some(input.as_str()),
                _ => None,
            })
            .collect();
        let injected = all
            .iter()
            .filter(|e| matches!(&e.body, EventBody::SteeringInjected(SteeringInjected { content, .. }) if content == "late"))
            .count();
        let answers: HashSet<_> = all
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::TurnEnd(TurnEnd { answer, status, .. }) => {
                    assert_eq!(*status, TurnStatus::Completed);
                    answer.clone()
                }
                _ => None,
            })
            .collect();
        // Whichever way it went, "late" was answered last.
        assert!(answers.contains("re: late"), "round {round}: {answers:?}");
        let outcome = match ack {
            Accepted::Steered { .. } => {
                assert_eq!((begins, injected), (vec!["first"], 1), "round {round}");
                "injected"
            }
            Accepted::Started { .. } | Accepted::Queued { .. } => {
                assert_eq!(
                    (begins, injected),
                    (vec!["first", "late"], 0),
                    "round {round}"
                );
                "own turn"
            }
            other => panic!("round {round}: unexpected {other:?}"),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    // Both sides of the race were exercised.
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn steering_a_turn_at_its_limit_runs_as_the_next_turn() {
    // The only answer waits until the message is in.
    let only_answer = Gate::default();
    let fake = FakeModel::start([
        Reply::Gated(only_answer.clone(), Box::new(Reply::text("Only answer."))),
        Reply::text("Next answer."),
    ])
    .await;
    let config = AgentConfig {
        max_iterations: 1,
        ..AgentConfig::default()
    };
    let Setup {
        scheduler,
        mut events,
        ..
    } = setup(&fake, config, SchedulerConfig::default()).await;
    scheduler.submit(message("l", "question")).await.unwrap();
    let mut seen = until(&mut events, LIMIT, is("llm_request")).await;
    // The turn's only (so last) model call has begun: too late to steer.
    assert!(matches!(
        scheduler.submit(message("l", "one more")).await,
        Ok(Accepted::Queued { position: 1, .. })
    ));
    only_answer.open();
    idle(&scheduler).await;
    seen.extend(drain(&mut events));
    let shown: Vec<String> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TurnBegin(TurnBegin { input, .. }) => Some(format!("begin {input}")),
            EventBody::FollowUpQueued(FollowUpQueued { content, position }) => {
                Some(format!("queued {content} at {position}"))
            }
            EventBody::SteeringInjected(SteeringInjected { content, .. }) => {
                Some(format!("injected {content}"))
            }
            EventBody::TurnEnd(TurnEnd { answer, .. }) => {
                Some(format!("end {}", answer.clone().unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        [
            "begin question",
            "queued one more at 1",
            "end Only answer.",
            "begin one more",
            "end Next answer.",
        ]
    );
}
