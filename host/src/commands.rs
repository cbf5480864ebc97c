//! Chat commands: a message that starts with `/` asks the host, not the
//! model. One registry serves every front end that takes messages (`chat`,
//! the HTTP API, later the channels): [`Commands::handle`] tells a command
//! from model input, turns the command into [`Op`]s submitted through the
//! [`Core`], and answers with text for the person. A command never reaches
//! the model.
//!
//! - A message is a command when it starts with `/` and the session's agent
//!   takes commands (`commands = true`, the default). `//text` sends
//!   `/text` to the model.
//! - `/help`, `/new`, `/agent [NAME]`, `/model [SPEC|default]`, `/tools`,
//!   `/usage`, `/compact`, `/stop` (graceful), `/abort` (hard), `/session`.
//! - An unknown command answers with the list; a command with a wrong
//!   argument says what it takes.

use crate::core::Core;
use crate::protocol::{Accepted, InterruptMode, Op, Policy, Target, Usage};

/// One command of the registry.
pub struct Spec {
    pub name: &'static str,
    /// How its argument is written, if it takes one.
    pub args: &'static str,
    pub help: &'static str,
}

/// Every command, in the order `/help` lists them.
pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "help",
        args: "",
        help: "this list",
    },
    Spec {
        name: "new",
        args: "",
        help: "start a fresh session (the current one is kept)",
    },
    Spec {
        name: "agent",
        args: "[NAME]",
        help: "show the session's agent and the others, or switch to NAME",
    },
    Spec {
        name: "model",
        args: "[SPEC|default]",
        help: "show the session's model, use SPEC (PROVIDER:MODEL) for its next turns, or go back to its agent's",
    },
    Spec {
        name: "tools",
        args: "",
        help: "the tools the session's agent offers",
    },
    Spec {
        name: "usage",
        args: "",
        help: "tokens the session's turns used",
    },
    Spec {
        name: "compact",
        args: "",
        help: "summarize the session's older history now (its messages stay in the store)",
    },
    Spec {
        name: "stop",
        args: "",
        help: "wind the running turn down: running tools finish, then a last answer",
    },
    Spec {
        name: "abort",
        args: "",
        help: "stop the running turn at once",
    },
    Spec {
        name: "session",
        args: "",
        help: "the session's key, agent, model, policy and what it holds",
    },
];

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The command's name (`help`, `agent`, ...), or the unknown one.
    pub command: String,
    /// For the person, as plain text (several lines at most).
    pub reply: String,
    /// `/new`: the session to talk to from now on.
    pub new_session: Option<String>,
    /// It did not do what it was asked (an unknown command, a refused op);
    /// `reply` says why.
    pub failed: bool,
}

/// What [`Commands::handle`] made of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Not a command: this text goes to the model.
    Message(String),
    /// A command, done.
    Command(Outcome),
}

/// The registry over a core.
pub struct Commands<'a> {
    core: &'a Core,
}

