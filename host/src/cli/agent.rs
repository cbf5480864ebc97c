//! `wasmclaw run` and `wasmclaw chat`: turns from the command line.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use crate::agent::{Agent, AgentConfig, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_REPEATED_REFUSALS};
use crate::bus::{EventBus, Filter};
use crate::core::Core;
use crate::home::{Home, HomeLock};
use crate::llm::{CallLimits, Chain, Provider, ProviderConfig, RetryPolicy};
use crate::plugin::Plugins;
use crate::protocol::{Accepted, Event, InterruptMode, Op, Target, TurnStatus};
use crate::scheduler::SchedulerConfig;
use crate::store::Store;

/// Which model, and how turns run.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// PROVIDER:MODEL (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
    /// scripted:FILE.json); several, comma-separated, form a fallback chain.
    #[arg(long, env = "WASMCLAW_MODEL", value_name = "SPEC")]
    pub model: Option<String>,
    /// Base URL of the chain's server, in place of $OPENAI_BASE_URL or
    /// $ANTHROPIC_BASE_URL: with /v1 for openai: candidates, without for
    /// anthropic: ones. A chain of both is refused (one URL cannot serve
    /// both).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Longest wait for a model's reply to start, and between streamed chunks.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub llm_timeout: f64,
    /// Longest one attempt of a model call may take, start to finish; past
    /// it the attempt fails as a timeout (and is retried).
    #[arg(
        long,
        env = "WASMCLAW_LLM_DEADLINE",
        value_name = "SECONDS",
        default_value_t = 600.0
    )]
    pub llm_deadline: f64,
    /// Longest `retry-after` waited for; a server asking for longer fails
    /// the candidate at once.
    #[arg(
        long,
        env = "WASMCLAW_MAX_RETRY_WAIT",
        value_name = "SECONDS",
        default_value_t = 60.0
    )]
    pub max_retry_wait: f64,
    /// Most bytes of a reply's text; past it the call fails (not retried).
    #[arg(long, env = "WASMCLAW_MAX_REPLY_TEXT", value_name = "BYTES", default_value_t = crate::llm::limits::DEFAULT_MAX_TEXT)]
    pub max_reply_text: usize,
    /// Most bytes of a reply's tool-call arguments, all calls together;
    /// past it the call fails (not retried).
    #[arg(long, env = "WASMCLAW_MAX_REPLY_ARGUMENTS", value_name = "BYTES", default_value_t = crate::llm::limits::DEFAULT_MAX_ARGUMENTS)]
    pub max_reply_arguments: usize,
    /// Ask for whole replies instead of streamed ones.
    #[arg(long)]
    pub no_stream: bool,
    /// Model calls per turn.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ITERATIONS)]
    pub max_iterations: u32,
    /// Identical refused tool calls (same tool, same arguments) that end a
    /// turn with an error; 0: no limit.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_REPEATED_REFUSALS)]
    pub max_refusals: u32,
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
    let seconds = |flag: &str, value: f64| {
        if value > 0.0 && value.is_finite() {
            Ok(Duration::from_secs_f64(value))
        } else {
            Err(anyhow::anyhow!(
                "{flag} must be a positive number of seconds, not {value}"
            ))
        }
    };
    let timeout = seconds("--llm-timeout", args.llm_timeout)?;
    let limits = CallLimits {
        max_text: args.max_reply_text,
        max_arguments: args.max_reply_arguments,
        deadline: seconds("--llm-deadline", args.llm_deadline)?,
        ..CallLimits::default()
    };
    let policy = RetryPolicy {
        max_retry_after: seconds("--max-retry-wait", args.max_retry_wait)?,
        ..RetryPolicy::default()
    };
    let mut configs = Vec::new();
    for spec in specs.split(',') {
        let mut config = ProviderConfig::parse(spec, |var| std::env::var(var).ok())
            .map_err(anyhow::Error::msg)?;
        config.stream = !args.no_stream;
        config.timeout = timeout;
        config.limits = limits;
        configs.push(config);
    }
    if let Some(url) = &args.base_url {
        crate::llm::apply_base_url(&mut configs, url)?;
    }
    let client = crate::llm::http_client();
    let providers = (configs.into_iter())
        .map(|config| Provider::new(config, client.clone()).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    Ok(Chain::new(providers, policy))
}

