//! Server-sent events: the one stream layer both wire formats read.
//!
//! [`Decoder`] follows the SSE specification (the HTML standard's "event
//! stream interpretation"): lines end with CRLF, LF or CR (also when a CRLF
//! is split between two reads); a leading byte order mark is dropped; a line
//! starting with `:` is a comment; `field: value` loses one space after the
//! colon; `data` lines are joined with `\n`; `event` names the event
//! (`message` when unnamed); `id` and `retry` are read and not needed; an
//! event is dispatched at a blank line, and an event left unfinished when the
//! stream ends is dropped. Text is decoded as UTF-8 with replacement.
//!
//! Two rules go beyond the specification, the same for both formats:
//! an event whose data is blank (`data:` with nothing after it, as some
//! servers send to keep a connection alive) carries nothing either API
//! defines and is skipped; and llama.cpp's `error: {...}` line (a field the
//! specification ignores) is read as an event named `error` with that data,
//! so its message reaches the user.
//!
//! A line or an event bigger than the bound it is given ends the stream
//! with [`LlmErrorKind::TooLarge`], so memory stays bounded whatever the
//! server sends; [`SseStream`] adds the idle timeout and the call's deadline.

use std::collections::VecDeque;
use std::error::Error as _;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

use super::limits::CallLimits;
use super::{LlmError, LlmErrorKind};
use crate::plugin::units::duration;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name; `message` when the server gave none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// The event stream's parser: bytes in, events out.
#[derive(Debug)]
pub struct Decoder {
    /// The bytes of the line not yet ended.
    line: Vec<u8>,
    /// The last line ended with CR: an LF right after it ends nothing.
    after_cr: bool,
    /// No line has been read yet (a BOM may lead).
    first_line: bool,
    event: String,
    data: String,
    /// A `data` field was seen for the event being read.
    has_data: bool,
    /// llama.cpp's `error:` field, when the event has no `data`.
    error: Option<String>,
    /// The most bytes of one line, and of one event's data.
    max: usize,
}

/// The decoder's failure: a line or an event past the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

impl Decoder {
    pub fn new(max: usize) -> Decoder {
        Decoder {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            event: String::new(),
            data: String::new(),
            has_data: false,
            error: None,
            max,
        }
    }

