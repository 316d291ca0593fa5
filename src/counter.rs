//! Counters that many threads increment without sharing a cache line.
//!
//! A breaker's counts that the hot path bumps without the lock live in a
//! cell per slot, each slot's cell on a line of 128 bytes of its own that
//! only that slot's thread writes in a call: the quiet successes (for the
//! gate, `src/gate.rs`), the refusals, and the calls admitted. A thread
//! counts in one slot, chosen once per thread for the whole process, and a
//! reader sums the slots. Two threads on different slots never move a line
//! between their cores, which a single shared counter does on every
//! increment.
//!
//! Every slot but the last belongs to **one thread at a time**: the first
//! threads that count each take one for as long as they live, and give it
//! back when they end, to the next thread that counts. The owner is the only
//! writer of its slot's refusals and admissions, so it adds with a plain load
//! and store, no read-modify-write. Threads beyond those share the last
//! slot, and add there with an atomic read-modify-write.
//!
//! The quiet successes are tagged with the period they count for, since the
//! lock side empties and re-tags them: an increment is one compare-and-swap
//! that succeeds only while the slot still carries the tag the caller read
//! from the gate, in every slot, owned or shared.

use crate::sync::{AtomicU64, Ordering};

/// Slots per breaker: one each for the first three counting threads, and
/// one that the others share.
#[cfg(not(loom))]
const SLOTS: usize = 4;
/// Under the model checker, two slots: enough to check that every slot is
/// sealed, few enough to keep the state space small.
#[cfg(loom)]
const SLOTS: usize = 2;
/// The slot that threads without one of their own share.
const SHARED: usize = SLOTS - 1;
/// A slot index is masked with this before use, which changes nothing (a
/// slot is always below `SLOTS`) but lets the compiler drop the bounds
/// check on the hot path.
const MASK: usize = SLOTS - 1;
const _: () = assert!(SLOTS.is_power_of_two());

/// One breaker's counts in one slot.
struct Cell {
    /// The tag (high 32 bits) and count (low 32 bits) of quiet successes.
    quiet: AtomicU64,
    refusals: AtomicU64,
    admitted: AtomicU64,
}

impl Cell {
    fn new(tag: u32) -> Cell {
        Cell {
            quiet: AtomicU64::new(tagged(tag, 0)),
            refusals: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
        }
    }
}

/// A cell on a line of its own, so that no two slots' writers share one.
#[repr(align(128))]
struct Line(Cell);

/// A breaker's cells, one per slot, each on that slot's line, held inline
/// by the breaker and freed with it. The cell for `slot` is `slot × 128`
/// bytes from the first, at a fixed offset from the breaker's shared state:
/// the hot path finds it with no pointer to load and no bounds to check.
struct Cells([Line; SLOTS]);

impl Cells {
    fn new(tag: u32) -> Cells {
        Cells(std::array::from_fn(|_| Line(Cell::new(tag))))
    }

    /// The cell for `slot`.
    #[inline(always)]
    fn get(&self, slot: usize) -> &Cell {
        &self.0[slot & MASK].0
    }

    /// The cells of every slot.
    fn iter(&self) -> impl Iterator<Item = &Cell> {
        self.0.iter().map(|l| &l.0)
    }
}

#[cfg(not(loom))]
mod thread_slot {
    use super::SHARED;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// No slot chosen yet.
    const UNSET: usize = usize::MAX;

    /// The slots not owned by a live thread, one bit each.
    static FREE: AtomicUsize = AtomicUsize::new((1 << SHARED) - 1);

    /// An owned slot, given back when the thread ends.
    struct Claim(Cell<usize>);

    impl Drop for Claim {
        fn drop(&mut self) {
            let i = self.0.replace(UNSET);
            if i != UNSET {
                // Whatever this thread counts from here on goes to the
                // shared slot; its owned slot's counts stay where they are.
                SLOT.with(|s| s.set(SHARED));
                // Release: the next owner's plain adds start from this
                // thread's last ones.
                FREE.fetch_or(1 << i, Ordering::Release);
            }
        }
    }

    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(UNSET) };
        static CLAIM: Claim = const { Claim(Cell::new(UNSET)) };
    }

    /// This thread's slot, and whether it owns it.
    #[inline(always)]
    pub(super) fn slot() -> (usize, bool) {
        let mut i = SLOT.with(Cell::get);
        if i == UNSET {
            i = choose();
        }
        (i, i != SHARED)
    }

    /// Takes a free slot for this thread, or the shared one.
    #[cold]
    fn choose() -> usize {
        let mut free = FREE.load(Ordering::Relaxed);
        let i = loop {
            if free == 0 {
                break SHARED;
            }
            let i = free.trailing_zeros() as usize;
            // Acquire: the last owner's counts are seen before adding to them.
            match FREE.compare_exchange_weak(
                free,
                free & !(1 << i),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break i,
                Err(now) => free = now,
            }
        };
        let i = if i == SHARED || CLAIM.try_with(|c| c.0.set(i)).is_ok() {
            i
        } else {
            // A thread being torn down cannot give a slot back: it shares.
            FREE.fetch_or(1 << i, Ordering::Release);
            SHARED
        };
        SLOT.with(|s| s.set(i));
        i
    }

    /// The slots owned by live threads, for the tests.
    #[cfg(test)]
    pub(super) fn owned() -> usize {
        ((1 << SHARED) - 1) & !FREE.load(Ordering::Relaxed)
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
    pub(super) fn slot() -> (usize, bool) {
        let i = SLOT.with(Cell::get) % super::SLOTS;
        (i, i != super::SHARED)
    }

    /// Makes this thread count in slot `i`.
    pub(crate) fn use_slot(i: usize) {
        SLOT.with(|s| s.set(i));
    }
}

