//! What the host costs, measured from outside: `cargo bench -p
//! wasmclaw-tests --bench host_cost` (or `make bench`). Prints a table and
//! writes `target/bench/host_cost.json`.
//!
//! The release binary, loopback only, against an OpenAI-format fake model
//! in a child process (so its CPU is not the host's):
//!
//! - **per turn**: `wasmclaw serve` with one plugin (echo), 50 turns one
//!   after another on one session (`POST ?wait=true`): text turns (one model
//!   call) and tool turns (echo's `add`, then the answer: two model calls),
//!   against a model that answers at once and one that takes 200 ms per
//!   reply. The server's CPU over the 50 turns (every thread, to the
//!   nanosecond), per turn. Targets: 0.25 ms a text turn and 0.5 ms a tool
//!   turn back to back, at most 1.5 times that with the 200 ms model. Also
//!   its threads' wake-ups (context switches) per turn: most of a turn's CPU
//!   is handing work from thread to thread. And, with the model at once, a
//!   text turn whose 900-character answer streams in 200 chunks, a token or
//!   so each, as a real model sends it, though all at once: the best case
//!   for joining them into deltas (no target of its own: the targeted rows
//!   stream two or three chunks).
//!
//!   The same text and tool turns are measured against the floor
//!   (`tests/floor`, `wasmclaw-floor`): the same API, model client, plugin
//!   sandbox, store writes, runtime and allocator, with none of wasmclaw's
//!   own work between them. A row gives `serve`'s CPU per turn over the
//!   floor's: what the host costs beyond its parts, whatever the machine's
//!   speed that day.
//!
//!   Each of these nine rows is measured in [`ROUNDS`] servers, one after
//!   another, the rows taking turns and each round starting one row later,
//!   so that a change in the machine's speed reaches every row alike. A row
//!   gives the median of its servers (each figure's median taken on its
//!   own) and, for the CPU, the least and the most. The rounds take about
//!   six minutes, five of them the 200 ms rows.
//! - **idle**: `wasmclaw serve` with ten plugins, once up and loaded: its
//!   CPU and its threads' wake-ups (context switches) over 60 s
//!   (`WASMCLAW_BENCH_IDLE_SECONDS` to change). Target: under 5 ms.
//! - **one-shot**: `wasmclaw run` with one plugin (its compiled code
//!   cached), one text turn: wall from spawn to exit, CPU and peak RSS, over
//!   20 runs. Targets: 15 ms wall, 20 MB peak RSS.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::bench::{
    ChildUsage, FAKE_MODEL_FLAG, Row, add_ten_plugins, add_then_answer, context_switches, cpu_of,
    fake_model_child_with, micros, millis, ms, percentile, print_and_save, serve_fake_model,
    switches_since, us, wait_with_usage,
};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder};
use wasmclaw_tests::serve_bin::{ServeChild, serve_command};
use wasmclaw_tests::server::TOKEN;
use wasmclaw_tests::wasmclaw_bin;

