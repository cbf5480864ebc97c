//! The HTTP API benchmark: `cargo bench -p wasmclaw-tests --bench serve` (or
//! `make bench`). Prints a table and writes `target/bench/serve.json`.
//!
//! `wasmclaw serve`'s API with 1,000 sessions, each watched by an SSE client
//! of its own (`GET /v1/sessions/{key}/events`, `llm_delta` included), and a
//! steady stream of 4,000 messages (`POST /v1/sessions/{key}/messages`), 200
//! a second: each session gets 4, 5 s apart. Each message is a
//! two-iteration turn with one tool call (the echo plugin's `add`) against a
//! fake model that waits 50 ms before each reply. Measured:
//!
//! - nothing lost (asserted): every client received, for its session, every
//!   event the session store holds for it, in `seq` order, none twice, and
//!   the `turn_end` of every message sent to it;
//! - the added latency per message: from sending the POST to its session's
//!   client receiving the turn's `turn_end`, minus the pure model time of
//!   the turn (2 × 50 ms); p50 and p99;
//! - the server's host CPU per message, its peak RSS, and its memory per
//!   connected SSE client.
//!
//! A control run comes first: 1,000 messages at the same rate on 250 other
//! sessions, 4 each, with no SSE client, each POST sent with `?wait=true`
//! (answered when its turn ends). Its latency and CPU per message, against
//! the main run's, show what the SSE clients cost.
//!
//! Three processes share the machine's cores: the server in this one (the
//! API, scheduler, agent and plugins, the session store on disk with the
//! event log writing every event, as in production), the fake model in a
//! child, and the clients (the 1,000 SSE readers and the message senders)
//! in another child, so the server's CPU and memory are its own. The
//! children's CPU is shown on rows of their own.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use wasmclaw::llm::ProviderKind;
use wasmclaw::protocol::{Event, EventBody, TurnEnd};
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, add_then_answer, cpu_of, fake_model_child, micros, millis, ms,
    percentile, print_and_save, proc_status_kb, process_cpu, serve_fake_model, us,
};
use wasmclaw_tests::fake_model::FakeModel;
use wasmclaw_tests::server::{Setup, TestServer, client_builder};
use wasmclaw_tests::{PluginDir, agents, eventually};

/// Sessions, each with an SSE client.
const SESSIONS: usize = 1000;
/// Messages per session.
const PER_SESSION: usize = 4;
/// Messages a second, over all sessions: with 1,000 sessions, a session
/// gets one every 5 s, long after its previous turn has ended.
const RATE: f64 = 200.0;
/// Sessions of the control run, without SSE clients: 1,000 messages.
const CONTROL_SESSIONS: usize = 250;
/// How long the fake model waits before each reply.
const MODEL_DELAY: Duration = Duration::from_millis(50);
/// The pure model time of a turn: two model calls.
const MODEL_TIME: Duration = Duration::from_millis(100);
/// Turns run before measuring (on sessions of their own).
const WARMUP: usize = 50;
/// How long any phase may take before the bench gives up.
const LIMIT: Duration = Duration::from_secs(120);

/// The flag the bench binary is started with to run the clients instead:
/// `--clients URL sse|wait`.
const CLIENTS_FLAG: &str = "--clients";

