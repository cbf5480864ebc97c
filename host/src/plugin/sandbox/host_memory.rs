//! Host memory a call holds for its guest outside the guest's linear
//! memory, counted against the call's memory limit (`limits.memory_mib`).
//!
//! `wasi:http` objects live in host memory: header objects (`fields`), the
//! buffers of request bodies being written, the answers the host has read
//! for the guest. Uncounted, a plugin limited to 64 MiB could make the host
//! hold gigabytes for it. So linear memory and these bytes share one
//! budget, [`CallMemory`]:
//!
//! - header objects: what each creation or change asks the host to hold
//!   (names, values, and the size of the objects themselves), from then to
//!   the end of the call;
//! - a request or response body being written: its buffer, at most
//!   [`BODY_CHUNK`] bytes per write and two writes buffered, from then to
//!   the end of the call;
//! - an answer read for the guest, as each piece of it arrives (and the
//!   copy the credential scrub makes of it), until the guest has let go of
//!   it;
//! - a request body, as each piece of it is collected to be sent.
//!
//! A header object or body over the budget stops the call, as growing
//! linear memory past the limit does; an answer over it is refused, like
//! one over `network.max_response_kib`. How many objects a call holds at
//! once is bounded by the size of its resource table (see
//! [`super::limits::MAX_RESOURCES`]).
//!
//! The header functions and the body constructors of `wasi:http/types` are
//! replaced in the linker by wrappers that charge first, then call
//! wasmtime-wasi-http's own (see [`crate::plugin::host::http_types`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The most a guest may write to a body at once (wasmtime-wasi-http
/// buffers two such writes per body).
pub const BODY_CHUNK: usize = 64 << 10;

/// A call's memory budget: its linear memory and what the host holds for
/// it, together.
#[derive(Debug)]
pub struct CallMemory {
    limit: u64,
    used: Mutex<Used>,
    /// The limit was reached by something the host holds.
    host_breach: AtomicBool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Used {
    linear: u64,
    host: u64,
}

/// Bytes the host holds for a call, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    memory: Arc<CallMemory>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.memory.used().host -= self.bytes;
    }
}

impl Charge {
    /// Holds `bytes` in all instead, if the budget has them: a running
    /// charge for something the host builds up piece by piece. Unchanged
    /// when it does not fit.
    pub fn resize(&mut self, bytes: u64) -> Result<(), OverLimit> {
        let mut used = self.memory.used();
        if bytes > self.bytes {
            let more = bytes - self.bytes;
            if used.linear + used.host + more > self.memory.limit {
                return Err(OverLimit {
                    asked: more,
                    limit: self.memory.limit,
                });
            }
            used.host += more;
        } else {
            used.host -= self.bytes - bytes;
        }
        self.bytes = bytes;
        Ok(())
    }
}

/// Bytes that would put a call over its memory limit.
#[derive(Debug, thiserror::Error)]
#[error(
    "the host would hold {asked} bytes more for the call, over its memory limit of {limit} bytes"
)]
pub struct OverLimit {
    pub asked: u64,
    pub limit: u64,
}

impl CallMemory {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(CallMemory {
            limit,
            used: Mutex::default(),
            host_breach: AtomicBool::new(false),
        })
    }

    fn used(&self) -> std::sync::MutexGuard<'_, Used> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Linear memory grows by `grow` bytes, if the budget has them.
    pub fn grow_linear(&self, grow: u64) -> bool {
        let mut used = self.used();
        let fits = used.linear + used.host + grow <= self.limit;
        if fits {
            used.linear += grow;
        }
        fits
    }

    /// A growth granted by [`CallMemory::grow_linear`] did not happen.
    pub fn undo_linear(&self, grow: u64) {
        self.used().linear -= grow;
    }

    /// Holds `bytes` for the host, if the budget has them.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, OverLimit> {
        let mut used = self.used();
        if used.linear + used.host + bytes > self.limit {
            return Err(OverLimit {
                asked: bytes,
                limit: self.limit,
            });
        }
        used.host += bytes;
        Ok(Charge {
            memory: self.clone(),
            bytes,
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the host holds for the call now.
    pub fn host_bytes(&self) -> u64 {
        self.used().host
    }

    /// The call is stopped because the host was to hold more than the
    /// limit allows.
    fn mark_host_breach(&self) {
        self.host_breach.store(true, Ordering::SeqCst);
    }

    /// Whether the call was stopped by something the host was to hold.
    pub fn host_breached(&self) -> bool {
        self.host_breach.load(Ordering::SeqCst)
    }
}

/// What the host holds for a call until it ends: header objects and body
/// buffers.
#[derive(Debug, Default)]
pub struct CallCharges {
    held: Vec<Charge>,
}

impl CallCharges {
    /// Charges `bytes` to `memory` until the call ends; over the limit, the
    /// call is marked as stopped by what the host was to hold.
    pub fn hold(&mut self, memory: &Arc<CallMemory>, bytes: u64) -> Result<(), OverLimit> {
        let charge = memory
            .charge(bytes)
            .inspect_err(|_| memory.mark_host_breach())?;
        self.held.push(charge);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_charge_grows_within_the_limit_and_is_given_back_when_dropped() {
        let memory = CallMemory::new(100);
        assert!(memory.grow_linear(40));
        let mut charge = memory.charge(0).unwrap();
        charge.resize(50).unwrap();
        assert_eq!(memory.host_bytes(), 50);
        let over = charge.resize(61).unwrap_err();
        assert_eq!((over.asked, over.limit), (11, 100));
        // Unchanged by the refusal; it may shrink, and grow again to fit.
        assert_eq!(memory.host_bytes(), 50);
        charge.resize(20).unwrap();
        charge.resize(60).unwrap();
        assert_eq!(memory.host_bytes(), 60);
        drop(charge);
        assert_eq!(memory.host_bytes(), 0);
    }

    #[test]
    fn linear_memory_and_host_charges_share_one_limit() {
        let memory = CallMemory::new(100);
        assert!(memory.grow_linear(60));
        let charge = memory.charge(40).unwrap();
        assert!(!memory.grow_linear(1));
        let over = memory.charge(1).unwrap_err();
        assert_eq!((over.asked, over.limit), (1, 100));
        // Given back when dropped.
        drop(charge);
        assert_eq!(memory.host_bytes(), 0);
        assert!(memory.grow_linear(40));
        memory.undo_linear(40);
        assert!(memory.charge(40).is_ok());
    }
}
