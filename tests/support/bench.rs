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

/// CPU time (user + system) this process has used so far, all threads
/// (those that have ended included), to the nanosecond.
pub fn process_cpu() -> Duration {
    cpu_clock(0)
}

/// The CPU time (user + system) process `pid` has used so far, all its
/// threads (those that have ended included), to the nanosecond; as
/// [`process_cpu`], for another process.
pub fn cpu_of(pid: u32) -> Duration {
    cpu_clock(pid)
}

/// The CPU clock of process `pid` (0: this one), read through the kernel's
/// per-process clock: the sum over its threads, precise, where
/// `/proc/PID/stat` counts in 10 ms ticks.
#[allow(unsafe_code)]
fn cpu_clock(pid: u32) -> Duration {
    let pid = libc::pid_t::try_from(pid).expect("a pid");
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid place for the clock id.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    assert_eq!(rc, 0, "no CPU clock for process {pid} (error {rc})");
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid place for the time.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(
        rc,
        0,
        "reading the CPU clock of process {pid}: {}",
        std::io::Error::last_os_error()
    );
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What a child process used, as its parent learns when it reaps it.
#[derive(Debug, Clone, Copy)]
pub struct ChildUsage {
    pub status: std::process::ExitStatus,
    /// From spawn (the caller's `started`) to reaped.
    pub wall: Duration,
    pub user: Duration,
    pub system: Duration,
    /// Its peak resident set size, in KiB.
    pub max_rss_kib: u64,
}

impl ChildUsage {
    pub fn cpu(&self) -> Duration {
        self.user + self.system
    }
}

/// Waits for `child` to exit and reaps it with `wait4`, which gives what it
/// used (CPU, peak RSS) where `Child::wait` gives only its status.
/// `started` is when it was spawned.
#[allow(unsafe_code)]
pub fn wait_with_usage(child: &std::process::Child, started: std::time::Instant) -> ChildUsage {
    use std::os::unix::process::ExitStatusExt;
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage`, which wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid places for what wait4 writes.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(
        rc,
        pid,
        "waiting for process {pid}: {}",
        std::io::Error::last_os_error()
    );
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    ChildUsage {
        status: std::process::ExitStatus::from_raw(status),
        wall,
        user: time(usage.ru_utime),
        system: time(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss as u64,
    }
}

/// Context switches of each live thread of process `pid` so far, voluntary
/// and not, by thread id: each is a thread going to sleep or being woken,
/// so their growth over an idle time ([`switches_since`]) counts its
/// wake-ups.
pub fn context_switches(pid: u32) -> std::collections::HashMap<u64, u64> {
    let mut threads = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return threads;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let switches = status
            .lines()
            .filter_map(|line| {
                line.strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|n| n.trim().parse::<u64>().ok())
            .sum();
        threads.insert(tid, switches);
    }
    threads
}

/// The context switches of process `pid` since `before` (from
/// [`context_switches`]): those of the threads still alive, and all of the
/// threads started since (a thread that ended meanwhile is not counted).
pub fn switches_since(pid: u32, before: &std::collections::HashMap<u64, u64>) -> u64 {
    context_switches(pid)
        .into_iter()
        .map(|(tid, now)| now.saturating_sub(before.get(&tid).copied().unwrap_or(0)))
        .sum()
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
    fake_model_child_with(&[])
}

/// [`fake_model_child`], with `args` after [`FAKE_MODEL_FLAG`] (what the
/// child is to serve).
pub fn fake_model_child_with(args: &[&str]) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg(FAKE_MODEL_FLAG)
        .args(args)
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

/// Ten distinct plugins that load together (the startup and idle
/// measurements): the examples and fixtures whose tool names do not clash.
pub const TEN_PLUGINS: [&str; 10] = [
    "calculator",
    "files",
    "text",
    "time",
    "echo",
    "hostile",
    "filler_1",
    "filler_2",
    "filler_3",
    "filler_4",
];

/// Copies the [`TEN_PLUGINS`] into `dir`, each with its example grants file
/// if it has one (and a `workspace` scratch folder, which `files` is
/// granted).
pub fn add_ten_plugins(dir: &crate::PluginDir) {
    dir.scratch("workspace");
    for name in TEN_PLUGINS {
        dir.add(name);
        let sidecar = crate::example_src(name).join(format!("{name}.toml"));
        if sidecar.exists() {
            dir.grants(name, &std::fs::read_to_string(sidecar).unwrap());
        }
    }
}
