//! What a turn and its tree of SubTurns have used, counted against their
//! bounds.
//!
//! - Tokens: a turn's token budget counts its own model calls and those of
//!   every SubTurn it started that has ended (a child's count includes its
//!   own children). A child is given at most what its parent has left, so a
//!   turn cannot spend more through sub-agents than it may spend itself.
//! - SubTurns: every turn of a tree (a top-level turn and all its
//!   descendants) shares one count of the SubTurns started in it, whoever
//!   started them (the `spawn` and `subagent` tools or a plugin's
//!   `agent.spawn-subturn`), for the life of the tree. One plugin call has a
//!   count of its own (see [`CallSpawns`]), because a plugin's own clock
//!   stops while it waits for a child, so its time limit does not bound how
//!   many it starts one after another.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shared by every turn of one tree.
#[derive(Debug, Default)]
pub struct TreeUsage {
    subturns_started: AtomicUsize,
}

impl TreeUsage {
    /// Counts one more SubTurn, unless `limit` have been started already;
    /// then returns how many were.
    pub fn start_subturn(&self, limit: usize) -> Result<usize, usize> {
        self.subturns_started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|n| n + 1)
    }

    /// SubTurns started in the tree so far.
    pub fn subturns_started(&self) -> usize {
        self.subturns_started.load(Ordering::SeqCst)
    }
}

/// What one turn has used: its tree's counts, and its tokens.
#[derive(Debug, Default)]
pub struct TurnUsage {
    pub(crate) tree: Arc<TreeUsage>,
    /// The turn's own tokens.
    own: AtomicU64,
    /// Tokens of its ended children (theirs and their children's).
    children: AtomicU64,
}

impl TurnUsage {
    /// The usage of a child of a turn of `tree`.
    pub fn in_tree(tree: Arc<TreeUsage>) -> TurnUsage {
        TurnUsage {
            tree,
            ..TurnUsage::default()
        }
    }

    /// The turn's own model call used `tokens`.
    pub fn add_own(&self, tokens: u64) {
        self.own.fetch_add(tokens, Ordering::SeqCst);
    }

    /// A child of the turn ended, having used `tokens` (its children's
    /// included).
    pub fn add_child(&self, tokens: u64) {
        self.children.fetch_add(tokens, Ordering::SeqCst);
    }

    /// What counts against the turn's budget: its own tokens and its ended
    /// children's.
    pub fn tokens(&self) -> u64 {
        self.own.load(Ordering::SeqCst) + self.children_tokens()
    }

    /// The part of [`TurnUsage::tokens`] its children used.
    pub fn children_tokens(&self) -> u64 {
        self.children.load(Ordering::SeqCst)
    }
}

/// SubTurns started by one plugin call, against `subturns.per_call`.
#[derive(Debug, Default)]
pub struct CallSpawns {
    started: AtomicUsize,
}

impl CallSpawns {
    /// Counts one more, unless `limit` have been started; then returns how
    /// many were.
    pub fn start(&self, limit: usize) -> Result<(), usize> {
        self.started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|_| ())
    }

    /// The last one counted did not start after all.
    pub fn undo(&self) {
        self.started.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_starts_subturns_up_to_its_limit_and_children_tokens_count_for_the_parent() {
        let tree = Arc::new(TreeUsage::default());
        assert_eq!(tree.start_subturn(2), Ok(1));
        assert_eq!(tree.start_subturn(2), Ok(2));
        assert_eq!(tree.start_subturn(2), Err(2));
        assert_eq!(tree.subturns_started(), 2);

        let parent = TurnUsage::in_tree(tree.clone());
        parent.add_own(10);
        parent.add_child(5);
        assert_eq!((parent.tokens(), parent.children_tokens()), (15, 5));

        let call = CallSpawns::default();
        assert_eq!(call.start(1), Ok(()));
        assert_eq!(call.start(1), Err(1));
        call.undo();
        assert_eq!(call.start(1), Ok(()));
    }
}
