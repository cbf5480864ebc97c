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
        Self::new_at(limit, outer, Instant::now())
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the call is stopped (as of now: a pause moves it later).
    pub fn at(&self) -> Instant {
        self.at_as_of(Instant::now())
    }

    /// Whether the call is past its deadline (never while paused).
    pub fn passed(&self) -> bool {
        self.passed_at(Instant::now())
    }

    /// When to look again: the deadline, or soon while paused (the pause
    /// may end at any moment).
    pub(super) fn next_check(&self) -> Instant {
        self.next_check_at(Instant::now())
    }

    /// Stops the clock (the guest waits for the host on something that has
    /// a time limit of its own).
    pub fn pause(&self) {
        self.pause_at(Instant::now());
    }

    /// Starts the clock again, the pause not counted.
    pub fn resume(&self) {
        self.resume_at(Instant::now());
    }

    // The same, at the time `now` (the tests choose it).

    fn new_at(limit: Duration, outer: Option<Instant>, now: Instant) -> Self {
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

    fn at_as_of(&self, now: Instant) -> Instant {
        let clock = self.clock();
        match clock.paused_since {
            Some(since) => clock.at + now.saturating_duration_since(since),
            None => clock.at,
        }
    }

    fn passed_at(&self, now: Instant) -> bool {
        let clock = self.clock();
        clock.paused_since.is_none() && now >= clock.at
    }

    fn next_check_at(&self, now: Instant) -> Instant {
        let clock = self.clock();
        match clock.paused_since {
            Some(_) => now + PAUSED_CHECK,
            None => clock.at,
        }
    }

    fn pause_at(&self, now: Instant) {
        let mut clock = self.clock();
        clock.paused_since.get_or_insert(now);
    }

    fn resume_at(&self, now: Instant) {
        let mut clock = self.clock();
        if let Some(since) = clock.paused_since.take() {
            clock.at += now.saturating_duration_since(since);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// On a clock the test sets: no sleeps, so no race with the machine.
    #[test]
    fn a_paused_deadline_never_passes_and_resumes_later_by_the_pause() {
        let start = Instant::now();
        let deadline = Deadline::new_at(20 * MS, None, start);
        let first = deadline.at_as_of(start);
        assert_eq!(first, start + 20 * MS);
        assert!(!deadline.passed_at(start + 19 * MS));
        assert!(deadline.passed_at(first));

        // Paused at 5 ms, 40 ms long, past the original deadline.
        deadline.pause_at(start + 5 * MS);
        // A second pause does not restart the first.
        deadline.pause_at(start + 10 * MS);
        let later = start + 45 * MS;
        assert!(!deadline.passed_at(later));
        assert!(!deadline.passed_at(start + Duration::from_secs(3600)));
        // While paused it moves on with the clock, and is looked at again
        // soon, not at some far time.
        assert_eq!(deadline.at_as_of(later), first + 40 * MS);
        assert_eq!(deadline.next_check_at(later), later + PAUSED_CHECK);

        deadline.resume_at(later);
        let moved = deadline.at_as_of(later);
        assert_eq!(moved, first + 40 * MS, "{moved:?} vs {first:?}");
        // Not passed when the unmoved deadline would have been, passed when
        // the moved one is.
        assert!(!deadline.passed_at(later));
        assert!(!deadline.passed_at(moved - MS));
        assert!(deadline.passed_at(moved));
        assert_eq!(deadline.next_check_at(later), moved);
        // Resuming again changes nothing.
        deadline.resume_at(later + 100 * MS);
        assert_eq!(deadline.at_as_of(later + 100 * MS), moved);
    }

    /// On the real clock: the bounds hold however slow the machine is.
    #[test]
    fn pause_and_resume_move_the_deadline_on_the_real_clock_by_at_least_the_pause() {
        let limit = Duration::from_secs(3600);
        let before = Instant::now();
        let deadline = Deadline::new(limit, None);
        let after = Instant::now();
        let first = deadline.at();
        assert!(before + limit <= first && first <= after + limit);

        deadline.pause();
        let paused = Instant::now();
        std::thread::sleep(10 * MS);
        let resuming = Instant::now();
        assert!(!deadline.passed());
        assert!(deadline.next_check() <= Instant::now() + PAUSED_CHECK);
        deadline.resume();
        let resumed = Instant::now();

        // The pause began before `paused` and ended after `resuming`, and
        // lasted at most from `after` to `resumed`.
        let moved = deadline.at();
        assert!(
            moved >= first + (resuming - paused),
            "{moved:?} vs {first:?}"
        );
        assert!(moved <= first + (resumed - after), "{moved:?} vs {first:?}");
        assert_eq!(deadline.next_check(), moved);

        // A deadline of no time has passed at once, never while paused, and
        // again once resumed.
        let now = Deadline::new(Duration::ZERO, None);
        assert!(now.passed());
        now.pause();
        assert!(!now.passed());
        now.resume();
        assert!(now.passed());
    }
}
