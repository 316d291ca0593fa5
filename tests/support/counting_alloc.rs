//! A global allocator that forwards to the system allocator and counts the
//! allocations made by the current thread, so that other threads (a loopback
//! server, tests running in parallel) do not show up in a count.
//!
//! A test binary installs it in its `main.rs` with `#[global_allocator] static
//! GLOBAL: support::counting_alloc::Counting = support::counting_alloc::Counting;`.
//! (`unsafe` is needed to implement `GlobalAlloc`; the crate itself forbids it.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The counting allocator.
pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: a thread being torn down may still allocate.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

/// Allocations made by this thread while running `f`.
pub fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// Allocations made by this thread while running `f` 1 000 times, after
/// 100 runs of warm-up (the first clock read sets quanta's clock up).
// Not every test binary that includes this file repeats its calls.
#[allow(dead_code)]
pub fn allocations_per_1000(mut f: impl FnMut()) -> u64 {
    for _ in 0..100 {
        f();
    }
    allocations_in(|| {
        for _ in 0..1_000 {
            f();
        }
    })
}

// SAFETY: every method forwards to `System` with its arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}
