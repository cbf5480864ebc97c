//! The floor of a turn: what a host built from wasmclaw's own parts
//! spends on one, with none of wasmclaw's own work. `host_cost` runs it
//! beside `wasmclaw serve`, with the same client and the same fake model,
//! so that a turn's CPU can be read against what the parts alone take on
//! the same machine at the same moment.
//!
//! It does, for `POST /v1/sessions/{key}/messages?wait=true`, what a
//! turn of `serve` cannot skip, the way `serve` does it:
//!
//! - the API: axum on hyper, a bearer token checked, the JSON body parsed
//!   and the JSON answer written;
//! - the history held in memory, the request written from it with the
//!   tools' definitions serialized once, sent by reqwest, and the answer's
//!   SSE stream parsed chunk by chunk (`model.rs`);
//! - a tool call the model asks for run in a fresh instance of the plugin
//!   (`sandbox.rs`), and the model asked again with its result;
//! - the store: one SQLite transaction on the file (WAL,
//!   `synchronous=NORMAL`, statements kept prepared) writing what `serve`
//!   writes for the turn into the same tables and indexes: the session's
//!   row, the turn's, its messages and its events (`store.rs`);
//! - tokio with one worker thread for two cores, and the same allocator.
//!
//! Left out, because they are what the floor measures against: the
//! scheduler, the turn's loop and context, the event bus and its
//! subscribers, hooks, approvals, metrics, limits and every check beyond
//! the token; of a tool call, what `sandbox.rs` names.
//!
//! `wasmclaw-floor --listen ADDR --base-url URL --model NAME --db FILE
//! [--plugin FILE.wasm]`, the token from `WASMCLAW_API_TOKEN`. It says
//! where it listens as `serve` does (`wasmclaw serving on http://ADDR`),
//! so that the same harness starts it, and stops at SIGTERM.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use rusqlite::Connection;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use model::{Message, Model, TOOLS, Usage};
use sandbox::Sandbox;
use store::{Events, Turn};

mod model;
mod sandbox;
mod store;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The most model calls a turn makes, as `serve`'s default.
const MAX_ITERATIONS: u32 = 10;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        let at = args.iter().position(|a| a == name);
        at.and_then(|at| args.get(at + 1))
            .unwrap_or_else(|| panic!("{name} is required"))
            .clone()
    };
    let token = std::env::var("WASMCLAW_API_TOKEN").expect("WASMCLAW_API_TOKEN");
    let plugin = (args.iter().any(|a| a == "--plugin")).then(|| {
        Sandbox::load(std::path::Path::new(&arg("--plugin"))).unwrap_or_else(|e| panic!("{e}"))
    });
    let floor = Floor::open(
        std::path::Path::new(&arg("--db")),
        Model::new(&arg("--base-url"), arg("--model")),
        plugin,
        &token,
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads((cores / 2).max(1))
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(serve(floor, arg("--listen")));
}

async fn serve(floor: Floor, listen: String) {
    let app = axum::Router::new()
        .route("/v1/sessions/{key}/messages", post(message))
        .with_state(Arc::new(floor));
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .expect("binding");
    #[allow(clippy::print_stdout)]
    {
        println!(
            "wasmclaw serving on http://{}",
            listener.local_addr().unwrap()
        );
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            terminate.recv().await;
        })
        .await
        .expect("serving");
}

struct Floor {
    token: String,
    model: Model,
    plugin: Option<Sandbox>,
    db: Mutex<Connection>,
    /// Each session's messages, as the request carries them.
    histories: Mutex<HashMap<String, Vec<Box<RawValue>>>>,
    /// The last event's seq.
    seq: AtomicU64,
}

#[derive(Deserialize)]
struct Input {
    content: String,
}

type Answer = (StatusCode, Json<Value>);

async fn message(
    State(floor): State<Arc<Floor>>,
    Path(key): Path<String>,
    headers: HeaderMap,
    Json(input): Json<Input>,
) -> Answer {
    if headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()) != Some(floor.token.as_bytes()) {
        return failed(
            StatusCode::UNAUTHORIZED,
            "a bearer token is required".into(),
        );
    }
    match floor.turn(&key, input.content).await {
        Ok(answer) => (
            StatusCode::OK,
            Json(json!({"status": "completed", "answer": answer})),
        ),
        Err(e) => failed(StatusCode::BAD_GATEWAY, e),
    }
}

fn failed(status: StatusCode, error: String) -> Answer {
    (status, Json(json!({"error": error})))
}

impl Floor {
    /// The floor with its tables created in the new database `db`, asking
    /// `model`, calling `plugin`'s tools, answering requests that bear
    /// `token`.
    fn open(db: &std::path::Path, model: Model, plugin: Option<Sandbox>, token: &str) -> Floor {
        Floor {
            token: format!("Bearer {token}"),
            model,
            plugin,
            db: Mutex::new(store::open(db)),
            histories: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
        }
    }