/// The core with everything it needs: the home locked for this process,
/// store open, the event log writing, plugins loaded (with `scan`; without,
/// they are not: a watch's first pass loads them), turns run by `schedule`.
/// The lock is held as long as the returned [`HomeLock`] lives.
pub async fn start(
    home: &Home,
    plugin_dir: &Path,
    load: super::RuntimeLimits,
    args: &AgentArgs,
    scan: bool,
    schedule: SchedulerConfig,
) -> Result<(Core, HomeLock)> {
    let chain = chain(args)?;
    let lock = home.lock()?;
    let store = Store::open(&home.sessions_db())?;
    let bus = EventBus::new(store.last_seq().context("reading the event log")?);
    let runtime = super::runtime(home, load)?;
    let plugins = if scan {
        Plugins::load_dir(runtime, plugin_dir).await
    } else {
        Plugins::unscanned(runtime, plugin_dir)
    };
    let config = AgentConfig {
        max_iterations: args.max_iterations,
        max_repeated_refusals: args.max_refusals,
        system_prompt: args.system.clone(),
        ..AgentConfig::default()
    };
    let agent = Agent::new(plugins, Arc::new(chain), bus, store, config);
    Ok((Core::new(Arc::new(agent), schedule), lock))
}

pub(super) fn session_key(args: &AgentArgs, kind: &str) -> String {
    args.session
        .clone()
        .unwrap_or_else(|| format!("{kind}-{}", uuid::Uuid::now_v7().simple()))
}

/// What `run` prints (stderr) at the first Ctrl-C.
const WINDING_DOWN: &str = "interrupting: winding the turn down (running tools finish, the model call is not retried, then a last answer); Ctrl-C again stops at once";

/// `wasmclaw run`: one turn; the answer on stdout; with `events`, every event
/// as a JSON line on stderr. Exit 1 when the turn does not complete. Ctrl-C
/// once winds the turn down (running tools finish, then one last answer),
/// twice stops it.
pub async fn run(
    home: &Home,
    plugin_dir: &Path,
    load: super::RuntimeLimits,
    args: &AgentArgs,
    events_shown: bool,
    message: &str,
) -> Result<ExitCode> {
    let (core, _home) = start(
        home,
        plugin_dir,
        load,
        args,
        true,
        SchedulerConfig::default(),
    )
    .await?;
    let mut events = core.subscribe(Filter::default(), None);
    core.announce_plugins();
    let session = session_key(args, "run");
    tracing::info!(session = %session, "running one turn");
    let mut ctrl_c = signal(SignalKind::interrupt())?;
    let op = Op::UserMessage {
        session: session.clone(),
        content: message.to_string(),
    };
    let (Accepted::Started { turn_id }, Some(mut watch)) = core.submit_watched(op).await? else {
        bail!("session {session} is busy");
    };
    let mut interrupts = 0;
    let print = |event: Arc<Event>| {
        if events_shown {
            eprintln!(
                "{}",
                serde_json::to_string(&*event).expect("events serialize")
            );
        }
    };
    // The turn's end, then the session idle: its SubTurns (and the turns
    // their late results start) finish before the host does.
    let mut end = None;
    loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => print(event),
            outcome = watch.ended(), if end.is_none() => {
                end = Some(outcome.context("the host stopped before the turn ended")?);
            }
            _ = core.until_idle(&session), if end.is_some() => {
                while let Some(event) = events.try_next().await {
                    print(event);
                }
                break;
            }
            _ = ctrl_c.recv() => {
                if end.is_some() {
                    break;
                }
                interrupts += 1;
                let mode = if interrupts == 1 { InterruptMode::Graceful } else { InterruptMode::Hard };
                let target = Target::Turn(turn_id.clone());
                let note = match core.submit(Op::Interrupt { target, mode }).await {
                    Ok(_) if mode == InterruptMode::Graceful => WINDING_DOWN.to_string(),
                    Ok(_) => "stopping the turn".to_string(),
                    Err(refused) => refused.to_string(),
                };
                // Not `eprintln!`: a note that cannot be written must not
                // end the run.
                let _ = writeln!(std::io::stderr(), "{note}");
            }
        }
    }
    let end = end.expect("the loop ends after the turn's end");
    core.shut_down(Duration::ZERO).await;
    match end.status {
        TurnStatus::Completed => {
            println!("{}", end.answer.unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        status => {
            eprintln!("error: the turn ended {}: {}", status.as_str(), end.reason);
            Ok(ExitCode::FAILURE)
        }
    }
}
