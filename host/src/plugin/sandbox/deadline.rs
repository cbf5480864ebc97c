//! A call's deadline: when it is stopped, and which bound set that. Its
//! clock stops while the guest waits for the host on something that has a
//! time limit of its own (a sub-agent).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a paused deadline is looked at again.
const PAUSED_CHECK: Duration = Duration::from_millis(20);

/// When a call is stopped, and which bound set that. Clones share the
/// clock, which stops while the guest waits for a SubTurn.
#[derive(Debug, Clone)]
pub struct Deadline {
    clock: Arc<Mutex<Clock>>,
    /// The time the call was given.
    pub timeout: Duration,
    /// Whether an outer deadline (the turn's) was earlier than the plugin's
    /// own time limit.
    pub from_turn: bool,
}

#[derive(Debug)]
struct Clock {
    at: Instant,
    paused_since: Option<Instant>,
}

impl Deadline {
    /// The earlier of `now + limit` and `outer`.
    pub fn new(limit: Duration, outer: Option<Instant>) -> Self {
        let now = Instant::now();
        let (at, timeout, from_turn) = match outer {
            Some(outer) if outer < now + limit => {
                (outer, outer.saturating_duration_since(now), true)
            }
            _ => (now + limit, limit, false),
        };
        Deadline {
            clock: Arc::new(Mutex::new(Clock {
                at,
                paused_since: None,
            })),
            timeout,
            from_turn,
        }
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the call is stopped (as of now: a pause moves it later).
    pub fn at(&self) -> Instant {
        let clock = self.clock();
        match clock.paused_since {
            Some(since) => clock.at + since.elapsed(),
            None => clock.at,
        }
    }

    /// Whether the call is past its deadline (never while paused).
    pub fn passed(&self) -> bool {
        let clock = self.clock();
        clock.paused_since.is_none() && Instant::now() >= clock.at
    }

    /// When to look again: the deadline, or soon while paused (the pause
    /// may end at any moment).
    pub(super) fn next_check(&self) -> Instant {
        let clock = self.clock();
        match clock.paused_since {
            Some(_) => Instant::now() + PAUSED_CHECK,
            None => clock.at,
        }
    }

    /// Stops the clock (the guest waits for the host on something that has
    /// a time limit of its own).
    pub fn pause(&self) {
        let mut clock = self.clock();
        clock.paused_since.get_or_insert_with(Instant::now);
    }

    /// Starts the clock again, the pause not counted.
    pub fn resume(&self) {
        let mut clock = self.clock();
        if let Some(since) = clock.paused_since.take() {
            clock.at += since.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_deadline_never_passes_and_resumes_later_by_the_pause() {
        let deadline = Deadline::new(Duration::from_millis(20), None);
        let first = deadline.at();
        deadline.pause();
        std::thread::sleep(Duration::from_millis(40));
        // Past the original deadline, but paused.
        assert!(!deadline.passed());
        // While paused it is looked at again soon, not at some far time.
        assert!(deadline.next_check() <= Instant::now() + PAUSED_CHECK);
        deadline.resume();
        let moved = deadline.at();
        assert!(
            moved >= first + Duration::from_millis(40),
            "{moved:?} vs {first:?}"
        );
        assert!(!deadline.passed());
        std::thread::sleep(Duration::from_millis(25));
        assert!(deadline.passed());
        assert_eq!(deadline.next_check(), deadline.at());
    }
}
