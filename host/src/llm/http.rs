//! What the OpenAI and Anthropic clients share: sending a request within the
//! timeout, turning error statuses into [`LlmError`]s (with the server's own
//! message and `retry-after`), reading a JSON body within its bound, and
//! reading an SSE stream (see [`super::sse`]).
//!
//! Timeouts: a streamed reply must start (headers) within the candidate's
//! timeout, and then each next chunk must arrive within it; a non-streamed
//! reply must arrive whole within it. Whatever the timeout allows, the whole
//! attempt must end within the call's deadline ([`CallLimits::deadline`]).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;

use super::limits::CallLimits;
use super::sse::{SseStream, error_chain};
use super::{LlmError, LlmErrorKind};
use crate::plugin::units::duration;

/// The most of an error body that is read.
const ERROR_BODY_CAP: usize = 64 * 1024;
/// The most of an error body's raw text that goes into a message.
const ERROR_TEXT_CHARS: usize = 500;

/// Whether a stream accumulator wants more events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    More,
    Done,
}

/// One request to one candidate, with its time limits and bounds.
pub struct Exchange {
    candidate: String,
    timeout: Duration,
    /// When the response must have started (or, not streamed, ended).
    deadline: Instant,
    /// When the whole attempt must have ended.
    call_deadline: Instant,
    limits: CallLimits,
}

impl Exchange {
    /// Starts the clock: the reply must start within `timeout` from now,
    /// and end within `limits.deadline`.
    pub fn new(candidate: &str, timeout: Duration, limits: CallLimits) -> Exchange {
        let now = Instant::now();
        Exchange {
            candidate: candidate.to_string(),
            timeout,
            deadline: now + timeout,
            call_deadline: now + limits.deadline,
            limits,
        }
    }

    /// The bounds of this attempt's reply.
    pub fn limits(&self) -> &CallLimits {
        &self.limits
    }

    pub fn error(&self, kind: LlmErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&self.candidate, kind, message)
    }

    /// The earlier of the response's and the call's deadline.
    fn until(&self) -> Instant {
        self.deadline.min(self.call_deadline)
    }

    /// The error for the deadline [`Exchange::until`] gave.
    fn no_response(&self) -> LlmError {
        if self.call_deadline < self.deadline {
            return self.limits.deadline_error(&self.candidate);
        }
        let message = format!("no response within {}", duration(self.timeout));
        self.error(LlmErrorKind::Timeout, message)
    }

    /// Sends `request` and waits for the response headers. An error status
    /// becomes [`LlmErrorKind::Status`] with the server's message.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, LlmError> {
        let response = match tokio::time::timeout_at(self.until(), request.send()).await {
            Err(_) => return Err(self.no_response()),
            Ok(Err(e)) => return Err(self.reqwest_error(&e)),
            Ok(Ok(response)) => response,
        };
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(self.status_error(response).await)
        }
    }

    /// Reads the whole body (by the same deadline as the headers, and no
    /// more than [`CallLimits::max_body`]) as JSON.
    pub async fn read_json<T: DeserializeOwned>(
        &self,
        mut response: reqwest::Response,
    ) -> Result<T, LlmError> {
        let max = self.limits.max_body();
        if response.content_length().is_some_and(|n| n > max as u64) {
            return Err(self.limits.body_error(&self.candidate, "the reply's body"));
        }
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout_at(self.until(), response.chunk()).await {
                Err(_) => return Err(self.no_response()),
                Ok(Err(e)) => {
                    let message = format!("the connection was cut mid-reply: {}", error_chain(&e));
                    return Err(LlmError::cut(&self.candidate, message));
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    if body.len() + chunk.len() > max {
                        return Err(self.limits.body_error(&self.candidate, "the reply's body"));
                    }
                    body.extend_from_slice(&chunk);
                }
            }
        }
        serde_json::from_slice(&body).map_err(|e| {
            let text = String::from_utf8_lossy(&body);
            let message = format!(
                "the reply is not the expected JSON ({e}): {}",
                snippet(&text, 80)
            );
            self.error(LlmErrorKind::Protocol, message)
        })
    }

    /// The response's SSE events; each must arrive within the timeout, all
    /// within the call's deadline.
    pub fn events(&self, response: reqwest::Response) -> SseStream {
        SseStream::new(
            &self.candidate,
            response,
            self.timeout,
            self.call_deadline,
            self.limits,
        )
    }

    fn reqwest_error(&self, e: &reqwest::Error) -> LlmError {
        let chain = error_chain(e);
        if e.is_timeout() {
            self.error(LlmErrorKind::Timeout, format!("timed out: {chain}"))
        } else if e.is_builder() {
            let url = e.url().map(|u| format!(" {u}")).unwrap_or_default();
            self.error(
                LlmErrorKind::Config,
                format!("could not build the request to{url}: {chain}"),
            )
        } else {
            self.error(
                LlmErrorKind::Network,
                format!("could not reach the server: {chain}"),
            )
        }
    }

    async fn status_error(&self, mut response: reqwest::Response) -> LlmError {
        let code = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_CAP {
            match tokio::time::timeout_at(self.until(), response.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(ERROR_BODY_CAP);
        let body = String::from_utf8_lossy(&body);
        let mut error = self.error(LlmErrorKind::Status(code), error_message(&body));
        error.retry_after = retry_after;
        (error.server_type, error.server_code) = error_labels(&body);
        error
    }
}

/// Whether the response is a whole JSON reply, as from a server that
/// ignored `stream: true`. Anything else is read as an SSE stream (some
/// servers send one without `text/event-stream`).
pub fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// An error object as both APIs send it, in an error body or in a stream:
/// `{"type": "...", "code": ..., "message": "..."}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireError {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub code: Option<Value>,
    pub message: Option<String>,
}

