//! The recorded turns of a session as a tree: SubTurns under their parents.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::TurnRecord;

/// A recorded turn and the SubTurns it started, in order of start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnNode {
    #[serde(flatten)]
    pub turn: TurnRecord,
    pub children: Vec<TurnNode>,
}

/// The top-level turns of `turns` (given in order of start), each with its
/// descendants. A SubTurn whose parent is not in the list is shown at the
/// top.
pub fn forest(turns: &[TurnRecord]) -> Vec<TurnNode> {
    let known: HashSet<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    let mut children: HashMap<Option<&str>, Vec<&TurnRecord>> = HashMap::new();
    for turn in turns {
        let parent = turn.parent_turn_id.as_deref().filter(|p| known.contains(p));
        children.entry(parent).or_default().push(turn);
    }
    fn build(
        parent: Option<&str>,
        children: &HashMap<Option<&str>, Vec<&TurnRecord>>,
    ) -> Vec<TurnNode> {
        children
            .get(&parent)
            .map(|kids| {
                kids.iter()
                    .map(|turn| TurnNode {
                        turn: (*turn).clone(),
                        children: build(Some(turn.id.as_str()), children),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    build(None, &children)
}