/// How the clients learn that a message's turn has ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// From its `turn_end` on the SSE stream of its session, which has a
    /// client of its own.
    Sse,
    /// From the answer to its POST, sent with `?wait=true`; no SSE client
    /// (the control).
    Wait,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::Sse => "sse",
            Mode::Wait => "wait",
        }
    }

    fn sessions(self) -> usize {
        match self {
            Mode::Sse => SESSIONS,
            Mode::Wait => CONTROL_SESSIONS,
        }
    }

    fn messages(self) -> usize {
        self.sessions() * PER_SESSION
    }

    /// The key of session `i`.
    fn key(self, i: usize) -> String {
        match self {
            Mode::Sse => format!("s{i}"),
            Mode::Wait => format!("c{i}"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == FAKE_MODEL_FLAG) {
        return serve_fake_model(
            2,
            add_then_answer(MODEL_DELAY),
            [],
            FakeModel::openai_base_url,
        );
    }
    // 1,000 SSE connections on both sides, plus the sockets of running
    // turns: more than a 1,024 soft limit on open files allows. The children
    // inherit the limit.
    rlimit::increase_nofile_limit(u64::MAX).expect("raising the open-file limit");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(at) = args.iter().position(|a| a == CLIENTS_FLAG) {
        let url = args.get(at + 1).expect("--clients URL MODE").clone();
        let mode = match args.get(at + 2).map(String::as_str) {
            Some("sse") => Mode::Sse,
            Some("wait") => Mode::Wait,
            other => panic!("--clients URL MODE: unknown mode {other:?}"),
        };
        return rt.block_on(clients(url, mode));
    }
    // Prints the table before asserting that nothing was lost.
    rt.block_on(bench());
}

// ---------------------------------------------------------------- server

async fn bench() {
    let (mut model, base) = fake_model_child();
    let dir = PluginDir::new();
    dir.add("echo");
    let candidate = agents::candidate(ProviderKind::OpenAi, base, "bench", true);
    let server = TestServer::start(dir.load().await, vec![candidate], Setup::default()).await;
    warm_up(&server).await;
    let control = phase(&server, Mode::Wait, model.id()).await;
    let sse = phase(&server, Mode::Sse, model.id()).await;
    let peak = proc_status_kb("VmHWM");

    let check = compare(&server, &sse.report).await;
    let dropped = server.agent.bus().dropped_total();
    server.stop().await;
    drop(model.stdin.take());
    model.wait().unwrap();

    let messages = Mode::Sse.messages();
    let (control_added, _, _) = latencies(&control.report);
    let (added, answered, dispositions) = latencies(&sse.report);
    let report = &sse.report;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mb = |kb: u64| format!("{:.1} MB", kb as f64 / 1024.0);
    let per_client = (sse.rss_connected as f64 - sse.rss_before as f64) / SESSIONS as f64;
    let latency_rows = |label: &str, sorted: &[Duration]| -> Vec<Row> {
        if sorted.is_empty() {
            return Vec::new();
        }
        [(50, "p50"), (99, "p99"), (100, "max")]
            .into_iter()
            .map(|(p, name)| {
                let d = percentile(sorted, p);
                (format!("{label}, {name}"), ms(d), millis(d))
            })
            .collect()
    };

    let control_messages = Mode::Wait.messages();
    let sse_cpu = sse.cpu / messages as u32;
    let control_cpu = control.cpu / control_messages as u32;
    let mut rows: Vec<Row> = vec![
        (
            "CPU cores (server, fake model and clients share them)".into(),
            cores.to_string(),
            json!(cores),
        ),
        (
            format!("messages ({SESSIONS} sessions with an SSE client each, {RATE}/s)"),
            messages.to_string(),
            json!(messages),
        ),
        (
            "pure model time per message (2 calls × 50 ms)".into(),
            ms(MODEL_TIME),
            millis(MODEL_TIME),
        ),
        (
            "connecting the 1,000 SSE clients: wall".into(),
            ms(sse.connect_wall),
            millis(sse.connect_wall),
        ),
        (
            "connecting the 1,000 SSE clients: server CPU".into(),
            ms(sse.connect_cpu),
            millis(sse.connect_cpu),
        ),
        (
            "server RSS per connected SSE client (growth over 1,000)".into(),
            format!("{per_client:.1} KB"),
            json!(per_client),
        ),
        (
            "events received by the clients".into(),
            check.received.to_string(),
            json!(check.received),
        ),
        (
            "sessions whose stream is exactly the stored events".into(),
            format!("{} of {SESSIONS}", check.whole),
            json!(check.whole),
        ),
        (
            "events missing / twice or out of order / not stored".into(),
            format!("{} / {} / {}", check.missing, check.disorder, check.extra),
            json!([check.missing, check.disorder, check.extra]),
        ),
        (
            "messages whose turn_end reached the client (completed)".into(),
            format!("{} of {messages} ({})", added.len(), report.completed),
            json!(added.len()),
        ),
        (
            "turn_end received twice / for no message sent".into(),
            format!("{} / {}", report.turn_ends_twice, report.turn_ends_unknown),
            json!([report.turn_ends_twice, report.turn_ends_unknown]),
        ),
        (
            "message dispositions".into(),
            format!("{dispositions:?}"),
            json!(dispositions),
        ),
        (
            "SSE reconnects / stream errors".into(),
            format!("{} / {}", report.reconnects, report.errors.len()),
            json!([report.reconnects, report.errors.len()]),
        ),
        (
            "events dropped from SSE queues (refilled from the log)".into(),
            dropped.to_string(),
            json!(dropped),
        ),
    ];
    rows.extend(latency_rows("POST answered (turn_id)", &answered));
    rows.extend(latency_rows(
        "added latency (POST to turn_end on SSE − 100 ms)",
        &added,
    ));
    rows.extend([
        (
            "wall, first POST to last turn_end received".into(),
            ms(sse.wall),
            millis(sse.wall),
        ),
        (
            "senders behind their schedule, max".into(),
            ms(Duration::from_micros(report.send_lag_us)),
            json!(report.send_lag_us as f64 / 1000.0),
        ),
        (
            "server CPU per message (API, turn, plugin, store, SSE)".into(),
            us(sse_cpu),
            micros(sse_cpu),
        ),
        (
            "server CPU, share of one core".into(),
            format!(
                "{:.0} %",
                sse.cpu.as_secs_f64() / sse.wall.as_secs_f64() * 100.0
            ),
            json!(sse.cpu.as_secs_f64() / sse.wall.as_secs_f64()),
        ),
        cpu_row(
            "fake model CPU per message (child process)",
            sse.model_cpu,
            messages,
        ),
        cpu_row(
            "clients CPU per message (child process)",
            Duration::from_micros(report.cpu_us),
            messages,
        ),
        (
            "server RSS before the SSE clients connect (warmed up)".into(),
            mb(sse.rss_before),
            json!(sse.rss_before),
        ),
        (
            "server RSS with 1,000 SSE clients connected".into(),
            mb(sse.rss_connected),
            json!(sse.rss_connected),
        ),
        (
            "server RSS after the messages".into(),
            mb(sse.rss_end),
            json!(sse.rss_end),
        ),
        ("server peak RSS (VmHWM)".into(), mb(peak), json!(peak)),
        (
            format!(
                "control: messages ({CONTROL_SESSIONS} sessions, no SSE client, \
                 POST ?wait=true, {RATE}/s)"
            ),
            control_messages.to_string(),
            json!(control_messages),
        ),
    ]);
    rows.extend(latency_rows(
        "control: added latency (POST to answer − 100 ms)",
        &control_added,
    ));
    rows.extend([
        (
            "control: server CPU per message".into(),
            us(control_cpu),
            micros(control_cpu),
        ),
        (
            "server CPU per message added by the SSE clients".into(),
            us(sse_cpu.saturating_sub(control_cpu)),
            micros(sse_cpu.saturating_sub(control_cpu)),
        ),
    ]);
    print_and_save("serve", &rows);

    let mut problems = check.problems;
    if added.len() != messages || report.completed != messages {
        problems.push(format!(
            "{} of {messages} turn_end events reached their client, {} completed",
            added.len(),
            report.completed
        ));
    }
    if report.turn_ends_twice + report.turn_ends_unknown > 0 {
        problems.push("turn_end events twice or for no message sent".into());
    }
    problems.extend(report.errors.iter().take(5).cloned());
    if control.report.completed != Mode::Wait.messages() {
        problems.push(format!(
            "control: {} of {} turns completed",
            control.report.completed,
            Mode::Wait.messages()
        ));
    }
    assert!(
        problems.is_empty(),
        "events were lost or garbled:\n{}",
        problems.join("\n")
    );
}

/// `cpu` per message.
fn cpu_row(label: &str, cpu: Duration, messages: usize) -> Row {
    let per = cpu / messages as u32;
    (label.into(), us(per), micros(per))
}

/// The added latencies (sorted), the times to the POST's answer (sorted)
/// and how many messages got each disposition.
fn latencies(report: &Report) -> (Vec<Duration>, Vec<Duration>, BTreeMap<String, usize>) {
    let mut added = Vec::new();
    let mut answered = Vec::new();
    let mut dispositions = BTreeMap::new();
    for m in &report.messages {
        answered.push(Duration::from_micros(m.answered_us));
        *dispositions.entry(m.disposition.clone()).or_default() += 1;
        if let Some(ended) = m.ended_us {
            added.push(Duration::from_micros(ended).saturating_sub(MODEL_TIME));
        }
    }
    added.sort();
    answered.sort();
    (added, answered, dispositions)
}

/// What one run of the clients measured.
struct Phase {
    report: Report,
    connect_wall: Duration,
    connect_cpu: Duration,
    rss_before: u64,
    rss_connected: u64,
    rss_end: u64,
    /// From "go" to the last message's end.
    wall: Duration,
    cpu: Duration,
    model_cpu: Duration,
}

/// Runs the clients' process in `mode`: it connects, waits for "go", sends
/// the messages, and says "done" once every turn has ended.
async fn phase(server: &TestServer, mode: Mode, model_pid: u32) -> Phase {
    let rss_before = proc_status_kb("VmRSS");
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .arg(CLIENTS_FLAG)
        .arg(&server.url)
        .arg(mode.arg())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let connecting = Instant::now();
    let cpu_connecting = process_cpu();
    expect_line(&mut lines, "connected").await;
    let connect_wall = connecting.elapsed();
    let connect_cpu = process_cpu() - cpu_connecting;
    let rss_connected = proc_status_kb("VmRSS");

    let cpu_before = process_cpu();
    let model_cpu_before = cpu_of(model_pid);
    let started = Instant::now();
    to_child.write_all(b"go\n").await.unwrap();
    to_child.flush().await.unwrap();
    expect_line(&mut lines, "done").await;
    let wall = started.elapsed();
    let cpu = process_cpu() - cpu_before;
    let model_cpu = cpu_of(model_pid) - model_cpu_before;
    let rss_end = proc_status_kb("VmRSS");

    let report = lines
        .next_line()
        .await
        .unwrap()
        .expect("the clients' report");
    let report: Report = serde_json::from_str(&report).expect("the clients' report is JSON");
    let status = child.wait().await.unwrap();
    assert!(status.success(), "the clients exited with {status}");
    Phase {
        report,
        connect_wall,
        connect_cpu,
        rss_before,
        rss_connected,
        rss_end,
        wall,
        cpu,
        model_cpu,
    }
}

/// A few turns before measuring, so the first ones' costs (connections to
/// the model, plugin instances) are not counted.
async fn warm_up(server: &TestServer) {
    let client = server.client();
    let mut turns = JoinSet::new();
    for i in 0..WARMUP {
        let request = client
            .post(server.at(&format!("/v1/sessions/warmup-{i}/messages?wait=true")))
            .json(&json!({"content": "add 40 and 2"}));
        turns.spawn(async move {
            let answer: serde_json::Value = request.send().await.unwrap().json().await.unwrap();
            assert_eq!(answer["status"], "completed", "warm-up turn: {answer}");
        });
    }
    while let Some(done) = turns.join_next().await {
        done.unwrap();
    }
}

async fn expect_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    expected: &str,
) {
    let line = tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("the clients did not say {expected:?} within {LIMIT:?}"))
        .unwrap();
    assert_eq!(line.as_deref(), Some(expected), "the clients' progress");
}

