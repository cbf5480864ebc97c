//! The heap the process holds, for the benches that measure it: the
//! allocator `wasmclaw` runs on (mimalloc, see `host/src/main.rs`), counted.
//! A bench installs it with `#[global_allocator] static HEAP: Counted =
//! Counted::new();` and reads [`Counted::held`].

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use mimalloc::MiMalloc;

/// mimalloc, counting the bytes it hands out and takes back.
pub struct Counted {
    allocated: AtomicU64,
    freed: AtomicU64,
}

impl Counted {
    pub const fn new() -> Counted {
        Counted {
            allocated: AtomicU64::new(0),
            freed: AtomicU64::new(0),
        }
    }

    /// Bytes allocated and not yet freed.
    pub fn held(&self) -> i64 {
        self.allocated.load(Relaxed) as i64 - self.freed.load(Relaxed) as i64
    }
}

impl Default for Counted {
    fn default() -> Counted {
        Counted::new()
    }
}

// SAFETY: every call goes to mimalloc with the caller's arguments; the
// counters only add.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let at = unsafe { MiMalloc.alloc(layout) };
        if !at.is_null() {
            self.allocated.fetch_add(layout.size() as u64, Relaxed);
        }
        at
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let at = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !at.is_null() {
            self.allocated.fetch_add(layout.size() as u64, Relaxed);
        }
        at
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { MiMalloc.dealloc(ptr, layout) };
        self.freed.fetch_add(layout.size() as u64, Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let at = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !at.is_null() {
            // Counted as the old block freed and the new one allocated.
            self.freed.fetch_add(layout.size() as u64, Relaxed);
            self.allocated.fetch_add(new_size as u64, Relaxed);
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_counts_what_is_allocated_until_it_is_freed() {
        let heap = Counted::new();
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: each pointer goes back with the layout it was made with.
        #[allow(unsafe_code)]
        unsafe {
            let a = heap.alloc(small);
            let b = heap.alloc_zeroed(small);
            assert_eq!(heap.held(), 200);
            let a = heap.realloc(a, small, 300);
            assert_eq!(heap.held(), 400);
            heap.dealloc(b, small);
            assert_eq!(heap.held(), 300);
            heap.dealloc(a, Layout::from_size_align(300, 8).unwrap());
        }
        assert_eq!(heap.held(), 0);
    }
}
