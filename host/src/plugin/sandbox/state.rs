//! One call's store: [`PluginState`], made fresh for every call.
//!
//! A store holds the guest's WASI context (only what the grants name), a
//! memory limiter, the call's log budget, its deadline, and what it may reach
//! through the host's own imports. The epoch ticker, which runs while a call
//! is in flight (from its first tick on), wakes the deadline check every
//! tick; a guest past its deadline is stopped there. Whatever limit a
//! call breaks is recorded here, so the caller can say which one in plain
//! words instead of "wasm trap" (see [`super::failure`]).

use std::sync::Arc;

use anyhow::{Context, Result};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::access::{NetworkAccess, SpawnAccess};
use super::deadline::Deadline;
use super::descriptors::{CallDescriptors, DescriptorBudget};
use super::engine::Epochs;
use super::host_memory::{CallCharges, CallMemory};
use super::limits::{Breach, MAX_RESOURCES, MemoryLimiter};
use super::output::{CallLog, GuestOutput};
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
    pub(in crate::plugin) spawn: SpawnAccess,
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
    /// The engine's epoch ticker, held running while the call is in flight
    /// (from its first tick on: see [`super::engine::Claim`]).
    pub(super) epochs: Epochs,
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

    /// Charges `bytes` to the call until it ends; over the limit, a trap
    /// that stops it.
    pub(in crate::plugin) fn hold(&mut self, bytes: u64) -> wasmtime::Result<()> {
        Ok(self.charges.hold(&self.memory, bytes)?)
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

impl PluginState {
    /// Which limit, if any, stopped the call.
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

/// What a store reaches when granted: what the grants name; credentials
/// are looked up in `secrets`, and descriptors are taken from the host-wide
/// `budget`.
struct Granted<'a> {
    grants: &'a Grants,
    secrets: &'a Arc<Secrets>,
    budget: &'a Arc<DescriptorBudget>,
}

/// Builds the store of one call: [`PluginState::builder`], the options,
/// then [`StoreBuilder::build`]. Unless told otherwise the store reaches
/// nothing (no directories, environment, network or descriptors: what
/// `list-tools` is called with at load), may not start sub-agents, and its
/// `config.get` answers `{}`.
pub struct StoreBuilder<'a> {
    plugin: &'a Arc<str>,
    limits: &'a Limits,
    deadline: Deadline,
    granted: Option<Granted<'a>>,
    spawn: SpawnAccess,
    config: Arc<str>,
}

impl PluginState {
    /// The builder of a fresh store for one call of `plugin`, within
    /// `limits`, stopped at `deadline`.
    pub fn builder<'a>(
        plugin: &'a Arc<str>,
        limits: &'a Limits,
        deadline: Deadline,
    ) -> StoreBuilder<'a> {
        StoreBuilder {
            plugin,
            limits,
            deadline,
            granted: None,
            spawn: SpawnAccess::default(),
            config: "{}".into(),
        }
    }
}

impl<'a> StoreBuilder<'a> {
    /// The store reaches what `grants` name: its directories, environment
    /// variables and network; credentials are looked up in `secrets`, and
    /// descriptors are taken from the host-wide `budget`.
    pub fn granted(
        mut self,
        grants: &'a Grants,
        secrets: &'a Arc<Secrets>,
        budget: &'a Arc<DescriptorBudget>,
    ) -> Self {
        self.granted = Some(Granted {
            grants,
            secrets,
            budget,
        });
        self
    }

    /// What `agent.spawn-subturn` may do in the call.
    pub fn spawn(mut self, spawn: SpawnAccess) -> Self {
        self.spawn = spawn;
        self
    }

    /// What `config.get` returns: the plugin's `[config]` as JSON.
    pub fn config(mut self, config: Arc<str>) -> Self {
        self.config = config;
        self
    }

    /// The store, in `engine`, whose ticker is `epochs`. Fails when a granted directory cannot be
    /// opened (or no longer resolves to itself), or the host-wide
    /// descriptor budget has none left for it.
    pub fn build(self, engine: &Engine, epochs: &Epochs) -> Result<Store<PluginState>> {
        let StoreBuilder {
            plugin,
            limits,
            deadline,
            granted,
            spawn,
            config,
        } = self;
        let log = Arc::new(CallLog::new(plugin.clone(), limits.log_lines));
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(GuestOutput::stdout(log.clone()))
            .stderr(GuestOutput::stderr(log.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let memory = CallMemory::new(limits.memory_bytes);
        let (network, mut descriptors) = match &granted {
            Some(Granted {
                grants,
                secrets,
                budget,
            }) => (
                NetworkAccess::new(
                    plugin.clone(),
                    grants.network.clone(),
                    (*secrets).clone(),
                    (*budget).clone(),
                    memory.clone(),
                ),
                CallDescriptors::new(plugin.clone(), limits.open_files, (*budget).clone()),
            ),
            // Nothing to open, nowhere to send.
            None => (
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
        if let Some(Granted { grants, .. }) = &granted {
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
            spawn,
            config,
            http: WasiHttpCtx::new(),
            network,
            descriptors,
            memory,
            charges: CallCharges::default(),
            epochs: epochs.clone(),
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
}

/// Runs `call` (instantiation and the calls into the instance) until the
/// store's deadline. The epoch callback stops a guest that computes past it;
/// this stops one that waits past it inside a host call (a WASI sleep or
/// poll), by dropping the call, which unwinds the guest's stack. Called on
/// the plugin pool, through [`super::pool::call_guest`].
pub(super) async fn until_deadline<T>(
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