use thread_slot::slot;
#[cfg(loom)]
pub(crate) use thread_slot::use_slot;

/// Where a tagged count keeps its tag; the count is below it.
const TAG_SHIFT: u32 = 32;
const COUNT_MASK: u64 = (1 << TAG_SHIFT) - 1;

fn tagged(tag: u32, count: u64) -> u64 {
    (u64::from(tag) << TAG_SHIFT) | count
}

/// Adds one to `a`: by a plain load and store in a slot this thread owns
/// (no other thread writes it), by a read-modify-write in the shared one.
#[inline(always)]
fn bump(a: &AtomicU64, owned: bool) {
    if owned {
        a.store(a.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    } else {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// A breaker's counts kept without the lock, a cell per slot.
///
/// - [`try_add_quiet`](Self::try_add_quiet) adds a quiet success only if
///   this thread's slot carries the given tag, in one compare-and-swap: an
///   increment lands in the period whose tag it was given, or not at all.
/// - [`take_quiet`](Self::take_quiet) empties the quiet counts and keeps
///   their tag.
/// - [`retag_quiet`](Self::retag_quiet) empties them and gives them a new
///   tag: after it, no increment for the old tag can succeed, and what it
///   returns is every increment that did.
/// - [`add_refusal`](Self::add_refusal) and
///   [`add_admitted`](Self::add_admitted) count; [`refusals`](Self::refusals)
///   and [`admitted`](Self::admitted) sum. Each slot only grows, so a later
///   sum is never smaller than an earlier one.
///
/// A slot's quiet count is 32 bits: a slot that is full refuses the
/// increment (the caller then takes the lock, which empties it), so nothing
/// is lost and nothing saturates.
pub(crate) struct PerThread(Cells);

impl PerThread {
    pub(crate) fn new(tag: u32) -> Self {
        PerThread(Cells::new(tag))
    }

    /// Adds one quiet success to this thread's slot if it carries `tag` and
    /// is not full.
    #[inline(always)]
    pub(crate) fn try_add_quiet(&self, tag: u32) -> bool {
        let q = &self.0.get(slot().0).quiet;
        let mut current = q.load(Ordering::Relaxed);
        loop {
            if current >> TAG_SHIFT != u64::from(tag) || current & COUNT_MASK == COUNT_MASK {
                return false;
            }
            match q.compare_exchange_weak(
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

    /// Empties every slot's quiet count, which all carry `tag`; returns what
    /// they held.
    pub(crate) fn take_quiet(&self, tag: u32) -> u64 {
        let mut n = 0;
        for l in self.0.iter() {
            if l.quiet.load(Ordering::Relaxed) & COUNT_MASK != 0 {
                n += l.quiet.swap(tagged(tag, 0), Ordering::Relaxed) & COUNT_MASK;
            }
        }
        n
    }

    /// Empties every slot's quiet count and tags it `tag`; returns what they
    /// held.
    pub(crate) fn retag_quiet(&self, tag: u32) -> u64 {
        self.0
            .iter()
            .map(|l| l.quiet.swap(tagged(tag, 0), Ordering::Relaxed) & COUNT_MASK)
            .sum()
    }

    /// Counts one refusal.
    #[inline(always)]
    pub(crate) fn add_refusal(&self) {
        let (i, owned) = slot();
        bump(&self.0.get(i).refusals, owned);
    }

    /// Counts one admitted call.
    #[inline(always)]
    pub(crate) fn add_admitted(&self) {
        let (i, owned) = slot();
        bump(&self.0.get(i).admitted, owned);
    }

    /// The refusals counted.
    pub(crate) fn refusals(&self) -> u64 {
        self.0
            .iter()
            .map(|l| l.refusals.load(Ordering::Relaxed))
            .sum()
    }

    /// The admitted calls counted.
    pub(crate) fn admitted(&self) -> u64 {
        self.0
            .iter()
            .map(|l| l.admitted.load(Ordering::Relaxed))
            .sum()
    }
}

/// One count that many threads add to, a line per slot, in the same slots
/// as [`PerThread`]: for counts outside a breaker that every call bumps (a
/// chain's answers per link).
#[cfg(feature = "chain")]
pub(crate) struct Counter([Slot; SLOTS]);

#[cfg(feature = "chain")]
#[repr(align(128))]
struct Slot(AtomicU64);

#[cfg(feature = "chain")]
impl Default for Counter {
    fn default() -> Self {
        Counter(std::array::from_fn(|_| Slot(AtomicU64::new(0))))
    }
}

#[cfg(feature = "chain")]
impl Counter {
    /// Adds one in this thread's slot.
    #[inline(always)]
    pub(crate) fn add_one(&self) {
        let (i, owned) = slot();
        bump(&self.0[i & MASK].0, owned);
    }

    /// The sum of the slots. Each slot only grows, so a later sum is never
    /// smaller than an earlier one.
    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn sums_what_every_thread_added_in_owned_and_shared_slots() {
        // More threads than slots, all alive at once: some share.
        let c = PerThread::new(0);
        let start = Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    for _ in 0..1_000 {
                        c.add_refusal();
                        c.add_admitted();
                    }
                });
            }
        });
        assert_eq!(c.refusals(), 8_000);
        assert_eq!(c.admitted(), 8_000);
    }

    #[test]
    fn two_live_threads_never_share_a_slot() {
        // Each pair of threads lives at the same time; threads of earlier
        // pairs have ended and given their slots back (the test harness's
        // other threads may hold some, so the pairs that find one free).
        for _ in 0..8 {
            let both = Barrier::new(2);
            let slots: Vec<(usize, bool)> = std::thread::scope(|s| {
                let a = s.spawn(|| {
                    let mine = slot();
                    both.wait();
                    mine
                });
                let b = s.spawn(|| {
                    let mine = slot();
                    both.wait();
                    mine
                });
                vec![a.join().unwrap(), b.join().unwrap()]
            });
            for (i, owned) in &slots {
                assert_eq!(*owned, *i != SHARED);
            }
            if slots.iter().all(|(_, owned)| *owned) {
                assert_ne!(slots[0].0, slots[1].0, "an owned slot has one thread");
            }
        }
    }

    #[test]
    fn an_ended_thread_gives_its_slot_back() {
        // Without giving back, the first threads of the process would keep
        // every owned slot, and every later thread would share.
        let owned = (0..32)
            .filter(|_| {
                std::thread::spawn(|| {
                    let (i, owned) = slot();
                    owned && thread_slot::owned() & (1 << i) != 0
                })
                .join()
                .unwrap()
            })
            .count();
        assert!(
            owned > 0,
            "no thread of 32, one after another, owned a slot"
        );
    }

    #[test]
    fn a_tagged_slot_counts_only_for_its_own_tag() {
        let c = PerThread::new(7);
        assert!(c.try_add_quiet(7));
        assert!(c.try_add_quiet(7));
        assert!(!c.try_add_quiet(8), "another period's increment is refused");
        assert_eq!(c.take_quiet(7), 2);
        assert!(c.try_add_quiet(7), "taking keeps the tag");
        assert_eq!(c.retag_quiet(8), 1);
        assert!(!c.try_add_quiet(7), "after a retag the old tag is refused");
        assert!(c.try_add_quiet(8));
        assert_eq!(c.take_quiet(8), 1);
    }

    #[test]
    fn a_full_slot_refuses_rather_than_saturating() {
        let c = PerThread::new(1);
        c.0.get(slot().0)
            .quiet
            .store(tagged(1, COUNT_MASK - 1), Ordering::Relaxed);
        assert!(c.try_add_quiet(1));
        assert!(!c.try_add_quiet(1), "full: the caller must take the lock");
        assert_eq!(c.take_quiet(1), COUNT_MASK);
        assert!(c.try_add_quiet(1));
    }

    #[test]
    fn every_increment_lands_before_a_retag_or_is_refused() {
        let c = PerThread::new(0);
        let counted = AtomicU64::new(0);
        let mut taken = 0;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50_000 {
                        if c.try_add_quiet(0) {
                            counted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            for _ in 0..1_000 {
                taken += c.take_quiet(0);
            }
        });
        taken += c.retag_quiet(1);
        assert_eq!(taken, counted.load(Ordering::Relaxed));
        assert_eq!(
            c.retag_quiet(2),
            0,
            "nothing lands for a tag once it is gone"
        );
    }
}
