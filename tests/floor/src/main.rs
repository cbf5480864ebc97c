//! The floor of a text turn: what a host built from wasmclaw's own parts
//! spends on one, with none of wasmclaw's own work. `host_cost` runs it
//! beside `wasmclaw serve`, with the same client and the same fake model,
//! so that a turn's CPU can be read against what the parts alone take on
//! the same machine at the same moment.
//!
//! It does, for `POST /v1/sessions/{key}/messages?wait=true`, what a
//! text turn of `serve` cannot skip, the way `serve` does it:
//!
//! - the API: axum on hyper, a bearer token checked, the JSON body parsed
//!   and the JSON answer written;
//! - the history held in memory, the request written from it with the
//!   tools' definitions serialized once, sent by reqwest, and the answer's
//!   SSE stream parsed chunk by chunk;
//! - the store: one SQLite transaction on the file (WAL,
//!   `synchronous=NORMAL`, statements kept prepared) writing what `serve`
//!   writes for the turn into the same tables and indexes: the session's
//!   row, the turn's, its two messages and its five events;
//! - tokio with one worker thread for two cores, and the same allocator.
//!
//! Left out, because they are what the floor measures against: the
//! scheduler, the turn's loop and context, the event bus and its
//! subscribers, hooks, approvals, metrics, limits and every check beyond
//! the token. Text turns only: a tool call's cost is the plugin's sandbox,
//! which has no floor short of itself.
//!
//! `wasmclaw-floor --listen ADDR --base-url URL --model NAME --db FILE`,
//! the token from `WASMCLAW_API_TOKEN`. It says where it listens as
//! `serve` does (`wasmclaw serving on http://ADDR`), so that the same
//! harness starts it, and stops at SIGTERM.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What the tables hold of a turn, as `serve`'s store declares them.
const SCHEMA: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    PRAGMA foreign_keys = ON;
    CREATE TABLE sessions (key TEXT PRIMARY KEY, created_at TEXT NOT NULL, settings TEXT) STRICT;
    CREATE TABLE turns (
        id TEXT PRIMARY KEY, session TEXT NOT NULL REFERENCES sessions (key),
        parent_turn_id TEXT, input TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status = 'completed' OR status = 'aborted'
            OR status = 'error' OR status = 'budget_exceeded' OR status = 'timed_out'),
        reason TEXT NOT NULL,
        iterations INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        started_at TEXT NOT NULL, ended_at TEXT NOT NULL) STRICT, WITHOUT ROWID;
    CREATE INDEX turns_by_session ON turns (session, started_at, id, ended_at);
    CREATE INDEX turns_by_parent ON turns (parent_turn_id) WHERE parent_turn_id IS NOT NULL;
    CREATE TABLE messages (
        session TEXT NOT NULL REFERENCES sessions (key), idx INTEGER NOT NULL,
        turn_id TEXT NOT NULL REFERENCES turns (id), json TEXT NOT NULL,
        PRIMARY KEY (session, idx)) STRICT, WITHOUT ROWID;
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY, session TEXT, turn_id TEXT, type TEXT NOT NULL,
        json TEXT NOT NULL) STRICT;
    CREATE INDEX events_by_session ON events (session, seq);
    CREATE INDEX turn_ends ON events (turn_id) WHERE type = 'turn_end';";

/// As many tools as `serve` offers the model with the echo plugin loaded.
const TOOLS: usize = 9;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        let at = args.iter().position(|a| a == name);
        at.and_then(|at| args.get(at + 1))
            .unwrap_or_else(|| panic!("{name} is required"))
            .clone()
    };
    let token = std::env::var("WASMCLAW_API_TOKEN").expect("WASMCLAW_API_TOKEN");
    let floor = Floor::open(
        std::path::Path::new(&arg("--db")),
        &arg("--base-url"),
        arg("--model"),
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
    model: String,
    url: String,
    client: reqwest::Client,
    /// The tools' definitions, serialized once.
    tools: Box<RawValue>,
    db: Mutex<Connection>,
    /// Each session's messages, as the request carries them.
    histories: Mutex<HashMap<String, Vec<Box<RawValue>>>>,
    /// The last event's seq.
    seq: AtomicU64,
}

