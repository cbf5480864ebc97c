//! A graceful interrupt during a model call: the call is not retried, and a
//! call that hangs is dropped once silent for the wind-down grace (5 s by
//! default), so the turn ends promptly, `completed` with reason
//! `interrupted` and the text it has, not `error` after every retry. `run`
//! says at the first Ctrl-C that it is winding down.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use wasmclaw::agent::AgentConfig;
use wasmclaw::bus::Subscription;
use wasmclaw::core::Core;
use wasmclaw::llm::Message;
use wasmclaw::protocol::{
    Accepted, Event, EventBody, InterruptMode, Op, Target, TurnEnd, TurnStatus,
};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::agents::{agent_with, anthropic, kinds, openai, streamed_text, until};
use wasmclaw_tests::fake_model::{FakeModel, Gate, Reply};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

/// Well past the 5 s grace, well short of the model's timeout and retries.
const LIMIT: Duration = Duration::from_secs(9);

fn is(kind: &'static str) -> impl Fn(&Event) -> bool {
    move |e| e.body.kind().as_str() == kind
}

/// Starts a turn on `fake`, interrupts it gracefully once its model call
/// has begun (or once `after` is seen), and returns the events up to its
/// end, with the time from the interrupt to the end.
async fn interrupted(
    fake: &FakeModel,
    wire: &str,
    after: &'static str,
) -> (Vec<std::sync::Arc<Event>>, Duration, Core) {
    let graceful = InterruptMode::Graceful;
    interrupted_then(fake, wire, after, graceful, async |_| Vec::new()).await
}

/// As [`interrupted`], with the interrupt's `mode`, calling `then` once the
/// interrupt is accepted; the events it reads are returned in their place.
async fn interrupted_then(
    fake: &FakeModel,
    wire: &str,
    after: &'static str,
    mode: InterruptMode,
    then: impl AsyncFnOnce(&mut Subscription) -> Vec<std::sync::Arc<Event>>,
) -> (Vec<std::sync::Arc<Event>>, Duration, Core) {
    let dir = PluginDir::new();
    let mut candidate = match wire {
        "openai" => openai(fake, "m", true),
        _ => anthropic(fake, "m", true),
    };
    // Without the interrupt, the call would be tried 3 times, 30 s each.
    candidate.timeout = Duration::from_secs(30);
    let (agent, mut events) = agent_with(
        dir.load().await,
        vec![candidate],
        Store::open_in_memory().unwrap(),
        AgentConfig::default(),
    );
    let scheduler = Core::new(agent, SchedulerConfig::default());
    let op = Op::UserMessage {
        session: "w".into(),
        content: "hello".into(),
        agent: None,
    };
    let Ok(Accepted::Started { turn_id }) = scheduler.submit(op).await else {
        panic!("the turn did not start");
    };
    let mut seen = until(&mut events, LIMIT, is(after)).await;
    let op = Op::Interrupt {
        target: Target::Turn(turn_id),
        mode,
    };
    assert!(matches!(
        scheduler.submit(op).await,
        Ok(Accepted::Interrupted { .. })
    ));
    seen.extend(then(&mut events).await);
    let at = Instant::now();
    seen.extend(until(&mut events, LIMIT, is("turn_end")).await);
    (seen, at.elapsed(), scheduler)
}

fn end(events: &[std::sync::Arc<Event>]) -> (TurnStatus, String, Option<String>) {
    match &events.last().unwrap().body {
        EventBody::TurnEnd(TurnEnd {
            status,
            reason,
            answer,
            ..
        }) => (*status, reason.clone(), answer.clone()),
        other => panic!("not a turn end: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_model_call_is_dropped_and_the_turn_completes_interrupted() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([Reply::Delay(
            Duration::from_secs(600),
            Box::new(Reply::text("never")),
        )])
        .await;
        let (events, took, scheduler) = interrupted(&fake, wire, "llm_request").await;
        assert_eq!(
            end(&events),
            (
                TurnStatus::Completed,
                "interrupted".into(),
                Some(String::new())
            ),
            "{wire}"
        );
        assert!(
            took >= Duration::from_secs(5) && took < LIMIT,
            "{wire}: {took:?}"
        );
        assert_eq!(
            kinds(&events),
            [
                "turn_begin",
                "llm_request",
                "interrupt_received",
                "turn_end"
            ],
            "{wire}"
        );
        assert_eq!(fake.requests().len(), 1, "{wire}: not tried again");
        // The turn's message stays in the history, with no answer.
        let history = scheduler.history("w").await.unwrap();
        assert_eq!(history, [Message::user("hello")], "{wire}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_stalls_mid_stream_ends_the_turn_with_the_text_it_streamed() {
    for wire in ["openai", "anthropic"] {
        let fake = FakeModel::start([Reply::HangMidStream]).await;
        let (events, took, scheduler) = interrupted(&fake, wire, "llm_delta").await;
        // The fake streams the text in thirds; two came before it stalled.
        let partial = "This reply is cut off be";
        assert_eq!(
            end(&events),
            (
                TurnStatus::Completed,
                "interrupted".into(),
                Some(partial.into())
            ),
            "{wire}"
        );
        assert!(took < LIMIT, "{wire}: {took:?}");
        assert_eq!(fake.requests().len(), 1, "{wire}");
        let history = scheduler.history("w").await.unwrap();
        assert_eq!(
            history,
            [
                Message::user("hello"),
                Message::Assistant {
                    content: partial.into(),
                    tool_calls: vec![]
                }
            ],
            "{wire}"
        );
    }
}

