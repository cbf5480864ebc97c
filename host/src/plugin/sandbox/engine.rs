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

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::plugin::policy::fields::MAX_MEMORY_MIB;

/// How often the epoch advances; a call's deadline is checked at each tick,
/// so a runaway guest is stopped at most this late (twice this for a
/// deadline within the call's first tick, since the ticker starts for a
/// call only once it has run that long: see [`Claim`]).
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

/// Advances the engine's epoch every [`EPOCH_TICK`] while a call is in
/// flight, and sleeps, with no wake-up at all, while none is: an idle host
/// spends nothing on it. A call that runs past its first tick (a
/// [`Claim`] started) wakes its thread if it sleeps ([`Epochs::running`]);
/// the thread goes back to sleep at the first tick after the last such
/// call has ended. Dropping the ticker stops the thread at once,
/// without waiting for a tick.
pub struct EpochTicker {
    epochs: Epochs,
    thread: Option<JoinHandle<()>>,
}

/// What a call holds the ticker running with. Cheap to clone: clones share
/// the ticker.
#[derive(Clone)]
pub struct Epochs {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Calls in flight that hold the ticker running (their claim started).
    running: usize,
    stop: bool,
    /// Ticks so far, and the wake-ups calls gave the thread (the tests
    /// look).
    ticks: u64,
    wakes: u64,
    /// The thread waits for a call: the next call wakes it.
    asleep: bool,
}

/// A call in flight: the epoch advances until every one is dropped.
pub struct Running {
    shared: Arc<Shared>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // The thread sees the count at its next tick and sleeps if it is 0.
        self.shared.lock().running -= 1;
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Counters only: never half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Epochs {
    /// Holds the ticker running for one call (from its [`Claim::start`] to
    /// the call's end). Wakes the ticker's thread only if it sleeps: one
    /// still ticking (the last call ended less than a tick ago) goes on.
    pub fn running(&self) -> Running {
        let mut state = self.shared.lock();
        state.running += 1;
        if state.asleep {
            state.wakes += 1;
            self.shared.wake.notify_one();
        }
        Running {
            shared: self.shared.clone(),
        }
    }

    /// Ticks made so far.
    pub fn ticks(&self) -> u64 {
        self.shared.lock().ticks
    }
}

/// One call's hold on the ticker, taken only once the call has run for a
/// while ([`Claim::start`]): most calls end within their first tick, and
/// one that does never wakes the ticker's thread (two thread switches and
/// a tick of a sleeping thread saved per call). Cheap to clone: clones
/// share the claim.
#[derive(Clone)]
pub struct Claim(Arc<Mutex<Phase>>);

enum Phase {
    /// The call runs; the ticker is not held for it yet.
    Waiting(Epochs),
    /// The ticker runs for the call.
    Ticking { _hold: Running },
    /// The call has ended: nothing to hold.
    Ended,
}

impl Claim {
    /// The claim of a call that has just started.
    pub fn new(epochs: &Epochs) -> Claim {
        Claim(Arc::new(Mutex::new(Phase::Waiting(epochs.clone()))))
    }

    fn lock(&self) -> MutexGuard<'_, Phase> {
        // A phase is replaced whole: never half-written.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds the ticker running until the call ends (waking its thread if
    /// it sleeps); nothing if the call has ended or holds it already.
    pub fn start(&self) {
        let mut phase = self.lock();
        if let Phase::Waiting(epochs) = &*phase {
            *phase = Phase::Ticking {
                _hold: epochs.running(),
            };
        }
    }

    /// The call has ended: the ticker is no longer held for it, and a later
    /// [`Claim::start`] does nothing.
    pub fn end(&self) {
        let ended = std::mem::replace(&mut *self.lock(), Phase::Ended);
        // The hold lets go outside the claim's lock.
        drop(ended);
    }

    /// Whether the ticker is held for the call now (the tests look).
    #[cfg(test)]
    pub fn ticking(&self) -> bool {
        matches!(*self.lock(), Phase::Ticking { .. })
    }
}

impl EpochTicker {
    pub fn start(engine: Engine) -> Self {
        Self::with_tick(engine, EPOCH_TICK)
    }

    /// A ticker advancing the epoch every `every` (the tests' own).
    fn with_tick(engine: Engine, every: Duration) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            wake: Condvar::new(),
        });
        let ticking = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wasmclaw-epoch".into())
            .spawn(move || tick(&ticking, &engine, every))
            .expect("spawning the epoch ticker thread");
        Self {
            epochs: Epochs { shared },
            thread: Some(thread),
        }
    }

    /// The handle calls hold the ticker running with.
    pub fn epochs(&self) -> &Epochs {
        &self.epochs
    }
}

