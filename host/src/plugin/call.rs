//! One tool call in a fresh instance, and what the caller is told when it
//! fails.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::bindings::latest::wasmclaw::plugin::types as wit;
use super::error::{ErrorKind, ToolError};
use super::loader::Plugin;
use super::sandbox::access::{SpawnAccess, SubTurnSpawner};
use super::sandbox::deadline::Deadline;
use super::sandbox::failure::{describe_failure, is_pool_exhausted};
use super::sandbox::limits::Breach;
use super::sandbox::pool;
use super::sandbox::state::PluginState;
use super::units::size;

/// Who is calling: passed to the plugin as its `call-context`.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The turn, for `agent.spawn-subturn` (none outside a turn).
    pub spawner: Option<Spawner>,
    pub session_key: String,
    pub turn_id: String,
    pub parent_turn_id: Option<String>,
    pub depth: u32,
    pub call_id: String,
    /// An outer deadline (the turn's); the call ends at the earlier of this
    /// and the plugin's own timeout.
    pub deadline: Option<Instant>,
}

/// The turn a plugin's `agent.spawn-subturn` starts children of.
#[derive(Clone)]
pub struct Spawner(pub Arc<dyn SubTurnSpawner>);

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spawner")
    }
}

impl Plugin {
    /// Runs `tool` in a fresh instance. `arguments` must already have been
    /// checked against the tool's schema (see [`super::Plugins::call`]).
    pub async fn call(
        self: &Arc<Self>,
        ctx: &CallContext,
        tool: &str,
        arguments: &str,
    ) -> Result<String, ToolError> {
        let (output, _instance) = self.call_and_keep(ctx, tool, arguments).await?;
        Ok(output)
    }

    /// [`Plugin::call`], and the instance kept alive after it (the
    /// benchmarks measure what one live instance costs).
    pub async fn call_and_keep(
        self: &Arc<Self>,
        ctx: &CallContext,
        tool: &str,
        arguments: &str,
    ) -> Result<(String, LiveInstance), ToolError> {
        let limits = &self.grants.limits;
        let (store, deadline) = self.call_store(ctx)?;
        let wit_ctx = wit_context(ctx, &deadline);
        let Some(export) = self.tool_export.clone() else {
            return Err(ToolError::new(
                ErrorKind::NotFound,
                format!("plugin '{}' offers no tools", self.name),
            ));
        };
        let (plugin, tool, arguments) = (self.clone(), tool.to_string(), arguments.to_string());
        let (store, outcome) = pool::call_guest(
            store,
            Box::new(move |store| {
                Box::pin(async move {
                    let instance = plugin.pre.instantiate_async(&mut *store).await?;
                    export
                        .load(&mut *store, &instance)?
                        .call_tool(&mut *store, wit_ctx, &tool, &arguments)
                        .await
                })
            }),
        )
        .await;
        match outcome {
            Ok(Ok(output)) => {
                let output = within_output_limit(output, limits.output_bytes, |got, limit| {
                    format!(
                        "plugin '{}' returned {got}, over its output limit of {limit}",
                        self.name
                    )
                })?;
                Ok((output, LiveInstance { _store: store }))
            }
            Ok(Err(e)) => Err(ToolError::from(e).cut_to(limits.output_bytes)),
            Err(trap) => Err(ToolError {
                kind: match store.data().breach() {
                    Some(Breach::Deadline) => ErrorKind::Timeout,
                    _ => ErrorKind::Internal,
                },
                message: describe_failure(&self.name, store.data(), limits, &trap),
                retryable: is_pool_exhausted(&trap),
            }),
        }
    }
}

/// A tool's result, or, when it is over the tool's output limit of `limit`
/// bytes, the error that says so, in the words of `says(size, limit)`. The
/// one treatment of every oversized result, whether the tool or a hook in
/// its place produced it.
pub fn within_output_limit(
    output: String,
    limit: usize,
    says: impl FnOnce(String, String) -> String,
) -> Result<String, ToolError> {
    if output.len() <= limit {
        return Ok(output);
    }
    Err(ToolError::new(
        ErrorKind::Internal,
        says(size(output.len() as u64), size(limit as u64)),
    ))
}

impl ToolError {
    /// The error with its message cut to `limit` bytes (a tool's output
    /// limit bounds its error text too).
    pub fn cut_to(mut self, limit: usize) -> ToolError {
        self.message
            .truncate(self.message.floor_char_boundary(limit));
        self
    }
}

/// An instance kept alive after a call, holding all the memory it touched:
/// what one live instance of a plugin costs (the benchmarks measure it).
pub struct LiveInstance {
    _store: wasmtime::Store<PluginState>,
}

impl Plugin {
    /// A fresh store for one call, with the plugin's grants and limits.
    fn call_store(
        &self,
        ctx: &CallContext,
    ) -> Result<(wasmtime::Store<PluginState>, Deadline), ToolError> {
        let limits = &self.grants.limits;
        let deadline = Deadline::new(limits.timeout, ctx.deadline);
        let store = PluginState::builder(&self.name, limits, deadline.clone())
            .granted(
                &self.grants,
                self.runtime.secrets(),
                self.runtime.descriptors(),
            )
            .spawn(SpawnAccess {
                plugin: self.name.to_string(),
                granted: self.grants.spawn_subturn,
                // Children run with the turns, not on the plugin pool.
                spawner: ctx.spawner.as_ref().map(|s| pool::on_caller(s.0.clone())),
            })
            .config(self.grants.config_json.clone())
            .build(self.runtime.engine(), self.runtime.epochs())
            .map_err(|e| {
                ToolError::new(
                    ErrorKind::Internal,
                    format!("plugin '{}' could not start: {e:#}", self.name),
                )
            })?;
        Ok((store, deadline))
    }
}

/// The guest's `call-context` for a call stopped at `deadline`.
pub(super) fn wit_context(ctx: &CallContext, deadline: &Deadline) -> wit::CallContext {
    wit::CallContext {
        session_key: ctx.session_key.clone(),
        turn_id: ctx.turn_id.clone(),
        parent_turn_id: ctx.parent_turn_id.clone(),
        depth: ctx.depth,
        call_id: ctx.call_id.clone(),
        deadline_ms: unix_ms(deadline.at()),
    }
}

fn unix_ms(deadline: Instant) -> u64 {
    let remaining = deadline.saturating_duration_since(Instant::now());
    (SystemTime::now() + remaining)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
