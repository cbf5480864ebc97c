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
//! On a terminal (stdin and stdout both), lines are typed in a line editor
//! (`chat/editor.rs`) with a history of [`editor::HISTORY_LINES`] lines in
//! `HOME/chat_history`; Ctrl-C at the prompt or Ctrl-D on an empty line
//! ends the chat. Colour only on a terminal without `NO_COLOR`; hook
//! decisions only with `-v`.
//!
//! Text streams as the model writes it. When a reply fails after some of its
//! text was shown and is asked again (`llm_retry` with `discard_partial`), a
//! marker line under that text says it is void; the answer follows.

mod editor;
mod screen;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use tokio::signal::unix::{SignalKind, signal};

use self::editor::{Input, LineEditor};
use self::screen::{Out, Screen};
use super::agent::{AgentArgs, session_key, start};
use super::approvals::Questions;
use super::term::{Paint, colour};
use crate::bus::Filter;
use crate::commands::{Commands, Handled};
use crate::config::Config;
use crate::config::watch::Loader;
use crate::home::Home;
use crate::protocol::{Accepted, EventBody, InterruptMode, Op, Target};

/// Where typed lines come from.
enum Keyboard {
    /// Piped input, one line at a time.
    Piped(Lines<BufReader<Stdin>>),
    Editor(LineEditor),
}

impl Keyboard {
    /// The next line; the editor is asked for one if it is not already.
    async fn next(&mut self) -> Result<Input> {
        match self {
            Keyboard::Piped(lines) => Ok(match lines.next_line().await? {
                Some(line) => Input::Line(line),
                None => Input::Eof,
            }),
            Keyboard::Editor(editor) => {
                editor.read("> ");
                editor.next().await
            }
        }
    }
}

/// `wasmclaw chat`; `verbose` (`-v`) shows hook decisions.
pub async fn chat(
    home: &Home,
    config: &Config,
    loader: Loader,
    args: &AgentArgs,
    live: bool,
    verbose: u8,
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

    let live = live || std::io::stdin().is_terminal();
    let paint = Paint {
        on: colour(&std::io::stdout()),
    };
    let (mut keyboard, out) = match LineEditor::start(home.root().join("chat_history"))? {
        Some((editor, printer)) => (Keyboard::Editor(editor), Out::Editor(printer)),
        None => {
            let lines = BufReader::new(tokio::io::stdin()).lines();
            (Keyboard::Piped(lines), Out::Stdout)
        }
    };
    let mut ctrl_c = signal(SignalKind::interrupt())?;
    let mut screen = Screen::new(out, paint, verbose > 0);
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
                interrupt(&core, &session, interrupts, &mut screen).await;
            }
            input = keyboard.next(), if input_open && (live || !busy || !asking.is_empty()) => {
                screen.typed();
                let line = match input? {
                    Input::Line(line) => Some(line),
                    // Ctrl-C in the editor: as the signal is without it.
                    Input::Interrupted if !busy => break,
                    Input::Interrupted => {
                        interrupts += 1;
                        interrupt(&core, &session, interrupts, &mut screen).await;
                        continue;
                    }
                    Input::Eof => None,
                };
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
                if let Keyboard::Editor(editor) = &keyboard {
                    editor.remember(text);
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

/// Ctrl-C while a turn runs: the first winds it down, the next stops it.
async fn interrupt(core: &crate::core::Core, session: &str, interrupts: u32, screen: &mut Screen) {
    let mode = if interrupts == 1 {
        InterruptMode::Graceful
    } else {
        InterruptMode::Hard
    };
    let op = Op::Interrupt {
        target: Target::Session(session.to_string()),
        mode,
    };
    match core.submit(op).await {
        Ok(_) if mode == InterruptMode::Graceful => screen.note(
            "interrupting: running tools finish, then a last answer; Ctrl-C again stops at once",
        ),
        Ok(_) => screen.note("stopping"),
        Err(refused) => screen.note(&refused.to_string()),
    }
}
