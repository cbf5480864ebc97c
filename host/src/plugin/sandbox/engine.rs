//! The one wasmtime engine of the host, and the epoch ticker that bounds
//! every call.
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
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::plugin::policy::fields::MAX_MEMORY_MIB;

/// How often the epoch advances; a call's deadline is checked at each tick,
/// so a runaway guest is stopped at most this late.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of a freed instance slot's memory and tables that may be reset in
/// place rather than unmapped.
const KEEP_RESIDENT: usize = 2 << 20;

/// The engine every plugin runs in: [`compile_config`] with the pooling
/// allocator, sized for `max_instances` instances alive at once.
pub fn new_engine(max_instances: u32) -> Result<Engine> {
    let mut wasm = compile_config();
    let mut pool = PoolingAllocationConfig::new();
    let n = max_instances.max(1);
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
    Ok(Engine::new(&wasm)?)
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
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: Engine) -> Self {
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
