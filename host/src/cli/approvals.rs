//! Approvals on the command line: `wasmclaw approvals list|revoke` over the
//! decisions the store keeps, and how `run` and `chat` ask a person about a
//! call that waits (the question, and reading the answer).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::home::Home;
use crate::protocol::{ApprovalDecision, ApprovalRequested, ApprovalScope};
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
