//! `wasmclaw run` and `wasmclaw chat`: turns from the command line.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::io::AsyncBufReadExt;

use crate::agent::{Agent, AgentConfig, DEFAULT_MAX_ITERATIONS};
use crate::bus::{Delivery, EventBus, Filter, Received, Subscription};
use crate::home::Home;
use crate::llm::{Chain, Provider, ProviderConfig, ProviderKind, RetryPolicy};
use crate::plugin::Plugins;
use crate::protocol::{EventBody, TurnStatus};
use crate::store::{EventLog, Store};

/// Which model, and how turns run.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// PROVIDER:MODEL (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
    /// scripted:FILE.json); several, comma-separated, form a fallback chain.
    #[arg(long, env = "WASMCLAW_MODEL", value_name = "SPEC")]
    pub model: Option<String>,
    /// Base URL of the OpenAI-compatible candidates (default
    /// $OPENAI_BASE_URL, else https://api.openai.com/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Longest wait for a model's reply to start, and between streamed chunks.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub llm_timeout: f64,
    /// Ask for whole replies instead of streamed ones.
    #[arg(long)]
    pub no_stream: bool,
    /// Model calls per turn.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ITERATIONS)]
    pub max_iterations: u32,
    /// A system prompt put before the history.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// The session to continue; default: a new one.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
}

const NO_MODEL: &str = "no model configured. Pass --model PROVIDER:MODEL or set WASMCLAW_MODEL, e.g.
  --model openai:gpt-4o-mini          (key from OPENAI_API_KEY; --base-url or OPENAI_BASE_URL for other servers)
  --model anthropic:claude-sonnet-4-5 (key from ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL)
  --model scripted:FILE.json          (replies played from a file, no network; see the README)
Several, comma-separated, form a fallback chain.";

/// The model chain from `--model`, `--base-url` and the environment.
pub fn chain(args: &AgentArgs) -> Result<Chain> {
    let Some(specs) = args.model.as_deref().filter(|s| !s.trim().is_empty()) else {
        bail!(NO_MODEL);
    };
    if !(args.llm_timeout > 0.0 && args.llm_timeout.is_finite()) {
        bail!("--llm-timeout must be a positive number of seconds");
    }
    let client = crate::llm::http_client();
    let mut providers = Vec::new();
    for spec in specs.split(',') {
        let mut config = ProviderConfig::parse(spec, |var| std::env::var(var).ok())
            .map_err(anyhow::Error::msg)?;
        if let (ProviderKind::OpenAi, Some(url)) = (config.kind, &args.base_url) {
            config.base_url = url.trim_end_matches('/').to_string();
        }
        config.stream = !args.no_stream;
        config.timeout = Duration::from_secs_f64(args.llm_timeout);
        providers.push(Provider::new(config, client.clone()).map_err(anyhow::Error::msg)?);
    }
    Ok(Chain::new(providers, RetryPolicy::default()))
}

/// The agent with everything it needs: plugins loaded, store open, the event
/// log writing.
pub async fn start(
    home: &Home,
    plugin_dir: &Path,
    args: &AgentArgs,
) -> Result<(Arc<Agent>, EventLog)> {
    let chain = chain(args)?;
    let store = Store::open(&home.sessions_db())?;
    let bus = EventBus::new(store.last_seq().context("reading the event log")?);
    let log = EventLog::spawn(store.clone(), bus.subscribe_all_lossless());
    let plugins = Plugins::load_dir(super::runtime(home)?, plugin_dir).await;
    let config = AgentConfig {
        max_iterations: args.max_iterations,
        system_prompt: args.system.clone(),
        ..AgentConfig::default()
    };
    let agent = Agent::new(plugins, Arc::new(chain), bus, store, config);
    Ok((Arc::new(agent), log))
}

fn session_key(args: &AgentArgs, kind: &str) -> String {
    args.session
        .clone()
        .unwrap_or_else(|| format!("{kind}-{}", uuid::Uuid::now_v7().simple()))
}

