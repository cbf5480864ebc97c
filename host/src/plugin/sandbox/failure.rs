//! Why a call stopped, in plain words: which limit it broke (its time, its
//! memory, its log lines, its resource table), that the host was busy, or how
//! the guest crashed and what it last wrote to stderr.

use super::limits::{Breach, MAX_RESOURCES};
use super::state::PluginState;
use crate::plugin::error::wasm_error_chain;
use crate::plugin::policy::grants::Limits;
use crate::plugin::units::{duration, size};

/// Says in plain words why a call into `plugin` stopped.
pub fn describe_failure(
    plugin: &str,
    state: &PluginState,
    limits: &Limits,
    error: &wasmtime::Error,
) -> String {
    if is_pool_exhausted(error) {
        return format!(
            "plugin '{plugin}' could not start: the host is running as many plugin instances as it allows; try again shortly"
        );
    }
    match state.breach() {
        Some(Breach::Deadline) if state.deadline.from_turn => format!(
            "plugin '{plugin}' did not finish before its turn's deadline ({}) and was stopped",
            duration(state.deadline.timeout)
        ),
        Some(Breach::Deadline) => format!(
            "plugin '{plugin}' did not finish within its time limit of {} and was stopped",
            duration(state.deadline.timeout)
        ),
        Some(Breach::Memory) if state.memory().host_breached() => format!(
            "plugin '{plugin}' exceeded its memory limit of {} with what the host holds for it ({} of HTTP header objects, bodies and answers) and was stopped",
            size(limits.memory_bytes),
            size(state.memory().host_bytes())
        ),
        Some(Breach::Memory) => format!(
            "plugin '{plugin}' exceeded its memory limit of {} and was stopped",
            size(limits.memory_bytes)
        ),
        None if table_full(error) => format!(
            "plugin '{plugin}' held more than {MAX_RESOURCES} host resources at once (open files, streams, HTTP objects), its limit, and was stopped"
        ),
        Some(Breach::LogLines) => format!(
            "plugin '{plugin}' exceeded its limit of {} log lines per call and was stopped",
            limits.log_lines
        ),
        None => {
            let reason = match error.downcast_ref::<wasmtime::Trap>() {
                Some(trap) => trap
                    .to_string()
                    .trim_start_matches("wasm trap: ")
                    .to_string(),
                None => wasm_error_chain(error),
            };
            let tail = state.log.stderr_tail();
            if tail.is_empty() {
                format!("plugin '{plugin}' crashed ({reason})")
            } else {
                format!(
                    "plugin '{plugin}' crashed ({reason}); its stderr ended with: {}",
                    tail.join(" / ")
                )
            }
        }
    }
}

/// Whether the call's resource table was full.
fn table_full(error: &wasmtime::Error) -> bool {
    error.chain().any(|c| {
        matches!(
            c.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        )
    })
}

/// Whether instantiation failed because the instance pool is full: the
/// host is busy, the plugin is fine.
pub fn is_pool_exhausted(error: &wasmtime::Error) -> bool {
    error
        .chain()
        .any(|c| c.is::<wasmtime::PoolConcurrencyLimitError>())
}
