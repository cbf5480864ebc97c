//! The turn benchmark: `cargo bench -p wasmclaw-tests --bench turns` (or
//! `make bench`). Prints a table and writes `target/bench/turns.json`.
//!
//! Host overhead per turn: the CPU the host spends on a two-iteration turn
//! with one tool call (building requests, HTTP and SSE parsing, events, the
//! session store, tool dispatch), not counting time waiting for the model or
//! running the plugin. The fake model runs in a child process, so its CPU is
//! not the host's; the plugin's time (the calls' own durations) is
//! subtracted from the process's CPU time.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::{Delivery, EventBus, Filter, Received};
use wasmclaw::llm::{
    Chain, ChatRequest, Message, Provider, ProviderConfig, ProviderKind, RetryPolicy, ToolDef,
};
use wasmclaw::protocol::{EventBody, ToolCallEnd};
use wasmclaw::store::{EventLog, Store};
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::bench::{
    FAKE_MODEL_FLAG, Row, fake_model_child, micros, percentile, print_and_save, process_cpu,
    serve_fake_model, us,
};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply};

const WARMUP: usize = 200;
const TURNS: usize = 2000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == FAKE_MODEL_FLAG) {
        // The child: enough replies for every turn.
        let replies = (0..WARMUP + TURNS).flat_map(|_| {
            [
                Reply::tool("c1", "add", json!({"a": 40, "b": 2})),
                Reply::text("The sum is 42."),
            ]
        });
        return serve_fake_model(
            1,
            Options::default(),
            replies,
            FakeModel::anthropic_base_url,
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows: Vec<Row> = Vec::new();
    rt.block_on(async {
        for (label, kind, on_disk) in [
            ("OpenAI", ProviderKind::OpenAi, true),
            ("Anthropic", ProviderKind::Anthropic, true),
            ("OpenAI, in-memory store", ProviderKind::OpenAi, false),
        ] {
            let (wall, overhead) = turns(kind, on_disk).await;
            rows.push((
                format!("{label} streamed turn, 2 iterations + 1 tool call, wall median"),
                us(percentile(&wall, 50)),
                micros(percentile(&wall, 50)),
            ));
            rows.push((
                format!("{label} streamed turn, wall p99"),
                us(percentile(&wall, 99)),
                micros(percentile(&wall, 99)),
            ));
            rows.push((
                format!("{label} host overhead per turn (CPU, model and plugin excluded)"),
                us(overhead),
                micros(overhead),
            ));
        }
        for (label, kind) in [
            ("OpenAI", ProviderKind::OpenAi),
            ("Anthropic", ProviderKind::Anthropic),
        ] {
            let floor = http_floor(kind).await;
            rows.push((
                format!("{label} the same two model calls alone (CPU: HTTP, SSE, JSON)"),
                us(floor),
                micros(floor),
            ));
        }
    });
    print_and_save("turns", &rows);
}

/// Sequential turns against a fake model in a child process; the sorted wall
/// times and the host's CPU per turn.
async fn turns(kind: ProviderKind, on_disk: bool) -> (Vec<Duration>, Duration) {
    let (mut child, base) = fake_model_child();

    let dir = PluginDir::new();
    dir.add("echo");
    let store = if on_disk {
        Store::open(&dir.scratch("home").join("sessions.db")).unwrap()
    } else {
        Store::open_in_memory().unwrap()
    };
    let bus = EventBus::new(store.last_seq().unwrap());
    let log = EventLog::spawn(store.clone(), bus.subscribe_all_lossless());
    let mut tool_events = bus.subscribe(Filter::default(), Delivery::Lossless);
    let config = candidate(kind, base);
    let chain = Chain::new(
        vec![Provider::new(config, wasmclaw::llm::http_client()).unwrap()],
        RetryPolicy::default(),
    );
    let agent = Arc::new(Agent::new(
        dir.load().await,
        Arc::new(chain),
        bus.clone(),
        store,
        AgentConfig::default(),
    ));

    let mut wall = Vec::with_capacity(TURNS);
    let mut cpu_before = Duration::ZERO;
    let mut plugin_time = Duration::ZERO;
    for i in 0..WARMUP + TURNS {
        if i == WARMUP {
            log.flush(bus.last_seq()).await;
            while tool_events.try_recv().is_some() {}
            cpu_before = process_cpu();
        }
        let started = std::time::Instant::now();
        let turn = agent.clone();
        let outcome = tokio::spawn(async move {
            turn.run_turn(&format!("session-{i}"), "What is 40 + 2?")
                .await
        })
        .await
        .unwrap();
        assert_eq!(
            outcome.answer.as_deref(),
            Some("The sum is 42."),
            "{outcome:?}"
        );
        if i >= WARMUP {
            wall.push(started.elapsed());
        }
    }
    log.flush(bus.last_seq()).await;
    let cpu = process_cpu() - cpu_before;
    while let Some(Received::Event(event)) = tool_events.try_recv() {
        if let EventBody::ToolCallEnd(ToolCallEnd { duration_ms, .. }) = event.body {
            plugin_time += Duration::from_secs_f64(duration_ms / 1000.0);
        }
    }
    drop(child.stdin.take());
    child.wait().unwrap();
    wall.sort();
    (wall, cpu.saturating_sub(plugin_time) / TURNS as u32)
}

async fn echo_plugins() -> Arc<wasmclaw::plugin::Plugins> {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.load().await
}

/// The floor under a turn's overhead: the same two streamed model calls
/// (the second with the tool result), made directly through the provider,
/// with no turn, events, store or plugin. CPU per pair.
async fn http_floor(kind: ProviderKind) -> Duration {
    let (mut child, base) = fake_model_child();
    let provider = Provider::new(candidate(kind, base), wasmclaw::llm::http_client()).unwrap();
    let tools: Arc<Vec<ToolDef>> = echo_plugins()
        .await
        .catalog()
        .tools()
        .iter()
        .map(|t| ToolDef {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.input_schema.clone(),
        })
        .collect::<Vec<_>>()
        .into();
    let mut cpu_before = Duration::ZERO;
    for i in 0..WARMUP + TURNS {
        if i == WARMUP {
            cpu_before = process_cpu();
        }
        let mut request = ChatRequest {
            messages: vec![Message::user("What is 40 + 2?")].into(),
            tools: tools.clone(),
            ..Default::default()
        };
        let first = provider.chat(&request, &mut |_| {}).await.unwrap();
        let call = first.tool_calls[0].clone();
        let messages = std::sync::Arc::make_mut(&mut request.messages);
        messages.push(Message::Assistant {
            content: first.text,
            tool_calls: vec![call.clone()],
        });
        messages.push(Message::Tool {
            tool_call_id: call.id,
            name: call.name,
            content: "42".into(),
            is_error: false,
        });
        let second = provider.chat(&request, &mut |_| {}).await.unwrap();
        assert_eq!(second.text, "The sum is 42.");
    }
    let cpu = process_cpu() - cpu_before;
    drop(child.stdin.take());
    child.wait().unwrap();
    cpu / TURNS as u32
}

fn candidate(kind: ProviderKind, base: String) -> ProviderConfig {
    ProviderConfig {
        kind,
        model: "bench".into(),
        base_url: if kind == ProviderKind::OpenAi {
            format!("{base}/v1")
        } else {
            base
        },
        api_key: Some("k".into()),
        api_key_env: None,
        headers: Default::default(),
        stream: true,
        timeout: Duration::from_secs(10),
        limits: Default::default(),
    }
}