impl WireError {
    /// An error reported inside a 200 reply: [`LlmErrorKind::Overloaded`]
    /// when it says overloaded, rate limited or server error, else
    /// [`LlmErrorKind::Refused`] (the request itself was refused, e.g. the
    /// context is too long: trying again would not help).
    pub fn into_error(self, candidate: &str) -> LlmError {
        let code = match &self.code {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let server_type = self.kind.unwrap_or_default();
        let labels = format!("{server_type} {code}").to_ascii_lowercase();
        let overloaded = [
            "overload",
            "rate_limit",
            "rate limit",
            "server",
            "api_error",
            "429",
            "500",
            "502",
            "503",
            "529",
        ]
        .iter()
        .any(|word| labels.contains(word));
        let label = [server_type.as_str(), code.as_str()]
            .into_iter()
            .find(|s| !s.is_empty());
        let message = self.message.unwrap_or_else(|| "(no message)".into());
        let message = match label {
            Some(label) => format!("the server reported an error: {label}: {message}"),
            None => format!("the server reported an error: {message}"),
        };
        let kind = if overloaded {
            LlmErrorKind::Overloaded
        } else {
            LlmErrorKind::Refused
        };
        let some = |s: String| (!s.is_empty()).then_some(s);
        LlmError {
            server_type: some(server_type),
            server_code: some(code),
            ..LlmError::new(candidate, kind, message)
        }
    }
}

/// An error reported as a whole stream event: `{"error": {...}}` (with or
/// without Anthropic's `"type": "error"`), a bare error object
/// (`{"code": 500, "message": "..."}`, llama.cpp's `error:` line), or text.
/// Text that is not an error object is taken as a server failure (retried).
pub fn error_event(candidate: &str, data: &str) -> LlmError {
    if let Some(error) = error_envelope(candidate, data) {
        return error;
    }
    match serde_json::from_str::<WireError>(data) {
        Ok(error) if error.message.is_some() => error.into_error(candidate),
        _ => LlmError::new(
            candidate,
            LlmErrorKind::Overloaded,
            format!(
                "the server reported an error: {}",
                snippet(data.trim(), ERROR_TEXT_CHARS)
            ),
        ),
    }
}

/// The error of a stream event whose top level is `{"error": {...}}`.
pub fn error_envelope(candidate: &str, data: &str) -> Option<LlmError> {
    #[derive(Deserialize)]
    struct Envelope {
        error: WireError,
    }
    let envelope: Envelope = serde_json::from_str(data).ok()?;
    Some(envelope.error.into_error(candidate))
}

/// The server's message from an error body: `{"error": {"message": ...}}`
/// (both APIs), `{"error": "..."}` or `{"message": "..."}`; else the raw
/// text, trimmed and cut to 500 characters.
pub fn error_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<Value>(body) {
        let found = [
            json.pointer("/error/message"),
            json.get("error"),
            json.get("message"),
        ]
        .into_iter()
        .flatten()
        .find_map(|v| v.as_str().filter(|s| !s.trim().is_empty()));
        if let Some(message) = found {
            let message = message.trim().to_string();
            // llama.cpp gives the sizes beside its message, not in it.
            let size = |key: &str| {
                json.pointer(&format!("/error/{key}"))
                    .and_then(Value::as_u64)
            };
            return match (size("n_prompt_tokens"), size("n_ctx")) {
                (Some(prompt), Some(ctx)) => {
                    format!("{message} (n_prompt_tokens {prompt}, n_ctx {ctx})")
                }
                _ => message,
            };
        }
    }
    match body.trim() {
        "" => "(empty body)".to_string(),
        text => snippet(text, ERROR_TEXT_CHARS),
    }
}

