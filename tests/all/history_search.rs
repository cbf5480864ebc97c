//! `history_search`: the model finds and reads what its session's stored
//! messages hold, in real turns against the fake model (the search itself
//! is tested in `host/src/store/search.rs`; a 300-turn session finds turn
//! 3's fact in `compaction.rs`).

use std::time::Duration;

use serde_json::json;
use wasmclaw::llm::Message;
use wasmclaw::protocol::TurnStatus;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::fake_model::Served;
use wasmclaw_tests::long_session::{self, config, core, message, tool_output_in_a_turn};

const LIMIT: Duration = Duration::from_secs(60);

/// A result cut for the model's window is read whole, page by page, by the
/// call id its marker names.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_tool_result_reads_whole_page_by_page() {
    let fake = long_session::model(Some(100_000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, mut events, store) = core(&dir, &fake, config(Some(6000))).await;
    let (_, outcome) = core.run(message("s", "big 10000 fact-1")).await.unwrap();
    assert_eq!(outcome.unwrap().status, TurnStatus::Completed);
    let history = store.history("s").await.unwrap();
    let Message::Tool {
        tool_call_id,
        content: whole,
        ..
    } = &history[2]
    else {
        panic!("{history:?}");
    };
    assert_eq!(whole.len(), 10_000);
    let id = tool_call_id;
    let first = tool_output_in_a_turn(
        &core,
        &mut events,
        "s",
        "history_search",
        json!({"call_id": id}),
        LIMIT,
    )
    .await;
    let heading = format!("the result of tool call {id}, bytes 0..4096 of 10000:\n");
    assert!(first.starts_with(&heading), "{first}");
    let more =
        format!("\n[5904 more bytes: read on with {{\"call_id\": {id:?}, \"offset\": 4096}}]");
    assert!(first.ends_with(&more), "{first}");
    // Smaller pages, as a model with a small window asks.
    let mut read = String::new();
    for offset in (0..10_000).step_by(3000) {
        let args = json!({"call_id": id, "offset": offset, "bytes": 3000});
        let page =
            tool_output_in_a_turn(&core, &mut events, "s", "history_search", args, LIMIT).await;
        let end = (offset + 3000).min(10_000);
        let heading = format!("the result of tool call {id}, bytes {offset}..{end} of 10000:\n");
        let body = page
            .strip_prefix(&heading)
            .unwrap_or_else(|| panic!("{page}"));
        let body = match end < 10_000 {
            true => {
                let more = format!(
                    "\n[{} more bytes: read on with {{\"call_id\": {id:?}, \"offset\": {end}}}]",
                    10_000 - end
                );
                body.strip_suffix(&more).unwrap_or_else(|| panic!("{page}"))
            }
            false => body,
        };
        read.push_str(body);
    }
    assert_eq!(&read, whole);
}

/// Unknown messages and calls, a query of no word, and a request naming
/// two things: each an error the model can act on; the session goes on.
#[tokio::test(flavor = "multi_thread")]
async fn wrong_requests_get_errors_that_say_what_to_give() {
    let fake = long_session::model(Some(100_000), Served::OpenAi).await;
    let dir = PluginDir::new();
    let (core, mut events, _store) = core(&dir, &fake, config(None)).await;
    let cases = [
        (
            json!({"message": 99}),
            "error (not-found): this conversation has no stored message 99",
        ),
        (
            json!({"call_id": "nope"}),
            "error (not-found): no result of tool call \"nope\" is stored in this conversation",
        ),
        (
            json!({"query": " ** () "}),
            "error (invalid-input): query: the query has no word to search for",
        ),
        (
            json!({"query": "x", "message": 0}),
            "error (invalid-input): give exactly one of `query`, `message` and `call_id`",
        ),
        (
            json!({}),
            "error (invalid-input): give exactly one of `query`, `message` and `call_id`",
        ),
        (
            json!({"query": "zebra quagga"}),
            "No earlier message of this conversation matches \"zebra quagga\".",
        ),
    ];
    for (args, expected) in cases {
        let output = tool_output_in_a_turn(
            &core,
            &mut events,
            "s",
            "history_search",
            args.clone(),
            LIMIT,
        )
        .await;
        assert_eq!(output, expected, "{args}");
    }
}
