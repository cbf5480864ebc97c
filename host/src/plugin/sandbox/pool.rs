//! The guest pool: the threads guest code runs on.
//!
//! Every call into a plugin (a tool call, a hook call, an `on-event`
//! observer's call, `list-tools` and `subscriptions` at load) runs as a task
//! on this pool, tokio runtimes of its own with one worker thread per core
//! of the machine each (named `wasmclaw-plugin-N`). The runtime that serves the
//! network and runs the turns only waits for the task: a guest that computes,
//! even one that loops until its deadline, takes CPU from other guests, never
//! from a turn, `/healthz` or an event stream.
//!
//! Two lanes keep a looping guest from delaying a new call: every call
//! starts on the first lane, and one still running after [`FIRST_SLICE`]
//! moves, at its next yield, to the background lane (`wasmclaw-plugin-bg-N`),
//! where observers run too. On Linux the lanes' threads run at a lower OS
//! priority ([`NICE`], and [`BACKGROUND_NICE`] for the background lane), so
//! that on a machine with more runnable threads than cores the host's own
//! threads are scheduled first, then new calls, then long ones.
//!
//! The pool is one per process, started on first use (its background lane
//! when a call first moves there, or the first observer starts): its size
//! is the machine's, however many engines there are (the tests build
//! several).
//!
//! Cancellation stays prompt: dropping the caller's future (a hard interrupt,
//! a turn's timeout) aborts the task, which stops at the guest's next yield
//! (every epoch tick, [`super::engine::EPOCH_TICK`]) or at once if it waits
//! in a host call, and its store is dropped there. The deadline is enforced
//! inside the task as before ([`until_deadline`]).
//!
//! A host import that belongs to the caller's runtime is handed back to it:
//! `agent.spawn-subturn` starts a child turn, whose tasks must live with the
//! other turns, not on the pool ([`on_caller`]).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::runtime::Handle;
use tokio_util::task::AbortOnDropHandle;

use super::access::SubTurnSpawner;
use super::engine::{Claim, EPOCH_TICK};
use super::state::{PluginState, until_deadline};
use crate::plugin::error::{ErrorKind, ToolError};
use crate::protocol::SubTurnRequest;

/// How much lower than the host's own threads a new call's thread is
/// scheduled (a Linux nice value: 0 is normal, 19 the lowest).
pub const NICE: i32 = 10;

/// The nice value of the background lane's threads.
pub const BACKGROUND_NICE: i32 = 19;

/// How long a call runs on the first lane before it moves to the background
/// lane (at its next yield). Most calls finish well within it.
pub const FIRST_SLICE: Duration = Duration::from_millis(20);

/// The pool: every call starts on the first lane; one that is still running
/// after [`FIRST_SLICE`] moves to the background lane, so a looping guest
/// never queues ahead of a new call.
struct Pool {
    first: tokio::runtime::Runtime,
    /// Started when a call first needs it: a command whose calls all end
    /// within their first slice, and which has no observer, never does.
    background: OnceLock<tokio::runtime::Runtime>,
    threads: usize,
}

impl Pool {
    fn background(&self) -> &tokio::runtime::Runtime {
        (self.background).get_or_init(|| lane(self.threads, "wasmclaw-plugin-bg-", BACKGROUND_NICE))
    }
}

thread_local! {
    /// This thread is one of the pool's (either lane).
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
    /// This thread is one of the background lane's.
    static IN_BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        Pool {
            first: lane(threads, "wasmclaw-plugin-", NICE),
            background: OnceLock::new(),
            threads,
        }
    })
}

/// A lane: `threads` worker threads named `name` and a number, at `nice`.
fn lane(threads: usize, name: &'static str, nice: i32) -> tokio::runtime::Runtime {
    let counter = AtomicUsize::new(0);
    let background = nice == BACKGROUND_NICE;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name_fn(move || format!("{name}{}", counter.fetch_add(1, Ordering::Relaxed)))
        .on_thread_start(move || {
            IN_POOL.set(true);
            IN_BACKGROUND.set(background);
            lower_priority(nice);
        })
        .enable_all()
        .build()
        .expect("starting the plugin pool's threads")
}

/// The number of worker threads of each lane (the machine's cores).
pub fn threads() -> usize {
    pool().threads
}

/// Runs `task` on the pool and waits for it: on the first lane, moved to
/// the background lane if it is still running after [`FIRST_SLICE`]; a task
/// started from the background lane (an observer's call) stays there.
/// Dropping the returned future aborts the task. A panic in the task is
/// resumed here, as if the task had run inline.
pub async fn run<F>(task: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let pool = pool();
    let handle = if IN_BACKGROUND.get() {
        AbortOnDropHandle::new(pool.background().spawn(task))
    } else {
        AbortOnDropHandle::new(pool.first.spawn(first_slice(Box::pin(task))))
    };
    joined(handle.await)
}

/// Polls `task` for up to [`FIRST_SLICE`], then hands it to the background
/// lane and waits for it there. Aborting this task drops the handle, which
/// aborts the moved one: a dropped call stops wherever it runs.
async fn first_slice<F>(mut task: Pin<Box<F>>) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let started = Instant::now();
    let done = std::future::poll_fn(|cx| match task.as_mut().poll(cx) {
        Poll::Ready(output) => Poll::Ready(Some(output)),
        Poll::Pending if started.elapsed() >= FIRST_SLICE => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    })
    .await;
    match done {
        Some(output) => output,
        None => joined(AbortOnDropHandle::new(pool().background().spawn(task)).await),
    }
}

fn joined<T>(result: Result<T, tokio::task::JoinError>) -> T {
    match result {
        Ok(output) => output,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only dropping a handle aborts a task, and the pool's runtimes
        // live as long as the process.
        Err(e) => panic!("a task on the plugin pool was cancelled: {e}"),
    }
}