/// What the comparison of the clients' streams with the store found.
struct Check {
    received: usize,
    /// Sessions whose stream is exactly the stored events.
    whole: usize,
    missing: usize,
    /// Seqs received twice or after a later one.
    disorder: usize,
    extra: usize,
    problems: Vec<String>,
}

/// Compares what each client received with what the store holds for its
/// session, once the event log has written every event.
async fn compare(server: &TestServer, report: &Report) -> Check {
    let store = server.agent.store().clone();
    let last = server.agent.bus().last_seq();
    assert!(
        eventually(LIMIT, || store.last_seq().unwrap() >= last).await,
        "the event log catches up"
    );
    let mut check = Check {
        received: 0,
        whole: 0,
        missing: 0,
        disorder: 0,
        extra: 0,
        problems: Vec::new(),
    };
    assert_eq!(report.received.len(), SESSIONS, "a stream per session");
    for (session, seqs) in &report.received {
        check.received += seqs.len();
        let stored: Vec<u64> = store
            .events(Some(session), 0, usize::MAX)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        if *seqs == stored {
            check.whole += 1;
            continue;
        }
        let disorder = seqs.windows(2).filter(|w| w[1] <= w[0]).count();
        let got: HashSet<u64> = seqs.iter().copied().collect();
        let held: HashSet<u64> = stored.iter().copied().collect();
        let missing = held.difference(&got).count();
        let extra = got.difference(&held).count();
        check.disorder += disorder;
        check.missing += missing;
        check.extra += extra;
        if check.problems.len() < 5 {
            check.problems.push(format!(
                "session {session}: {} events received, {} stored; {missing} missing, \
                 {disorder} twice or out of order, {extra} not stored",
                seqs.len(),
                stored.len(),
            ));
        }
    }
    check
}

