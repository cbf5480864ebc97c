//! What can go wrong talking to a model, and whether trying again may help.

use std::fmt;
use std::time::Duration;

use crate::protocol::TurnErrorKind;

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
    /// The `type` of the server's error object, when it sent one
    /// (`invalid_request_error`, `overloaded_error`).
    pub server_type: Option<String>,
    /// The `code` of the server's error object, when it sent one
    /// (`context_length_exceeded`, `rate_limit_exceeded`, `500`).
    pub server_code: Option<String>,
    /// [`LlmErrorKind::Network`] only: the reply had started (its headers
    /// had come) when the connection broke, or the stream ended before the
    /// reply was complete; not a connection that failed.
    pub mid_reply: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmErrorKind {
    /// An HTTP error status.
    Status(u16),
    /// No response (or no next chunk) within the timeout.
    Timeout,
    /// The connection failed or was cut, including mid-stream (then
    /// [`LlmError::mid_reply`] is set).
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
            server_type: None,
            server_code: None,
            mid_reply: false,
        }
    }

    /// A 401 says where the key came from: the variable that was not set,
    /// or the one whose key the server refused.
    pub fn with_key_hint(mut self, key_sent: bool, key_var: Option<&str>) -> LlmError {
        if self.kind != LlmErrorKind::Status(401) {
            return self;
        }
        let hint = match (key_sent, key_var) {
            (true, Some(var)) => format!("the key sent is the one in {var}: check it"),
            (true, None) => "the key sent was refused: check it".to_string(),
            (false, Some(var)) => format!("no key was sent: {var} is not set"),
            (false, None) => {
                "no key was sent: the provider names no api_key_env (in its [providers.NAME])"
                    .to_string()
            }
        };
        self.message = format!("{} ({hint})", self.message);
        self
    }

    /// The connection broke after the reply had started.
    pub fn cut(candidate: &str, message: impl Into<String>) -> LlmError {
        LlmError {
            mid_reply: true,
            ..LlmError::new(candidate, LlmErrorKind::Network, message)
        }
    }

    /// What kind of failure this is, as a turn that ends with it reports it
    /// (`turn_end`'s `error_kind`):
    ///
    /// | signal | class |
    /// |---|---|
    /// | HTTP 401, 403 | `auth` |
    /// | HTTP 429 | `rate_limited` |
    /// | HTTP 503, 529 | `overloaded` |
    /// | HTTP 413; a 4xx or a refusal in a stream that says the context is too long | `context_too_long` |
    /// | HTTP 408 | `timeout` |
    /// | another 4xx; a refusal in a stream | `bad_request` |
    /// | another status (5xx) | `provider` |
    /// | an error event in a stream: overload (`overloaded_error`, 503, 529) | `overloaded` |
    /// | an error event in a stream: rate limit (`rate_limit_error`, 429) | `rate_limited` |
    /// | an error event in a stream: anything else (`server_error`, `api_error`, text) | `provider` |
    /// | no connection | `network` |
    /// | the connection broke, or the stream ended, mid-reply | `cut_stream` |
    /// | no response, or no next chunk, in time; the call's deadline | `timeout` |
    /// | a reply that is not the wire format | `provider` |
    /// | a reply past a bound | `reply_too_large` |
    /// | misconfiguration (a missing key, a bad URL, a bad script) | `config` |
    ///
    /// The context is too long when the server's code is
    /// `context_length_exceeded` (OpenAI) or its message says so: OpenAI's
    /// "maximum context length is N tokens", Anthropic's "prompt is too
    /// long: N tokens > M maximum", "exceed context limit", llama.cpp's
    /// "exceeds the available context size".
    pub fn class(&self) -> TurnErrorKind {
        match self.kind {
            LlmErrorKind::Status(401 | 403) => TurnErrorKind::Auth,
            LlmErrorKind::Status(429) => TurnErrorKind::RateLimited,
            LlmErrorKind::Status(503 | 529) => TurnErrorKind::Overloaded,
            LlmErrorKind::Status(413) => TurnErrorKind::ContextTooLong,
            LlmErrorKind::Status(408) => TurnErrorKind::Timeout,
            LlmErrorKind::Status(400..=499) | LlmErrorKind::Refused => {
                if self.says_context_too_long() {
                    TurnErrorKind::ContextTooLong
                } else {
                    TurnErrorKind::BadRequest
                }
            }
            LlmErrorKind::Status(_) => TurnErrorKind::Provider,
            LlmErrorKind::Overloaded => {
                let labels = self.labels();
                if ["overload", "503", "529"]
                    .iter()
                    .any(|w| labels.contains(w))
                {
                    TurnErrorKind::Overloaded
                } else if ["rate_limit", "rate limit", "429"]
                    .iter()
                    .any(|w| labels.contains(w))
                {
                    TurnErrorKind::RateLimited
                } else {
                    TurnErrorKind::Provider
                }
            }
            LlmErrorKind::Network if self.mid_reply => TurnErrorKind::CutStream,
            LlmErrorKind::Network => TurnErrorKind::Network,
            LlmErrorKind::Timeout => TurnErrorKind::Timeout,
            LlmErrorKind::Protocol => TurnErrorKind::Provider,
            LlmErrorKind::TooLarge => TurnErrorKind::ReplyTooLarge,
            LlmErrorKind::Config => TurnErrorKind::Config,
        }
    }

    /// The server's type and code, lower case, space-separated.
    fn labels(&self) -> String {
        let labels = [&self.server_type, &self.server_code];
        let labels: Vec<&str> = labels.iter().filter_map(|l| l.as_deref()).collect();
        labels.join(" ").to_ascii_lowercase()
    }

    /// Whether the server said the request is longer than the model's
    /// context window.
    fn says_context_too_long(&self) -> bool {
        const CODES: [&str; 1] = ["context_length_exceeded"];
        const PHRASES: [&str; 6] = [
            "context_length_exceeded",
            "maximum context length",
            "prompt is too long",
            "exceed context limit",
            "exceeds the available context size",
            "context length exceeded",
        ];
        let code = self.server_code.as_deref().unwrap_or_default();
        let message = self.message.to_ascii_lowercase();
        CODES.contains(&code) || PHRASES.iter().any(|p| message.contains(p))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn error(kind: LlmErrorKind, message: &str) -> LlmError {
        LlmError::new("openai:m", kind, message)
    }

    fn labelled(kind: LlmErrorKind, server_type: &str, code: &str, message: &str) -> LlmError {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        LlmError {
            server_type: some(server_type),
            server_code: some(code),
            ..error(kind, message)
        }
    }

    #[test]
    fn statuses_are_classified() {
        use LlmErrorKind::Status;
        let cases = [
            (401, TurnErrorKind::Auth),
            (403, TurnErrorKind::Auth),
            (429, TurnErrorKind::RateLimited),
            (503, TurnErrorKind::Overloaded),
            (529, TurnErrorKind::Overloaded),
            (413, TurnErrorKind::ContextTooLong),
            (408, TurnErrorKind::Timeout),
            (400, TurnErrorKind::BadRequest),
            (404, TurnErrorKind::BadRequest),
            (422, TurnErrorKind::BadRequest),
            (500, TurnErrorKind::Provider),
            (502, TurnErrorKind::Provider),
            (504, TurnErrorKind::Provider),
            (302, TurnErrorKind::Provider),
        ];
        for (code, class) in cases {
            assert_eq!(error(Status(code), "x").class(), class, "HTTP {code}");
        }
    }

    #[test]
    fn a_context_overflow_is_recognised_in_each_providers_shape() {
        use LlmErrorKind::{Refused, Status};
        let overflows = [
            // OpenAI: the code says it, whatever the message.
            labelled(
                Status(400),
                "invalid_request_error",
                "context_length_exceeded",
                "Your input exceeds the context window of this model.",
            ),
            // OpenAI and vLLM: the message says it.
            error(
                Status(400),
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            ),
            // Anthropic.
            labelled(
                Status(400),
                "invalid_request_error",
                "",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
            labelled(
                Status(400),
                "invalid_request_error",
                "",
                "input length and `max_tokens` exceed context limit: 197000 + 20000 > 200000",
            ),
            // llama.cpp.
            error(
                Status(400),
                "the request exceeds the available context size, try increasing it",
            ),
            // Refused inside a stream.
            labelled(
                Refused,
                "invalid_request_error",
                "",
                "the server reported an error: invalid_request_error: prompt is too long: 9 tokens > 8 maximum",
            ),
        ];
        for overflow in overflows {
            assert_eq!(
                overflow.class(),
                TurnErrorKind::ContextTooLong,
                "{overflow:?}"
            );
        }
        let other = labelled(
            Status(400),
            "invalid_request_error",
            "invalid_value",
            "Invalid value for 'tool_choice'",
        );
        assert_eq!(other.class(), TurnErrorKind::BadRequest);
        let refused = labelled(Refused, "invalid_request_error", "", "bad");
        assert_eq!(refused.class(), TurnErrorKind::BadRequest);
        // A context message on a status that says something else first.
        let auth = error(Status(401), "maximum context length");
        assert_eq!(auth.class(), TurnErrorKind::Auth);
    }

    #[test]
    fn errors_inside_a_stream_are_classified_by_the_servers_labels() {
        let overloaded = LlmErrorKind::Overloaded;
        let cases = [
            (
                labelled(overloaded, "overloaded_error", "", "Overloaded"),
                TurnErrorKind::Overloaded,
            ),
            (
                labelled(overloaded, "", "503", "busy"),
                TurnErrorKind::Overloaded,
            ),
            (
                labelled(overloaded, "rate_limit_error", "", "slow down"),
                TurnErrorKind::RateLimited,
            ),
            (
                labelled(overloaded, "", "rate_limit_exceeded", "slow down"),
                TurnErrorKind::RateLimited,
            ),
            (
                labelled(overloaded, "server_error", "500", "boom"),
                TurnErrorKind::Provider,
            ),
            (
                labelled(overloaded, "api_error", "", "oops"),
                TurnErrorKind::Provider,
            ),
            (
                error(overloaded, "the server reported an error: upstream died"),
                TurnErrorKind::Provider,
            ),
        ];
        for (error, class) in cases {
            assert_eq!(error.class(), class, "{error:?}");
        }
    }

    #[test]
    fn the_other_kinds_are_classified() {
        let cases = [
            (
                error(LlmErrorKind::Network, "could not reach the server"),
                TurnErrorKind::Network,
            ),
            (
                LlmError::cut("openai:m", "the connection was cut mid-stream"),
                TurnErrorKind::CutStream,
            ),
            (
                error(LlmErrorKind::Timeout, "no response within 1 s"),
                TurnErrorKind::Timeout,
            ),
            (
                error(LlmErrorKind::Protocol, "not JSON"),
                TurnErrorKind::Provider,
            ),
            (
                error(LlmErrorKind::TooLarge, "past its bound"),
                TurnErrorKind::ReplyTooLarge,
            ),
            (
                error(LlmErrorKind::Config, "OPENAI_API_KEY is not set"),
                TurnErrorKind::Config,
            ),
        ];
        for (error, class) in cases {
            assert_eq!(error.class(), class, "{error:?}");
        }
        let cut = LlmError::cut("openai:m", "cut");
        assert_eq!(cut.kind, LlmErrorKind::Network);
        assert!(cut.is_retryable());
    }

    #[test]
    fn the_wire_names_of_the_classes_are_their_serde_names() {
        let all = [
            TurnErrorKind::Auth,
            TurnErrorKind::RateLimited,
            TurnErrorKind::Overloaded,
            TurnErrorKind::ContextTooLong,
            TurnErrorKind::BadRequest,
            TurnErrorKind::Network,
            TurnErrorKind::Timeout,
            TurnErrorKind::CutStream,
            TurnErrorKind::Provider,
            TurnErrorKind::ReplyTooLarge,
            TurnErrorKind::Config,
            TurnErrorKind::Hook,
            TurnErrorKind::NoAnswer,
            TurnErrorKind::RepeatedRefusal,
            TurnErrorKind::Internal,
        ];
        for kind in all {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.as_str(), "{kind:?}");
        }
    }
}
