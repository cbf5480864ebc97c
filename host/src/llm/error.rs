//! What can go wrong talking to a model, and whether trying again may help.

use std::fmt;
use std::time::Duration;

/// A failed model call. `Display` names the candidate (`openai:gpt-4o`), the
/// HTTP status when there was one, and the server's own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmError {
    /// The candidate that failed, as `provider:model`.
    pub candidate: String,
    pub kind: LlmErrorKind,
    pub message: String,
    /// A wait the server asked for (`retry-after`).
    pub retry_after: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmErrorKind {
    /// An HTTP error status.
    Status(u16),
    /// No response (or no next chunk) within the timeout.
    Timeout,
    /// The connection failed or was cut, including mid-stream.
    Network,
    /// The server answered with something that is not the wire format.
    Protocol,
    /// The server reported an error inside a 200 stream (e.g. Anthropic's
    /// `overloaded_error` event).
    Overloaded,
    /// The server refused the request inside a 200 stream (an
    /// `invalid_request_error` event): final, like a 400.
    Refused,
    /// Misconfiguration found before any request (a missing key, a bad URL).
    Config,
    /// The reply passed a bound of [`super::CallLimits`] (its text, its
    /// tool-call arguments, its body): final, since the same request would
    /// most likely run away again.
    TooLarge,
}

impl LlmError {
    pub fn new(candidate: &str, kind: LlmErrorKind, message: impl Into<String>) -> LlmError {
        LlmError {
            candidate: candidate.to_string(),
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Whether the same request may succeed later or elsewhere: rate limits,
    /// server errors, overload, timeouts, broken connections and streams.
    /// Client errors (400, 401, 403, 404, 422), requests refused inside a
    /// stream, configuration errors and replies past a bound are final.
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            LlmErrorKind::Status(code) => matches!(code, 408 | 409 | 425 | 429) || code >= 500,
            LlmErrorKind::Timeout | LlmErrorKind::Network | LlmErrorKind::Overloaded => true,
            // A malformed chunk is usually a proxy or server glitch.
            LlmErrorKind::Protocol => true,
            LlmErrorKind::Refused | LlmErrorKind::Config | LlmErrorKind::TooLarge => false,
        }
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            LlmErrorKind::Status(code) => write!(
                f,
                "{}: HTTP {code}{}: {}",
                self.candidate,
                reqwest::StatusCode::from_u16(code)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .map(|r| format!(" {r}"))
                    .unwrap_or_default(),
                self.message
            ),
            _ => write!(f, "{}: {}", self.candidate, self.message),
        }
    }
}

impl std::error::Error for LlmError {}
