//! A global allocator that forwards to the system allocator and keeps the
//! number of bytes currently allocated by the whole process, to measure
//! what a piece of code leaves behind.
//!
//! The count is process-wide, so each test of a binary that uses it holds
//! `one_at_a_time()` from start to end: then no other test allocates or
//! frees while it measures.
//!
//! A test binary installs it in its `main.rs` with `#[global_allocator]
//! static GLOBAL: support::live_bytes::Live = support::live_bytes::Live;`.
//! (`unsafe` is needed to implement `GlobalAlloc`; the crate itself forbids it.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The allocator.
pub struct Live;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Bytes allocated and not yet freed, process-wide.
pub fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// Held for the whole of a test, so that tests of one binary run one at a
/// time.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bytes that running `f` left allocated.
pub fn retained_by(f: impl FnOnce()) -> isize {
    let before = live();
    f();
    live() - before
}

fn add(n: usize) {
    LIVE.fetch_add(n as isize, Ordering::Relaxed);
}

fn sub(n: usize) {
    LIVE.fetch_sub(n as isize, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with its arguments unchanged.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            sub(layout.size());
            add(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }
}
