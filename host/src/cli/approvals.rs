//! Approvals on the command line: `wasmclaw approvals list|revoke` over the
//! decisions the store keeps, and how `run` and `chat` ask a person about a
//! call that waits (the question, and reading the answer).

use std::collections::VecDeque;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::home::Home;
use crate::protocol::{
    ApprovalDecision, ApprovalRequested, ApprovalScope, DecidedBy, Event, EventBody, Op,
};
use crate::store::Store;

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// The decisions kept beyond one call: `always` ones (per agent) and
    /// `session` ones.
    List {
        /// Every field, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forgets kept decisions: an agent's `always` ones, or a session's.
    Revoke {
        /// The agent whose `always` decisions go.
        #[arg(
            long,
            value_name = "NAME",
            conflicts_with = "session",
            required_unless_present = "session"
        )]
        agent: Option<String>,
        /// The session whose `session` decisions go.
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// Only the decision on this tool (default: every tool).
        #[arg(long, value_name = "TOOL")]
        tool: Option<String>,
    },
}

impl ApprovalsCommand {
    pub async fn run(&self, home: &Home) -> Result<ExitCode> {
        let path = home.sessions_db();
        if !path.exists() {
            bail!("no sessions yet: {} does not exist", path.display());
        }
        let store = Store::open(&path)?;
        match self {
            ApprovalsCommand::List { json } => {
                let kept = store.kept_approvals(None).await?;
                if *json {
                    println!("{}", serde_json::to_string_pretty(&kept)?);
                } else if kept.is_empty() {
                    println!("no decisions kept");
                } else {
                    for k in kept {
                        let who = match k.scope {
                            ApprovalScope::Always => "agent",
                            _ => "session",
                        };
                        let note = k.note.map_or(String::new(), |n| format!(" ({n})"));
                        println!(
                            "{} {} {who} {} tool {} since {}{note}",
                            k.scope.as_str(),
                            k.decision.as_str(),
                            k.owner,
                            k.tool,
                            k.decided_at
                        );
                    }
                }
            }
            ApprovalsCommand::Revoke {
                agent,
                session,
                tool,
            } => {
                let (scope, owner, who) = match (agent, session) {
                    (Some(agent), _) => (ApprovalScope::Always, agent, "agent"),
                    (None, Some(session)) => (ApprovalScope::Session, session, "session"),
                    (None, None) => bail!("name --agent or --session"),
                };
                let n = store
                    .revoke_approvals(scope, owner, tool.as_deref())
                    .await?;
                if n == 0 {
                    bail!("{who} {owner} has no kept decision{}", on_tool(tool));
                }
                println!("revoked {n} decision{} of {who} {owner}", plural(n));
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn on_tool(tool: &Option<String>) -> String {
    tool.as_ref()
        .map_or(String::new(), |t| format!(" on tool {t}"))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The calls waiting for an answer typed on this terminal, in the order
/// they asked: the first is the one asked now. `run` and `chat` keep one.
#[derive(Default)]
pub struct Questions {
    queue: VecDeque<(Option<String>, ApprovalRequested)>,
}

impl Questions {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The call asked about now.
    pub fn current(&self) -> Option<&ApprovalRequested> {
        self.queue.front().map(|(_, r)| r)
    }

    /// Takes in an event of the session: a call that asks joins the queue;
    /// one that ended without an answer from here (it timed out, its turn
    /// stopped) leaves it. What to say: the question to put now, if the
    /// current one changed, and a note about a call that left.
    pub fn event(&mut self, event: &Event) -> (Option<String>, Option<String>) {
        match &event.body {
            EventBody::ApprovalRequested(request) => {
                self.queue
                    .push_back((event.turn_id.clone(), request.clone()));
                let first = self.queue.len() == 1;
                (first.then(|| question(request)), None)
            }
            EventBody::ApprovalDecided(decided) if decided.by != DecidedBy::User => {
                let at = (self.queue.iter())
                    .position(|(turn, r)| r.call_id == decided.call_id && *turn == event.turn_id);
                let Some(at) = at else {
                    return (None, None);
                };
                self.queue.remove(at);
                let why = match decided.by {
                    DecidedBy::Timeout => "nobody approved it in time",
                    _ => "the turn stopped",
                };
                let note = format!("tool {} not approved: {why}", decided.tool);
                let next = (at == 0).then(|| self.current().map(question)).flatten();
                (next, Some(note))
            }
            _ => (None, None),
        }
    }

    /// The decision a typed `line` gives the current call, and the question
    /// to put next; `Err`: the line is not an answer.
    pub fn answer(
        &mut self,
        session: &str,
        line: &str,
        note: Option<&str>,
    ) -> Result<(Op, Option<String>), &'static str> {
        let (decision, scope) = answer(line).ok_or("answer y, s, a or n")?;
        let (turn_id, request) = self.queue.pop_front().ok_or("nothing is asked")?;
        let op = decision_op(session, turn_id, &request, decision, scope, note);
        Ok((op, self.current().map(question)))
    }
}

/// The op that decides `request` (of the turn `turn_id`) of `session`.
pub fn decision_op(
    session: &str,
    turn_id: Option<String>,
    request: &ApprovalRequested,
    decision: ApprovalDecision,
    scope: ApprovalScope,
    note: Option<&str>,
) -> Op {
    Op::Approve {
        session: session.to_string(),
        call_id: request.call_id.clone(),
        turn_id,
        decision,
        scope,
        note: note.map(String::from),
    }
}

/// The question put to a person about a waiting call: the tool, its
/// arguments (as indented JSON when they are an object), who asked, and the
/// answers.
pub fn question(request: &ApprovalRequested) -> String {
    let arguments = serde_json::from_str::<serde_json::Value>(&request.arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| request.arguments.clone());
    let arguments: Vec<String> = arguments.lines().map(|l| format!("    {l}")).collect();
    format!(
        "approve tool {} ({}; until {})?\n{}\n  [y] once  [s] for this session  [a] always  [n] deny: ",
        request.tool,
        request.asked_by,
        request.expires_at,
        arguments.join("\n")
    )
}

/// A person's answer: `y`/`yes`/`once`, `s`/`session`, `a`/`always`
/// (allow), `n`/`no`/`deny` or nothing (deny); None for anything else.
pub fn answer(line: &str) -> Option<(ApprovalDecision, ApprovalScope)> {
    let allow = |scope| Some((ApprovalDecision::Allow, scope));
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "once" => allow(ApprovalScope::Once),
        "s" | "session" => allow(ApprovalScope::Session),
        "a" | "always" => allow(ApprovalScope::Always),
        "" | "n" | "no" | "deny" => Some((ApprovalDecision::Deny, ApprovalScope::Once)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_the_question() {
        use ApprovalDecision::{Allow, Deny};
        assert_eq!(answer("Y"), Some((Allow, ApprovalScope::Once)));
        assert_eq!(answer(" session "), Some((Allow, ApprovalScope::Session)));
        assert_eq!(answer("a"), Some((Allow, ApprovalScope::Always)));
        assert_eq!(answer(""), Some((Deny, ApprovalScope::Once)));
        assert_eq!(answer("maybe"), None);
        let request = ApprovalRequested {
            call_id: "c1".into(),
            tool: "write".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
            asked_by: "agent default: rule `write`".into(),
            expires_at: "2026-01-01T00:10:00.000Z".into(),
        };
        assert_eq!(
            question(&request),
            "approve tool write (agent default: rule `write`; until 2026-01-01T00:10:00.000Z)?\n    {\n      \"path\": \"a.txt\"\n    }\n  [y] once  [s] for this session  [a] always  [n] deny: "
        );
    }
}
