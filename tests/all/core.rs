//! The core every front end uses: waiting for a turn that has ended or not,
//! events from a seq on with no gap while other sessions publish, and
//! importing a history.

use std::time::Duration;

use wasmclaw::agent::AgentConfig;
use wasmclaw::bus::Filter;
use wasmclaw::core::Core;
use wasmclaw::llm::Message;
use wasmclaw::protocol::{Accepted, Op, Refused, TurnStatus};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{core_with, openai};
use wasmclaw_tests::fake_model::{FakeModel, Gate, Reply, fake_model, roles_and_texts};

const LIMIT: Duration = Duration::from_secs(30);

fn message(session: &str, content: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: None,
    }
}

async fn core(fake: &FakeModel, dir: &PluginDir) -> Core {
    dir.add("echo");
    let (core, _events) = core_with(
        dir.load().await,
        vec![openai(fake, "m", true)],
        Store::open_in_memory().unwrap(),
        AgentConfig::default(),
        SchedulerConfig::default(),
    );
    core
}

async fn started(core: &Core, op: Op) -> String {
    match core.submit(op).await {
        Ok(Accepted::Started { turn_id }) => turn_id,
        other => panic!("expected a started turn, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_turn_answers_for_a_turn_that_already_ended_and_one_that_ends_later() {
    let gate = Gate::default();
    let held = gate.clone();
    let fake = fake_model(move |last_user, _| match last_user {
        "slow" => Reply::Gated(held.clone(), Box::new(Reply::text("late"))),
        _ => Reply::text("early"),
    })
    .await;
    let dir = PluginDir::new();
    let core = core(&fake, &dir).await;

    // Ended before the wait began: found in the event log.
    let (accepted, outcome) = tokio::time::timeout(LIMIT, core.run(message("a", "fast")))
        .await
        .expect("the turn ends in time")
        .unwrap();
    let Accepted::Started { turn_id } = accepted else {
        panic!("{accepted:?}");
    };
    assert_eq!(outcome.unwrap().answer.as_deref(), Some("early"));
    let ended = tokio::time::timeout(LIMIT, core.wait_turn(&turn_id))
        .await
        .expect("an ended turn is answered at once")
        .unwrap();
    assert_eq!(ended.turn_id, turn_id);
    assert_eq!(ended.status, TurnStatus::Completed);
    assert_eq!(ended.answer.as_deref(), Some("early"));

    // Still running when the wait began.
    let turn_id = started(&core, message("b", "slow")).await;
    assert!(core.is_busy("b"));
    // `join!` polls the wait first: it has begun when the gate opens.
    let (ended, ()) = tokio::join!(
        tokio::time::timeout(LIMIT, core.wait_turn(&turn_id)),
        async { gate.open() },
    );
    let ended = ended.expect("the turn ends in time").unwrap();
    assert_eq!(ended.turn_id, turn_id);
    assert_eq!(ended.answer.as_deref(), Some("late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn subscribe_after_a_seq_gives_every_later_event_once_while_turns_go_on() {
    let fake = fake_model(|_, _| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let core = core(&fake, &dir).await;
    let filter = |session: &str| Filter {
        session: Some(session.to_string()),
        ..Default::default()
    };

    // The first turns of "r", and the seq of an event in the middle of them.
    let mut all = core.subscribe(filter("r"), Some(0));
    for i in 0..3 {
        let op = message("r", &format!("before {i}"));
        let (_, outcome) = core.run(op).await.unwrap();
        assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    }
    let mut before = Vec::new();
    while let Some(event) = all.try_next().await {
        before.push(event.seq);
    }
    assert!(before.len() > 6, "{before:?}");
    let after = before[before.len() / 2];

    // Another session runs turns all along, and "r" goes on too.
    let other = {
        let core = core.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                let (_, outcome) = core.run(message("o", &format!("other {i}"))).await.unwrap();
                assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
            }
        })
    };
    let more = {
        let core = core.clone();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..5 {
                let (accepted, outcome) =
                    core.run(message("r", &format!("after {i}"))).await.unwrap();
                assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
                // Right after a turn's end the session may still be busy:
                // the next message then waits its (short) turn.
                let (Accepted::Started { turn_id } | Accepted::Queued { turn_id, .. }) = accepted
                else {
                    panic!("{accepted:?}");
                };
                ids.push(turn_id);
            }
            ids
        })
    };
    // Subscribed while both sessions publish.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut resumed = core.subscribe(filter("r"), Some(after));
    let ids = tokio::time::timeout(LIMIT, more).await.unwrap().unwrap();
    let last_id = ids.last().unwrap().clone();
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(LIMIT, resumed.recv())
            .await
            .expect("the events come in time")
            .expect("the host is up");
        assert_eq!(event.session.as_deref(), Some("r"));
        seen.push(event.seq);
        if event.turn_id.as_deref() == Some(last_id.as_str())
            && event.body.kind().as_str() == "turn_end"
        {
            break;
        }
    }
    tokio::time::timeout(LIMIT, other).await.unwrap().unwrap();

    // Exactly the events of "r" after `after`, in order, each once: the same
    // as a subscription that was there from the start.
    let mut expected = Vec::new();
    while expected.last() != seen.last() {
        let event = tokio::time::timeout(LIMIT, all.recv())
            .await
            .expect("the events come in time")
            .expect("the host is up");
        before.push(event.seq);
        expected = before.iter().copied().filter(|&s| s > after).collect();
    }
    assert_eq!(seen, expected);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_history_is_imported_into_a_new_session_only_and_the_next_turn_sees_it() {
    let fake = fake_model(|_, _| Reply::text("noted")).await;
    let dir = PluginDir::new();
    let core = core(&fake, &dir).await;
    let history = vec![
        Message::system("You are terse."),
        Message::user("my name is Ada"),
        Message::assistant("Hello, Ada."),
    ];
    let import = |session: &str| Op::ImportHistory {
        session: session.into(),
        messages: history.clone(),
    };

    // A session with history refuses it.
    let (_, outcome) = core.run(message("used", "hi")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    // (Ended, the session is idle once its task has let it go.)
    tokio::time::timeout(LIMIT, core.until_idle("used"))
        .await
        .unwrap();
    match core.submit(import("used")).await {
        Err(Refused::Invalid(message)) => assert!(
            message.contains("session 'used' already has history"),
            "{message}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(core.history("used").await.unwrap().len(), 2);

    // A new one takes it, as one `imported` turn.
    let accepted = tokio::time::timeout(LIMIT, core.submit(import("new")))
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(accepted, Accepted::Imported { messages: 3, .. }),
        "{accepted:?}"
    );
    assert_eq!(core.history("new").await.unwrap(), history);
    let turns = core.turns("new").await.unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].reason, "imported");
    // And not twice.
    assert!(matches!(
        core.submit(import("new")).await,
        Err(Refused::Invalid(_))
    ));

    // The next turn's model request carries the imported messages first.
    let asked = fake.requests().len();
    let (_, outcome) = tokio::time::timeout(LIMIT, core.run(message("new", "what is my name?")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    let requests = fake.requests();
    assert_eq!(requests.len(), asked + 1);
    let pair = |role: &str, text: &str| (role.to_string(), text.to_string());
    assert_eq!(
        roles_and_texts(&requests[asked].body),
        [
            pair("system", "You are terse."),
            pair("user", "my name is Ada"),
            pair("assistant", "Hello, Ada."),
            pair("user", "what is my name?"),
        ]
    );
}