#[derive(Deserialize)]
struct Message {
    content: String,
}

type Answer = (StatusCode, Json<Value>);

async fn message(
    State(floor): State<Arc<Floor>>,
    Path(key): Path<String>,
    headers: HeaderMap,
    Json(message): Json<Message>,
) -> Answer {
    if headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()) != Some(floor.token.as_bytes()) {
        return failed(
            StatusCode::UNAUTHORIZED,
            "a bearer token is required".into(),
        );
    }
    match floor.turn(&key, message.content).await {
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
    /// `model` at `base_url`, answering requests that bear `token`.
    fn open(db: &std::path::Path, base_url: &str, model: String, token: &str) -> Floor {
        let db = Connection::open(db).expect("opening the database");
        db.execute_batch(SCHEMA).expect("creating the tables");
        db.set_prepared_statement_cache_capacity(64);
        Floor {
            token: format!("Bearer {token}"),
            model,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            client: reqwest::Client::builder().build().expect("an HTTP client"),
            tools: tools(),
            db: Mutex::new(db),
            histories: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
        }
    }

    /// One text turn of `key`: the model's answer to `input`, committed.
    /// A session's turns are expected one at a time (the bench's client
    /// waits for each); the floor has no scheduler to order them.
    async fn turn(&self, key: &str, input: String) -> Result<String, String> {
        let id = uuid::Uuid::now_v7().to_string();
        let started_at = now();
        let started = Instant::now();
        let user = raw(&json!({"role": "user", "content": input}));
        let mut history = self.history(key)?;
        let body = self.request(&history, &user);
        let (answer, usage) = self.call(body).await?;
        let assistant = raw(&json!({"role": "assistant", "content": answer}));
        let events = events(&self.seq, key, &id, &input, &answer, &usage, started);
        let turn = Turn {
            id: &id,
            session: key,
            input: &input,
            started_at: &started_at,
            usage: &usage,
            from: history.len(),
        };
        self.commit(&turn, [&user, &assistant], &events)?;
        history.extend([user, assistant]);
        self.histories
            .lock()
            .unwrap()
            .insert(key.to_string(), history);
        Ok(answer)
    }

    /// The session's messages: held in memory, read from the table once.
    fn history(&self, key: &str) -> Result<Vec<Box<RawValue>>, String> {
        if let Some(held) = self.histories.lock().unwrap().remove(key) {
            return Ok(held);
        }
        let db = self.db.lock().unwrap();
        let mut read = db
            .prepare_cached("SELECT json FROM messages WHERE session = ?1 ORDER BY idx")
            .map_err(text)?;
        let rows = read
            .query_map([key], |row| row.get::<_, String>(0))
            .map_err(text)?;
        rows.map(|json| RawValue::from_string(json.map_err(text)?).map_err(text))
            .collect()
    }

    /// The request's JSON, written straight from the held messages (a
    /// `json!` value would parse each of them again).
    fn request(&self, history: &[Box<RawValue>], user: &RawValue) -> Vec<u8> {
        #[derive(Serialize)]
        struct Request<'a> {
            model: &'a str,
            stream: bool,
            stream_options: StreamOptions,
            tools: &'a RawValue,
            messages: Vec<&'a RawValue>,
        }
        #[derive(Serialize)]
        struct StreamOptions {
            include_usage: bool,
        }
        let mut messages: Vec<&RawValue> = history.iter().map(|m| &**m).collect();
        messages.push(user);
        serde_json::to_vec(&Request {
            model: &self.model,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: &self.tools,
            messages,
        })
        .expect("a request is JSON")
    }

    /// Sends `body` and reads the answer's stream: its text and usage.
    async fn call(&self, body: Vec<u8>) -> Result<(String, Usage), String> {
        let mut response = self
            .client
            .post(&self.url)
            .header(header::CONTENT_TYPE, "application/json")
            .bearer_auth("none")
            .body(body)
            .send()
            .await
            .map_err(text)?
            .error_for_status()
            .map_err(text)?;
        let (mut answer, mut usage) = (String::new(), Usage::default());
        let mut buffer = Vec::new();
        while let Some(bytes) = response.chunk().await.map_err(text)? {
            buffer.extend_from_slice(&bytes);
            let mut start = 0;
            while let Some(end) = memchr::memchr(b'\n', &buffer[start..]) {
                let line = &buffer[start..start + end];
                start += end + 1;
                let Some(data) = line.strip_prefix(b"data: ") else {
                    continue;
                };
                if data == b"[DONE]" {
                    return Ok((answer, usage));
                }
                let chunk: Chunk = serde_json::from_slice(data).map_err(text)?;
                for choice in chunk.choices {
                    answer.push_str(choice.delta.content.as_deref().unwrap_or_default());
                }
                if let Some(u) = chunk.usage {
                    usage = u;
                }
            }
            buffer.drain(..start);
        }
        Err("the stream ended without [DONE]".into())
    }

    /// The turn's row, its messages and its events, in one transaction.
    fn commit(
        &self,
        turn: &Turn,
        messages: [&RawValue; 2],
        events: &[Event],
    ) -> Result<(), String> {
        let db = self.db.lock().unwrap();
        let write = || -> rusqlite::Result<()> {
            db.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            for event in events {
                db.prepare_cached(
                    "INSERT INTO events (seq, session, turn_id, type, json) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![event.seq as i64, turn.session, turn.id, event.kind, event.json])?;
            }
            db.prepare_cached(
                "INSERT INTO sessions (key, created_at) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            )?
            .execute(params![turn.session, turn.started_at])?;
            db.prepare_cached(
                "INSERT INTO turns (id, session, parent_turn_id, input, status, reason, iterations,
                    input_tokens, output_tokens, started_at, ended_at)
                 VALUES (?1, ?2, NULL, ?3, 'completed', 'final_answer', 1, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                turn.id,
                turn.session,
                turn.input,
                turn.usage.prompt_tokens,
                turn.usage.completion_tokens,
                turn.started_at,
                now(),
            ])?;
            let mut insert = db.prepare_cached(
                "INSERT INTO messages (session, idx, turn_id, json) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (idx, message) in (turn.from..).zip(messages) {
                insert.execute(params![turn.session, idx as i64, turn.id, message.get()])?;
            }
            db.prepare_cached("COMMIT")?.execute([])?;
            Ok(())
        };
        write().map_err(|e| {
            let _ = db.execute_batch("ROLLBACK");
            e.to_string()
        })
    }
}

