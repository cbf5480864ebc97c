//! What one model call may take: an overall deadline, and bounds on the
//! reply's text, its tool-call arguments (with the calls' names and ids),
//! and the number of its tool calls.
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
use crate::plugin::units::{duration, size};

/// The default bound on a reply's text: 1 MiB.
pub const DEFAULT_MAX_TEXT: usize = 1024 * 1024;
/// The default bound on a reply's tool-call arguments, all calls together.
pub const DEFAULT_MAX_ARGUMENTS: usize = 1024 * 1024;
/// The default bound on the number of a reply's tool calls.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 128;
/// The default deadline of one attempt of a model call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// Per-attempt limits of a model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// The most bytes of reply text (`--max-reply-text`).
    pub max_text: usize,
    /// The most bytes of tool-call arguments, names and ids, every call of
    /// the reply together (`--max-reply-arguments`).
    pub max_arguments: usize,
    /// The most tool calls in one reply.
    pub max_tool_calls: usize,
    /// The longest one attempt may take, start to finish (`--llm-deadline`).
    pub deadline: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_text: DEFAULT_MAX_TEXT,
            max_arguments: DEFAULT_MAX_ARGUMENTS,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
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
                size(self.max_text as u64)
            ),
        ))
    }

    /// An error if tool-call arguments, names and ids of `len` bytes (all
    /// calls together) are past the bound.
    pub fn check_arguments(&self, candidate: &str, len: usize) -> Result<(), LlmError> {
        if len <= self.max_arguments {
            return Ok(());
        }
        Err(LlmError::new(
            candidate,
            LlmErrorKind::TooLarge,
            format!(
                "the reply's tool-call arguments passed their bound of {} (--max-reply-arguments)",
                size(self.max_arguments as u64)
            ),
        ))
    }

    /// An error if `count` tool calls are past the bound.
    pub fn check_tool_calls(&self, candidate: &str, count: usize) -> Result<(), LlmError> {
        if count <= self.max_tool_calls {
            return Ok(());
        }
        Err(LlmError::new(
            candidate,
            LlmErrorKind::TooLarge,
            format!(
                "the reply's tool calls passed their bound of {} calls",
                self.max_tool_calls
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
                size(self.max_body() as u64),
                size(self.max_text as u64),
                size(self.max_arguments as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_name_themselves() {
        let limits = CallLimits {
            max_text: 100,
            max_arguments: 2048,
            max_tool_calls: 2,
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
        assert!(limits.check_tool_calls("c", 2).is_ok());
        let many = limits.check_tool_calls("c", 3).unwrap_err();
        assert_eq!(
            (many.kind, many.message.as_str()),
            (
                LlmErrorKind::TooLarge,
                "the reply's tool calls passed their bound of 2 calls"
            )
        );
        let late = limits.deadline_error("c");
        assert_eq!(late.kind, LlmErrorKind::Timeout);
        assert!(late.is_retryable());
        assert_eq!(
            late.message,
            "the reply was not complete within the call's deadline of 1500 ms (--llm-deadline)"
        );
        assert_eq!(size(DEFAULT_MAX_TEXT as u64), "1 MiB");
    }
}