/// `wasmclaw run`: one turn; the answer on stdout; with `events`, every event
/// as a JSON line on stderr. Exit 1 when the turn ends in error.
pub async fn run(
    home: &Home,
    plugin_dir: &Path,
    args: &AgentArgs,
    events: bool,
    message: &str,
) -> Result<ExitCode> {
    let (agent, log) = start(home, plugin_dir, args).await?;
    let printer = events.then(|| {
        let mut sub = agent.bus().subscribe(Filter::default(), Delivery::Lossless);
        let (done_tx, mut done) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let print = |r: Received| {
                if let Received::Event(event) = r {
                    let line = serde_json::to_string(&*event).expect("events serialize");
                    eprintln!("{line}");
                }
            };
            loop {
                tokio::select! {
                    Some(r) = sub.recv() => print(r),
                    _ = &mut done => break,
                }
            }
            while let Some(r) = sub.try_recv() {
                print(r);
            }
        });
        (done_tx, task)
    });
    agent.announce_plugins();
    let session = session_key(args, "run");
    tracing::info!(session = %session, "running one turn");
    let outcome = agent.run_turn(&session, message).await;
    if let Some((done, task)) = printer {
        let _ = done.send(());
        let _ = task.await;
    }
    log.flush(agent.bus().last_seq()).await;
    match outcome.status {
        TurnStatus::Completed => {
            println!("{}", outcome.answer.unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            eprintln!(
                "error: the turn ended {}: {}",
                outcome.status.as_str(),
                outcome.reason
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `wasmclaw chat`: a conversation on the terminal, streamed.
pub async fn chat(home: &Home, plugin_dir: &Path, args: &AgentArgs) -> Result<ExitCode> {
    let (agent, log) = start(home, plugin_dir, args).await?;
    agent.announce_plugins();
    let _watch = agent.watch_plugins()?;
    let session = session_key(args, "chat");
    let catalog = agent.plugins().catalog();
    let tools: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    println!(
        "wasmclaw chat: model {}, session {session} (continue it later with --session {session})",
        agent_model(args)
    );
    println!(
        "tools: {}",
        if tools.is_empty() {
            "none".to_string()
        } else {
            tools.join(", ")
        }
    );
    println!("Type a message; an empty line or /quit ends.");
    drop(catalog);

    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let line = line.trim();
        if line.is_empty() || line == "/quit" || line == "/exit" {
            break;
        }
        let sub = agent.bus().subscribe(
            Filter {
                session: Some(session.clone()),
                no_deltas: false,
            },
            // Lossless: the renderer stops at the turn's end, which must
            // not be the event a full queue drops.
            Delivery::Lossless,
        );
        let renderer = tokio::spawn(render(sub));
        let outcome = agent.run_turn(&session, line).await;
        let _ = renderer.await;
        if outcome.status != TurnStatus::Completed {
            println!("[turn {}: {}]", outcome.status.as_str(), outcome.reason);
        }
    }
    log.flush(agent.bus().last_seq()).await;
    Ok(ExitCode::SUCCESS)
}

fn agent_model(args: &AgentArgs) -> &str {
    args.model.as_deref().unwrap_or_default()
}

/// Shows one turn as it happens: text as it streams, tool calls and their
/// outcomes, retries. Returns at the turn's end.
async fn render(mut sub: Subscription) {
    let mut out = std::io::stdout();
    let mut mid_line = false;
    // Whether the current model call streamed its text (not with --no-stream).
    let mut streamed = false;
    while let Some(received) = sub.recv().await {
        let event = match received {
            Received::Event(event) => event,
            Received::Dropped(n) => {
                end_line(&mut out, &mut mid_line);
                let _ = writeln!(out, "  [{n} events not shown: the terminal fell behind]");
                continue;
            }
        };
        match &event.body {
            EventBody::LlmRequest { .. } => streamed = false,
            EventBody::LlmDelta { text, .. } => {
                streamed = true;
                let _ = write!(out, "{text}");
                mid_line = !text.ends_with('\n');
            }
            EventBody::LlmResponse { text, .. } if !streamed && !text.is_empty() => {
                let _ = writeln!(out, "{text}");
            }
            EventBody::ToolCallBegin {
                tool, arguments, ..
            } => {
                end_line(&mut out, &mut mid_line);
                let _ = writeln!(out, "  ⚙ {tool} {}", clip(arguments, 200));
            }
            EventBody::ToolCallEnd {
                tool,
                ok,
                output,
                duration_ms,
                ..
            } => {
                let mark = if *ok { "✓" } else { "✗" };
                let _ = writeln!(
                    out,
                    "  {mark} {tool} ({duration_ms:.1} ms): {}",
                    clip(output, 300)
                );
            }
            EventBody::ToolCallSkipped { tool, reason, .. } => {
                let _ = writeln!(out, "  - {tool} skipped: {reason}");
            }
            EventBody::LlmRetry {
                error,
                next_model,
                delay_ms,
                ..
            } => {
                end_line(&mut out, &mut mid_line);
                let _ = writeln!(out, "  [{error}; trying {next_model} in {delay_ms} ms]");
            }
            EventBody::TurnEnd { .. } => {
                end_line(&mut out, &mut mid_line);
                break;
            }
            _ => {}
        }
        let _ = out.flush();
    }
}

/// Ends the line of streamed text, if one is open.
fn end_line(out: &mut std::io::Stdout, mid_line: &mut bool) {
    if std::mem::take(mid_line) {
        let _ = writeln!(out);
    }
}

/// The first `max` characters of `text` on one line.
fn clip(text: &str, max: usize) -> String {
    crate::llm::http::snippet(&text.replace('\n', " ⏎ "), max)
}
