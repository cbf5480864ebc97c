//! The stream benchmark: `cargo bench -p wasmclaw-tests --bench sse`.
//! Prints a table and writes `target/bench/sse.json`.
//!
//! Reading a 32 MiB OpenAI-style event stream (text deltas of 64 bytes, in
//! 16 KiB reads as a socket gives them), and a stream whose one event is a
//! single 8 MiB line: the time and the peak heap of the host's SSE layer
//! (`wasmclaw::llm::sse::Decoder`), and of `eventsource-stream`, which the
//! host used before, for comparison.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::json;
use wasmclaw::llm::sse::Decoder;
use wasmclaw_tests::bench::{Row, millis, ms, print_and_save};

/// The system allocator, counting the bytes in use and their peak.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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

/// (time, peak heap above the input, events, data bytes) for `parse`.
fn measure(input: &[Bytes], parse: impl Fn(&[Bytes]) -> (usize, usize)) -> (Duration, usize, usize, usize) {
    let base = IN_USE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let started = Instant::now();
    let (events, bytes) = parse(input);
    let elapsed = started.elapsed();
    (elapsed, PEAK.load(Ordering::Relaxed) - base, events, bytes)
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
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
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
    let mib = |n: usize| format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0));
    let mut rows: Vec<Row> = Vec::new();
    for (case, stream) in [
        ("32 MiB of 64-byte deltas", many_deltas(32 * 1024 * 1024)),
        ("one 8 MiB line", one_long_line(8 * 1024 * 1024)),
    ] {
        let input = reads(&stream);
        drop(stream);
        let new = measure(&input, decoder);
        let old = measure(&input, eventsource);
        assert_eq!((new.2, new.3), (old.2, old.3), "both read the same events");
        for (parser, (time, peak, ..)) in [("host SSE layer", new), ("eventsource-stream", old)] {
            rows.push((format!("{case}: {parser}: time"), ms(time), millis(time)));
            rows.push((format!("{case}: {parser}: peak heap"), mib(peak), json!(peak)));
        }
    }
    print_and_save("sse", &rows);
}