/// Starts `task` on the background lane without waiting for it (an
/// observer's loop, whose calls then stay there too); dropping the handle
/// does not stop it, aborting it does.
pub fn spawn<F>(task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pool().background().spawn(task)
}

/// A call into a guest: instantiation and the calls into the instance, given
/// the call's store.
pub type GuestCall<T> = Box<
    dyn for<'a> FnOnce(&'a mut wasmtime::Store<PluginState>) -> BoxFuture<'a, wasmtime::Result<T>>
        + Send,
>;

/// Runs `call` with `store` on the pool until the store's deadline, and
/// gives the store back with the outcome (the caller reads what limit, if
/// any, the call broke). The one way guest code is run.
///
/// The epoch ticker runs for the call only once it has run for a tick
/// (most calls end sooner and never wake the ticker's thread). The caller
/// starts it ([`Claim::start`]) with a timer of its runtime, which guest
/// code never holds up; a caller on the pool itself (an observer's call),
/// whose timer a computing guest could hold up, or outside a tokio runtime
/// (no timer), starts it at once, as does
/// a caller that drops the call: the aborted task stops at the guest's next
/// yield, which only a tick gives a guest that computes. The task ends the
/// claim wherever it stops.
pub async fn call_guest<T: Send + 'static>(
    mut store: wasmtime::Store<PluginState>,
    call: GuestCall<T>,
) -> (wasmtime::Store<PluginState>, wasmtime::Result<T>) {
    let claim = Claim::new(&store.data().epochs);
    let ended = scopeguard::guard(claim.clone(), |claim| claim.end());
    let task = run(async move {
        let _ended = ended;
        let outcome = until_deadline(&mut store, async move |store| call(store).await).await;
        (store, outcome)
    });
    if IN_POOL.get() || Handle::try_current().is_err() {
        claim.start();
        return task.await;
    }
    let _dropped = scopeguard::guard(claim.clone(), |claim| claim.start());
    tokio::pin!(task);
    tokio::select! {
        biased;
        done = &mut task => return done,
        () = tokio::time::sleep(EPOCH_TICK) => claim.start(),
    }
    task.await
}

/// `spawner`, with the child turns it starts run on the runtime of the
/// caller of this function (not on the pool, where the guest that asks for
/// them runs). Outside a tokio runtime, `spawner` as it is.
pub fn on_caller(spawner: Arc<dyn SubTurnSpawner>) -> Arc<dyn SubTurnSpawner> {
    match Handle::try_current() {
        Ok(handle) => Arc::new(OnRuntime { handle, spawner }),
        Err(_) => spawner,
    }
}

/// A spawner whose children run on `handle`'s runtime.
struct OnRuntime {
    handle: Handle,
    spawner: Arc<dyn SubTurnSpawner>,
}

impl SubTurnSpawner for OnRuntime {
    fn run(
        &self,
        plugin: &str,
        request: SubTurnRequest,
    ) -> BoxFuture<'static, Result<String, ToolError>> {
        // Dropping the guest's call (a hard interrupt) drops the child's
        // future, as when it ran inline.
        let child = AbortOnDropHandle::new(self.handle.spawn(self.spawner.run(plugin, request)));
        Box::pin(async move {
            match child.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(ToolError::new(
                    ErrorKind::Internal,
                    "the sub-agent was stopped: the host is shutting down",
                )),
            }
        })
    }
}

/// Lowers the calling thread's scheduling priority to `nice`. On Linux the
/// nice value is per thread; elsewhere this does nothing.
fn lower_priority(nice: i32) {
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(None, nice) {
        tracing::warn!("the plugin pool's threads run at normal priority: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn tasks_run_on_the_pools_named_threads_not_the_callers() {
        let caller = std::thread::current().id();
        let (name, id) = run(async {
            let t = std::thread::current();
            (t.name().map(str::to_string), t.id())
        })
        .await;
        assert!(
            name.as_deref()
                .is_some_and(|n| n.starts_with("wasmclaw-plugin-")),
            "{name:?}"
        );
        assert_ne!(id, caller);
        assert_eq!(
            threads(),
            std::thread::available_parallelism().unwrap().get()
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_task_still_running_after_its_first_slice_moves_to_the_background_lane() {
        let name = || std::thread::current().name().map(str::to_string);
        // It yields until it finds itself moved (at most 10 s): a loaded
        // machine may stall it past any fixed time, so none is assumed.
        let (first, later) = run(async move {
            let first = name();
            let end = Instant::now() + std::time::Duration::from_secs(10);
            let in_background = || name().is_some_and(|n| n.starts_with("wasmclaw-plugin-bg-"));
            while !in_background() && Instant::now() < end {
                tokio::task::yield_now().await;
            }
            (first, name())
        })
        .await;
        let first = first.unwrap();
        assert!(
            first.starts_with("wasmclaw-plugin-") && !first.starts_with("wasmclaw-plugin-bg-"),
            "{first}"
        );
        assert!(
            later.as_deref().unwrap().starts_with("wasmclaw-plugin-bg-"),
            "{later:?}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_caller_aborts_the_task() {
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let (dropped_tx, dropped) = tokio::sync::oneshot::channel::<()>();
        // Sends on `dropped_tx` when the task's future is dropped.
        struct OnDrop(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                let _ = self.0.take().unwrap().send(());
            }
        }
        let guard = OnDrop(Some(dropped_tx));
        let call = tokio::spawn(run(async move {
            let _guard = guard;
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await
        }));
        started.await.unwrap();
        call.abort();
        tokio::time::timeout(std::time::Duration::from_secs(5), dropped)
            .await
            .expect("the task was dropped")
            .unwrap();
    }
}