    /// Reads `bytes`; each event it completes goes to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), TooLarge> {
        while !bytes.is_empty() {
            if self.after_cr && bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
            self.after_cr = false;
            // By words, not a byte at a time (which cost 14 instructions a
            // byte of the stream).
            match memchr::memchr2(b'\n', b'\r', bytes) {
                None => {
                    if self.line.len() + bytes.len() > self.max {
                        return Err(TooLarge);
                    }
                    self.line.extend_from_slice(bytes);
                    return Ok(());
                }
                Some(end) => {
                    self.after_cr = bytes[end] == b'\r';
                    if self.line.is_empty() {
                        self.on_line(&bytes[..end], out)?;
                    } else {
                        let mut line = std::mem::take(&mut self.line);
                        line.extend_from_slice(&bytes[..end]);
                        self.on_line(&line, out)?;
                        line.clear();
                        self.line = line; // keeps its allocation
                    }
                    bytes = &bytes[end + 1..];
                }
            }
        }
        Ok(())
    }

    fn on_line(&mut self, line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), TooLarge> {
        if line.len() > self.max {
            return Err(TooLarge);
        }
        let mut line = line;
        if std::mem::take(&mut self.first_line) {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // a comment
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // Checked as UTF-8 first: much faster than the lossy conversion,
        // which is for the rare line that is not.
        let value = match std::str::from_utf8(value) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(TooLarge);
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"error" => self.error = Some(value.into_owned()),
            // `id` and `retry` matter to a browser reconnecting, not here.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut VecDeque<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        let error = self.error.take();
        let has_data = std::mem::take(&mut self.has_data);
        let data = std::mem::take(&mut self.data);
        let (event, data) = match (has_data, error) {
            (false, Some(error)) => ("error".to_string(), error),
            (false, None) => return,
            (true, _) if event.is_empty() => ("message".to_string(), data),
            (true, _) => (event, data),
        };
        if data.trim().is_empty() {
            return;
        }
        out.push_back(SseEvent { event, data });
    }
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A response's events, each within the idle timeout, all within the call's
/// deadline.
pub struct SseStream {
    candidate: String,
    idle: Duration,
    deadline: Instant,
    limits: CallLimits,
    body: Body,
    decoder: Decoder,
    ready: VecDeque<SseEvent>,
    ended: bool,
}

impl SseStream {
    pub fn new(
        candidate: &str,
        response: reqwest::Response,
        idle: Duration,
        deadline: Instant,
        limits: CallLimits,
    ) -> SseStream {
        SseStream {
            candidate: candidate.to_string(),
            idle,
            deadline,
            limits,
            body: Box::pin(response.bytes_stream()),
            decoder: Decoder::new(limits.max_body()),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// The next event, or `None` when the server closed the stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, LlmError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            let idle_until = Instant::now() + self.idle;
            let chunk = match tokio::time::timeout_at(
                idle_until.min(self.deadline),
                self.body.next(),
            )
            .await
            {
                Err(_) if idle_until < self.deadline => {
                    let message = format!("no data for {} while streaming", duration(self.idle));
                    return Err(self.error(LlmErrorKind::Timeout, message));
                }
                Err(_) => return Err(self.limits.deadline_error(&self.candidate)),
                Ok(None) => {
                    // An event left unfinished is dropped, as the
                    // specification says.
                    self.ended = true;
                    continue;
                }
                Ok(Some(Err(e))) => {
                    let message = format!("the connection was cut mid-stream: {}", error_chain(&e));
                    return Err(LlmError::cut(&self.candidate, message));
                }
                Ok(Some(Ok(chunk))) => chunk,
            };
            if self.decoder.feed(&chunk, &mut self.ready).is_err() {
                return Err(self.limits.body_error(&self.candidate, "a streamed event"));
            }
        }
    }

    fn error(&self, kind: LlmErrorKind, message: String) -> LlmError {
        LlmError::new(&self.candidate, kind, message)
    }
}

/// An error and its sources, `: `-joined, skipping repeats.
pub(super) fn error_chain(error: &reqwest::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events from `parts` fed one after another.
    fn decode(parts: &[&str]) -> Vec<(String, String)> {
        let mut decoder = Decoder::new(1024);
        let mut out = VecDeque::new();
        for part in parts {
            decoder.feed(part.as_bytes(), &mut out).unwrap();
        }
        out.into_iter().map(|e| (e.event, e.data)).collect()
    }

    fn pair(event: &str, data: &str) -> (String, String) {
        (event.to_string(), data.to_string())
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let events = decode(&[
            "\u{feff}: a comment\n",
            "event: message_start\ndata: {\"a\":\ndata:1}\nid: 7\nretry: 10\n\n",
            "data:no space\n\n",
            "data:  two spaces\nunknown: x\n\n",
        ]);
        assert_eq!(
            events,
            [
                pair("message_start", "{\"a\":\n1}"),
                pair("message", "no space"),
                pair("message", " two spaces"),
            ]
        );
    }

    #[test]
    fn every_line_ending_and_splits_anywhere() {
        let whole = "data: one\r\n\r\ndata: two\r\rdata: three\n\n";
        let expected = [
            pair("message", "one"),
            pair("message", "two"),
            pair("message", "three"),
        ];
        assert_eq!(decode(&[whole]), expected);
        // Split at every byte: a CRLF across two reads is one line end.
        let bytes: Vec<String> = whole.chars().map(String::from).collect();
        let parts: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(decode(&parts), expected);
    }

    #[test]
    fn blank_data_and_unfinished_events_are_skipped() {
        let events = decode(&[
            "data:\n\n",
            "data: \n\n",
            "event: ping\n\n",
            "data: kept\n\n",
            "event: error\ndata: {\"error\":{\"code\":500}}\n\n",
            "data: never finished",
        ]);
        assert_eq!(
            events,
            [
                pair("message", "kept"),
                pair("error", "{\"error\":{\"code\":500}}")
            ]
        );
    }

    #[test]
    fn llama_cpp_error_lines_become_error_events() {
        let events = decode(&["error: {\"code\":500,\"message\":\"boom\"}\n\n"]);
        assert_eq!(
            events,
            [pair("error", "{\"code\":500,\"message\":\"boom\"}")]
        );
    }

    #[test]
    fn lines_and_events_past_the_bound_fail() {
        let mut out = VecDeque::new();
        let mut decoder = Decoder::new(16);
        assert_eq!(decoder.feed(&[b'x'; 17], &mut out), Err(TooLarge));
        let mut decoder = Decoder::new(16);
        decoder.feed(b"data: 12345678\n", &mut out).unwrap();
        assert_eq!(decoder.feed(b"data: 12345678\n", &mut out), Err(TooLarge));
        assert!(out.is_empty());
    }
}
