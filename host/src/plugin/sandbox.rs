//! The per-call sandbox: one fresh `Store` per tool call.
//!
//! A store holds the guest's WASI context (only what the grants name), a
//! memory limiter, the call's log budget and its deadline. The epoch ticker
//! wakes the deadline check every tick; a guest past its deadline is stopped
//! there. Whatever limit a call breaks is recorded here, so the caller can say
//! which one in plain words instead of "wasm trap".

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::grants::{DirMode, Grants, Limits};
use super::output::{CallLog, GuestOutput};

/// Most table elements an instance may have.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The data of one call's store.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    pub(super) log: Arc<CallLog>,
    deadline: Instant,
    /// The time the call was given (to the earlier of its limit and an outer
    /// deadline), for messages.
    pub(super) timeout: Duration,
    timed_out: bool,
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The shared types interface has no functions; the bindings still ask for
/// its (empty) host trait.
impl super::bindings::wasmclaw::plugin::types::Host for PluginState {}

/// Which limit, if any, stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breach {
    Deadline,
    Memory,
    LogLines,
}

impl PluginState {
    pub fn breach(&self) -> Option<Breach> {
        if self.timed_out {
            Some(Breach::Deadline)
        } else if self.limiter.breached {
            Some(Breach::Memory)
        } else if self.log.breached() {
            Some(Breach::LogLines)
        } else {
            None
        }
    }
}

/// What a new store may reach.
pub enum Capabilities<'a> {
    /// Nothing: used to call `list-tools` at load.
    None,
    /// What the grants name.
    Granted(&'a Grants),
}

/// A fresh store for one call of `plugin`, stopped at `deadline`.
pub fn new_store(
    engine: &Engine,
    plugin: &Arc<str>,
    limits: &Limits,
    caps: Capabilities<'_>,
    deadline: Instant,
) -> Result<Store<PluginState>> {
    let log = Arc::new(CallLog::new(plugin.clone(), limits.log_lines));
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(GuestOutput::stdout(log.clone()))
        .stderr(GuestOutput::stderr(log.clone()))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if let Capabilities::Granted(grants) = caps {
        for name in &grants.env {
            if let Some(value) = std::env::var_os(name).and_then(|v| v.into_string().ok()) {
                wasi.env(name, value);
            }
        }
        for dir in &grants.dirs {
            let perms = match dir.mode {
                DirMode::ReadOnly => FsPerms::ReadOnly,
                DirMode::ReadWrite => FsPerms::ReadWrite,
            };
            wasi.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("opening granted directory {}", dir.host.display()))?;
        }
    }

    let state = PluginState {
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: MemoryLimiter::new(limits.memory_bytes),
        log,
        deadline,
        timeout: deadline.saturating_duration_since(Instant::now()),
        timed_out: false,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut cx| {
        let state = cx.data_mut();
        if Instant::now() >= state.deadline {
            state.timed_out = true;
            return Err(wasmtime::Error::msg("deadline exceeded"));
        }
        // Let other tasks on this thread run, then check again next tick.
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}

/// Runs `call` (instantiation and the calls into the instance) until the
/// store's deadline. The epoch callback stops a guest that computes past it;
/// this stops one that waits past it inside a host call (a WASI sleep or
/// poll), by dropping the call, which unwinds the guest's stack.
pub async fn until_deadline<T>(
    store: &mut Store<PluginState>,
    call: impl AsyncFnOnce(&mut Store<PluginState>) -> wasmtime::Result<T>,
) -> wasmtime::Result<T> {
    let deadline = store.data().deadline;
    match tokio::time::timeout_at(deadline.into(), call(store)).await {
        Ok(result) => result,
        Err(_) => {
            store.data_mut().timed_out = true;
            Err(wasmtime::Error::msg("deadline exceeded"))
        }
    }
}

/// Caps the linear memory of all memories of one instance together.
struct MemoryLimiter {
    limit: u64,
    used: u64,
    breached: bool,
}

impl MemoryLimiter {
    fn new(limit: u64) -> Self {
        Self {
            limit,
            used: 0,
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
        let grow = (desired - current) as u64;
        if self.used + grow > self.limit {
            // Stop the guest here rather than hand it a failed allocation that
            // some languages would swallow and some would turn into a vague
            // trap later.
            self.breached = true;
            return Err(wasmtime::Error::msg("memory limit exceeded"));
        }
        self.used += grow;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
