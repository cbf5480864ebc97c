//! Gates a plugin call waits at until the test opens them, so that "while
//! the tool runs" is an order the test sets, not a time it guesses.
//!
//! The hostile fixture's `wait_gate {"name": NAME}` creates `NAME.started`
//! in the folder granted to it as `/gate` ([`ToolGates::grants`]), then waits until `NAME` exists
//! there. A test waits for the first file ([`ToolGates::wait_started`]) and
//! creates the second ([`ToolGates::open`]). A gate never opened holds its
//! call until a timeout or a hard interrupt stops it.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::fake_model::{Reply, ToolCallReply};

/// The gates of one test: a folder of its own, which lives as long as
/// this does (so a test may drop its plugin directory and keep its gates).
pub struct ToolGates {
    dir: TempDir,
}

impl Default for ToolGates {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolGates {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The grants that give a plugin the gates folder as `/gate`; add them
    /// to the plugin's other grants.
    pub fn grants(&self) -> String {
        format!(
            "[[dirs]]\nhost = {:?}\nguest = \"/gate\"\nmode = \"read-write\"\n",
            self.dir.path()
        )
    }

    /// Opens gate `name`: a call waiting at it returns, and so does every
    /// later call that waits at it.
    pub fn open(&self, name: &str) {
        std::fs::write(self.dir.path().join(name), "").unwrap();
    }

    /// Whether a call has reached gate `name`.
    pub fn started(&self, name: &str) -> bool {
        self.dir.path().join(format!("{name}.started")).exists()
    }

    /// Waits until a call has reached gate `name` (is running, inside the
    /// plugin); panics after `limit`.
    pub async fn wait_started(&self, name: &str, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.started(name) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no call reached gate {name:?} within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The arguments of `wait_gate` at gate `name`.
pub fn gate_args(name: &str) -> Value {
    json!({ "name": name })
}

/// The output of a `wait_gate` call once gate `name` is open.
pub fn gate_output(name: &str) -> String {
    format!("gate {name} opened")
}

/// A model reply calling `wait_gate` once per (call id, gate name).
pub fn gate_calls(calls: &[(&str, &str)]) -> Reply {
    Reply::ToolCalls {
        text: String::new(),
        calls: calls
            .iter()
            .map(|(id, gate)| ToolCallReply {
                id: id.to_string(),
                name: "wait_gate".into(),
                arguments: gate_args(gate),
            })
            .collect(),
    }
}
