//! The stream benchmark: `cargo bench -p wasmclaw-tests --bench sse`.
//! Prints a table and writes `target/bench/sse.json`.
//!
//! Reading a 32 MiB OpenAI-style event stream (text deltas of 64 bytes, in
//! 16 KiB reads as a socket gives them), and a stream whose one event is a
//! single 8 MiB line: the time and the peak memory of the host's SSE layer
//! (`wasmclaw::llm::sse::Decoder`), and of `eventsource-stream`, which the
//! host used before, for comparison. Each parse runs in a child process of
//! its own; its peak memory is its peak resident set (`VmHWM`) less that of a
//! child that only builds the same input.

#![allow(clippy::print_stdout)]

use std::collections::VecDeque;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::json;
use wasmclaw::llm::sse::Decoder;
use wasmclaw_tests::bench::{Row, millis, ms, print_and_save};

const READ: usize = 16 * 1024;

/// The stream, cut into reads.
fn reads(stream: &[u8]) -> Vec<Bytes> {
    stream.chunks(READ).map(Bytes::copy_from_slice).collect()
}

fn many_deltas(total: usize) -> Vec<u8> {
    let piece = "x".repeat(64);
    let event = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
    );
    let mut stream = Vec::with_capacity(total + event.len());
    while stream.len() < total {
        stream.extend_from_slice(event.as_bytes());
    }
    stream.extend_from_slice(b"data: [DONE]\n\n");
    stream
}

fn one_long_line(len: usize) -> Vec<u8> {
    let mut stream = b"data: ".to_vec();
    stream.extend(std::iter::repeat_n(b'y', len));
    stream.extend_from_slice(b"\n\n");
    stream
}

/// This process's peak resident set, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

const CASES: [&str; 2] = ["32 MiB of 64-byte deltas", "one 8 MiB line"];
const CHILD_FLAG: &str = "--parse";

fn input(case: &str) -> Vec<Bytes> {
    let stream = match case {
        "32 MiB of 64-byte deltas" => many_deltas(32 * 1024 * 1024),
        _ => one_long_line(8 * 1024 * 1024),
    };
    reads(&stream)
}

/// The child's side: parses `case` with `parser`; prints the time in
/// nanoseconds, the peak resident set in KiB, the events and their bytes.
fn child(parser: &str, case: &str) {
    let input = input(case);
    let started = Instant::now();
    let (events, bytes) = match parser {
        "host" => decoder(&input),
        "eventsource" => eventsource(&input),
        _ => (0, 0),
    };
    let elapsed = started.elapsed().as_nanos();
    println!("{elapsed} {} {events} {bytes}", peak_kib());
}

/// Runs a child for `parser` on `case`: (time, peak KiB, events, bytes).
fn run_child(parser: &str, case: &str) -> (Duration, u64, u64, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([CHILD_FLAG, parser, case])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let figures: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    (
        Duration::from_nanos(figures[0]),
        figures[1],
        figures[2],
        figures[3],
    )
}

fn decoder(input: &[Bytes]) -> (usize, usize) {
    let mut decoder = Decoder::new(64 * 1024 * 1024);
    let mut out = VecDeque::new();
    let (mut events, mut bytes) = (0, 0);
    for read in input {
        decoder.feed(read, &mut out).unwrap();
        // Each event is taken as it comes, as the providers do.
        for event in out.drain(..) {
            events += 1;
            bytes += event.data.len();
        }
    }
    (events, bytes)
}

fn eventsource(input: &[Bytes]) -> (usize, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let reads = futures_util::stream::iter(input.iter().cloned().map(Ok::<_, std::io::Error>));
        let mut stream = reads.eventsource();
        let (mut events, mut bytes) = (0, 0);
        while let Some(event) = stream.next().await {
            let event = event.unwrap();
            events += 1;
            bytes += event.data.len();
        }
        (events, bytes)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CHILD_FLAG) {
        return child(&args[2], &args[3]);
    }
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let mut rows: Vec<Row> = Vec::new();
    for case in CASES {
        let (_, baseline, ..) = run_child("none", case);
        let new = run_child("host", case);
        let old = run_child("eventsource", case);
        assert_eq!((new.2, new.3), (old.2, old.3), "both read the same events");
        for (parser, (time, peak, ..)) in [("host SSE layer", new), ("eventsource-stream", old)] {
            let above = peak.saturating_sub(baseline);
            rows.push((format!("{case}: {parser}: time"), ms(time), millis(time)));
            rows.push((
                format!("{case}: {parser}: peak memory"),
                mib(above),
                json!(above),
            ));
        }
    }
    print_and_save("sse", &rows);
}
