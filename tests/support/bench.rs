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

/// CPU time (user + system) this process has used so far, all threads.
pub fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("reading /proc/self/stat");
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
