//! What a turn and its tree of SubTurns have used, counted against their
//! bounds.
//!
//! - Tokens: a turn's token budget counts its own model calls, those of
//!   every SubTurn it started that has ended (a child's count includes its
//!   own children), and the budgets of its children still running: a
//!   child's budget is set aside in its parent when it starts (at most what
//!   the parent has left), and replaced by what it used when it ends,
//!   however it ends. Children started together share what is left, so a
//!   turn cannot spend more through sub-agents than it may spend itself.
//! - SubTurns: every turn of a tree (a top-level turn and all its
//!   descendants) shares one count of the SubTurns started in it, whoever
//!   started them (the `spawn` and `subagent` tools or a plugin's
//!   `agent.spawn-subturn`), for the life of the tree. One plugin call has a
//!   count of its own (see [`CallSpawns`]), because a plugin's own clock
//!   stops while it waits for a child, so its time limit does not bound how
//!   many it starts one after another.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Its children's tokens: used by those that ended, set aside for
    /// those running. One lock, so two children starting at once see each
    /// other's share.
    children: Mutex<Children>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Children {
    ended: u64,
    reserved: u64,
}

/// What counts against a turn's budget, in its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    /// Its own tokens and its ended children's.
    pub used: u64,
    /// The part of `used` its children used.
    pub children: u64,
    /// Set aside for its children still running.
    pub reserved: u64,
}

impl Spent {
    /// All that counts against the budget.
    pub fn total(&self) -> u64 {
        self.used + self.reserved
    }
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

    /// Sets aside a child's budget: `asked`, or all that is left of
    /// `budget` when it asks nothing, at most what is left. Nothing left:
    /// what was spent.
    pub fn reserve(&self, budget: u64, asked: Option<u64>) -> Result<u64, Spent> {
        let mut children = self.children.lock().unwrap();
        let spent = self.spent_with(&children);
        let left = budget.saturating_sub(spent.total());
        if left == 0 {
            return Err(spent);
        }
        let granted = asked.map_or(left, |asked| asked.min(left));
        children.reserved += granted;
        Ok(granted)
    }

    /// A child for which `reserved` was set aside ended, having used
    /// `tokens` (its children's included): its use replaces its share.
    pub fn child_ended(&self, reserved: u64, tokens: u64) {
        let mut children = self.children.lock().unwrap();
        children.reserved -= reserved;
        children.ended += tokens;
    }

    /// A child of the turn ended, having used `tokens` (its children's
    /// included), with nothing set aside for it.
    pub fn add_child(&self, tokens: u64) {
        self.child_ended(0, tokens);
    }

    /// What counts against the turn's budget: its own tokens, its ended
    /// children's, and what is set aside for its running children.
    pub fn tokens(&self) -> u64 {
        self.spent().total()
    }

    /// The part of [`TurnUsage::tokens`] its ended children used.
    pub fn children_tokens(&self) -> u64 {
        self.children.lock().unwrap().ended
    }

    /// [`TurnUsage::tokens`] in its parts.
    pub fn spent(&self) -> Spent {
        self.spent_with(&self.children.lock().unwrap())
    }

    fn spent_with(&self, children: &Children) -> Spent {
        Spent {
            used: self.own.load(Ordering::SeqCst) + children.ended,
            children: children.ended,
            reserved: children.reserved,
        }
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

    #[test]
    fn children_started_together_share_what_their_parent_has_left() {
        let parent = TurnUsage::default();
        parent.add_own(15);
        // 30 left of 45: set aside as the children start, before any ends.
        assert_eq!(parent.reserve(45, Some(12)), Ok(12));
        assert_eq!(parent.reserve(45, Some(12)), Ok(12));
        assert_eq!(parent.reserve(45, Some(12)), Ok(6));
        let nothing_left = Spent {
            used: 15,
            children: 0,
            reserved: 30,
        };
        assert_eq!(parent.reserve(45, Some(12)), Err(nothing_left));
        assert_eq!(parent.reserve(45, None), Err(nothing_left));
        assert_eq!(parent.tokens(), 45);

        // One ends having used 4 of its 12: 8 come back.
        parent.child_ended(12, 4);
        assert_eq!(
            parent.spent(),
            Spent {
                used: 19,
                children: 4,
                reserved: 18
            }
        );
        assert_eq!(parent.reserve(45, None), Ok(8));
        // One that never ran gives back all of its share.
        parent.child_ended(8, 0);
        assert_eq!(parent.tokens(), 37);
    }
}
