//! The error a tool caller sees: the host's side of the WIT `plugin-error`.
//!
//! Everything that can go wrong in a call (bad arguments, an unknown tool, a
//! trap, a breached limit, an error the plugin returned itself) ends up as a
//! [`ToolError`], whose text is written for the model and the operator alike.

use serde::{Deserialize, Serialize};

use super::bindings::latest::wasmclaw::plugin::types as wit;

/// The WIT `error-kind`, and `cancelled`, which only the host gives.
pub use wasmclaw_protocol::ToolErrorKind as ErrorKind;

/// A failed tool call, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ToolError {
    pub kind: ErrorKind,
    pub message: String,
    /// Whether the same call may succeed if tried again.
    pub retryable: bool,
}

impl ToolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retryable: false,
        }
    }

    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }
}

impl From<wit::ErrorKind> for ErrorKind {
    fn from(kind: wit::ErrorKind) -> Self {
        match kind {
            wit::ErrorKind::InvalidInput => ErrorKind::InvalidInput,
            wit::ErrorKind::NotFound => ErrorKind::NotFound,
            wit::ErrorKind::Denied => ErrorKind::Denied,
            wit::ErrorKind::Timeout => ErrorKind::Timeout,
            wit::ErrorKind::Upstream => ErrorKind::Upstream,
            wit::ErrorKind::Internal => ErrorKind::Internal,
        }
    }
}

impl From<wit::PluginError> for ToolError {
    fn from(e: wit::PluginError) -> Self {
        Self {
            kind: e.kind.into(),
            message: e.message,
            retryable: e.retryable,
        }
    }
}

impl From<ToolError> for wit::PluginError {
    fn from(e: ToolError) -> Self {
        let kind = match e.kind {
            ErrorKind::InvalidInput => wit::ErrorKind::InvalidInput,
            ErrorKind::NotFound => wit::ErrorKind::NotFound,
            ErrorKind::Denied => wit::ErrorKind::Denied,
            ErrorKind::Timeout => wit::ErrorKind::Timeout,
            ErrorKind::Upstream => wit::ErrorKind::Upstream,
            ErrorKind::Internal | ErrorKind::Cancelled => wit::ErrorKind::Internal,
        };
        wit::PluginError {
            kind,
            message: e.message,
            retryable: e.retryable,
        }
    }
}

/// A wasmtime error and its causes, on one line.
pub fn wasm_error_chain(e: &wasmtime::Error) -> String {
    let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    chain.join(": ")
}