    /// One turn of `key`: the model's answer to `input`, after the tool
    /// calls it asks for, committed with the events `serve` writes. A
    /// session's turns are expected one at a time (the bench's client
    /// waits for each); the floor has no scheduler to order them.
    async fn turn(&self, key: &str, input: String) -> Result<String, String> {
        let id = uuid::Uuid::now_v7().to_string();
        let started_at = store::now();
        let mut history = self.history(key)?;
        let from = history.len();
        let mut events = Events::new(&self.seq, key, &id);
        events.push("turn_begin", json!({"input": input, "agent": "default"}));
        let user = Message::user(&input);
        history.push(user.wire);
        let mut stored = vec![user.stored];
        let mut usage = Usage::default();
        for iteration in 1..=MAX_ITERATIONS {
            events.push(
                "llm_request",
                json!({"iteration": iteration, "model": "openai:m",
                       "messages": history.len(), "tools": TOOLS, "tokens": 1005}),
            );
            let started = Instant::now();
            let reply = self.model.call(self.model.request(&history)).await?;
            usage += reply.usage;
            if !reply.text.is_empty() {
                events.push(
                    "llm_delta",
                    json!({"iteration": iteration, "text": reply.text}),
                );
            }
            let finish = if reply.calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            events.push(
                "llm_response",
                json!({"iteration": iteration, "model": "openai:m", "text": reply.text,
                       "tool_calls": reply.calls, "finish_reason": finish,
                       "usage": reply.usage.json(),
                       "duration_ms": started.elapsed().as_secs_f64() * 1000.0}),
            );
            let assistant = Message::assistant(&reply);
            history.push(assistant.wire);
            stored.push(assistant.stored);
            if reply.calls.is_empty() {
                events.push(
                    "turn_end",
                    json!({"status": "completed", "reason": "final_answer",
                           "iterations": iteration, "usage": usage.json(),
                           "answer": reply.text}),
                );
                let turn = Turn {
                    id: &id,
                    session: key,
                    input: &input,
                    started_at: &started_at,
                    iterations: iteration,
                    usage: &usage,
                    from,
                };
                store::commit(&self.db.lock().unwrap(), &turn, &stored, &events.written)?;
                self.histories
                    .lock()
                    .unwrap()
                    .insert(key.to_string(), history);
                return Ok(reply.text);
            }
            for call in &reply.calls {
                let result = self.tool(key, &id, call, &mut events).await?;
                let message = Message::tool(call, &result);
                history.push(message.wire);
                stored.push(message.stored);
            }
        }
        Err(format!("no answer after {MAX_ITERATIONS} model calls"))
    }

    /// Runs `call` and writes its two events: its output, or its error's
    /// message as the output (a failed tool still answers the model).
    async fn tool(
        &self,
        key: &str,
        turn_id: &str,
        call: &model::Call,
        events: &mut Events<'_>,
    ) -> Result<String, String> {
        let Some(plugin) = &self.plugin else {
            return Err(format!(
                "the model asked for '{}', and no plugin is loaded",
                call.name
            ));
        };
        events.push(
            "tool_call_begin",
            json!({"call_id": call.id, "tool": call.name, "arguments": call.arguments}),
        );
        let started = Instant::now();
        let outcome = (plugin)
            .call(key, turn_id, &call.id, &call.name, &call.arguments)
            .await;
        let (ok, output) = match outcome {
            Ok(output) => (true, output),
            Err(error) => (false, error),
        };
        events.push(
            "tool_call_end",
            json!({"call_id": call.id, "tool": call.name, "ok": ok, "output": output,
                   "duration_ms": started.elapsed().as_secs_f64() * 1000.0}),
        );
        Ok(output)
    }

    /// The session's messages: held in memory, read from the table once.
    fn history(&self, key: &str) -> Result<Vec<Box<RawValue>>, String> {
        if let Some(held) = self.histories.lock().unwrap().remove(key) {
            return Ok(held);
        }
        let stored = store::messages(&self.db.lock().unwrap(), key).map_err(text)?;
        stored.iter().map(|json| Message::wire_of(json)).collect()
    }
}

