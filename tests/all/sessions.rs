//! Sessions in the SQLite store: history across a restart, and turns that
//! fail leaving no half-written history.

use serde_json::json;
use wasmclaw::llm::Message;
use wasmclaw::protocol::TurnStatus;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply};

#[tokio::test(flavor = "multi_thread")]
async fn history_survives_a_restart_and_a_failed_turn_leaves_none() {
    let dir = PluginDir::new();
    dir.add("echo");
    let db = dir.scratch("home").join("sessions.db");
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({"text": "remembered"})),
        Reply::text("Noted."),
    ])
    .await;

    // First run of the host: one completed turn.
    {
        let (agent, _) = agent(
            dir.load().await,
            vec![openai(&fake, "m", false)],
            Store::open(&db).unwrap(),
        );
        let outcome = agent.run_turn("s", "remember this").await;
        assert_eq!(outcome.status, TurnStatus::Completed);
    }
    let after_first = Store::open(&db).unwrap().history("s").await.unwrap();
    assert_eq!(after_first.len(), 4);
    assert_eq!(after_first[0], Message::user("remember this"));
    assert!(matches!(&after_first[2], Message::Tool { content, .. } if content == "remembered"));

    // Second run: a turn that fails after a tool call leaves no trace in the
    // history, but is recorded as a turn.
    let (agent, _) = agent(
        dir.load().await,
        vec![openai(&fake, "m", false)],
        Store::open(&db).unwrap(),
    );
    fake.push(Reply::tool("c2", "echo", json!({"text": "half"})));
    fake.push(Reply::Status {
        code: 400,
        message: "bad request".into(),
        retry_after: None,
    });
    let failed = agent.run_turn("s", "do something").await;
    assert_eq!(
        (failed.status, failed.reason.as_str()),
        (
            TurnStatus::Error,
            "openai:m: HTTP 400 Bad Request: bad request"
        )
    );
    assert_eq!(agent.store().history("s").await.unwrap(), after_first);

    // The next turn sees exactly the first turn's history, then its own message.
    fake.push(Reply::text("Yes."));
    let outcome = agent.run_turn("s", "still there?").await;
    assert_eq!(outcome.status, TurnStatus::Completed);
    let requests = fake.requests();
    let sent = &requests.last().unwrap().body["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
    assert_eq!(sent[4]["content"], "still there?");

    let turns = agent.store().turns("s").await.unwrap();
    let statuses: Vec<(TurnStatus, &str)> =
        turns.iter().map(|t| (t.status, t.input.as_str())).collect();
    assert_eq!(
        statuses,
        [
            (TurnStatus::Completed, "remember this"),
            (TurnStatus::Error, "do something"),
            (TurnStatus::Completed, "still there?")
        ]
    );
    assert_eq!(agent.store().history("s").await.unwrap().len(), 6);
}
