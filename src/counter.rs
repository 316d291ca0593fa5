//! A counter that many threads increment without sharing a cache line.
//!
//! Each thread adds to one of a few slots, each on a line of its own, chosen
//! once per thread; a reader sums the slots. Two threads on different slots
//! never move a line between their cores, which a single shared counter does
//! on every increment.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots per counter: enough to keep a handful of busy threads apart.
const SLOTS: usize = 4;

#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

#[derive(Default)]
pub(crate) struct Counter([Slot; SLOTS]);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot, handed out round-robin on first use.
#[inline]
fn slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    SLOT.try_with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
            s.set(i);
        }
        i
    })
    // A thread being torn down has no thread-locals left: any slot will do.
    .unwrap_or(0)
}

impl Counter {
    /// Adds one; returns this slot's count before the addition.
    #[inline]
    pub(crate) fn add_one(&self) -> u64 {
        self.0[slot()].0.fetch_add(1, Ordering::Relaxed)
    }

    /// The sum of the slots. Each slot only grows, so a later sum is never
    /// smaller than an earlier one.
    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_what_every_thread_added() {
        let c = Counter::default();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        c.add_one();
                    }
                });
            }
        });
        assert_eq!(c.sum(), 8_000);
    }
}