/// The ticker's thread: asleep while no call is in flight, else a tick
/// `every` so often; returns once stopped.
fn tick(shared: &Shared, engine: &Engine, every: Duration) {
    let mut state = shared.lock();
    loop {
        while state.running == 0 && !state.stop {
            state.asleep = true;
            state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.asleep = false;
        if state.stop {
            return;
        }
        state = shared
            .wake
            .wait_timeout_while(state, every, |s| !s.stop)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if state.stop {
            return;
        }
        engine.increment_epoch();
        state.ticks += 1;
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.epochs.shared.lock().stop = true;
        self.epochs.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until the ticker's thread is asleep (or awake), at most 5 s.
    fn until_asleep(epochs: &Epochs, want: bool) {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while epochs.shared.lock().asleep != want {
            assert!(std::time::Instant::now() < end, "asleep never {want}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until `epochs` has made `more` ticks past `from`, at most 5 s.
    fn until_ticks(epochs: &Epochs, from: u64, more: u64) -> bool {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while epochs.ticks() < from + more {
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[test]
    fn the_epoch_advances_only_while_a_call_is_in_flight() {
        let engine = Engine::new(&compile_config()).unwrap();
        let ticker = EpochTicker::start(engine);
        let epochs = ticker.epochs().clone();
        // No call: no tick, however long.
        std::thread::sleep(EPOCH_TICK * 5);
        assert_eq!(epochs.ticks(), 0);

        let (first, second) = (epochs.running(), epochs.running());
        assert!(until_ticks(&epochs, 0, 3), "ticks while calls run");
        drop(first);
        let at = epochs.ticks();
        assert!(until_ticks(&epochs, at, 2), "one call still runs");
        drop(second);
        // At most the tick under way when the last call ended, then none.
        until_asleep(&epochs, true);
        let stopped = epochs.ticks();
        std::thread::sleep(EPOCH_TICK * 5);
        assert_eq!(epochs.ticks(), stopped);

        // A later call wakes it again.
        let again = epochs.running();
        assert!(until_ticks(&epochs, stopped, 2));
        drop(again);
    }

    /// A call wakes the thread only if it sleeps: one made while the thread
    /// still waits out the tick after the last call (back-to-back tool
    /// calls) does not wake it again.
    #[test]
    fn a_call_wakes_the_ticker_only_if_it_sleeps() {
        let engine = Engine::new(&compile_config()).unwrap();
        let ticker = EpochTicker::with_tick(engine, Duration::from_millis(300));
        let epochs = ticker.epochs().clone();
        let wakes = || epochs.shared.lock().wakes;
        until_asleep(&epochs, true);
        let first = epochs.running();
        assert_eq!(wakes(), 1);
        until_asleep(&epochs, false);
        drop(first);
        // Still waiting out that tick: the next calls find it awake.
        drop(epochs.running());
        drop(epochs.running());
        assert_eq!(wakes(), 1);
        // Asleep again after the tick: the next call wakes it.
        until_asleep(&epochs, true);
        drop(epochs.running());
        assert_eq!(wakes(), 2);
    }

    /// A claim holds the ticker from its start to its end, once however
    /// often it is started; one that ends unstarted (a call shorter than a
    /// tick) never wakes the thread.
    #[test]
    fn a_claim_holds_the_ticker_only_from_its_start_to_its_end() {
        let engine = Engine::new(&compile_config()).unwrap();
        let ticker = EpochTicker::with_tick(engine, Duration::from_millis(300));
        let epochs = ticker.epochs().clone();
        let held = || {
            let state = epochs.shared.lock();
            (state.running, state.wakes)
        };
        until_asleep(&epochs, true);

        let short = Claim::new(&epochs);
        short.end();
        short.start();
        assert_eq!(held(), (0, 0), "a call that ended unstarted");
        assert!(!short.ticking());

        let long = Claim::new(&epochs);
        assert_eq!(held(), (0, 0), "a call not started yet");
        long.start();
        long.clone().start();
        assert_eq!(held(), (1, 1), "a started call, once");
        assert!(long.ticking());
        long.end();
        long.start();
        assert_eq!(held(), (0, 1), "an ended call");
    }

    #[test]
    fn dropping_the_ticker_does_not_wait_for_a_tick() {
        let engine = Engine::new(&compile_config()).unwrap();
        // A tick of a minute: a drop that waited for it would take that long.
        let tick = Duration::from_secs(60);
        let ticker = EpochTicker::with_tick(engine, tick);
        // Asleep with no call; awake, waiting out its tick, with one.
        until_asleep(ticker.epochs(), true);
        let running = ticker.epochs().running();
        until_asleep(ticker.epochs(), false);
        let started = std::time::Instant::now();
        drop(ticker);
        assert!(started.elapsed() < tick / 2, "{:?}", started.elapsed());
        drop(running);
    }
}
