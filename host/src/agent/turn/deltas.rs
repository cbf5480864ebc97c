//! A model call's streamed text as `llm_delta` events: at most one every
//! [`EVERY`].
//!
//! A model streams its answer a token or a few at a time, each in a chunk
//! of its own, and each delta is an event: published on the bus, written to
//! the event log, sent to every stream that watches the session. A 200-token
//! answer made 200 of them, most of a turn's host CPU. So text that
//! arrives less than [`EVERY`] after the last delta published is held, and
//! goes out in one delta when that time is up (the turn's model call sets a
//! timer: see `model_call.rs`), with the next text that arrives later, or
//! before whatever the call publishes next (a retry, its response). The
//! first text of a call, and of each attempt the chain makes, goes out at
//! once, and a watcher sees the answer
//! grow at least every [`EVERY`]: a person reading along cannot tell.
//!
//! Nothing is lost or reordered: the deltas of a call still add up to its
//! text, in order; only their number changes.

use std::time::{Duration, Instant};

/// The least time between two deltas of a call.
pub(super) const EVERY: Duration = Duration::from_millis(50);

/// The text of a call held for its next delta, and when its last delta
/// was published.
#[derive(Debug, Default)]
pub(super) struct Deltas {
    held: String,
    published_at: Option<Instant>,
}

/// What to do with text just streamed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Streamed {
    /// Publish this delta now (the text held before, then the new).
    Publish(String),
    /// Held for the next delta; `first` if nothing was held before (the
    /// caller's timer has a new time to wait for: [`Deltas::due`]).
    Held { first: bool },
}

impl Deltas {
    /// `text` was streamed at `now`.
    pub fn streamed(&mut self, text: &str, now: Instant) -> Streamed {
        if self.published_at.is_some_and(|at| now < at + EVERY) {
            let first = self.held.is_empty();
            self.held.push_str(text);
            return Streamed::Held { first };
        }
        self.published_at = Some(now);
        let mut delta = std::mem::take(&mut self.held);
        delta.push_str(text);
        Streamed::Publish(delta)
    }

    /// When the text held is due to go out; None if none is held.
    pub fn due(&self) -> Option<Instant> {
        match self.published_at {
            Some(at) if !self.held.is_empty() => Some(at + EVERY),
            _ => None,
        }
    }

    /// The text held, to publish now as a delta; None if none is held.
    pub fn take(&mut self, now: Instant) -> Option<String> {
        if self.held.is_empty() {
            return None;
        }
        self.published_at = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_text_goes_out_at_once_and_the_rest_at_most_every_interval() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut deltas = Deltas::default();
        assert_eq!(deltas.due(), None);
        assert_eq!(
            deltas.streamed("The", at(0)),
            Streamed::Publish("The".into())
        );
        assert_eq!(deltas.due(), None, "nothing held");
        assert_eq!(
            deltas.streamed(" sum", at(10)),
            Streamed::Held { first: true }
        );
        assert_eq!(
            deltas.streamed(" is", at(20)),
            Streamed::Held { first: false }
        );
        assert_eq!(deltas.due(), Some(at(50)));
        // The timer's time: what was held, in order.
        assert_eq!(deltas.take(at(50)), Some(" sum is".into()));
        assert_eq!((deltas.due(), deltas.take(at(51))), (None, None));
        // Within the interval of that delta: held again.
        assert_eq!(
            deltas.streamed(" 4", at(60)),
            Streamed::Held { first: true }
        );
        assert_eq!(deltas.due(), Some(at(100)));
        // Text after the interval goes out at once, with what was held.
        assert_eq!(
            deltas.streamed("2.", at(130)),
            Streamed::Publish(" 42.".into())
        );
        assert_eq!(deltas.due(), None);
    }
}
