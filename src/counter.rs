//! Counters that many threads increment without sharing a cache line.
//!
//! Each thread adds to one of a few slots, each on a line of its own, chosen
//! once per thread; a reader sums the slots. Two threads on different slots
//! never move a line between their cores, which a single shared counter does
//! on every increment.
//!
//! [`Counter`] only counts. [`TaggedCounter`] counts quiet successes for the
//! gate (`src/gate.rs`): each slot carries the tag of the period it counts
//! for, and an increment succeeds only while the slot still carries the tag
//! the caller read from the gate.

use crate::sync::{AtomicU64, Ordering};

/// Slots per counter: enough to keep a handful of busy threads apart.
#[cfg(not(loom))]
const SLOTS: usize = 4;
/// Under the model checker, two slots: enough to check that every slot is
/// sealed, few enough to keep the state space small.
#[cfg(loom)]
const SLOTS: usize = 2;

#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

#[derive(Default)]
pub(crate) struct Counter([Slot; SLOTS]);

#[cfg(not(loom))]
mod thread_slot {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    }

    /// This thread's slot, handed out round-robin on first use.
    #[inline]
    pub(super) fn slot() -> usize {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        SLOT.try_with(|s| {
            let mut i = s.get();
            if i == usize::MAX {
                i = NEXT.fetch_add(1, Ordering::Relaxed) % super::SLOTS;
                s.set(i);
            }
            i
        })
        // A thread being torn down has no thread-locals left: any slot will do.
        .unwrap_or(0)
    }
}

#[cfg(loom)]
mod thread_slot {
    use std::cell::Cell;

    loom::thread_local! {
        static SLOT: Cell<usize> = Cell::new(0);
    }

    /// Under the model checker a thread picks its slot itself, so that a
    /// model is the same on every run.
    pub(super) fn slot() -> usize {
        SLOT.with(Cell::get) % super::SLOTS
    }

    /// Makes this thread count in slot `i`.
    pub(crate) fn use_slot(i: usize) {
        SLOT.with(|s| s.set(i));
    }
}

use thread_slot::slot;
#[cfg(loom)]
pub(crate) use thread_slot::use_slot;

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

/// Where a tagged slot keeps its tag; the count is below it.
const TAG_SHIFT: u32 = 32;
const COUNT_MASK: u64 = (1 << TAG_SHIFT) - 1;

fn tagged(tag: u32, count: u64) -> u64 {
    (u64::from(tag) << TAG_SHIFT) | count
}

/// A counter whose slots carry a tag: the period they count for.
///
/// - [`try_add`](Self::try_add) adds one only if this thread's slot carries
///   the given tag, in one compare-and-swap: an increment lands in the period
///   whose tag it was given, or not at all.
/// - [`take`](Self::take) empties the slots and keeps their tag.
/// - [`retag`](Self::retag) empties the slots and gives them a new tag: after
///   it, no increment for the old tag can succeed, and what it returns is
///   every increment that did.
///
/// A slot's count is 32 bits: a slot that is full refuses the increment (the
/// caller then takes the lock, which empties it), so nothing is lost and
/// nothing saturates.
pub(crate) struct TaggedCounter([Slot; SLOTS]);

impl TaggedCounter {
    pub(crate) fn new(tag: u32) -> Self {
        TaggedCounter(std::array::from_fn(|_| {
            Slot(AtomicU64::new(tagged(tag, 0)))
        }))
    }

    /// Adds one to this thread's slot if it carries `tag` and is not full.
    #[inline]
    pub(crate) fn try_add(&self, tag: u32) -> bool {
        let slot = &self.0[slot()].0;
        let mut current = slot.load(Ordering::Relaxed);
        loop {
            if current >> TAG_SHIFT != u64::from(tag) || current & COUNT_MASK == COUNT_MASK {
                return false;
            }
            match slot.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
    }

    /// Empties every slot, which all carry `tag`; returns what they held.
    pub(crate) fn take(&self, tag: u32) -> u64 {
        let mut n = 0;
        for s in &self.0 {
            if s.0.load(Ordering::Relaxed) & COUNT_MASK != 0 {
                n += s.0.swap(tagged(tag, 0), Ordering::Relaxed) & COUNT_MASK;
            }
        }
        n
    }

    /// Empties every slot and tags it `tag`; returns what they held.
    pub(crate) fn retag(&self, tag: u32) -> u64 {
        self.0
            .iter()
            .map(|s| s.0.swap(tagged(tag, 0), Ordering::Relaxed) & COUNT_MASK)
            .sum()
    }
}

#[cfg(all(test, not(loom)))]
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

    #[test]
    fn a_tagged_slot_counts_only_for_its_own_tag() {
        let c = TaggedCounter::new(7);
        assert!(c.try_add(7));
        assert!(c.try_add(7));
        assert!(!c.try_add(8), "another period's increment is refused");
        assert_eq!(c.take(7), 2);
        assert!(c.try_add(7), "taking keeps the tag");
        assert_eq!(c.retag(8), 1);
        assert!(!c.try_add(7), "after a retag the old tag is refused");
        assert!(c.try_add(8));
        assert_eq!(c.take(8), 1);
    }

    #[test]
    fn a_full_slot_refuses_rather_than_saturating() {
        let c = TaggedCounter::new(1);
        c.0[slot()]
            .0
            .store(tagged(1, COUNT_MASK - 1), Ordering::Relaxed);
        assert!(c.try_add(1));
        assert!(!c.try_add(1), "full: the caller must take the lock");
        assert_eq!(c.take(1), COUNT_MASK);
        assert!(c.try_add(1));
    }

    #[test]
    fn every_increment_lands_before_a_retag_or_is_refused() {
        let c = TaggedCounter::new(0);
        let counted = AtomicU64::new(0);
        let mut taken = 0;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50_000 {
                        if c.try_add(0) {
                            counted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            for _ in 0..1_000 {
                taken += c.take(0);
            }
        });
        taken += c.retag(1);
        assert_eq!(taken, counted.load(Ordering::Relaxed));
        assert_eq!(c.retag(2), 0, "nothing lands for a tag once it is gone");
    }
}