struct Turn<'a> {
    id: &'a str,
    session: &'a str,
    input: &'a str,
    started_at: &'a str,
    usage: &'a Usage,
    /// The index of the turn's first message.
    from: usize,
}

struct Event {
    seq: u64,
    kind: &'static str,
    json: String,
}

/// The five events of a text turn, as `serve` writes them.
fn events(
    seq: &AtomicU64,
    key: &str,
    id: &str,
    input: &str,
    answer: &str,
    usage: &Usage,
    started: Instant,
) -> Vec<Event> {
    let usage =
        json!({"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens});
    let bodies = [
        ("turn_begin", json!({"input": input, "agent": "default"})),
        (
            "llm_request",
            json!({"iteration": 1, "model": "openai:m", "messages": 1, "tools": TOOLS, "tokens": 1005}),
        ),
        ("llm_delta", json!({"iteration": 1, "text": answer})),
        (
            "llm_response",
            json!({"iteration": 1, "model": "openai:m", "text": answer, "tool_calls": [],
                   "finish_reason": "stop", "usage": usage,
                   "duration_ms": started.elapsed().as_secs_f64() * 1000.0}),
        ),
        (
            "turn_end",
            json!({"status": "completed", "reason": "final_answer", "iterations": 1,
                   "usage": usage, "answer": answer}),
        ),
    ];
    #[derive(Serialize)]
    struct Head<'a> {
        seq: u64,
        time: String,
        session: &'a str,
        turn_id: &'a str,
        parent_turn_id: Option<&'a str>,
        #[serde(rename = "type")]
        kind: &'a str,
    }
    bodies
        .into_iter()
        .map(|(kind, body)| {
            let seq = seq.fetch_add(1, Ordering::Relaxed) + 1;
            let head = Head {
                seq,
                time: now(),
                session: key,
                turn_id: id,
                parent_turn_id: None,
                kind,
            };
            // The head's fields, then the body's: `{head,body}`.
            let mut json = serde_json::to_string(&head).expect("JSON");
            json.pop();
            json.push(',');
            json.push_str(&body.to_string()[1..]);
            Event { seq, kind, json }
        })
        .collect()
}

/// [`TOOLS`] definitions the size of the echo plugin's.
fn tools() -> Box<RawValue> {
    let tools: Vec<Value> = (0..TOOLS)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": "Adds two integers and returns their sum as a decimal string.",
                "parameters": {"type": "object", "properties": {
                    "a": {"type": "integer", "description": "The first addend."},
                    "b": {"type": "integer", "description": "The second addend."}},
                    "required": ["a", "b"]}}})
        })
        .collect();
    raw(&tools)
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Delta,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
}

