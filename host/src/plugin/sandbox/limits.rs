//! How a call's limits are enforced in its store: one memory limit for all
//! of its linear memories (shared with what the host holds for it), the size
//! of its resource table, and which limit, if any, stopped it.

use std::sync::Arc;

use wasmtime::ResourceLimiter;

use super::host_memory::CallMemory;

/// Most WASI resources (open files, streams, pollables, HTTP objects) one
/// call may hold at once: each entry costs host memory besides what
/// [`super::host_memory`] counts.
pub const MAX_RESOURCES: usize = 4096;

/// Which limit, if any, stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breach {
    Deadline,
    Memory,
    LogLines,
}

/// Caps the linear memory of all memories of one instance together, and
/// what the host holds for the call (see [`super::host_memory`]).
pub(super) struct MemoryLimiter {
    memory: Arc<CallMemory>,
    /// Growth granted by `memory_growing` but not yet known to have happened.
    pending: u64,
    pub(super) breached: bool,
}

impl MemoryLimiter {
    pub(super) fn new(memory: Arc<CallMemory>) -> Self {
        Self {
            memory,
            pending: 0,
            breached: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current) as u64;
        if !self.memory.grow_linear(grow) {
            // Stop the guest here rather than hand it a failed allocation that
            // some languages would swallow and some would turn into a vague
            // trap later.
            self.breached = true;
            return Err(wasmtime::Error::msg("memory limit exceeded"));
        }
        self.pending = grow;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        // The growth was refused later (e.g. past the memory's own maximum):
        // it did not happen, so it does not count.
        self.memory.undo_linear(std::mem::take(&mut self.pending));
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Bounded by the pool's `table_elements`.
        Ok(true)
    }
}
