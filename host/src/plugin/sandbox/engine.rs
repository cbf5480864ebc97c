//! The one wasmtime engine of the host, the linker every plugin is
//! instantiated with, and the epoch ticker that bounds every call.
//!
//! Settings (measured on a 2-core machine with Rust, Go, Python and
//! JavaScript guests):
//! the pooling allocator instantiates about twice as fast as on-demand
//! allocation; copy-on-write memory images make instantiation of big guests
//! (Python, JavaScript) several times faster; `concurrency_support(false)`
//! makes calls about three times faster while no plugin needs component-model
//! async; epoch interruption stops a guest in an infinite loop at a small cost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::{CompileCache, Compiler, LoadLimits};
use super::descriptors::DescriptorBudget;
use super::state::PluginState;
use crate::plugin::bindings::ToolAndHookPlugin;
use crate::plugin::policy::fields::MAX_MEMORY_MIB;
use crate::plugin::policy::protected::Protected;
use crate::plugin::policy::secrets::Secrets;

/// How often the epoch advances; a call's deadline is checked at each tick,
/// so a runaway guest is stopped at most this late.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of a freed instance slot's memory and tables that may be reset in
/// place rather than unmapped.
const KEEP_RESIDENT: usize = 2 << 20;

/// How the runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled code is cached; `None` compiles every load afresh.
    pub cache_dir: Option<std::path::PathBuf>,
    /// How cache misses are compiled.
    pub compiler: Compiler,
    /// Largest plugin file, and the bounds of a compiler child.
    pub load: LoadLimits,
    /// Plugin instances alive at once (all sessions, tools and hooks).
    pub max_instances: u32,
    /// Paths of the host's own that no grant may reach, besides the cache
    /// and each plugin's own directory, which are always protected.
    pub protected: Vec<Protected>,
    /// The operator's secrets, which grants' credentials name.
    pub secrets: Arc<Secrets>,
    /// Descriptors all plugin calls may hold together; `None`: half the
    /// process's open-file limit (see [`super::descriptors`]).
    pub max_descriptors: Option<usize>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            compiler: Compiler::InProcess,
            load: LoadLimits::default(),
            max_instances: 1000,
            protected: Vec::new(),
            secrets: Arc::default(),
            max_descriptors: None,
        }
    }
}

/// The engine, the linker and the compile cache, shared by all plugins.
/// Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<PluginState>,
    cache: CompileCache,
    protected: Vec<Protected>,
    secrets: Arc<Secrets>,
    descriptors: Arc<DescriptorBudget>,
    _ticker: EpochTicker,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let mut wasm = compile_config();
        let mut pool = PoolingAllocationConfig::new();
        let n = config.max_instances.max(1);
        pool.total_component_instances(n)
            .total_core_instances(n.saturating_mul(4))
            .total_memories(n.saturating_mul(2))
            .total_tables(n.saturating_mul(4))
            .total_stacks(n)
            .max_memory_size((MAX_MEMORY_MIB as usize) << 20)
            .max_core_instances_per_component(64)
            .max_memories_per_component(8)
            .max_tables_per_component(32)
            .table_elements(100_000)
            // On reuse of a slot, reset only the pages the last call dirtied
            // (found with Linux's PAGEMAP_SCAN), with memset, instead of
            // unmapping them: no page faults and no TLB shootdowns on the
            // next call. Where the ioctl is missing this is plain madvise.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        super::descriptors::add_to_linker(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        super::host_memory::add_to_linker(&mut linker)?;
        ToolAndHookPlugin::add_to_linker::<_, HasSelf<PluginState>>(&mut linker, |s| s)?;

        let mut protected = config.protected;
        protected.extend(config.cache_dir.as_ref().map(|dir| {
            Protected::new(
                dir,
                "the compile cache",
                "the host runs the code it holds without checking it again",
            )
        }));
        let cache = CompileCache::new(config.cache_dir, config.compiler, config.load);
        Ok(Self {
            inner: Arc::new(Inner {
                _ticker: EpochTicker::start(engine.clone()),
                engine,
                linker,
                cache,
                protected,
                secrets: config.secrets,
                descriptors: match config.max_descriptors {
                    Some(n) => DescriptorBudget::new(n),
                    None => DescriptorBudget::for_process(),
                },
            }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn linker(&self) -> &Linker<PluginState> {
        &self.inner.linker
    }

    pub fn cache(&self) -> &CompileCache {
        &self.inner.cache
    }

    pub fn secrets(&self) -> &Arc<Secrets> {
        &self.inner.secrets
    }

    /// Descriptors all plugin calls may hold together.
    pub fn descriptors(&self) -> &Arc<DescriptorBudget> {
        &self.inner.descriptors
    }

    /// Paths no grant may overlap.
    pub fn protected(&self) -> &[Protected] {
        &self.inner.protected
    }
}

/// The settings that decide what compiled code looks like. A compiler in
/// another process uses exactly these, so its output loads here.
pub fn compile_config() -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        .memory_init_cow(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .parallel_compilation(true);
    c
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wasmclaw-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch ticker thread");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