// --------------------------------------------------------------- clients

/// What the clients report, as one JSON line.
#[derive(Serialize, Deserialize)]
struct Report {
    /// Per session, every `seq` received, in the order received.
    received: BTreeMap<String, Vec<u64>>,
    messages: Vec<Sent>,
    /// Messages whose turn_end said `completed`.
    completed: usize,
    turn_ends_twice: usize,
    turn_ends_unknown: usize,
    /// Streams that ended or failed and were opened again (with
    /// `Last-Event-ID`).
    reconnects: usize,
    /// Failed connections, malformed streams or events (the first ones).
    errors: Vec<String>,
    /// The latest a message was sent after its time in the schedule.
    send_lag_us: u64,
    /// The clients' CPU during the message phase.
    cpu_us: u64,
}

#[derive(Serialize, Deserialize)]
struct Sent {
    session: String,
    turn_id: String,
    disposition: String,
    /// From sending the POST to its answer.
    answered_us: u64,
    /// From sending the POST to receiving the turn's `turn_end` on the
    /// session's stream.
    ended_us: Option<u64>,
}

/// One session's stream, as read so far.
#[derive(Default)]
struct Stream {
    seqs: Vec<u64>,
    reconnects: usize,
    errors: Vec<String>,
}

/// A `turn_end` as received: the turn, when, and its status.
type Ended = (String, Instant, String);

