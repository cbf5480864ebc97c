//! `wasmclaw:plugin/agent`: `agent.spawn-subturn`, a plugin's tool runs a
//! child turn of the turn that called it, and gets its answer.
//!
//! The plugin runtime does not know about turns: the caller hands the call a
//! [`SubTurnSpawner`](crate::plugin::sandbox::access::SubTurnSpawner) (the
//! agent's turn), and the plugin's grants decide whether the guest may use
//! it. While the guest waits for the child, its own deadline is paused; the
//! child's timeout bounds the wait.

use crate::plugin::bindings::latest::wasmclaw::plugin::agent::{Host, SubturnRequest};
use crate::plugin::bindings::latest::wasmclaw::plugin::types::PluginError;
use crate::plugin::error::{ErrorKind, ToolError};
use crate::plugin::sandbox::state::PluginState;
use crate::protocol::SubTurnRequest;

impl Host for PluginState {
    async fn spawn_subturn(
        &mut self,
        request: SubturnRequest,
    ) -> wasmtime::Result<Result<String, PluginError>> {
        let access = &self.spawn;
        let denied = |message: String| Ok(Err(ToolError::new(ErrorKind::Denied, message).into()));
        if !access.granted {
            return denied(format!(
                "plugin '{}' may not start sub-agents: its grants do not say spawn_subturn = true",
                access.plugin
            ));
        }
        let Some(spawner) = access.spawner.clone() else {
            return denied(
                "there is no turn to start a sub-agent from: the tool was called outside a turn"
                    .into(),
            );
        };
        let request = SubTurnRequest {
            task: request.task,
            label: request.label,
            model: request.model,
            agent: request.agent,
            tools: request.tools,
            critical: request.critical,
            // Checked with the other arguments (at most a day).
            timeout_s: request.timeout_ms.map(|ms| ms as f64 / 1000.0),
            token_budget: request.token_budget,
        };
        self.deadline.pause();
        let result = spawner.run(&access.plugin, request).await;
        self.deadline.resume();
        Ok(result.map_err(PluginError::from))
    }
}