/// Text held for the next delta when the interrupt comes goes out in its
/// time while the call winds down, not when the call ends: the model
/// streamed two thirds of its answer (the second within 50 ms of the
/// first, so held) and waits at its gate, which opens only once the turn
/// has published both.
#[tokio::test(flavor = "multi_thread")]
async fn text_held_for_a_delta_goes_out_in_its_time_while_the_call_winds_down() {
    let fox = "The quick brown fox jumps over the lazy dog.";
    let gate = Gate::default();
    let fake = FakeModel::start([Reply::PauseMidStream(gate.clone(), fox.into())]).await;
    let streamed = |events: &[std::sync::Arc<Event>]| streamed_text(events, 1);
    let graceful = InterruptMode::Graceful;
    let (events, _took, _scheduler) =
        interrupted_then(&fake, "openai", "llm_delta", graceful, async |sub| {
            // The first third came before the interrupt.
            let mut seen = Vec::new();
            while streamed(&seen) != "n fox jumps ove" {
                seen.extend(until(sub, LIMIT, is("llm_delta")).await);
            }
            gate.open();
            seen
        })
        .await;
    assert_eq!(
        end(&events),
        (
            TurnStatus::Completed,
            "interrupted".into(),
            Some(fox.into())
        )
    );
    assert_eq!(streamed(&events), fox);
}

/// Text held for a delta when a hard interrupt drops the call goes out
/// before the turn's end: the model streamed two thirds of its answer (the
/// second within 50 ms of the first, so held) and waits at a gate that
/// never opens.
#[tokio::test(flavor = "multi_thread")]
async fn text_held_for_a_delta_goes_out_when_a_hard_interrupt_drops_the_call() {
    let fox = "The quick brown fox jumps over the lazy dog.";
    let fake = FakeModel::start([Reply::PauseMidStream(Gate::default(), fox.into())]).await;
    let hard = InterruptMode::Hard;
    let (events, _took, _scheduler) =
        interrupted_then(&fake, "openai", "llm_delta", hard, async |_| Vec::new()).await;
    assert_eq!(end(&events).0, TurnStatus::Aborted);
    assert_eq!(streamed_text(&events, 1), "The quick brown fox jumps ove");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_attempt_that_fails_after_the_interrupt_is_not_retried() {
    // The attempt fails once the interrupt is in.
    let gate = Gate::default();
    let fake = FakeModel::start([
        Reply::Gated(
            gate.clone(),
            Box::new(Reply::Status {
                code: 503,
                message: "overloaded".into(),
                retry_after: None,
            }),
        ),
        Reply::text("never"),
    ])
    .await;
    let graceful = InterruptMode::Graceful;
    let (events, took, _scheduler) =
        interrupted_then(&fake, "openai", "llm_request", graceful, async |_| {
            gate.open();
            Vec::new()
        })
        .await;
    assert_eq!(
        end(&events),
        (
            TurnStatus::Completed,
            "interrupted".into(),
            Some(String::new())
        )
    );
    // Dropped when the failure came, not after the grace.
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(
        kinds(&events),
        [
            "turn_begin",
            "llm_request",
            "interrupt_received",
            "llm_retry",
            "turn_end"
        ]
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn run_says_it_winds_down_at_the_first_ctrl_c() {
    let fake = FakeModel::start([Reply::Delay(
        Duration::from_secs(600),
        Box::new(Reply::text("never")),
    )])
    .await;
    let dir = PluginDir::new();
    let url = fake.openai_base_url();
    let mut child = tokio::process::Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", dir.scratch("home"))
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .args(["--plugins", dir.path().to_str().unwrap()])
        .args(["run", "--model", "openai:m", "--base-url", &url])
        .args(["--events", "-", "-m", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Events on stdout, notes on stderr.
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let mut lines = Vec::new();
    let mut next_line = async || {
        let line = tokio::time::timeout(LIMIT, stdout.next_line())
            .await
            .expect("a line in time")
            .unwrap();
        if let Some(line) = &line {
            lines.push(line.clone());
        }
        line
    };
    while let Some(line) = next_line().await {
        if line.contains(r#""type":"llm_request""#) {
            break;
        }
    }
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let at = Instant::now();
    while next_line().await.is_some() {}
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(at.elapsed() < LIMIT, "{:?}", at.elapsed());
    assert_eq!(status.code(), Some(0), "{lines:#?}");
    let mut notes = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut notes)
        .await
        .unwrap();
    assert_eq!(
        notes,
        "interrupting: winding the turn down (running tools finish, the model call is not retried, then a last answer); Ctrl-C again stops at once\n"
    );
    let events: Vec<Value> = (lines.iter())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = events.last().unwrap();
    assert_eq!(
        (&last["type"], &last["status"], &last["reason"]),
        (
            &"turn_end".into(),
            &"completed".into(),
            &"interrupted".into()
        )
    );
    assert_eq!(fake.requests().len(), 1);
}
