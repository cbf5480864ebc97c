//! `wasmclaw run`: one turn from the command line. The prompt comes as an
//! argument, with `-m`, or on stdin; the answer streams to stdout (see
//! `run/answer.rs`); events go as JSON lines to a file or to stdout, never
//! mixed with log lines or notes (those are on stderr).

mod answer;

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{SignalKind, signal};

use self::answer::AnswerStream;
use super::agent::{AgentArgs, session_key, start};
use super::approvals::{Questions, decision_op};
use crate::bus::Filter;
use crate::config::Config;
use crate::core::Core;
use crate::home::Home;
use crate::protocol::{
    Accepted, ApprovalDecision, ApprovalScope, Event, EventBody, InterruptMode, Op, Target,
    TurnStatus,
};

/// The flags of `wasmclaw run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Every event as a JSON line, into FILE, or on stdout with `-` (the
    /// answer is then only in the events).
    #[arg(long, value_name = "FILE|-")]
    pub events: Option<PathBuf>,
    /// What a tool call that waits for approval gets: `ask` (on the
    /// terminal; without one, a denial that says why), `allow` or
    /// `deny`.
    #[arg(long, value_enum, default_value_t = Approve::Ask)]
    pub approve: Approve,
    /// The user message (as PROMPT).
    #[arg(short, long, conflicts_with = "prompt")]
    pub message: Option<String>,
    /// The user message; without it (and without -m), stdin when it is not
    /// a terminal.
    pub prompt: Option<String>,
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

/// The prompt: the argument, `-m`, or all of stdin (less its final newline)
/// when stdin is not a terminal.
fn prompt(args: &RunArgs) -> Result<String> {
    if let Some(text) = args.prompt.as_ref().or(args.message.as_ref()) {
        return Ok(text.clone());
    }
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        bail!(
            "no prompt: pass it as an argument (wasmclaw run \"...\"), with -m \"...\", or on stdin (echo ... | wasmclaw run)"
        );
    }
    let mut text = String::new();
    stdin
        .read_to_string(&mut text)
        .context("reading the prompt from stdin")?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text.trim().is_empty() {
        bail!("no prompt: stdin was empty; pass the prompt on stdin, as an argument or with -m");
    }
    Ok(text.to_string())
}

/// Where the events go: a file, or stdout.
enum EventSink {
    None,
    Stdout,
    File(PathBuf, std::io::LineWriter<std::fs::File>),
}

impl EventSink {
    fn open(to: Option<&PathBuf>) -> Result<Self> {
        Ok(match to {
            None => EventSink::None,
            Some(path) if path.as_os_str() == "-" => EventSink::Stdout,
            Some(path) => {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("--events: cannot create {}", path.display()))?;
                EventSink::File(path.clone(), std::io::LineWriter::new(file))
            }
        })
    }

    fn write(&mut self, event: &Event) -> Result<()> {
        let line = serde_json::to_string(event).expect("events serialize");
        match self {
            EventSink::None => {}
            // `println!`: a closed stdout ends the process quietly.
            EventSink::Stdout => println!("{line}"),
            EventSink::File(path, file) => writeln!(file, "{line}")
                .with_context(|| format!("--events: writing {}", path.display()))?,
        }
        Ok(())
    }
}

/// `wasmclaw run`: one turn. Exit 1 when the turn does not complete. Ctrl-C
/// once winds the turn down (running tools finish, then one last answer),
/// twice stops it.
pub async fn run(home: &Home, config: &Config, args: &RunArgs) -> Result<ExitCode> {
    let message = prompt(args)?;
    let mut sink = EventSink::open(args.events.as_ref())?;
    let approve = args.approve;
    let (core, _home) = start(home, config, true).await?;
    let mut events = core.subscribe(Filter::default(), None);
    core.announce_plugins();
    let session = session_key(&args.agent, "run");
    tracing::info!(session = %session, "running one turn");
    let mut ctrl_c = signal(SignalKind::interrupt())?;
    let op = Op::UserMessage {
        session: session.clone(),
        content: message,
        agent: None,
    };
    let (Accepted::Started { turn_id }, Some(mut watch)) = core.submit_watched(op).await? else {
        bail!("session {session} is busy");
    };
    let mut interrupts = 0;
    // The answer on stdout, unless stdout carries the events.
    let mut answer =
        (!matches!(sink, EventSink::Stdout)).then(|| AnswerStream::new(std::io::stdout()));
    let streaming = !args.agent.flags.no_stream;
    // Calls waiting for the person at the terminal, the first one asked.
    let terminal = std::io::stdin().is_terminal();
    let mut asking = Questions::default();
    let mut answers = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    // The turn's end, then the session idle: its SubTurns (and the turns
    // their late results start) finish before the host does.
    let mut end = None;
    // An error on the way (a write of the events that fails) still shuts
    // the host down, so what the turn has done is stored.
    let looped: Result<()> = async {
        loop {
            tokio::select! {
                biased;
                Some(event) = events.recv() => {
                    sink.write(&event)?;
                    if event.session.as_deref() != Some(session.as_str()) {
                        continue;
                    }
                    if let Some(answer) = answer.as_mut().filter(|_| streaming)
                        && event.turn_id.as_deref() == Some(turn_id.as_str())
                        && event.parent_turn_id.is_none()
                        && let Some(note) = written(answer.event(&event.body))?
                    {
                        say([format!("{note}\n")]);
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
                        sink.write(&event)?;
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
                    say([format!("{note}\n")]);
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = looped {
        core.shut_down(Duration::ZERO).await;
        return Err(e);
    }
    let end = end.expect("the loop ends after the turn's end");
    core.shut_down(Duration::ZERO).await;
    let completed = end.status == TurnStatus::Completed;
    if let Some(answer) = answer {
        let text = completed.then(|| end.answer.as_deref().unwrap_or_default());
        if let Some(note) = written(answer.finish(text))? {
            say([format!("{note}\n")]);
        }
    }
    if completed {
        Ok(ExitCode::SUCCESS)
    } else {
        bail!("the turn ended {}: {}", end.status.as_str(), end.reason)
    }
}

/// The answer written; a closed stdout (`wasmclaw run ... | head -1`) ends
/// the process quietly, as every other output does.
fn written<T>(result: std::io::Result<T>) -> Result<T> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        result => result.context("writing the answer on stdout"),
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