/// An error's text, with its causes (`{:#}`) where it has them.
fn text(e: impl std::fmt::Display) -> String {
    format!("{e:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that keeps each request and answers it with what `reply`
    /// makes of its body, in SSE chunks of a character of text each.
    async fn model(reply: fn(&Value) -> Value) -> (String, Arc<Mutex<Vec<Value>>>) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            post(move |Json(body): Json<Value>| async move {
                let delta = reply(&body);
                kept.lock().unwrap().push(body);
                let chunk = |delta: &Value, usage: Value| {
                    format!(
                        "data: {}\n\n",
                        json!({"choices": [{"delta": delta}], "usage": usage})
                    )
                };
                let usage = json!({"prompt_tokens": 10, "completion_tokens": 2});
                let mut body = String::new();
                match delta["content"].as_str() {
                    Some(text) => {
                        for c in text.chars() {
                            body += &chunk(&json!({"content": c.to_string()}), Value::Null);
                        }
                    }
                    None => body += &chunk(&delta, Value::Null),
                }
                body += &chunk(&json!({}), usage);
                body += "data: [DONE]\n\n";
                ([(header::CONTENT_TYPE, "text/event-stream")], body)
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (base, requests)
    }

    fn ok(_: &Value) -> Value {
        json!({"content": "ok"})
    }

    /// Echo's `add` asked for, in two pieces, then the answer.
    fn add_then_answer(body: &Value) -> Value {
        let last = body["messages"].as_array().unwrap().last().unwrap();
        if last["role"] == "tool" {
            return json!({"content": format!("The sum is {}.", last["content"].as_str().unwrap())});
        }
        json!({"tool_calls": [
            {"index": 0, "id": "c1", "type": "function",
             "function": {"name": "add", "arguments": "{\"a\": 40, "}},
            {"index": 0, "function": {"arguments": "\"b\": 2}"}},
        ]})
    }

    fn column(db: &std::path::Path, sql: &str) -> Vec<String> {
        let db = Connection::open(db).unwrap();
        let mut statement = db.prepare(sql).unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    }

    fn stored_messages(db: &std::path::Path) -> Vec<Value> {
        column(
            db,
            "SELECT json FROM messages WHERE session = 's' ORDER BY idx",
        )
        .iter()
        .map(|json| serde_json::from_str(json).unwrap())
        .collect()
    }

    #[tokio::test]
    async fn a_turn_sends_the_held_history_and_commits_the_rows_serve_writes() {
        let (base, requests) = model(ok).await;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let floor = Floor::open(&db, Model::new(&base, "m".into()), None, "t");
        assert_eq!(floor.turn("s", "hi".into()).await.unwrap(), "ok");
        assert_eq!(floor.turn("s", "again".into()).await.unwrap(), "ok");

        let requests = requests.lock().unwrap();
        let second = &requests[1];
        assert_eq!(
            second["messages"],
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "again"},
            ])
        );
        assert_eq!(second["tools"].as_array().unwrap().len(), TOOLS);
        assert_eq!(second["stream"], true);

        let mut expected = second["messages"].as_array().unwrap().clone();
        expected.push(json!({"role": "assistant", "content": "ok"}));
        assert_eq!(stored_messages(&db), expected);
        assert_eq!(
            column(
                &db,
                "SELECT input || ' ' || status || ' ' || iterations || ' ' || output_tokens \
                 FROM turns ORDER BY input"
            ),
            ["again completed 1 2", "hi completed 1 2"]
        );
        let kinds = [
            "turn_begin",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end",
        ];
        assert_eq!(
            column(&db, "SELECT type FROM events ORDER BY seq"),
            [kinds, kinds].concat()
        );
        for json in column(&db, "SELECT json FROM events") {
            let event: Value = serde_json::from_str(&json).unwrap();
            assert_eq!(event["session"], "s", "{json}");
        }
    }

    #[tokio::test]
    async fn a_tool_turn_runs_the_plugin_and_asks_the_model_again_with_its_result() {
        let (base, requests) = model(add_then_answer).await;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let plugin = Sandbox::load(&wasmclaw_tests::guest("echo")).unwrap();
        let floor = Floor::open(&db, Model::new(&base, "m".into()), Some(plugin), "t");
        assert_eq!(
            floor.turn("s", "40 + 2?".into()).await.unwrap(),
            "The sum is 42."
        );

        let call = json!({"id": "c1", "type": "function",
                          "function": {"name": "add", "arguments": "{\"a\": 40, \"b\": 2}"}});
        assert_eq!(
            requests.lock().unwrap()[1]["messages"],
            json!([
                {"role": "user", "content": "40 + 2?"},
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ])
        );
        // The table keeps the host's form of the messages.
        let held = json!([
            {"role": "user", "content": "40 + 2?"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "c1", "name": "add", "arguments": "{\"a\": 40, \"b\": 2}"}]},
            {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "42"},
            {"role": "assistant", "content": "The sum is 42."},
        ]);
        assert_eq!(Value::Array(stored_messages(&db)), held);
        assert_eq!(
            column(&db, "SELECT type FROM events ORDER BY seq"),
            [
                "turn_begin",
                "llm_request",
                "llm_response",
                "tool_call_begin",
                "tool_call_end",
                "llm_request",
                "llm_delta",
                "llm_response",
                "turn_end",
            ]
        );
        let end: Value = serde_json::from_str(
            &column(&db, "SELECT json FROM events WHERE type = 'tool_call_end'")[0],
        )
        .unwrap();
        assert_eq!((&end["ok"], &end["output"]), (&json!(true), &json!("42")));
        assert_eq!(
            column(&db, "SELECT iterations || ' ' || output_tokens FROM turns"),
            ["2 4"]
        );

        // Not held, the history is read from the table, and sent as it
        // was sent before.
        floor.histories.lock().unwrap().clear();
        let read = floor.history("s").unwrap();
        let read: Vec<Value> = (read.iter())
            .map(|m| serde_json::from_str(m.get()).unwrap())
            .collect();
        let mut sent = requests.lock().unwrap()[1]["messages"]
            .as_array()
            .unwrap()
            .clone();
        sent.push(json!({"role": "assistant", "content": "The sum is 42."}));
        assert_eq!(read, sent);
    }
}
