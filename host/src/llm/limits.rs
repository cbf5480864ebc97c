//! What one model call may take: an overall deadline, and bounds on the
//! reply's text and tool-call arguments.
//!
//! The bounds are checked as the reply is assembled, before a delta is
//! published, so a reply past a bound costs at most the bound in memory; the
//! attempt then ends with [`LlmErrorKind::TooLarge`], which is not retried:
//! the same request to the same model would most likely run away again, and
//! each try costs the bound again in tokens and time. The deadline covers
//! the whole attempt (headers, body, every streamed event), so a server that
//! keeps a stream alive without finishing it cannot hold a call for ever; it
//! ends the attempt with [`LlmErrorKind::Timeout`], retried like the others.

use std::time::Duration;

use super::{LlmError, LlmErrorKind};
use crate::plugin::call::duration;

/// The default bound on a reply's text: 1 MiB.
pub const DEFAULT_MAX_TEXT: usize = 1024 * 1024;
/// The default bound on a reply's tool-call arguments, all calls together.
pub const DEFAULT_MAX_ARGUMENTS: usize = 1024 * 1024;
/// The default deadline of one attempt of a model call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// Per-attempt limits of a model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// The most bytes of reply text (`--max-reply-text`).
    pub max_text: usize,
    /// The most bytes of tool-call arguments, every call of the reply
    /// together (`--max-reply-arguments`).
    pub max_arguments: usize,
    /// The longest one attempt may take, start to finish (`--llm-deadline`).
    pub deadline: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_text: DEFAULT_MAX_TEXT,
            max_arguments: DEFAULT_MAX_ARGUMENTS,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

impl CallLimits {
    /// The most bytes of a whole (non-streamed) reply body, or of one
    /// streamed event: room for the text and the arguments, JSON-escaped
    /// (up to three bytes per byte for escaped non-ASCII), and the envelope.
    pub fn max_body(&self) -> usize {
        (self.max_text.saturating_add(self.max_arguments))
            .saturating_mul(3)
            .saturating_add(64 * 1024)
    }

    /// An error if text of `len` bytes is past the bound.
    pub fn check_text(&self, candidate: &str, len: usize) -> Result<(), LlmError> {
        if len <= self.max_text {
            return Ok(());
        }
        Err(LlmError::new(
            candidate,
            LlmErrorKind::TooLarge,
            format!(
                "the reply's text passed its bound of {} (--max-reply-text)",
                bytes(self.max_text)
            ),
        ))
    }

    /// An error if tool-call arguments of `len` bytes (all calls together)
    /// are past the bound.
    pub fn check_arguments(&self, candidate: &str, len: usize) -> Result<(), LlmError> {
        if len <= self.max_arguments {
            return Ok(());
        }
        Err(LlmError::new(
            candidate,
            LlmErrorKind::TooLarge,
            format!(
                "the reply's tool-call arguments passed their bound of {} (--max-reply-arguments)",
                bytes(self.max_arguments)
            ),
        ))
    }

    /// The error for a body or event past [`CallLimits::max_body`].
    pub fn body_error(&self, candidate: &str, what: &str) -> LlmError {
        LlmError::new(
            candidate,
            LlmErrorKind::TooLarge,
            format!(
                "{what} passed {}, more than the bounds of the reply's text ({}, --max-reply-text) and arguments ({}, --max-reply-arguments) allow",
                bytes(self.max_body()),
                bytes(self.max_text),
                bytes(self.max_arguments)
            ),
        )
    }

    /// The error for an attempt that ran past its deadline.
    pub fn deadline_error(&self, candidate: &str) -> LlmError {
        LlmError::new(
            candidate,
            LlmErrorKind::Timeout,
            format!(
                "the reply was not complete within the call's deadline of {} (--llm-deadline)",
                duration(self.deadline)
            ),
        )
    }
}

/// `1 MiB`, `64 KiB` or `1000 bytes`.
pub fn bytes(n: usize) -> String {
    const MIB: usize = 1024 * 1024;
    match n {
        0 => "0 bytes".to_string(),
        n if n.is_multiple_of(MIB) => format!("{} MiB", n / MIB),
        n if n.is_multiple_of(1024) => format!("{} KiB", n / 1024),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_name_themselves() {
        let limits = CallLimits {
            max_text: 100,
            max_arguments: 2048,
            deadline: Duration::from_millis(1500),
        };
        assert!(limits.check_text("c", 100).is_ok());
        let error = limits.check_text("openai:m", 101).unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::TooLarge);
        assert!(!error.is_retryable());
        assert_eq!(
            error.to_string(),
            "openai:m: the reply's text passed its bound of 100 bytes (--max-reply-text)"
        );
        assert_eq!(
            limits.check_arguments("c", 2049).unwrap_err().message,
            "the reply's tool-call arguments passed their bound of 2 KiB (--max-reply-arguments)"
        );
        let late = limits.deadline_error("c");
        assert_eq!(late.kind, LlmErrorKind::Timeout);
        assert!(late.is_retryable());
        assert_eq!(
            late.message,
            "the reply was not complete within the call's deadline of 1500 ms (--llm-deadline)"
        );
        assert_eq!(bytes(DEFAULT_MAX_TEXT), "1 MiB");
    }
}