/// The clients' process: in [`Mode::Sse`], an SSE reader per session. Says
/// `connected` once every stream is open, waits for `go`, sends the
/// messages, says `done` once every message's turn has ended, then prints
/// the [`Report`].
#[allow(clippy::print_stdout)]
async fn clients(url: String, mode: Mode) {
    let client = client_builder().build().unwrap();
    let (ends_tx, mut ends) = mpsc::unbounded_channel::<Ended>();
    let readers_wanted = if mode == Mode::Sse { SESSIONS } else { 0 };
    let (ready_tx, mut ready) = mpsc::channel::<()>(SESSIONS);
    let mut streams = Vec::with_capacity(readers_wanted);
    let mut readers = JoinSet::new();
    for i in 0..readers_wanted {
        let stream = Arc::new(Mutex::new(Stream::default()));
        streams.push(stream.clone());
        let reader = read_events(
            client.clone(),
            format!("{url}/v1/sessions/{}/events", mode.key(i)),
            mode.key(i),
            stream,
            ends_tx.clone(),
            ready_tx.clone(),
        );
        readers.spawn(reader);
    }
    drop(ready_tx);
    for _ in 0..readers_wanted {
        tokio::time::timeout(LIMIT, ready.recv())
            .await
            .expect("every SSE client connects")
            .expect("a reader for every session");
    }
    println!("connected");
    tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new()))
        .await
        .unwrap()
        .unwrap();

    // 200 messages a second, session after session.
    let messages = mode.messages();
    let wait = if mode == Mode::Wait { "?wait=true" } else { "" };
    let cpu_before = process_cpu();
    let start = tokio::time::Instant::now();
    let mut lag = Duration::ZERO;
    let mut posts = JoinSet::new();
    for k in 0..messages {
        let at = start + Duration::from_secs_f64(k as f64 / RATE);
        tokio::time::sleep_until(at).await;
        lag = lag.max(at.elapsed());
        let session = mode.key(k % mode.sessions());
        let request = client
            .post(format!("{url}/v1/sessions/{session}/messages{wait}"))
            .json(&json!({"content": "add 40 and 2"}));
        let ends = ends_tx.clone();
        posts.spawn(async move {
            let sent = Instant::now();
            let response = request.send().await.expect("POST a message");
            assert!(
                response.status().is_success(),
                "POST: {}",
                response.status()
            );
            let answer: serde_json::Value = response.json().await.expect("a JSON answer");
            let answered = sent.elapsed();
            if mode == Mode::Wait {
                // Answered when the turn ended.
                let turn_id = answer["turn_id"].as_str().unwrap_or_default().to_string();
                let status = answer["status"].as_str().unwrap_or_default().to_string();
                let _ = ends.send((turn_id, Instant::now(), status));
            }
            (session, answer, sent, answered)
        });
    }
    let mut sent: HashMap<String, (Sent, Instant)> = HashMap::with_capacity(messages);
    while let Some(post) = posts.join_next().await {
        let (session, answer, at, answered) = post.unwrap();
        let turn_id = answer["turn_id"].as_str().expect("a turn_id").to_string();
        let message = Sent {
            session,
            turn_id: turn_id.clone(),
            disposition: answer["disposition"].as_str().unwrap_or("?").to_string(),
            answered_us: answered.as_micros() as u64,
            ended_us: None,
        };
        sent.insert(turn_id, (message, at));
    }

    // Every turn_end, then a moment for anything that should not come.
    let mut completed = 0;
    let mut twice = 0;
    let mut unknown = 0;
    let mut on_end = |(turn_id, at, status): Ended| match sent.get_mut(&turn_id) {
        Some((message, sent_at)) if message.ended_us.is_none() => {
            message.ended_us = Some((at - *sent_at).as_micros() as u64);
            completed += usize::from(status == "completed");
            true
        }
        Some(_) => {
            twice += 1;
            false
        }
        None => {
            unknown += 1;
            false
        }
    };
    let mut waiting = messages;
    while waiting > 0 {
        match tokio::time::timeout(LIMIT, ends.recv()).await {
            Ok(Some(end)) => waiting -= usize::from(on_end(end)),
            _ => break,
        }
    }
    let cpu = process_cpu() - cpu_before;
    println!("done");
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(end) = ends.try_recv() {
        on_end(end);
    }
    readers.abort_all();

    let mut report = Report {
        received: BTreeMap::new(),
        messages: sent.into_values().map(|(m, _)| m).collect(),
        completed,
        turn_ends_twice: twice,
        turn_ends_unknown: unknown,
        reconnects: 0,
        errors: Vec::new(),
        send_lag_us: lag.as_micros() as u64,
        cpu_us: cpu.as_micros() as u64,
    };
    for (i, stream) in streams.iter().enumerate() {
        let mut stream = stream.lock().unwrap();
        report
            .received
            .insert(mode.key(i), std::mem::take(&mut stream.seqs));
        report.reconnects += stream.reconnects;
        report.errors.append(&mut stream.errors);
    }
    report.errors.truncate(20);
    println!("{}", serde_json::to_string(&report).unwrap());
}

