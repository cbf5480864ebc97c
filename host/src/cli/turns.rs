//! `wasmclaw turns --session KEY`: the tree of a session's turns, as the
//! store recorded them (SubTurns under their parents).

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::home::Home;
use crate::llm::http::snippet;
use crate::store::{Store, TurnNode, TurnRecord, forest};

pub async fn list(home: &Home, session: &str, json: bool) -> Result<ExitCode> {
    let path = home.sessions_db();
    if !path.exists() {
        bail!("no sessions yet: {} does not exist", path.display());
    }
    let turns = Store::open(&path)?.turns(session).await?;
    if turns.is_empty() {
        bail!("session '{session}' has no recorded turns");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&turns)?);
    } else {
        for line in tree(&turns) {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per turn, children indented under their parent, in order of
/// start.
pub fn tree(turns: &[TurnRecord]) -> Vec<String> {
    fn lines(nodes: &[TurnNode], depth: usize, out: &mut Vec<String>) {
        for node in nodes {
            let turn = &node.turn;
            out.push(format!(
                "{}{} {} {} ({} iteration{}, {} tokens) {}",
                "  ".repeat(depth),
                turn.id,
                turn.status.as_str(),
                turn.reason,
                turn.iterations,
                if turn.iterations == 1 { "" } else { "s" },
                turn.usage.input_tokens + turn.usage.output_tokens,
                snippet(&turn.input.replace('\n', " "), 60),
            ));
            lines(&node.children, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    lines(&forest(turns), 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TurnStatus;
    use crate::store::tests::turn;

    #[test]
    fn children_are_shown_under_their_parents_in_order() {
        let mut a = turn("s", "a", TurnStatus::Completed, "2026-01-01T00:00:01.000Z");
        let mut a1 = turn(
            "s",
            "a1",
            TurnStatus::BudgetExceeded,
            "2026-01-01T00:00:02.000Z",
        );
        a1.parent_turn_id = Some("a".into());
        let mut a11 = turn(
            "s",
            "a11",
            TurnStatus::Completed,
            "2026-01-01T00:00:03.000Z",
        );
        a11.parent_turn_id = Some("a1".into());
        let mut a2 = turn("s", "a2", TurnStatus::Completed, "2026-01-01T00:00:04.000Z");
        a2.parent_turn_id = Some("a".into());
        let b = turn("s", "b", TurnStatus::Aborted, "2026-01-01T00:00:05.000Z");
        a.input = "first\nline".into();
        let lines = tree(&[a, a1, a11, a2, b]);
        let shape: Vec<(usize, &str)> = lines
            .iter()
            .map(|l| {
                (
                    l.len() - l.trim_start().len(),
                    l.split_whitespace().next().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [(0, "a"), (2, "a1"), (4, "a11"), (2, "a2"), (0, "b")]
        );
        assert!(lines[0].contains(" completed "), "{}", lines[0]);
        assert!(lines[0].ends_with("first line"), "{}", lines[0]);
        assert!(lines[1].contains(" budget_exceeded "), "{}", lines[1]);
    }
}
