//! The heap the process holds, for the benches that measure it: a counting
//! wrapper over the allocator `wasmclaw` runs on (mimalloc, see
//! `host/src/main.rs`), so their CPU figures are the binary's. What it
//! counts is the bytes the program asks for, whatever the allocator keeps
//! around them. A bench installs it with `#[global_allocator] static HEAP:
//! Counted = Counted::new();` and reads [`Counted::held`].

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use mimalloc::MiMalloc;

/// mimalloc, counting the bytes allocated and not yet freed.
pub struct Counted {
    held: AtomicI64,
}

impl Counted {
    pub const fn new() -> Counted {
        Counted {
            held: AtomicI64::new(0),
        }
    }

    /// Bytes allocated and not yet freed.
    pub fn held(&self) -> i64 {
        self.held.load(Relaxed)
    }

    fn add(&self, bytes: usize) {
        self.held.fetch_add(bytes as i64, Relaxed);
    }

    fn sub(&self, bytes: usize) {
        self.held.fetch_sub(bytes as i64, Relaxed);
    }
}

impl Default for Counted {
    fn default() -> Counted {
        Counted::new()
    }
}

// SAFETY: each method returns what mimalloc returns for the same arguments,
// so the contract of `GlobalAlloc` is mimalloc's; the counting is an atomic
// add and never allocates. The `unsafe` blocks inside only forward the
// caller's arguments, under the caller's own obligations.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let at = unsafe { MiMalloc.alloc(layout) };
        if !at.is_null() {
            self.add(layout.size());
        }
        at
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let at = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !at.is_null() {
            self.add(layout.size());
        }
        at
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { MiMalloc.dealloc(ptr, layout) };
        self.sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let at = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !at.is_null() {
            // The old block freed and the new one allocated; on failure the
            // old block stays, and so does its count.
            self.sub(layout.size());
            self.add(new_size);
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
        // SAFETY: each pointer is checked, and goes back with the layout it
        // was made with.
        #[allow(unsafe_code)]
        unsafe {
            let a = heap.alloc(small);
            let b = heap.alloc_zeroed(small);
            assert!(!a.is_null() && !b.is_null());
            assert!(
                std::slice::from_raw_parts(b, 100)
                    .iter()
                    .all(|&byte| byte == 0)
            );
            assert_eq!(heap.held(), 200);
            let a = heap.realloc(a, small, 300);
            assert!(!a.is_null());
            assert_eq!(heap.held(), 400);
            heap.dealloc(b, small);
            assert_eq!(heap.held(), 300);
            heap.dealloc(a, Layout::from_size_align(300, 8).unwrap());
        }
        assert_eq!(heap.held(), 0);
    }
}