/// Reads `session`'s events from `url` into `stream`, reporting each
/// `turn_end` to `ends`; opens the stream again (with `Last-Event-ID`) if it
/// ends or fails. Says `ready` once the stream is first open.
async fn read_events(
    client: reqwest::Client,
    url: String,
    session: String,
    stream: Arc<Mutex<Stream>>,
    ends: mpsc::UnboundedSender<Ended>,
    ready: mpsc::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut last: Option<u64> = None;
    let error = |e: String| {
        stream
            .lock()
            .unwrap()
            .errors
            .push(format!("{session}: {e}"))
    };
    loop {
        let mut request = client.get(&url);
        if let Some(seq) = last {
            request = request.header("last-event-id", seq.to_string());
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(()).await;
                }
                let mut events = response.bytes_stream().eventsource();
                while let Some(item) = events.next().await {
                    let sse = match item {
                        Ok(sse) => sse,
                        Err(e) => {
                            error(format!("SSE stream: {e}"));
                            break;
                        }
                    };
                    let event: Event = match serde_json::from_str(&sse.data) {
                        Ok(event) => event,
                        Err(e) => {
                            error(format!("data is not an event ({e}): {}", sse.data));
                            continue;
                        }
                    };
                    if sse.id != event.seq.to_string()
                        || event.session.as_deref() != Some(session.as_str())
                    {
                        error(format!("id {:?} with event {}", sse.id, sse.data));
                    }
                    stream.lock().unwrap().seqs.push(event.seq);
                    last = Some(event.seq);
                    if let EventBody::TurnEnd(TurnEnd { status, .. }) = &event.body {
                        let status = serde_json::to_value(status).unwrap();
                        let turn_id = event.turn_id.clone().unwrap_or_default();
                        let status = status.as_str().unwrap_or_default().to_string();
                        let _ = ends.send((turn_id, Instant::now(), status));
                    }
                }
            }
            Ok(response) => error(format!("GET events: {}", response.status())),
            Err(e) => error(format!("GET events: {e}")),
        }
        stream.lock().unwrap().reconnects += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
