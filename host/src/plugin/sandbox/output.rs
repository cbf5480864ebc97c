//! What a guest writes for people to read: its `log` lines (see
//! [`crate::plugin::host::log`]), stdout and stderr.
//!
//! All three go to the host log (target `plugin`, tagged with the plugin's
//! name), never to the host's own stdout. Each call has a budget of lines
//! shared by the three; the line that breaks it stops the call. The last few
//! stderr lines are kept so a crash can say what the guest printed (a Rust
//! panic message, a Python traceback).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

use crate::plugin::bindings::latest::wasmclaw::plugin::log::Level;

/// Longest line kept; the rest is cut.
const MAX_LINE: usize = 4096;
/// stderr lines kept for crash reports: enough for a short traceback and
/// the runtime's panic after it.
const STDERR_TAIL: usize = 16;

/// The error returned when a guest writes past its line budget.
#[derive(Debug, thiserror::Error)]
#[error("log limit of {0} lines per call exceeded")]
pub struct LogLimitExceeded(pub u32);

/// One call's log budget and stderr tail.
#[derive(Debug)]
pub struct CallLog {
    plugin: Arc<str>,
    limit: u32,
    used: AtomicU32,
    breached: AtomicBool,
    stderr_tail: Mutex<VecDeque<String>>,
    /// The unfinished last line of stdout and of stderr. Kept here, not per
    /// stream handle, so a guest that opens many handles holds one buffer.
    partial: [Mutex<Vec<u8>>; 2],
}

#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdout = 0,
    Stderr = 1,
}

impl CallLog {
    pub fn new(plugin: Arc<str>, limit: u32) -> Self {
        Self {
            plugin,
            limit,
            used: AtomicU32::new(0),
            breached: AtomicBool::new(false),
            stderr_tail: Mutex::new(VecDeque::new()),
            partial: Default::default(),
        }
    }

    /// Whether the call wrote more lines than allowed.
    pub fn breached(&self) -> bool {
        self.breached.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The last lines the guest wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail.lock().unwrap().iter().cloned().collect()
    }

    /// Takes one line from the budget and writes it to the host log.
    pub fn line(&self, level: Level, text: &str) -> Result<(), LogLimitExceeded> {
        if self.used.fetch_add(1, Ordering::Relaxed) >= self.limit {
            self.breached.store(true, Ordering::Relaxed);
            return Err(LogLimitExceeded(self.limit));
        }
        let text = cut(text);
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(target: "plugin", plugin, "{text}"),
            Level::Debug => tracing::debug!(target: "plugin", plugin, "{text}"),
            Level::Info => tracing::info!(target: "plugin", plugin, "{text}"),
            Level::Warn => tracing::warn!(target: "plugin", plugin, "{text}"),
            Level::Error => tracing::error!(target: "plugin", plugin, "{text}"),
        }
        Ok(())
    }

    fn stream_line(&self, stream: Stream, raw: &[u8]) -> Result<(), LogLimitExceeded> {
        let text = String::from_utf8_lossy(raw);
        let text = text.trim_end_matches('\r');
        match stream {
            Stream::Stdout => self.line(Level::Info, text),
            Stream::Stderr => {
                let mut tail = self.stderr_tail.lock().unwrap();
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(cut(text).to_string());
                drop(tail);
                self.line(Level::Warn, text)
            }
        }
    }
}

fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(MAX_LINE)]
}

/// The guest's stdout or stderr: whole lines into [`CallLog`].
#[derive(Clone)]
pub struct GuestOutput {
    log: Arc<CallLog>,
    stream: Stream,
}

impl GuestOutput {
    pub fn stdout(log: Arc<CallLog>) -> Self {
        Self {
            log,
            stream: Stream::Stdout,
        }
    }

    pub fn stderr(log: Arc<CallLog>) -> Self {
        Self {
            log,
            stream: Stream::Stderr,
        }
    }

    fn writer(&self) -> LineWriter {
        LineWriter { out: self.clone() }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.writer())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.writer())
    }
}

/// A handle on stdout or stderr: splits written bytes into lines.
struct LineWriter {
    out: GuestOutput,
}

impl LineWriter {
    fn push(&mut self, mut bytes: &[u8]) -> Result<(), LogLimitExceeded> {
        let log = &self.out.log;
        let stream = self.out.stream;
        let mut partial = log.partial[stream as usize].lock().unwrap();
        while let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            partial.extend_from_slice(&bytes[..nl]);
            let line = std::mem::take(&mut *partial);
            log.stream_line(stream, &line)?;
            bytes = &bytes[nl + 1..];
        }
        // Bound the unfinished line; past MAX_LINE it is written as a line.
        partial.extend_from_slice(bytes);
        if partial.len() > MAX_LINE {
            let line = std::mem::take(&mut *partial);
            log.stream_line(stream, &line)?;
        }
        Ok(())
    }
}

impl Drop for CallLog {
    /// The guest's unfinished last lines are written when the call ends.
    fn drop(&mut self) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let line = std::mem::take(self.partial[stream as usize].get_mut().unwrap());
            if !line.is_empty() {
                let _ = self.stream_line(stream, &line);
            }
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LineWriter {
    async fn ready(&mut self) {}
}

impl OutputStream for LineWriter {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes)
            .map_err(|e| StreamError::Trap(wasmtime::Error::msg(e.to_string())))
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(
            self.push(buf)
                .map(|()| buf.len())
                .map_err(std::io::Error::other),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
