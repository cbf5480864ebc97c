//! A small model that repeats a refused call: it is told plainly what was
//! wrong (the property by name, the shape the schema expects), told again
//! that it repeats itself, and the turn ends after the configured number of
//! identical refusals instead of filling the context. Both wire formats,
//! against the calculator example.

use std::time::Duration;

use serde_json::json;
use wasmclaw::agent::AgentConfig;
use wasmclaw::protocol::{EventBody, ToolCallEnd, TurnStatus};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent_with, anthropic, drain, openai};
use wasmclaw_tests::fake_model::{Reply, fake_model};

const LIMIT: Duration = Duration::from_secs(60);

/// What the calculator's schema check says of the copied `maxLength`.
const REFUSED: &str = r#"error (invalid-input): invalid arguments for calculate: "maxLength" is not an argument of calculate (maxLength is one of the schema's own rules, not values to send); expected {"expression": string} (required: expression; no other properties)"#;

fn repeated(count: u32) -> String {
    format!(
        "{REFUSED}\nThis exact call was refused {count} times in this turn; sent again unchanged it will be refused again. Change the arguments as the error says, or answer without this tool."
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_refused_call_three_times_ends_the_turn() {
    for wire in ["openai", "anthropic"] {
        let dir = PluginDir::new();
        dir.add("calculator");
        // The model copies a schema keyword into its arguments, every time.
        let fake = fake_model(|_, _| {
            Reply::tool(
                "c1",
                "calculate",
                json!({"expression": "6 * 7", "maxLength": 10000}),
            )
        })
        .await;
        let candidate = match wire {
            "openai" => openai(&fake, "m", true),
            _ => anthropic(&fake, "m", true),
        };
        let store = Store::open_in_memory().unwrap();
        let (agent, mut sub) = agent_with(
            dir.load().await,
            vec![candidate],
            store,
            AgentConfig::default(),
        );
        let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "What is 6 * 7?"))
            .await
            .unwrap();
        let reason = format!(
            r#"the model made the same refused call 3 times (the limit is 3): calculate {{"expression":"6 * 7","maxLength":10000}} was refused with: {REFUSED}"#
        );
        assert_eq!(
            (outcome.status, outcome.reason.as_str(), outcome.iterations),
            (TurnStatus::Error, reason.as_str(), 3),
            "{wire}"
        );
        let outputs: Vec<String> = drain(&mut sub)
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::ToolCallEnd(ToolCallEnd { output, ok, .. }) => {
                    assert!(!ok);
                    Some(output.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            outputs,
            [REFUSED.to_string(), repeated(2), repeated(3)],
            "{wire}"
        );
        // What the model read: the second request has the first refusal,
        // the third the second, with the note.
        let requests = fake.requests();
        assert_eq!(requests.len(), 3, "{wire}");
        let last_result = |i: usize| {
            let messages = requests[i].body["messages"].as_array().unwrap();
            let last = messages.last().unwrap();
            match wire {
                "openai" => last["content"].as_str().unwrap().to_string(),
                _ => last["content"][0]["content"].as_str().unwrap().to_string(),
            }
        };
        assert_eq!(
            (last_result(1), last_result(2)),
            (REFUSED.to_string(), repeated(2)),
            "{wire}"
        );
        // An error turn leaves no history.
        assert_eq!(agent.store().history("s").await.unwrap(), [], "{wire}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_number_of_identical_refusals_is_configurable() {
    let dir = PluginDir::new();
    dir.add("calculator");
    let fake = fake_model(|_, _| Reply::tool("c1", "calculate", json!({"expr": "1 + 1"}))).await;
    let config = AgentConfig {
        max_repeated_refusals: 2,
        ..AgentConfig::default()
    };
    let store = Store::open_in_memory().unwrap();
    let (agent, _sub) = agent_with(
        dir.load().await,
        vec![openai(&fake, "m", false)],
        store,
        config,
    );
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "1 + 1?"))
        .await
        .unwrap();
    let refused = r#"error (invalid-input): invalid arguments for calculate: "expr" is not an argument of calculate; "expression" is a required property; expected {"expression": string} (required: expression; no other properties)"#;
    assert_eq!(
        (outcome.status, outcome.reason, outcome.iterations),
        (
            TurnStatus::Error,
            format!(
                r#"the model made the same refused call 2 times (the limit is 2): calculate {{"expr":"1 + 1"}} was refused with: {refused}"#
            ),
            2
        )
    );
    assert_eq!(fake.requests().len(), 2);
}
