//! `wasmclaw run` and `wasmclaw chat`: turns from the command line.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{SignalKind, signal};

use super::approvals::{Questions, decision_op};
use crate::agent::Agent;
use crate::bus::{EventBus, Filter};
use crate::config::Config;
use crate::config::overrides::AgentFlags;
use crate::core::Core;
use crate::home::{Home, HomeLock};
use crate::plugin::Plugins;
use crate::protocol::{
    Accepted, ApprovalDecision, ApprovalScope, Event, EventBody, InterruptMode, Op, Target,
    TurnStatus,
};
use crate::store::Store;

/// Which agent and model, how its turns run, and the session.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    #[command(flatten)]
    pub flags: AgentFlags,
    /// The session to continue; default: a new one.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
}

/// The core with everything it needs: the home locked for this process,
/// store open, the event log writing, plugins loaded (with `scan`; without,
/// they are not: a watch's first pass loads them), turns run by the
/// scheduler `config` sets. Its agent is the one `config` runs (one model
/// chain, one [`crate::agent::AgentConfig`]). The lock is held as long as
/// the returned [`HomeLock`] lives.
pub async fn start(home: &Home, config: &Config, scan: bool) -> Result<(Core, HomeLock)> {
    let profiles = Arc::new(config.clone()).profiles(crate::config::process_env)?;
    let lock = home.lock()?;
    let store = Store::open(&home.sessions_db())?;
    let bus = EventBus::new(store.last_seq().context("reading the event log")?);
    let runtime = super::runtime(home, config)?;
    let dir = &config.plugins.dir;
    let plugins = if scan {
        Plugins::load_dir(runtime, dir).await
    } else {
        Plugins::unscanned(runtime, dir)
    };
    let max_subturns = config.limits.max_subturns;
    let agent = Agent::with_profiles(plugins, profiles, bus, store, max_subturns);
    Ok((Core::new(Arc::new(agent), config.scheduler_config()), lock))
}

pub(super) fn session_key(args: &AgentArgs, kind: &str) -> String {
    args.session
        .clone()
        .unwrap_or_else(|| format!("{kind}-{}", uuid::Uuid::now_v7().simple()))
}

/// What `run` does with a tool call that waits for approval.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approve {
    /// Ask on the terminal; without one, deny (and say why).
    Ask,
    Allow,
    Deny,
}

/// What `run` prints (stderr) at the first Ctrl-C.
const WINDING_DOWN: &str = "interrupting: winding the turn down (running tools finish, the model call is not retried, then a last answer); Ctrl-C again stops at once";

/// `wasmclaw run`: one turn; the answer on stdout; with `events`, every event
/// as a JSON line on stderr. Exit 1 when the turn does not complete. Ctrl-C
/// once winds the turn down (running tools finish, then one last answer),
/// twice stops it.
pub async fn run(
    home: &Home,
    config: &Config,
    args: &AgentArgs,
    events_shown: bool,
    approve: Approve,
    message: &str,
) -> Result<ExitCode> {
    let (core, _home) = start(home, config, true).await?;
    let mut events = core.subscribe(Filter::default(), None);
    core.announce_plugins();
    let session = session_key(args, "run");
    tracing::info!(session = %session, "running one turn");
    let mut ctrl_c = signal(SignalKind::interrupt())?;
    let op = Op::UserMessage {
        session: session.clone(),
        content: message.to_string(),
        agent: None,
    };
    let (Accepted::Started { turn_id }, Some(mut watch)) = core.submit_watched(op).await? else {
        bail!("session {session} is busy");
    };
    let mut interrupts = 0;
    let print = |event: &Event| {
        if events_shown {
            eprintln!(
                "{}",
                serde_json::to_string(event).expect("events serialize")
            );
        }
    };
    // Calls waiting for the person at the terminal, the first one asked.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut asking = Questions::default();
    let mut answers = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    // The turn's end, then the session idle: its SubTurns (and the turns
    // their late results start) finish before the host does.
    let mut end = None;
    loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => {
                print(&event);
                if event.session.as_deref() != Some(session.as_str()) {
                    continue;
                }
                if approve == Approve::Ask && terminal {
                    let (question, note) = asking.event(&event);
                    say(note.map(|n| format!("{n}\n")).into_iter().chain(question));
                    continue;
                }
                let EventBody::ApprovalRequested(request) = &event.body else { continue };
                let (decision, note) = match approve {
                    Approve::Ask => (
                        ApprovalDecision::Deny,
                        "no terminal to ask on: run with --approve allow or --approve deny",
                    ),
                    Approve::Allow => (ApprovalDecision::Allow, "allowed by --approve allow"),
                    Approve::Deny => (ApprovalDecision::Deny, "denied by --approve deny"),
                };
                say([format!("tool {}: {note}\n", request.tool)]);
                let turn_id = event.turn_id.clone();
                let op = decision_op(&session, turn_id, request, decision, ApprovalScope::Once, Some(note));
                decide(&core, op).await;
            }
            line = answers.next_line(), if !asking.is_empty() => {
                let line = line?.unwrap_or_default();
                match asking.answer(&session, &line, None) {
                    Ok((op, next)) => {
                        decide(&core, op).await;
                        say(next);
                    }
                    Err(again) => say([format!("{again}: ")]),
                }
            }
            outcome = watch.ended(), if end.is_none() => {
                end = Some(outcome.context("the host stopped before the turn ended")?);
            }
            _ = core.until_idle(&session), if end.is_some() => {
                while let Some(event) = events.try_next().await {
                    print(&event);
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

/// Writes `texts` on stderr (not `eprint!`: a note that cannot be written
/// must not end the run).
fn say(texts: impl IntoIterator<Item = String>) {
    let mut stderr = std::io::stderr();
    for text in texts {
        let _ = write!(stderr, "{text}");
    }
    let _ = stderr.flush();
}

/// Sends a decision; one that comes too late (the call timed out or its
/// turn stopped) is said on stderr.
async fn decide(core: &Core, op: Op) {
    if let Err(refused) = core.submit(op).await {
        say([format!("{refused}\n")]);
    }
}