impl<'a> Commands<'a> {
    pub fn new(core: &'a Core) -> Commands<'a> {
        Commands { core }
    }

    /// `text` for `session`: a command done, or the text for the model.
    /// `new_session` makes the key `/new` hands out.
    pub async fn handle(
        &self,
        session: &str,
        text: &str,
        new_session: impl FnOnce() -> String,
    ) -> Handled {
        let trimmed = text.trim_start();
        if !trimmed.starts_with('/') || !self.takes_commands(session) {
            return Handled::Message(text.to_string());
        }
        if let Some(literal) = trimmed.strip_prefix("//") {
            return Handled::Message(format!("/{literal}"));
        }
        let line = &trimmed[1..];
        let (name, arg) = match line.trim().split_once(char::is_whitespace) {
            Some((name, arg)) => (name, arg.trim()),
            None => (line.trim(), ""),
        };
        if let Some(spec) = COMMANDS.iter().find(|c| c.name == name)
            && spec.args.is_empty()
            && !arg.is_empty()
        {
            let reply = format!("/{name} takes no argument (it was given `{arg}`)");
            return Handled::Command(failed(name, reply));
        }
        let done = |reply: String| ok(name, reply);
        let outcome = match name {
            "help" => done(help()),
            "new" => {
                let key = new_session();
                Outcome {
                    new_session: Some(key.clone()),
                    ..done(format!("new session {key}"))
                }
            }
            "agent" => self.agent(session, arg).await,
            "model" => self.model(session, arg).await,
            "tools" => self.tools(session),
            "usage" => self.usage(session).await,
            "compact" => self.compact(session).await,
            "stop" => self.interrupt(session, InterruptMode::Graceful).await,
            "abort" => self.interrupt(session, InterruptMode::Hard).await,
            "session" => self.session(session).await,
            _ => failed(
                name,
                format!("unknown command /{name}; the commands are:\n{}", help()),
            ),
        };
        Handled::Command(outcome)
    }

    /// Whether the agent `session` runs takes commands.
    fn takes_commands(&self, session: &str) -> bool {
        let profiles = self.core.profiles();
        let name = self.core.session_agent(session);
        profiles.get(&name).is_none_or(|p| p.config.commands)
    }

    async fn agent(&self, session: &str, arg: &str) -> Outcome {
        let profiles = self.core.profiles();
        if arg.is_empty() {
            let agents: Vec<&str> = profiles.names().collect();
            let reply = format!(
                "agent {} (agents: {})",
                self.core.session_agent(session),
                agents.join(", ")
            );
            return ok("agent", reply);
        }
        let op = Op::SetAgent {
            session: session.to_string(),
            agent: arg.to_string(),
        };
        self.submit("agent", op, format!("agent {arg} from the next turn on"))
            .await
    }

    async fn model(&self, session: &str, arg: &str) -> Outcome {
        if arg.is_empty() {
            let model = self.core.live(session).and_then(|l| l.settings.model);
            let reply = match model {
                Some(model) => format!("model {model} (the session's own)"),
                None => format!("model of agent {}", self.core.session_agent(session)),
            };
            return ok("model", reply);
        }
        let (model, reply) = if arg == "default" {
            (None, "the agent's model from the next turn on".to_string())
        } else {
            (
                Some(arg.to_string()),
                format!("model {arg} from the next turn on"),
            )
        };
        let op = Op::SetModel {
            session: session.to_string(),
            model,
        };
        self.submit("model", op, reply).await
    }

    fn tools(&self, session: &str) -> Outcome {
        let agent = self.core.session_agent(session);
        match self.core.agent_tools(&agent) {
            Ok(tools) if tools.is_empty() => ok("tools", format!("agent {agent} offers no tool")),
            Ok(tools) => {
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                ok("tools", names.join(", "))
            }
            Err(e) => failed("tools", e.to_string()),
        }
    }

    async fn usage(&self, session: &str) -> Outcome {
        match self.core.turns(session).await {
            Ok(turns) => {
                let mut total = Usage::default();
                for turn in &turns {
                    total += turn.usage;
                }
                let last = turns.iter().rfind(|t| t.parent_turn_id.is_none());
                let mut reply = format!(
                    "{} turns: {} tokens in, {} out",
                    turns.len(),
                    total.input_tokens,
                    total.output_tokens
                );
                if let Some(last) = last {
                    reply.push_str(&format!(
                        "; the last: {} in, {} out",
                        last.usage.input_tokens, last.usage.output_tokens
                    ));
                }
                match self.core.context_tokens(session).await {
                    Ok((tokens, Some(window))) => reply.push_str(&format!(
                        "; context: about {tokens} tokens of a {window}-token window"
                    )),
                    Ok((tokens, None)) => {
                        reply.push_str(&format!("; context: about {tokens} tokens"))
                    }
                    Err(e) => reply.push_str(&format!("; context: not counted ({e:#})")),
                }
                ok("usage", reply)
            }
            Err(e) => failed(
                "usage",
                format!("could not read the session's turns: {e:#}"),
            ),
        }
    }

    async fn compact(&self, session: &str) -> Outcome {
        let op = Op::Compact {
            session: session.to_string(),
        };
        match self.core.submit(op).await {
            Ok(Accepted::Compacted {
                summarized,
                kept,
                tokens_before,
                tokens_after,
            }) => ok(
                "compact",
                format!(
                    "{summarized} messages summarized, {kept} kept; about {tokens_before} tokens \
                     before, {tokens_after} after"
                ),
            ),
            Ok(_) => ok("compact", "done".to_string()),
            Err(refused) => failed("compact", refused.message().to_string()),
        }
    }

    async fn interrupt(&self, session: &str, mode: InterruptMode) -> Outcome {
        let name = match mode {
            InterruptMode::Graceful => "stop",
            InterruptMode::Hard => "abort",
        };
        let op = Op::Interrupt {
            target: Target::Session(session.to_string()),
            mode,
        };
        match self.core.submit(op).await {
            Ok(Accepted::Interrupted { turn_id, discarded }) => {
                let mut reply = match mode {
                    InterruptMode::Graceful => format!("winding turn {turn_id} down"),
                    InterruptMode::Hard => format!("stopped turn {turn_id}"),
                };
                if !discarded.is_empty() {
                    reply.push_str(&format!("; {} queued messages dropped", discarded.len()));
                }
                ok(name, reply)
            }
            Ok(_) => ok(name, "done".to_string()),
            Err(refused) => failed(name, refused.message().to_string()),
        }
    }

    async fn session(&self, session: &str) -> Outcome {
        let live = self.core.live(session).unwrap_or_default();
        let agent = self.core.session_agent(session);
        let model = live.settings.model.as_deref().unwrap_or("the agent's");
        let (history, turns) = match (
            self.core.history(session).await,
            self.core.turns(session).await,
        ) {
            (Ok(history), Ok(turns)) => (history.len(), turns.len()),
            (Err(e), _) | (_, Err(e)) => {
                return failed("session", format!("could not read the session: {e:#}"));
            }
        };
        let state = if live.busy { "busy" } else { "idle" };
        let policy = match live.policy {
            Policy::Steer => "steer",
            Policy::FollowUp => "follow-up",
        };
        let reply = format!(
            "session {session}: agent {agent}, model {model}, policy {policy}, {state}; \
             {history} messages, {turns} turns"
        );
        ok("session", reply)
    }

    async fn submit(&self, name: &str, op: Op, reply: String) -> Outcome {
        match self.core.submit(op).await {
            Ok(_) => ok(name, reply),
            Err(refused) => failed(name, refused.message().to_string()),
        }
    }
}

fn ok(name: &str, reply: String) -> Outcome {
    Outcome {
        command: name.to_string(),
        reply,
        new_session: None,
        failed: false,
    }
}

fn failed(name: &str, reply: String) -> Outcome {
    Outcome {
        failed: true,
        ..ok(name, reply)
    }
}

/// Every command, one line each.
fn help() -> String {
    let lines: Vec<String> = (COMMANDS.iter())
        .map(|c| {
            let usage = format!("/{} {}", c.name, c.args);
            format!("  {:<22} {}", usage.trim_end(), c.help)
        })
        .collect();
    lines.join("\n")
}
