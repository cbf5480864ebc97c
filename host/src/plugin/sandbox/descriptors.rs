//! Host descriptors held for plugin calls, bounded per call and host-wide.
//!
//! Every file or directory a guest opens is a real descriptor of the host
//! process, and so is each granted directory of a call (opened when its
//! store is made) and each HTTP request the host sends for it. Unbounded,
//! one call opening files in a loop would use up the process's open-file
//! limit, and every other session's model requests would fail with
//! `Too many open files`. So:
//!
//! - per call: at most `limits.open_files` (default 64) files and
//!   directories opened by the call at once. A descriptor counts until the
//!   host has closed it, whatever still holds it (the descriptor itself, or
//!   a stream read from it after the descriptor was dropped);
//! - host-wide: all plugin calls together hold at most a budget derived
//!   from the process's limit (`RLIMIT_NOFILE`, soft): half of it, so the
//!   host's own work (model requests, the session store, the API listener)
//!   always has the other half. A closed descriptor's slot is given back
//!   when its call next opens one, when the call ends, or when any call
//!   finds the budget spent: then the closed descriptors of every live call
//!   are given back before it is refused, so a call that opened files,
//!   closed them and waits holds none.
//!
//! An open over a bound fails in the guest with WASI `error-code.quota`
//! (WASI has no "too many open files"), and the host logs which plugin hit
//! which bound. A call that cannot open its granted directories, or send an
//! HTTP request, because the host-wide budget is spent is refused with a
//! message saying so.
//!
//! The mechanism is the one way to a new descriptor: `open-at` of
//! `wasi:filesystem/types` is replaced in the linker by a wrapper (see
//! [`crate::plugin::host::filesystem`]) that asks the call's
//! [`CallDescriptors`] first and records the descriptor after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

/// Descriptors the host lets all plugin calls hold together.
#[derive(Debug)]
pub struct DescriptorBudget {
    limit: usize,
    used: AtomicUsize,
    /// What each live call opened, to give back what was closed when the
    /// budget is spent.
    calls: Mutex<Vec<Weak<OpenFiles>>>,
}

/// What one call opened: held until the host has closed it.
#[derive(Debug, Default)]
struct OpenFiles(Mutex<Vec<(Weak<std::fs::File>, Slot)>>);

impl OpenFiles {
    /// Gives back the slots of what the host has closed; what is open now.
    fn prune(&self) -> usize {
        let mut open = self.0.lock().unwrap();
        open.retain(|(file, _)| file.strong_count() > 0);
        open.len()
    }
}

/// One descriptor of the host-wide budget, given back when dropped.
#[derive(Debug)]
pub struct Slot(Arc<DescriptorBudget>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.used.fetch_sub(1, Ordering::SeqCst);
    }
}

impl DescriptorBudget {
    /// A budget of `limit` descriptors.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(DescriptorBudget {
            limit,
            used: AtomicUsize::new(0),
            calls: Mutex::default(),
        })
    }

    /// Half of this process's open-file limit (the soft one, which is what
    /// `open` fails at).
    pub fn for_process() -> Arc<Self> {
        let soft = rlimit::getrlimit(rlimit::Resource::NOFILE)
            .map(|(soft, _)| soft)
            .unwrap_or(1024);
        Self::new(usize::try_from(soft / 2).unwrap_or(usize::MAX).max(1))
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Descriptors plugin calls hold now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// One descriptor, if the budget has one left once the closed
    /// descriptors of live calls are given back.
    pub fn take(self: &Arc<Self>) -> Option<Slot> {
        self.try_take().or_else(|| {
            self.prune();
            self.try_take()
        })
    }

    /// Gives back the slots of every live call's closed descriptors.
    fn prune(&self) {
        let calls: Vec<Arc<OpenFiles>> = {
            let mut calls = self.calls.lock().unwrap();
            calls.retain(|call| call.strong_count() > 0);
            calls.iter().filter_map(Weak::upgrade).collect()
        };
        for call in calls {
            call.prune();
        }
    }

    /// Counts a new call's open files among those pruned.
    fn register(&self, open: &Arc<OpenFiles>) {
        let mut calls = self.calls.lock().unwrap();
        calls.retain(|call| call.strong_count() > 0);
        calls.push(Arc::downgrade(open));
    }

    fn try_take(self: &Arc<Self>) -> Option<Slot> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }

    /// Why a call could not have a descriptor, in words.
    pub fn spent(&self, plugin: &str, what: &str) -> String {
        format!(
            "plugin '{plugin}' could not {what}: plugin calls hold {} open descriptors, the host's limit (half of its open-file limit); try again shortly",
            self.limit
        )
    }
}

