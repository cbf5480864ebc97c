//! What the benchmarks share: timing, percentiles, and the table they print
//! and write to `target/bench/NAME.json`.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::target_dir;

/// One line of a benchmark's table: the name, the figure as shown, and the
/// figure for the file.
pub type Row = (String, String, Value);

/// The durations of `n` runs of `f`, sorted.
pub async fn timed(n: usize, f: impl AsyncFn()) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    samples.sort();
    samples
}

pub fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Microseconds with a fraction, for the figures file.
pub fn micros(d: Duration) -> Value {
    json!(d.as_nanos() as f64 / 1000.0)
}

pub fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_nanos() as f64 / 1000.0)
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Milliseconds with a fraction, for the figures file.
pub fn millis(d: Duration) -> Value {
    json!(d.as_secs_f64() * 1000.0)
}

/// This process's resident set size, in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) this process has used so far, all threads.
pub fn process_cpu() -> Duration {
    cpu_in("/proc/self/stat")
}

/// The CPU time (user + system) process `pid` has used so far; as
/// [`process_cpu`], for another process.
pub fn cpu_of(pid: u32) -> Duration {
    cpu_in(&format!("/proc/{pid}/stat"))
}

fn cpu_in(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    // Fields after the command name (which is in parentheses): utime and
    // stime are the 12th and 13th, in clock ticks (100 per second on Linux).
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// Prints `rows` as a table and writes them to `target/bench/{name}.json`.
pub fn print_and_save(name: &str, rows: &[Row]) {
    let width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    println!("\n{:<width$}  value", "measurement");
    println!("{:-<width$}  {:-<12}", "", "");
    for (name, shown, _) in rows {
        println!("{name:<width$}  {shown}");
    }
    let out = target_dir().join("bench");
    std::fs::create_dir_all(&out).unwrap();
    let figures: serde_json::Map<String, Value> = rows
        .iter()
        .map(|(n, s, v)| (n.clone(), json!({"shown": s, "value": v})))
        .collect();
    let file = out.join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_string_pretty(&figures).unwrap()).unwrap();
    println!("\nwritten to {}", file.display());
}

/// The fake model of the scheduler and serve benches: after `delay`, a call
/// of the echo plugin's `add`, or the answer once the tool result is in (a
/// two-iteration turn with one tool call).
pub fn add_then_answer(delay: Duration) -> crate::fake_model::Options {
    use crate::fake_model::{Options, Reply, Responder, after_tool_result};
    let responder = Responder::new(move |body| {
        let reply = if after_tool_result(body) {
            Reply::text("The sum is 42.")
        } else {
            Reply::tool("c1", "add", json!({"a": 40, "b": 2}))
        };
        Reply::Delay(delay, Box::new(reply))
    });
    Options {
        responder: Some(responder),
        ..Default::default()
    }
}

/// The flag a bench binary is started with to serve the fake model instead.
pub const FAKE_MODEL_FLAG: &str = "--fake-model";

/// Runs this bench binary again with [`FAKE_MODEL_FLAG`], so the fake model's
/// CPU is not the host's: the child (it stops when its stdin closes) and the
/// base URL it printed.
pub fn fake_model_child() -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg(FAKE_MODEL_FLAG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    (child, first_line.trim().to_string())
}

/// The child's side: starts the fake model on `workers` threads with
/// `options` and `replies`, prints the base URL `url` gives, and serves
/// until stdin closes.
pub fn serve_fake_model(
    workers: usize,
    options: crate::fake_model::Options,
    replies: impl IntoIterator<Item = crate::fake_model::Reply>,
    url: fn(&crate::fake_model::FakeModel) -> String,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fake = crate::fake_model::FakeModel::start_with(options, replies).await;
        println!("{}", url(&fake));
        tokio::task::spawn_blocking(|| std::io::stdin().lines().count())
            .await
            .unwrap();
    });
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`).
pub fn proc_status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}
