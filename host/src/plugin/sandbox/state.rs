//! The per-call sandbox: one fresh `Store` per tool call.
//!
//! A store holds the guest's WASI context (only what the grants name), a
//! memory limiter, the call's log budget and its deadline. The epoch ticker
//! wakes the deadline check every tick; a guest past its deadline is stopped
//! there. Whatever limit a call breaks is recorded here, so the caller can say
//! which one in plain words instead of "wasm trap".

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::descriptors::{CallDescriptors, DescriptorBudget};
use super::host_memory::{CallCharges, CallMemory};
use super::output::{CallLog, GuestOutput};
use crate::plugin::host::http::NetworkAccess;
use crate::plugin::policy::grants::{DirMode, Grants, Limits};
use crate::plugin::policy::secrets::Secrets;

/// The data of one call's store.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    pub(in crate::plugin) log: Arc<CallLog>,
    pub(in crate::plugin) deadline: Deadline,
    timed_out: bool,
    /// What `agent.spawn-subturn` may do in this call.
    pub(in crate::plugin) spawn: crate::plugin::host::agent::SpawnAccess,
    /// What `config.get` returns: the plugin's `[config]` as JSON.
    pub(in crate::plugin) config: Arc<str>,
    http: WasiHttpCtx,
    /// Where `wasi:http` requests may go.
    network: NetworkAccess,
    /// The host descriptors the call holds.
    descriptors: CallDescriptors,
    /// Its memory limit, shared by linear memory and what the host holds.
    memory: Arc<CallMemory>,
    /// What the host holds for it until it ends.
    charges: CallCharges,
}

/// How often a paused deadline is looked at again.
const PAUSED_CHECK: Duration = Duration::from_millis(20);

/// When a call is stopped, and which bound set that. Clones share the
/// clock, which stops while the guest waits for a SubTurn.
#[derive(Debug, Clone)]
pub struct Deadline {
    clock: Arc<Mutex<Clock>>,
    /// The time the call was given.
    pub timeout: Duration,
    /// Whether an outer deadline (the turn's) was earlier than the plugin's
    /// own time limit.
    pub from_turn: bool,
}

#[derive(Debug)]
struct Clock {
    at: Instant,
    paused_since: Option<Instant>,
}

impl Deadline {
    /// The earlier of `now + limit` and `outer`.
    pub fn new(limit: Duration, outer: Option<Instant>) -> Self {
        let now = Instant::now();
        let (at, timeout, from_turn) = match outer {
            Some(outer) if outer < now + limit => {
                (outer, outer.saturating_duration_since(now), true)
            }
            _ => (now + limit, limit, false),
        };
        Deadline {
            clock: Arc::new(Mutex::new(Clock {
                at,
                paused_since: None,
            })),
            timeout,
            from_turn,
        }
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the call is stopped (as of now: a pause moves it later).
    pub fn at(&self) -> Instant {
        let clock = self.clock();
        match clock.paused_since {
            Some(since) => clock.at + since.elapsed(),
            None => clock.at,
        }
    }

    /// Whether the call is past its deadline (never while paused).
    pub fn passed(&self) -> bool {
        let clock = self.clock();
        clock.paused_since.is_none() && Instant::now() >= clock.at
    }

    /// When to look again: the deadline, or soon while paused (the pause
    /// may end at any moment).
    fn next_check(&self) -> Instant {
        let clock = self.clock();
        match clock.paused_since {
            Some(_) => Instant::now() + PAUSED_CHECK,
            None => clock.at,
        }
    }

    /// Stops the clock (the guest waits for the host on something that has
    /// a time limit of its own).
    pub fn pause(&self) {
        let mut clock = self.clock();
        clock.paused_since.get_or_insert_with(Instant::now);
    }

    /// Starts the clock again, the pause not counted.
    pub fn resume(&self) {
        let mut clock = self.clock();
        if let Some(since) = clock.paused_since.take() {
            clock.at += since.elapsed();
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.network,
        }
    }
}

impl PluginState {
    pub(in crate::plugin) fn memory(&self) -> Arc<CallMemory> {
        self.memory.clone()
    }

    pub(in crate::plugin) fn charges(&mut self) -> &mut CallCharges {
        &mut self.charges
    }

