//! `wasmclaw chat`: a conversation on the terminal, streamed.
//!
//! One loop serves the keyboard, the session's events and Ctrl-C, so what is
//! printed follows what happened. While a turn runs, a typed line steers it
//! (when input comes from a terminal, or with `--live`; piped input is read
//! one line per turn). Ctrl-C once asks the turn to wind down (running tools
//! finish, then one last answer); twice stops it at once; with no turn
//! running it ends the chat.
//!
//! Text streams as the model writes it. When a reply fails after some of its
//! text was shown and is asked again (`llm_retry` with `discard_partial`), a
//! marker line under that text says it is void; the answer follows.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{SignalKind, signal};

use super::agent::{AgentArgs, session_key, start};
use crate::bus::Filter;
use crate::home::Home;
use crate::protocol::{
    Accepted, Event, EventBody, HookDecision, HookError, InterruptMode, LlmDelta, LlmResponse,
    LlmRetry, Op, SteeringInjected, SubturnEnd, SubturnSpawn, Target, ToolCallBegin, ToolCallEnd,
    ToolCallSkipped, TurnEnd, TurnStatus,
};
use crate::scheduler::SchedulerConfig;

pub async fn chat(
    home: &Home,
    plugin_dir: &Path,
    load: super::RuntimeLimits,
    args: &AgentArgs,
    live: bool,
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
    // Lossless: the terminal shows every event of the session, in order.
    let filter = Filter {
        session: Some(session_key(args, "chat")),
        no_deltas: false,
        ..Default::default()
    };
    let session = filter.session.clone().expect("named");
    let mut events = core.subscribe(filter, None);
    core.announce_plugins();
    let _watch = core.watch_plugins()?;
    let tools = core.tool_names();
    println!(
        "wasmclaw chat: model {}, session {session} (continue it later with --session {session})",
        args.model.as_deref().unwrap_or_default()
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

    let live = live || std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut ctrl_c = signal(SignalKind::interrupt())?;
    let mut screen = Screen::default();
    let mut busy = false;
    let mut input_open = true;
    let mut interrupts = 0;
    screen.prompt();
    loop {
        tokio::select! {
            biased;
            Some(event) = events.recv() => {
                // A turn that started by itself (a late sub-agent's result).
                if matches!(event.body, EventBody::TurnBegin(_)) && event.parent_turn_id.is_none() {
                    busy = true;
                }
                screen.show(&event);
            }
            _ = core.until_idle(&session), if busy => {
                // Everything the turns published is queued by now.
                while let Some(event) = events.try_next().await {
                    screen.show(&event);
                }
                busy = false;
                interrupts = 0;
                screen.prompt();
                if !input_open {
                    break;
                }
            }
            _ = ctrl_c.recv() => {
                if !busy {
                    screen.end_line();
                    break;
                }
                interrupts += 1;
                let mode = if interrupts == 1 { InterruptMode::Graceful } else { InterruptMode::Hard };
                let op = Op::Interrupt { target: Target::Session(session.clone()), mode };
                match core.submit(op).await {
                    Ok(_) if mode == InterruptMode::Graceful => screen.note(
                        "interrupting: running tools finish, then a last answer; Ctrl-C again stops at once",
                    ),
                    Ok(_) => screen.note("stopping"),
                    Err(refused) => screen.note(&refused.to_string()),
                }
            }
            line = lines.next_line(), if input_open && (live || !busy) => {
                let line = line?;
                let text = line.as_deref().map(str::trim).unwrap_or_default();
                let quit = line.is_none() || text == "/quit" || text == "/exit";
                if quit || (text.is_empty() && !busy) {
                    input_open = false;
                    if !busy {
                        break;
                    }
                    continue;
                }
                if text.is_empty() {
                    continue;
                }
                let op = Op::UserMessage { session: session.clone(), content: text.to_string() };
                match core.submit(op).await {
                    Ok(Accepted::Steered { .. }) => screen.note("steering: taken in before the next model call"),
                    Ok(Accepted::Queued { .. }) => screen.note("queued: runs after this turn"),
                    Ok(_) => {}
                    Err(refused) => screen.note(&refused.to_string()),
                }
                busy = true;
            }
        }
    }
    core.shut_down(std::time::Duration::ZERO).await;
    Ok(ExitCode::SUCCESS)
}

/// Shown under the text of a model reply that failed and is asked again.
const VOID: &str = "↑ void: that reply failed; the text above is not the answer";

/// What the terminal shows, and where its cursor is.
#[derive(Default)]
struct Screen {
    /// Labels of the sub-agents started, by id.
    labels: std::collections::HashMap<String, String>,
    /// A line of streamed text is open.
    mid_line: bool,
    /// The current model call streamed its text (not with --no-stream).
    streamed: bool,
    /// Text of the current attempt is on screen.
    shown: bool,
}

impl Screen {
    fn prompt(&mut self) {
        self.end_line();
        print!("> ");
        let _ = std::io::stdout().flush();
    }

    fn note(&mut self, text: &str) {
        self.end_line();
        println!("  [{text}]");
    }

    /// Ends the line of streamed text, if one is open.
    fn end_line(&mut self) {
        if std::mem::take(&mut self.mid_line) {
            println!();
        }
    }

    /// One event of the session: text as it streams, tool calls and their
    /// outcomes, retries, steering and interrupts, how a turn ended.
    fn show(&mut self, event: &Event) {
        if event.parent_turn_id.is_some() {
            // A sub-agent's own work: shown by its start and end.
            return;
        }
        match &event.body {
            EventBody::SubturnSpawn(SubturnSpawn {
                subturn_id, label, ..
            }) => {
                self.labels.insert(subturn_id.clone(), label.clone());
                self.note(&format!("sub-agent '{label}' started"));
            }
            EventBody::SubturnEnd(SubturnEnd {
                subturn_id, status, ..
            }) => {
                let label = self.labels.remove(subturn_id).unwrap_or_default();
                self.note(&format!("sub-agent '{label}' ended {}", status.as_str()));
            }
            EventBody::LlmRequest(_) => (self.streamed, self.shown) = (false, false),
            EventBody::LlmDelta(LlmDelta { text, .. }) => {
                (self.streamed, self.shown) = (true, true);
                print!("{text}");
                self.mid_line = !text.ends_with('\n');
            }
            EventBody::LlmResponse(LlmResponse { text, .. })
                if !self.streamed && !text.is_empty() =>
            {
                self.shown = true;
                println!("{text}");
            }
            EventBody::ToolCallBegin(ToolCallBegin {
                tool, arguments, ..
            }) => {
                self.end_line();
                println!("  ⚙ {tool} {}", clip(arguments, 200));
            }
            EventBody::ToolCallEnd(ToolCallEnd {
                tool,
                ok,
                output,
                duration_ms,
                ..
            }) => {
                let mark = if *ok { "✓" } else { "✗" };
                println!(
                    "  {mark} {tool} ({duration_ms:.1} ms): {}",
                    clip(output, 300)
                );
            }
            EventBody::ToolCallSkipped(ToolCallSkipped { tool, reason, .. }) => {
                println!("  - {tool} skipped: {reason}");
            }
            EventBody::SteeringInjected(SteeringInjected { content, .. }) => {
                self.note(&format!("taken in: {}", clip(content, 200)));
            }
            EventBody::HookDecision(HookDecision {
                hook,
                point,
                decision,
                reason,
                ..
            }) => {
                let why = reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                self.note(&format!(
                    "hook '{hook}' ({point}): {}{why}",
                    decision.as_str()
                ));
            }
            EventBody::HookError(HookError {
                hook, point, error, ..
            }) => {
                self.note(&format!(
                    "hook '{hook}' ({point}) failed: {}",
                    clip(error, 200)
                ));
            }
            EventBody::LlmRetry(LlmRetry {
                error,
                next_model,
                delay_ms,
                discard_partial,
                ..
            }) => {
                if *discard_partial && std::mem::take(&mut self.shown) {
                    // A terminal cannot be trusted to erase what scrolled
                    // or wrapped: the void text is marked instead.
                    self.note(VOID);
                }
                self.note(&format!("{error}; trying {next_model} in {delay_ms} ms"));
            }
            EventBody::TurnEnd(TurnEnd { status, reason, .. }) => {
                self.end_line();
                if *status != TurnStatus::Completed {
                    println!("[turn {}: {reason}]", status.as_str());
                } else if reason == "interrupted" {
                    println!("[turn ended early: interrupted]");
                }
            }
            _ => {}
        }
        let _ = std::io::stdout().flush();
    }
}

/// The first `max` characters of `text` on one line.
fn clip(text: &str, max: usize) -> String {
    crate::llm::http::snippet(&text.replace('\n', " ⏎ "), max)
}
