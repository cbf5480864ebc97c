//! `wasmclaw chat`: a conversation on the terminal, streamed.
//!
//! One loop serves the keyboard, the session's events and Ctrl-C, so what is
//! printed follows what happened. While a turn runs, a typed line steers it
//! (when input comes from a terminal, or with `--live`; piped input is read
//! one line per turn). Ctrl-C once asks the turn to wind down (running tools
//! finish, then one last answer); twice stops it at once; with no turn
//! running it ends the chat.
//!
//! A tool call that waits for approval is asked about inline: the tool, its
//! arguments and the answers (once, for the session, always, deny); the
//! next line typed is the answer.
//!
//! Text streams as the model writes it. When a reply fails after some of its
//! text was shown and is asked again (`llm_retry` with `discard_partial`), a
//! marker line under that text says it is void; the answer follows.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{SignalKind, signal};

use super::agent::{AgentArgs, session_key, start};
use super::approvals::Questions;
use crate::bus::Filter;
use crate::commands::{Commands, Handled};
use crate::config::Config;
use crate::config::watch::Loader;
use crate::home::Home;
use crate::protocol::{
    Accepted, Event, EventBody, HookDecision, HookError, InterruptMode, LlmDelta, LlmResponse,
    LlmRetry, Op, SteeringInjected, SubturnEnd, SubturnSpawn, Target, ToolCallBegin, ToolCallEnd,
    ToolCallSkipped, TurnEnd, TurnStatus,
};

pub async fn chat(
    home: &Home,
    config: &Config,
    loader: Loader,
    args: &AgentArgs,
    live: bool,
) -> Result<ExitCode> {
    let (core, _home) = start(home, config, true).await?;
    let _reload = crate::config::watch::watch(core.clone(), loader, config.clone())?;
    // Lossless: the terminal shows every event of the session, in order.
    let filter = Filter {
        session: Some(session_key(args, "chat")),
        no_deltas: false,
        ..Default::default()
    };
    let mut session = filter.session.clone().expect("named");
    let mut events = core.subscribe(filter, None);
    core.announce_plugins();
    let _watch = core.watch_plugins()?;
    // The tools of the agent the session runs (its own, or the default).
    let agent = core.session_agent(&session);
    let tools: Vec<String> = (core.agent_tools(&agent).unwrap_or_default().into_iter())
        .map(|t| t.name)
        .collect();
    let settings = config.agents.get(&agent).unwrap_or(config.running_agent());
    let chain: Vec<String> = (settings.model.iter())
        .map(|m| format!("{}:{}", m.provider, m.model))
        .collect();
    println!(
        "wasmclaw chat: agent {agent}, model {}, session {session} (continue it later with --session {session})",
        chain.join(",")
    );
    println!(
        "tools: {}",
        if tools.is_empty() {
            "none".to_string()
        } else {
            tools.join(", ")
        }
    );
    println!("Type a message; /help lists the commands; an empty line or /quit ends.");

    let live = live || std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut ctrl_c = signal(SignalKind::interrupt())?;
    let mut screen = Screen::default();
    let mut busy = false;
    let mut input_open = true;
    let mut interrupts = 0;
    // Calls waiting for an answer typed here, the first one asked.
    let mut asking = Questions::default();
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
                let (question, note) = asking.event(&event);
                if let Some(note) = note {
                    screen.note(&note);
                }
                if let Some(question) = question {
                    screen.ask(&question);
                }
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
            line = lines.next_line(), if input_open && (live || !busy || !asking.is_empty()) => {
                let line = line?;
                if !asking.is_empty() {
                    match asking.answer(&session, line.as_deref().unwrap_or_default(), None) {
                        Ok((op, next)) => {
                            if let Err(refused) = core.submit(op).await {
                                screen.note(&refused.to_string());
                            }
                            if let Some(next) = next {
                                screen.ask(&next);
                            }
                        }
                        Err(again) => screen.note(again),
                    }
                    continue;
                }
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
                let new_key = || format!("chat-{}", uuid::Uuid::now_v7().simple());
                let text = match Commands::new(&core).handle(&session, text, new_key).await {
                    Handled::Message(text) => text,
                    Handled::Command(outcome) => {
                        match outcome.new_session {
                            // A running turn would go on unseen.
                            Some(_) if busy => screen.note("a turn is running: /stop or /abort it first"),
                            Some(key) => {
                                screen.reply(&outcome.reply);
                                // The new session runs the agent this one runs.
                                if let Some(agent) = core.live(&session).and_then(|l| l.settings.agent) {
                                    let op = Op::SetAgent { session: key.clone(), agent };
                                    if let Err(refused) = core.submit(op).await {
                                        screen.note(&refused.to_string());
                                    }
                                }
                                let filter = Filter { session: Some(key.clone()), ..Default::default() };
                                events = core.subscribe(filter, None);
                                session = key;
                            }
                            None => screen.reply(&outcome.reply),
                        }
                        if !busy {
                            screen.prompt();
                        }
                        continue;
                    }
                };
                let op = Op::UserMessage { session: session.clone(), content: text, agent: None };
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

    /// The question about a call that waits for approval.
    fn ask(&mut self, question: &str) {
        self.end_line();
        print!("  {question}");
        let _ = std::io::stdout().flush();
    }

    /// A command's answer, each line indented.
    fn reply(&mut self, text: &str) {
        self.end_line();
        for line in text.lines() {
            println!("  {line}");
        }
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