/// The descriptors one call holds.
pub struct CallDescriptors {
    plugin: Arc<str>,
    /// Files and directories the call may have open at once.
    limit: usize,
    budget: Arc<DescriptorBudget>,
    /// What the call opened: held until the host has closed it.
    open: Arc<OpenFiles>,
    /// The call's granted directories.
    preopens: Vec<Slot>,
}

impl CallDescriptors {
    pub fn new(plugin: Arc<str>, limit: usize, budget: Arc<DescriptorBudget>) -> Self {
        let open = Arc::<OpenFiles>::default();
        budget.register(&open);
        CallDescriptors {
            plugin,
            limit,
            budget,
            open,
            preopens: Vec::new(),
        }
    }

    /// Counts a granted directory the call's store opens.
    pub fn preopen(&mut self) -> Result<(), String> {
        let slot = self.budget.take().ok_or_else(|| {
            self.budget
                .spent(&self.plugin, "open its granted directories")
        })?;
        self.preopens.push(slot);
        Ok(())
    }

    /// Files and directories the call has open now.
    pub fn open_now(&mut self) -> usize {
        self.open.prune()
    }

    /// A place for one more descriptor, or the error the guest gets.
    pub fn reserve(&mut self, path: &str) -> Result<Slot, ErrorCode> {
        let open = self.open_now();
        if open >= self.limit {
            tracing::warn!(
                target: "plugin",
                plugin = %self.plugin,
                "plugin '{}' may not open {path:?}: it holds {open} open files, its limit (limits.open_files)",
                self.plugin
            );
            return Err(ErrorCode::Quota);
        }
        self.budget.take().ok_or_else(|| {
            tracing::warn!(
                target: "plugin",
                plugin = %self.plugin,
                "{}",
                self.budget.spent(&self.plugin, &format!("open {path:?}"))
            );
            ErrorCode::Quota
        })
    }

    /// Records what `open-at` opened.
    pub fn opened(&mut self, descriptor: &Descriptor, slot: Slot) {
        let file = match descriptor {
            Descriptor::File(f) => &f.file,
            Descriptor::Dir(d) => &d.dir,
        };
        self.open
            .0
            .lock()
            .unwrap()
            .push((Arc::downgrade(file), slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_gives_out_its_limit_and_takes_slots_back_when_dropped() {
        let budget = DescriptorBudget::new(2);
        let a = budget.take().unwrap();
        let _b = budget.take().unwrap();
        assert!(budget.take().is_none());
        assert_eq!(budget.in_use(), 2);
        drop(a);
        assert_eq!(budget.in_use(), 1);
        assert!(budget.take().is_some());
    }

    #[test]
    fn the_process_budget_is_half_the_soft_limit() {
        let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert_eq!(DescriptorBudget::for_process().limit() as u64, soft / 2);
    }

    #[test]
    fn a_call_counts_what_is_still_open_and_is_refused_past_its_limit() {
        let budget = DescriptorBudget::new(10);
        let mut calls = CallDescriptors::new("p".into(), 1, budget.clone());
        let file = Arc::new(tempfile::tempfile().unwrap());
        let slot = calls.reserve("a").unwrap();
        calls
            .open
            .0
            .lock()
            .unwrap()
            .push((Arc::downgrade(&file), slot));
        assert_eq!(calls.reserve("b").unwrap_err(), ErrorCode::Quota);
        // Closed by the host: its place and its slot are free again.
        drop(file);
        assert_eq!(calls.open_now(), 0);
        assert_eq!(budget.in_use(), 0);
        assert!(calls.reserve("b").is_ok());
    }

    #[test]
    fn a_spent_budget_takes_back_what_other_live_calls_closed_before_refusing() {
        let budget = DescriptorBudget::new(3);
        // One call opens three files, so the budget is spent, then closes
        // them and goes on waiting without opening another.
        let mut waiting = CallDescriptors::new("w".into(), 64, budget.clone());
        let files: Vec<Arc<std::fs::File>> = (0..3)
            .map(|_| Arc::new(tempfile::tempfile().unwrap()))
            .collect();
        for file in &files {
            let slot = waiting.reserve("f").unwrap();
            waiting
                .open
                .0
                .lock()
                .unwrap()
                .push((Arc::downgrade(file), slot));
        }
        let mut other = CallDescriptors::new("o".into(), 64, budget.clone());
        assert_eq!(other.reserve("x").unwrap_err(), ErrorCode::Quota);
        drop(files);
        assert_eq!(budget.in_use(), 3);
        // Another call's open finds the budget spent: the waiting call's
        // closed files are given back first, and it gets one.
        let slot = other.reserve("x").unwrap();
        assert_eq!(budget.in_use(), 1);
        drop(slot);
        assert_eq!(budget.in_use(), 0);
        assert_eq!(waiting.open_now(), 0);
    }
}