/// Turns measured per row, one after another on one session.
const TURNS: usize = 50;
/// Servers each per-turn row is measured in.
const ROUNDS: usize = 5;
/// Turns before measuring, on a session of their own.
const WARMUP: usize = 5;
/// The slow model's time per reply.
const SLOW: Duration = Duration::from_millis(200);
/// One-shot runs measured (after one that fills the compile cache).
const RUNS: usize = 20;
/// The idle time measured, unless `WASMCLAW_BENCH_IDLE_SECONDS` says.
const IDLE: Duration = Duration::from_secs(60);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == FAKE_MODEL_FLAG) {
        // The child: `--fake-model text|tool DELAY_MS`.
        let delay = Duration::from_millis(args[at + 2].parse().expect("a delay in ms"));
        let options = match args[at + 1].as_str() {
            "text" => Options {
                responder: Some(Responder::new(move |_| {
                    Reply::Delay(delay, Box::new(Reply::text("ok")))
                })),
                ..Options::default()
            },
            "tool" => add_then_answer(delay),
            "streamed" => Options {
                responder: Some(Responder::new(move |_| {
                    Reply::Delay(delay, Box::new(Reply::text(streamed_answer())))
                })),
                text_pieces: STREAMED_CHUNKS,
                ..Options::default()
            },
            other => panic!("--fake-model {other}: expected text, tool or streamed"),
        };
        return serve_fake_model(1, options, [], FakeModel::openai_base_url);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows: Vec<Row> = Vec::new();
    rt.block_on(async {
        let rows_of = [
            (Host::Serve, Kind::Text, Duration::ZERO),
            (Host::Serve, Kind::Tool, Duration::ZERO),
            (Host::Serve, Kind::Streamed, Duration::ZERO),
            (Host::Serve, Kind::Text, SLOW),
            (Host::Serve, Kind::Tool, SLOW),
            (Host::Floor, Kind::Text, Duration::ZERO),
            (Host::Floor, Kind::Tool, Duration::ZERO),
            (Host::Floor, Kind::Text, SLOW),
            (Host::Floor, Kind::Tool, SLOW),
        ];
        let mut by_row = vec![Vec::new(); rows_of.len()];
        for round in 0..ROUNDS {
            for at in (0..rows_of.len()).map(|i| (i + round) % rows_of.len()) {
                let (host, kind, delay) = rows_of[at];
                by_row[at].push(per_turn(host, kind, delay).await);
            }
        }
        for (&(host, kind, delay), servers) in rows_of.iter().zip(&by_row) {
            rows.extend(per_turn_rows(host, kind, delay, servers.clone()));
        }
        for (kind, delay) in [Kind::Text, Kind::Tool]
            .map(|k| [(k, Duration::ZERO), (k, SLOW)])
            .concat()
        {
            let of = |host| {
                let at = rows_of.iter().position(|&row| row == (host, kind, delay));
                &by_row[at.unwrap()]
            };
            rows.push(over_the_floor(
                kind,
                delay,
                of(Host::Serve),
                of(Host::Floor),
            ));
        }
        rows.extend(idle().await);
    });
    rows.extend(one_shot());
    print_and_save("host_cost", &rows);
}

/// What serves a row's turns.
#[derive(Clone, Copy, PartialEq)]
enum Host {
    Serve,
    /// `wasmclaw-floor` (`tests/floor`): wasmclaw's parts without its own
    /// work; text and tool turns.
    Floor,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Tool,
    /// A text turn whose answer streams in [`STREAMED_CHUNKS`] chunks, as
    /// a real model streams a long answer.
    Streamed,
}

/// The chunks of the streamed answer, about a token each.
const STREAMED_CHUNKS: usize = 200;

/// The streamed answer: 900 characters.
fn streamed_answer() -> String {
    "The quick brown fox jumps over the lazy dog. ".repeat(20)
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Tool => "tool",
            Kind::Streamed => "streamed",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::Text => "text turn",
            Kind::Tool => "tool turn (1 call)",
            Kind::Streamed => "text turn streamed in 200 chunks",
        }
    }

    fn answer(self) -> String {
        match self {
            Kind::Text => "ok".into(),
            Kind::Tool => "The sum is 42.".into(),
            Kind::Streamed => streamed_answer(),
        }
    }
}

/// The fake model child for `kind` with `delay` per reply, and its
/// OpenAI base URL.
fn model(kind: Kind, delay: Duration) -> (std::process::Child, String) {
    fake_model_child_with(&[kind.arg(), &delay.as_millis().to_string()])
}

/// What one server measured over [`TURNS`] turns.
#[derive(Clone, Copy)]
struct PerTurn {
    cpu: Duration,
    switches: f64,
    /// The median turn's.
    wall: Duration,
}

/// [`TURNS`] turns of `kind` on one session of `host` (`wasmclaw serve`
/// with echo loaded, or the floor): the server's CPU and wake-ups per
/// turn, and the median wall.
async fn per_turn(host: Host, kind: Kind, delay: Duration) -> PerTurn {
    let (mut model, base) = model(kind, delay);
    let dir = PluginDir::new();
    dir.add("echo");
    let command = match host {
        Host::Serve => serve_command(&dir.scratch("home"), &dir.path(), &base),
        Host::Floor => floor_command(
            &dir.scratch("floor").join("sessions.db"),
            &dir.path().join("echo.wasm"),
            &base,
        ),
    };
    let server = ServeChild::start(command).await;
    let client = server.client();
    for _ in 0..WARMUP {
        let answer = server.ask(&client, "warm-up", "What is 40 + 2?").await;
        assert_eq!(answer["answer"], kind.answer(), "{answer}");
    }
    let (cpu_before, switches_before) = (cpu_of(server.pid), context_switches(server.pid));
    let mut walls = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let started = Instant::now();
        let answer = server.ask(&client, "measured", "What is 40 + 2?").await;
        walls.push(started.elapsed());
        assert_eq!(answer["status"], "completed", "{answer}");
        assert_eq!(answer["answer"], kind.answer(), "{answer}");
    }
    let cpu = (cpu_of(server.pid) - cpu_before) / TURNS as u32;
    let switches = switches_since(server.pid, &switches_before) as f64 / TURNS as f64;
    server.stop().await;
    drop(model.stdin.take());
    model.wait().unwrap();
    walls.sort();
    PerTurn {
        cpu,
        switches,
        wall: percentile(&walls, 50),
    }
}