/// The `type` and `code` of the error object in an error body
/// (`{"error": {"type": ..., "code": ...}}`, both APIs), when it has them;
/// a numeric code as its digits.
pub fn error_labels(body: &str) -> (Option<String>, Option<String>) {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return (None, None);
    };
    let label = |pointer: &str| match json.pointer(pointer) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    (label("/error/type"), label("/error/code"))
}

/// `retry-after` in seconds (integer or fractional); HTTP dates are ignored.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// The first `max` characters of `text`, with `…` when cut.
pub fn snippet(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

    #[test]
    fn error_message_prefers_the_servers_message() {
        let openai =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai), "Incorrect API key provided");
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message("  <html>bad gateway</html>\n"),
            "<html>bad gateway</html>"
        );
        assert_eq!(error_message(""), "(empty body)");
        let long = "x".repeat(2000);
        assert_eq!(error_message(&long).chars().count(), 501);
    }

    #[test]
    fn retry_after_takes_seconds_and_ignores_dates() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("1.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn stream_errors_are_classified() {
        let parse = |json: &str| {
            serde_json::from_str::<WireError>(json)
                .unwrap()
                .into_error("c")
        };
        let overloaded = parse(r#"{"type":"overloaded_error","message":"Overloaded"}"#);
        assert_eq!(overloaded.kind, LlmErrorKind::Overloaded);
        assert!(
            overloaded.message.contains("Overloaded"),
            "{}",
            overloaded.message
        );
        assert_eq!(
            parse(r#"{"code":"rate_limit_exceeded","message":"slow down"}"#).kind,
            LlmErrorKind::Overloaded
        );
        assert_eq!(
            parse(r#"{"type":"server_error","message":"oops"}"#).kind,
            LlmErrorKind::Overloaded
        );
        assert_eq!(
            parse(r#"{"code":503,"message":"busy"}"#).kind,
            LlmErrorKind::Overloaded
        );
        let bad = parse(r#"{"type":"invalid_request_error","message":"bad","code":null}"#);
        assert_eq!(bad.kind, LlmErrorKind::Refused);
        assert_eq!(
            bad.message,
            "the server reported an error: invalid_request_error: bad"
        );
    }

    #[test]
    fn error_bodies_and_events_keep_the_servers_type_and_code() {
        let some = |s: &str| Some(s.to_string());
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(
            error_labels(openai),
            (
                some("invalid_request_error"),
                some("context_length_exceeded")
            )
        );
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert_eq!(
            error_labels(anthropic),
            (some("invalid_request_error"), None)
        );
        let llama = r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#;
        assert_eq!(error_labels(llama), (some("server_error"), some("500")));
        assert_eq!(error_labels(r#"{"error":"model not found"}"#), (None, None));
        assert_eq!(error_labels("<html>bad gateway</html>"), (None, None));

        let event = error_event(
            "c",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            (event.server_type, event.server_code),
            (some("overloaded_error"), None)
        );
        let event = error_event(
            "c",
            r#"{"error":{"code":"context_length_exceeded","message":"too long","type":"invalid_request_error"}}"#,
        );
        assert_eq!(event.kind, LlmErrorKind::Refused);
        assert_eq!(
            event.class(),
            crate::protocol::TurnErrorKind::ContextTooLong
        );
        let event = error_event("c", "upstream died");
        assert_eq!((event.server_type, event.server_code), (None, None));
    }

    #[test]
    fn snippet_cuts_on_char_boundaries() {
        assert_eq!(snippet("héllo", 2), "hé…");
        assert_eq!(snippet("hi", 2), "hi");
    }

    /// Serves one connection on a local port: reads the request, then
    /// writes each part after its delay; then holds the connection open
    /// (`hold`) or closes it. Returns the base URL.
    async fn serve(parts: Vec<(u64, &'static str)>, hold: bool) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = socket.read(&mut buf).await.unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = (text.lines())
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                    if request.len() >= end + 4 + length || n == 0 {
                        break;
                    }
                }
            }
            for (delay, part) in parts {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                socket.write_all(part.as_bytes()).await.unwrap();
            }
            if hold {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        });
        url
    }

    fn post(url: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new()
            .post(url)
            .json(&serde_json::json!({"hello": "world"}))
    }

    const SSE_HEAD: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

    #[tokio::test]
    async fn an_error_status_carries_the_message_and_retry_after() {
        let body = r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#;
        let response: &'static str = Box::leak(
            format!(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 2\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_boxed_str(),
        );
        let url = serve(vec![(0, response)], false).await;
        let exchange = Exchange::new("openai:m", Duration::from_secs(5), CallLimits::default());
        let error = exchange.send(post(&url)).await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Status(429));
        assert_eq!(error.message, "Rate limit reached");
        assert_eq!(error.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(
            error.to_string(),
            "openai:m: HTTP 429 Too Many Requests: Rate limit reached"
        );
    }

    #[tokio::test]
    async fn no_headers_in_time_is_a_timeout() {
        let url = serve(vec![], true).await;
        let exchange = Exchange::new(
            "openai:m",
            Duration::from_millis(200),
            CallLimits::default(),
        );
        let error = exchange.send(post(&url)).await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Timeout);
        assert_eq!(error.message, "no response within 200 ms");
    }

    #[tokio::test]
    async fn a_stalled_stream_times_out_per_chunk() {
        let url = serve(
            vec![
                (0, SSE_HEAD),
                (0, "b\r\ndata: one\n\n\r\n"),
                (100, "b\r\ndata: two\n\n\r\n"),
            ],
            true,
        )
        .await;
        let exchange = Exchange::new(
            "openai:m",
            Duration::from_millis(300),
            CallLimits::default(),
        );
        let response = exchange.send(post(&url)).await.unwrap();
        assert!(!is_json(&response));
        let mut events = exchange.events(response);
        assert_eq!(events.next().await.unwrap().unwrap().data, "one");
        assert_eq!(events.next().await.unwrap().unwrap().data, "two");
        let error = events.next().await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Timeout);
        assert_eq!(error.message, "no data for 300 ms while streaming");
    }

    #[tokio::test]
    async fn a_cut_connection_is_a_network_error() {
        let url = serve(
            vec![
                (0, SSE_HEAD),
                (0, "b\r\ndata: one\n\n\r\n"),
                (0, "40\r\ndata: tw"),
            ],
            false,
        )
        .await;
        let exchange = Exchange::new("openai:m", Duration::from_secs(5), CallLimits::default());
        let mut events = exchange.events(exchange.send(post(&url)).await.unwrap());
        assert_eq!(events.next().await.unwrap().unwrap().data, "one");
        let error = events.next().await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Network);
        assert!(
            error
                .message
                .starts_with("the connection was cut mid-stream: "),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn a_cut_stream_is_told_from_a_failed_connection() {
        let url = serve(vec![(0, SSE_HEAD), (0, "40\r\ndata: tw")], false).await;
        let exchange = Exchange::new("openai:m", Duration::from_secs(5), CallLimits::default());
        let mut events = exchange.events(exchange.send(post(&url)).await.unwrap());
        let error = events.next().await.unwrap_err();
        assert!(error.mid_reply);
        assert_eq!(error.class(), crate::protocol::TurnErrorKind::CutStream);

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let error = exchange.send(post(&url)).await.unwrap_err();
        assert!(!error.mid_reply);
        assert_eq!(error.class(), crate::protocol::TurnErrorKind::Network);
    }

    #[tokio::test]
    async fn an_error_status_keeps_the_servers_labels() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let response: &'static str = Box::leak(
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_boxed_str(),
        );
        let url = serve(vec![(0, response)], false).await;
        let exchange = Exchange::new("anthropic:m", Duration::from_secs(5), CallLimits::default());
        let error = exchange.send(post(&url)).await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Status(400));
        assert_eq!(error.server_type.as_deref(), Some("invalid_request_error"));
        assert_eq!(
            error.class(),
            crate::protocol::TurnErrorKind::ContextTooLong
        );
        assert_eq!(
            error.to_string(),
            "anthropic:m: HTTP 400 Bad Request: prompt is too long: 210000 tokens > 200000 maximum"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_network_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let exchange = Exchange::new("openai:m", Duration::from_secs(5), CallLimits::default());
        let error = exchange.send(post(&url)).await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Network);
        assert!(
            error.message.starts_with("could not reach the server: "),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn a_json_body_that_is_not_the_expected_shape_is_a_protocol_error() {
        let url = serve(vec![(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\r\n<html/>  ")], false).await;
        let exchange = Exchange::new("openai:m", Duration::from_secs(5), CallLimits::default());
        let response = exchange.send(post(&url)).await.unwrap();
        assert!(is_json(&response));
        let error = exchange.read_json::<Value>(response).await.unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Protocol);
        assert!(error.message.contains("<html/>"), "{}", error.message);
    }
}