#[derive(Deserialize, Default)]
struct Usage {
    prompt_tokens: i64,
    completion_tokens: i64,
}

fn raw(value: &impl serde::Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("JSON")
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that answers "ok" in two SSE chunks and keeps each request.
    async fn model() -> (String, Arc<Mutex<Vec<Value>>>) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            post(move |Json(body): Json<Value>| async move {
                kept.lock().unwrap().push(body);
                let chunk = |delta: Value, usage: Value| {
                    format!(
                        "data: {}\n\n",
                        json!({"choices": [{"delta": delta}], "usage": usage})
                    )
                };
                let usage = json!({"prompt_tokens": 10, "completion_tokens": 2});
                let body = chunk(json!({"role": "assistant", "content": "o"}), Value::Null)
                    + &chunk(json!({"content": "k"}), usage)
                    + "data: [DONE]\n\n";
                ([(header::CONTENT_TYPE, "text/event-stream")], body)
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (base, requests)
    }

    #[tokio::test]
    async fn a_turn_sends_the_held_history_and_commits_the_rows_serve_writes() {
        let (base, requests) = model().await;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let floor = Floor::open(&db, &base, "m".into(), "t");
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

        let db = Connection::open(&db).unwrap();
        let column = |sql: &str| -> Vec<String> {
            let mut statement = db.prepare(sql).unwrap();
            let rows = statement.query_map([], |row| row.get(0)).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let stored: Vec<Value> =
            column("SELECT json FROM messages WHERE session = 's' ORDER BY idx")
                .iter()
                .map(|json| serde_json::from_str(json).unwrap())
                .collect();
        let mut expected = second["messages"].as_array().unwrap().clone();
        expected.push(json!({"role": "assistant", "content": "ok"}));
        assert_eq!(stored, expected);
        assert_eq!(
            column(
                "SELECT input || ' ' || status || ' ' || output_tokens FROM turns ORDER BY input"
            ),
            ["again completed 2", "hi completed 2"]
        );
        let kinds = [
            "turn_begin",
            "llm_request",
            "llm_delta",
            "llm_response",
            "turn_end",
        ];
        assert_eq!(
            column("SELECT type FROM events ORDER BY seq"),
            [kinds, kinds].concat()
        );
        for json in column("SELECT json FROM events") {
            let event: Value = serde_json::from_str(&json).unwrap();
            assert_eq!(event["session"], "s", "{json}");
        }
    }
}