/// The floor (`tests/floor`) serving on a free loopback port with the
/// database `db`, the tools of `plugin`, the model at `base_url` and
/// [`TOKEN`], as [`serve_command`] starts `serve`.
fn floor_command(db: &Path, plugin: &Path, base_url: &str) -> tokio::process::Command {
    let bin = wasmclaw_bin().with_file_name("wasmclaw-floor");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --release -p wasmclaw-floor` (`make bench` does)",
        bin.display()
    );
    let mut command = tokio::process::Command::new(bin);
    command
        .env("WASMCLAW_API_TOKEN", TOKEN)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--model",
            "m",
            "--base-url",
            base_url,
        ])
        .arg("--db")
        .arg(db)
        .arg("--plugin")
        .arg(plugin)
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}

/// `serve`'s turn of `kind` over the floor's with `delay`: the median of
/// the rounds' ratios (each round measures both within minutes of each
/// other, so a change in the machine's speed cancels out).
fn over_the_floor(kind: Kind, delay: Duration, serve: &[PerTurn], floor: &[PerTurn]) -> Row {
    let mut ratios: Vec<f64> = serve
        .iter()
        .zip(floor)
        .map(|(s, f)| s.cpu.as_secs_f64() / f.cpu.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let ratio = ratios[ratios.len() / 2];
    (
        format!(
            "serve's CPU per {} over the floor's, {}, median of {ROUNDS} rounds",
            kind.words(),
            model_words(delay)
        ),
        format!("{ratio:.2} ×"),
        json!(ratio),
    )
}

fn model_words(delay: Duration) -> String {
    if delay.is_zero() {
        "model at once".to_string()
    } else {
        format!("model {} ms", delay.as_millis())
    }
}

/// The rows of `host`'s `kind` with `delay` from what its servers
/// measured: the median of each figure, and for the CPU the least and the
/// most.
fn per_turn_rows(host: Host, kind: Kind, delay: Duration, mut servers: Vec<PerTurn>) -> Vec<Row> {
    let middle = servers.len() / 2;
    servers.sort_by_key(|s| s.cpu);
    let (least, most, cpu) = (
        servers[0].cpu,
        servers[servers.len() - 1].cpu,
        servers[middle].cpu,
    );
    servers.sort_by(|a, b| a.switches.total_cmp(&b.switches));
    let switches = servers[middle].switches;
    servers.sort_by_key(|s| s.wall);
    let wall = servers[middle].wall;
    let in_us = |d: Duration| d.as_nanos() as f64 / 1000.0;
    let what = kind.words();
    let model = model_words(delay);
    let (host, cpu_of_it) = match host {
        Host::Serve => ("serve", "host CPU"),
        Host::Floor => ("the floor", "CPU"),
    };
    vec![
        (
            format!(
                "{host}: {cpu_of_it} per {what}, {model}, {TURNS} turns on one session, \
                 median of {ROUNDS} servers (least–most)"
            ),
            format!("{} ({:.1}–{:.1})", us(cpu), in_us(least), in_us(most)),
            micros(cpu),
        ),
        (
            format!(
                "{host}: wake-ups (context switches of its threads) per {what}, {model}, median"
            ),
            format!("{switches:.1}"),
            json!(switches),
        ),
        (
            format!("{host}: wall per {what}, {model}, median turn, median server"),
            ms(wall),
            millis(wall),
        ),
    ]
}

/// `wasmclaw serve` with ten plugins, idle: its CPU and wake-ups.
async fn idle() -> Vec<Row> {
    let idle = std::env::var("WASMCLAW_BENCH_IDLE_SECONDS")
        .ok()
        .map(|s| Duration::from_secs(s.parse().expect("WASMCLAW_BENCH_IDLE_SECONDS: seconds")))
        .unwrap_or(IDLE);
    let (mut model, base) = model(Kind::Text, Duration::ZERO);
    let dir = PluginDir::new();
    add_ten_plugins(&dir);
    let home = dir.scratch("home");
    // A first start fills the compile cache, as on any start but the first.
    let first = ServeChild::start(serve_command(&home, &dir.path(), &base)).await;
    first.until_plugins_loaded().await;
    first.stop().await;

    let server = ServeChild::start(serve_command(&home, &dir.path(), &base)).await;
    server.until_plugins_loaded().await;
    let plugins = server.get(&server.client(), "/v1/plugins").await;
    let loaded = plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] == "ok")
        .count();
    assert_eq!(loaded, 10, "ten plugins load: {plugins}");
    // What start-up left running settles first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu_before, switches_before) = (cpu_of(server.pid), context_switches(server.pid));
    tokio::time::sleep(idle).await;
    let cpu = cpu_of(server.pid) - cpu_before;
    let switches = switches_since(server.pid, &switches_before);
    server.stop().await;
    drop(model.stdin.take());
    model.wait().unwrap();
    let secs = idle.as_secs();
    vec![
        (
            format!("serve idle, 10 plugins: CPU over {secs} s"),
            ms(cpu),
            millis(cpu),
        ),
        (
            format!(
                "serve idle, 10 plugins: wake-ups (context switches of its threads) over {secs} s"
            ),
            switches.to_string(),
            json!(switches),
        ),
    ]
}

/// `wasmclaw run` with echo (cached), one text turn per run.
fn one_shot() -> Vec<Row> {
    let (mut model, base) = model(Kind::Text, Duration::ZERO);
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    // The first run compiles echo into the cache.
    run_once(&home, &dir.path(), &base);
    let mut runs: Vec<ChildUsage> = (0..RUNS)
        .map(|_| run_once(&home, &dir.path(), &base))
        .collect();
    drop(model.stdin.take());
    model.wait().unwrap();

    let median = |mut values: Vec<Duration>| {
        values.sort();
        (values[0], percentile(&values, 50))
    };
    let (wall_min, wall) = median(runs.iter().map(|r| r.wall).collect());
    let (cpu_min, cpu) = median(runs.iter().map(ChildUsage::cpu).collect());
    let (_, system) = median(runs.iter().map(|r| r.system).collect());
    runs.sort_by_key(|r| r.max_rss_kib);
    let rss = runs[runs.len() / 2].max_rss_kib;
    let rss_max = runs[runs.len() - 1].max_rss_kib;
    let mb = |kib: u64| format!("{:.1} MB", kib as f64 / 1024.0);
    vec![
        (
            format!("run, 1 plugin cached, text turn: wall, median of {RUNS} (min)"),
            format!("{} ({})", ms(wall), ms(wall_min)),
            millis(wall),
        ),
        (
            "run: CPU, median (min)".into(),
            format!("{} ({})", ms(cpu), ms(cpu_min)),
            millis(cpu),
        ),
        (
            "run: of which in the kernel, median".into(),
            ms(system),
            millis(system),
        ),
        (
            "run: peak RSS, median (max)".into(),
            format!("{} ({})", mb(rss), mb(rss_max)),
            json!(rss),
        ),
    ]
}

/// One `wasmclaw run` of a text turn, checked, and what it used.
// Reaped by `wait_with_usage` (wait4), which clippy does not know.
#[allow(clippy::zombie_processes)]
fn run_once(home: &Path, plugins: &Path, base: &str) -> ChildUsage {
    let started = Instant::now();
    let mut child = Command::new(wasmclaw_tests::wasmclaw_bin())
        .env("WASMCLAW_HOME", home)
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .arg("--plugins")
        .arg(plugins)
        .args(["run", "--model", "openai:m", "--base-url", base])
        .args(["-m", "What is 40 + 2?"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let usage = wait_with_usage(&child, started);
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(usage.status.success(), "wasmclaw run: {err}");
    assert_eq!(out, "ok\n", "{err}");
    usage
}
