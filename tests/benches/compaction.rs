//! What compaction costs, and how close the token estimate is: `cargo
//! bench -p wasmclaw-tests --bench compaction` (or `make bench`). Prints a
//! table and writes `target/bench/compaction.json`.
//!
//! - **host CPU per turn**: one session of 1,000 turns through the core
//!   (the `echo` plugin, compaction on), each turn a 1,500-byte tool output
//!   and an answer, against a fake model with a 4,000-token window in a
//!   child process (so its CPU is not the host's), as the 300-turn test
//!   plays it. This process's CPU per turn, the mean of the ten turns up to
//!   turn 10 and up to turn 1,000, and their ratio. Target: at most 1.5.
//! - **compaction per 100 turns**: how many compactions, their time (the
//!   summarizing call included), the tokens of the summarizing calls.
//! - **the estimate**: the host's quarter-of-the-bytes estimate against
//!   OpenAI's BPE tokenizers (`o200k_base`, `cl100k_base`) on the
//!   repository's Markdown, its Rust source and JSON tool outputs (the
//!   `llm_response` events of the run above): estimated / real tokens.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasmclaw::agent::context::estimate_text;
use wasmclaw::protocol::EventBody;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::drain;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, fake_model_child_with, process_cpu, serve_fake_model, us,
};
use wasmclaw_tests::fake_model::{FakeModel, Options, Responder, Served, Window};
use wasmclaw_tests::long_session::{config, core_of, message, reply};

const TURNS: usize = 1000;
/// Turns averaged at each point.
const SPAN: usize = 10;
const WINDOW: u64 = 4000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == FAKE_MODEL_FLAG) {
        let ids = Arc::new(std::sync::atomic::AtomicU64::new(1));
        let options = Options {
            responder: Some(Responder::new(move |body| reply(body, &ids))),
            window: Some(Window {
                tokens: WINDOW,
                answers_as: Served::OpenAi,
            }),
            ..Options::default()
        };
        return serve_fake_model(1, options, [], FakeModel::openai_base_url);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = rt.block_on(long_session());
    rows.extend(estimates());
    wasmclaw_tests::bench::print_and_save("compaction", &rows);
}

async fn long_session() -> Vec<Row> {
    let (mut model, base) = fake_model_child_with(&[]);
    let dir = PluginDir::new();
    let store = Store::open(&dir.scratch("home").join("sessions.db")).unwrap();
    let mut candidate = openai_at(&base);
    candidate.model = "m".into();
    let (core, mut events, store) =
        core_of(&dir, vec![candidate], config(Some(WINDOW)), store).await;
    let mut cpu = Vec::with_capacity(TURNS);
    let (mut compactions, mut time, mut tokens) = (0u64, 0f64, 0u64);
    for turn in 1..=TURNS {
        let input = format!("turn {turn}: big 1500 fact-{turn}");
        let before = process_cpu();
        let (_, outcome) = core.run(message("long", &input)).await.unwrap();
        cpu.push(process_cpu() - before);
        assert_eq!(
            outcome.unwrap().status,
            wasmclaw::protocol::TurnStatus::Completed
        );
        for event in drain(&mut events) {
            if let EventBody::CompactionEnd(end) = &event.body {
                compactions += 1;
                time += end.duration_ms;
                tokens += end.usage.input_tokens + end.usage.output_tokens;
            }
        }
    }
    let _ = model.kill();
    let mean = |turns: &[Duration]| turns.iter().sum::<Duration>() / turns.len() as u32;
    let early = mean(&cpu[..SPAN]);
    let late = mean(&cpu[TURNS - SPAN..]);
    let ratio = late.as_secs_f64() / early.as_secs_f64();
    let per_100 = |n: f64| n * 100.0 / TURNS as f64;
    let records = store.compactions("long").await.unwrap().len();
    assert_eq!(records as u64, compactions);
    vec![
        (
            "host CPU per turn, turns 1-10".to_string(),
            us(early),
            json!({"cpu_us": early.as_micros() as u64}),
        ),
        (
            "host CPU per turn, turns 991-1000".to_string(),
            format!("{} ({ratio:.2}x turn 10; target <= 1.5)", us(late)),
            json!({"cpu_us": late.as_micros() as u64, "ratio": ratio}),
        ),
        (
            "compactions per 100 turns".to_string(),
            format!(
                "{:.1}, {:.1} ms, {:.0} tokens",
                per_100(compactions as f64),
                per_100(time),
                per_100(tokens as f64)
            ),
            json!({
                "compactions": per_100(compactions as f64),
                "ms": per_100(time),
                "tokens": per_100(tokens as f64),
            }),
        ),
    ]
}

fn openai_at(base: &str) -> wasmclaw::llm::ProviderConfig {
    let fake_url = base.to_string();
    let mut candidate =
        wasmclaw_tests::agents::candidate(wasmclaw::llm::ProviderKind::OpenAi, fake_url, "m", true);
    candidate.timeout = Duration::from_secs(30);
    candidate
}

/// Text of the repository's files ending in `ext` under `dirs`.
fn corpus(dirs: &[&str], ext: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut text = String::new();
    let mut stack: Vec<std::path::PathBuf> = dirs.iter().map(|d| root.join(d)).collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                let entry = entry.unwrap().path();
                if !entry.ends_with("target") {
                    stack.push(entry);
                }
            }
        } else if path.extension().is_some_and(|e| e == ext) {
            text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    text
}

/// Tool outputs as JSON: what a files or search tool gives back.
fn json_outputs() -> String {
    let mut out = String::new();
    for i in 0..400 {
        let item = json!({
            "path": format!("host/src/module_{i}.rs"),
            "line": i * 7,
            "matches": [{"text": format!("fn handler_{i}(request: &Request) -> Result<Response>"), "score": 0.5 + i as f64 / 1000.0}],
            "size": 1024 + i,
        });
        out.push_str(&item.to_string());
        out.push('\n');
    }
    out
}

fn estimates() -> Vec<Row> {
    let o200k = tiktoken_rs::o200k_base().unwrap();
    let cl100k = tiktoken_rs::cl100k_base().unwrap();
    let samples = [
        (
            "Markdown (README, docs)",
            corpus(&["README.md", "plugins", "wit"], "md"),
        ),
        ("Rust source (host/src)", corpus(&["host/src"], "rs")),
        ("JSON tool outputs", json_outputs()),
    ];
    let mut rows = Vec::new();
    for (name, text) in samples {
        let estimate = estimate_text(&text) as f64;
        let o200 = o200k.encode_ordinary(&text).len() as f64;
        let cl100 = cl100k.encode_ordinary(&text).len() as f64;
        rows.push((
            format!("estimate / real tokens, {name}"),
            format!(
                "{:.2} (o200k_base), {:.2} (cl100k_base); {} bytes",
                estimate / o200,
                estimate / cl100,
                text.len()
            ),
            json!({"o200k_base": estimate / o200, "cl100k_base": estimate / cl100, "bytes": text.len()}),
        ));
    }
    rows
}