    /// The call's filesystem, and the count of what it has open.
    pub(in crate::plugin) fn filesystem_and_descriptors(
        &mut self,
    ) -> (
        wasmtime_wasi::filesystem::WasiFilesystemCtxView<'_>,
        &mut CallDescriptors,
    ) {
        (
            wasmtime_wasi::filesystem::WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
            &mut self.descriptors,
        )
    }
}

/// The shared types interface has no functions; the bindings still ask for
/// its (empty) host trait.
impl crate::plugin::bindings::wasmclaw::plugin::types::Host for PluginState {}

impl crate::plugin::bindings::wasmclaw::plugin::config::Host for PluginState {
    fn get(&mut self) -> wasmtime::Result<String> {
        Ok(self.config.to_string())
    }
}

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
        } else if self.limiter.breached || self.memory.host_breached() {
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
    /// What the grants name; credentials are looked up in `secrets`, and
    /// descriptors are taken from the host-wide `budget`.
    Granted(&'a Grants, &'a Arc<Secrets>, &'a Arc<DescriptorBudget>),
}

/// Most WASI resources (open files, streams, pollables, HTTP objects) one
/// call may hold at once: each entry costs host memory besides what
/// [`super::host_memory`] counts.
pub const MAX_RESOURCES: usize = 4096;

/// A fresh store for one call of `plugin`, stopped at `deadline`.
pub fn new_store(
    engine: &Engine,
    plugin: &Arc<str>,
    limits: &Limits,
    caps: Capabilities<'_>,
    deadline: Deadline,
) -> Result<Store<PluginState>> {
    let log = Arc::new(CallLog::new(plugin.clone(), limits.log_lines));
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(GuestOutput::stdout(log.clone()))
        .stderr(GuestOutput::stderr(log.clone()))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let memory = CallMemory::new(limits.memory_bytes);
    let (network, mut descriptors) = match caps {
        Capabilities::Granted(grants, secrets, budget) => (
            NetworkAccess::new(
                plugin.clone(),
                grants.network.clone(),
                secrets.clone(),
                budget.clone(),
                memory.clone(),
            ),
            CallDescriptors::new(plugin.clone(), limits.open_files, budget.clone()),
        ),
        // Nothing to open, nowhere to send.
        Capabilities::None => (
            NetworkAccess::new(
                plugin.clone(),
                Arc::default(),
                Arc::default(),
                DescriptorBudget::new(0),
                memory.clone(),
            ),
            CallDescriptors::new(plugin.clone(), 0, DescriptorBudget::new(0)),
        ),
    };
    if let Capabilities::Granted(grants, _, _) = caps {
        for name in &grants.env {
            if let Some(value) = std::env::var_os(name).and_then(|v| v.into_string().ok()) {
                wasi.env(name, value);
            }
        }
        for dir in &grants.dirs {
            // The grant was resolved at load; a directory swapped for a
            // symlink since then must not widen it.
            let now = dir.host.canonicalize().ok();
            if now.as_deref() != Some(dir.host.as_path()) {
                anyhow::bail!(
                    "granted directory {} no longer resolves to itself (moved, removed or replaced by a link)",
                    dir.host.display()
                );
            }
            descriptors.preopen().map_err(anyhow::Error::msg)?;
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
        table: {
            let mut table = ResourceTable::new();
            table.set_max_capacity(MAX_RESOURCES);
            table
        },
        limiter: MemoryLimiter::new(memory.clone()),
        log,
        deadline,
        timed_out: false,
        spawn: Default::default(),
        config: "{}".into(),
        http: WasiHttpCtx::new(),
        network,
        descriptors,
        memory,
        charges: CallCharges::default(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut cx| {
        let state = cx.data_mut();
        if state.deadline.passed() {
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
/// poll), by dropping the call, which unwinds the guest's stack. Called on
/// the plugin pool, through [`super::pool::call_guest`].
pub(in crate::plugin) async fn until_deadline<T>(
    store: &mut Store<PluginState>,
    call: impl AsyncFnOnce(&mut Store<PluginState>) -> wasmtime::Result<T>,
) -> wasmtime::Result<T> {
    let deadline = store.data().deadline.clone();
    let result = {
        let call = call(&mut *store);
        tokio::pin!(call);
        loop {
            // The deadline moves when the clock pauses: look again at the
            // next check.
            let next = deadline.next_check();
            tokio::select! {
                result = &mut call => break Some(result),
                _ = tokio::time::sleep_until(next.into()) => {
                    if deadline.passed() {
                        break None;
                    }
                }
            }
        }
    };
    result.unwrap_or_else(|| {
        store.data_mut().timed_out = true;
        Err(wasmtime::Error::msg("deadline exceeded"))
    })
}

/// Caps the linear memory of all memories of one instance together, and
/// what the host holds for the call (see [`super::host_memory`]).
struct MemoryLimiter {
    memory: Arc<CallMemory>,
    /// Growth granted by `memory_growing` but not yet known to have happened.
    pending: u64,
    breached: bool,
}

impl MemoryLimiter {
    fn new(memory: Arc<CallMemory>) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_deadline_never_passes_and_resumes_later_by_the_pause() {
        let deadline = Deadline::new(Duration::from_millis(20), None);
        let first = deadline.at();
        deadline.pause();
        std::thread::sleep(Duration::from_millis(40));
        // Past the original deadline, but paused.
        assert!(!deadline.passed());
        // While paused it is looked at again soon, not at some far time.
        assert!(deadline.next_check() <= Instant::now() + PAUSED_CHECK);
        deadline.resume();
        let moved = deadline.at();
        assert!(
            moved >= first + Duration::from_millis(40),
            "{moved:?} vs {first:?}"
        );
        assert!(!deadline.passed());
        std::thread::sleep(Duration::from_millis(25));
        assert!(deadline.passed());
        assert_eq!(deadline.next_check(), deadline.at());
    }
}
