//! A bulkhead's calls in flight per lane and each lane's guaranteed share
//! of the limit, and the one compare-and-swap that admits a call.
//!
//! Two words, each four 16-bit fields, one per lane (a bulkhead without
//! lanes uses the first):
//!
//! - **counts**: the calls each lane has in flight;
//! - **guarantees**: the slots each lane is guaranteed; the limit is their
//!   sum. The adaptive limit publishes a new word whenever it moves; a
//!   fixed limit publishes once.
//!
//! A call in lane `i` is admitted when the lane holds fewer calls than its
//! guarantee, or when the bulkhead as a whole holds fewer than the limit
//! (it borrows a slot another lane is not using). Admission reads the
//! guarantees and compare-and-swaps the counts from the word it judged, so
//! each decision is made on one consistent view of every lane's calls.
//! A guarantee is kept even when lanes that borrowed fill the limit: the
//! total in flight is then above the limit by at most the guarantees, for
//! as long as the borrowed calls are out. Calls are never preempted: when
//! the limit falls, the calls in flight stay, and the lanes above their new
//! guarantee are refused until enough of them return.
//!
//! Counts are 16-bit fields whose sum must fit 16 bits too ([`total`] adds
//! the four with one multiplication), so a limit is at most
//! [`MAX_LIMIT`], and the total in flight at most a little over twice that.
//! `tests/loom_gate.rs` checks admission and release under a model checker.

use crate::sync::{AtomicU64, Ordering};

/// The most lanes a bulkhead has.
pub(crate) const MAX_LANES: usize = 4;

/// The largest limit, 2^14: the calls in flight (with guarantees kept over
/// borrowed slots, at most the limit, plus the guarantees, plus one per lane
/// for rounding) must add up within a 16-bit field.
pub(crate) const MAX_LIMIT: usize = 16_384;

const FIELD: u32 = 16;
const MASK: u64 = (1 << FIELD) - 1;

/// Lane `lane`'s field of `word`.
#[inline(always)]
pub(crate) fn field(word: u64, lane: usize) -> u64 {
    (word >> (FIELD * lane as u32)) & MASK
}

/// The sum of the four fields of `word` (which must fit 16 bits): the
/// multiplication adds every field into the top one.
#[inline(always)]
pub(crate) fn total(word: u64) -> u64 {
    word.wrapping_mul(0x0001_0001_0001_0001) >> (3 * FIELD)
}

/// One call in lane `lane`, as a count.
#[inline(always)]
fn one(lane: usize) -> u64 {
    1 << (FIELD * lane as u32)
}

/// The guarantees of a limit of `limit` shared by lanes with `shares`: each
/// lane but `shed_last` is guaranteed its share rounded down; `shed_last`
/// is guaranteed the rest, so that the guarantees add up to the limit and,
/// as the limit falls, the other lanes lose theirs first. Without lanes
/// (`shares` empty) the one field holds the limit.
pub(crate) fn guarantees(limit: usize, shares: &[f64], shed_last: usize) -> u64 {
    let limit = limit.min(MAX_LIMIT) as u64;
    if shares.is_empty() {
        return limit;
    }
    let mut word = 0;
    let mut given = 0;
    for (lane, &share) in shares.iter().enumerate() {
        if lane != shed_last {
            // The share rounded down, but not below a whole number that
            // floating point misses by a hair (0.7 × 10 = 6.999...).
            let g = ((limit as f64 * share + 1e-9).floor() as u64).min(limit - given);
            given += g;
            word |= g << (FIELD * lane as u32);
        }
    }
    word | (limit - given) << (FIELD * shed_last as u32)
}

/// Whether a call in lane `lane` is admitted with `counts` in flight under
/// `guarantees`.
#[inline(always)]
pub(crate) fn admits(counts: u64, guarantees: u64, lane: usize) -> bool {
    field(counts, lane) < field(guarantees, lane) || total(counts) < total(guarantees)
}

/// The two words of a bulkhead.
#[derive(Debug)]
pub(crate) struct Shares {
    counts: AtomicU64,
    guarantees: AtomicU64,
}

impl Shares {
    /// No call in flight, with `guarantees`.
    pub(crate) fn new(guarantees: u64) -> Shares {
        Shares {
            counts: AtomicU64::new(0),
            guarantees: AtomicU64::new(guarantees),
        }
    }

    /// Takes a slot in `lane`: the calls then in flight and the guarantees
    /// it was admitted under, or the guarantees it was refused under.
    #[inline(always)]
    pub(crate) fn take(&self, lane: usize) -> Result<(u64, u64), u64> {
        // A guarantee a moment old is as good as the current one: the
        // limit only says how many calls to let through now.
        let guarantees = self.guarantees.load(Ordering::Relaxed);
        let mut counts = self.counts.load(Ordering::Relaxed);
        loop {
            if !admits(counts, guarantees, lane) {
                return Err(guarantees);
            }
            // SeqCst pairs with a release's load of the waiter count (see
            // `Bulkhead::release`).
            match self.counts.compare_exchange_weak(
                counts,
                counts + one(lane),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok((counts + one(lane), guarantees)),
                Err(now) => counts = now,
            }
        }
    }

    /// Gives a slot of `lane` back.
    #[inline(always)]
    pub(crate) fn give_back(&self, lane: usize) {
        self.counts.fetch_sub(one(lane), Ordering::SeqCst);
    }

    /// Whether a call in `lane` would be refused now.
    #[inline(always)]
    pub(crate) fn full(&self, lane: usize) -> bool {
        !admits(
            self.counts.load(Ordering::Relaxed),
            self.guarantees.load(Ordering::Relaxed),
            lane,
        )
    }

    /// The calls in flight, per lane.
    pub(crate) fn counts(&self) -> u64 {
        self.counts.load(Ordering::Relaxed)
    }

    /// The guarantees, per lane.
    pub(crate) fn guarantees(&self) -> u64 {
        self.guarantees.load(Ordering::Relaxed)
    }

    /// Publishes new guarantees (a new limit).
    pub(crate) fn publish(&self, guarantees: u64) {
        self.guarantees.store(guarantees, Ordering::Relaxed);
    }
}

/// The shares, for the model checker's test only.
#[cfg(loom)]
pub mod model {
    /// A bulkhead's two words.
    #[derive(Debug)]
    pub struct Shares(super::Shares);

    impl Shares {
        /// No call in flight, `limit` shared out by `shares`.
        pub fn new(limit: usize, shares: &[f64], shed_last: usize) -> Shares {
            Shares(super::Shares::new(super::guarantees(
                limit, shares, shed_last,
            )))
        }

        /// Takes a slot in `lane`: the calls then in flight, in all.
        pub fn take(&self, lane: usize) -> Option<u64> {
            self.0
                .take(lane)
                .ok()
                .map(|(counts, _)| super::total(counts))
        }

        /// Gives a slot of `lane` back.
        pub fn give_back(&self, lane: usize) {
            self.0.give_back(lane);
        }

        /// Publishes a new limit.
        pub fn publish(&self, limit: usize, shares: &[f64], shed_last: usize) {
            self.0.publish(super::guarantees(limit, shares, shed_last));
        }

        /// The calls in flight, in all.
        pub fn in_flight(&self) -> u64 {
            super::total(self.0.counts())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(word: u64) -> [u64; 4] {
        [0, 1, 2, 3].map(|l| field(word, l))
    }

    #[test]
    fn the_total_adds_the_four_fields() {
        let w = 3 | 5 << 16 | 7 << 32 | 11 << 48;
        assert_eq!(total(w), 26);
        assert_eq!(total(2 * MAX_LIMIT as u64), 2 * MAX_LIMIT as u64);
        let halves = (MAX_LIMIT as u64) | (MAX_LIMIT as u64) << 48;
        assert_eq!(total(halves), 2 * MAX_LIMIT as u64);
    }

    #[test]
    fn the_shed_last_lane_is_guaranteed_the_rest_and_keeps_the_limit_longest() {
        let shares = [0.8, 0.2];
        assert_eq!(fields(guarantees(16, &shares, 0)), [13, 3, 0, 0]);
        assert_eq!(fields(guarantees(4, &shares, 0)), [4, 0, 0, 0]);
        assert_eq!(fields(guarantees(1, &shares, 0)), [1, 0, 0, 0]);
        // Shed last the other way round: intraday gives first.
        assert_eq!(fields(guarantees(16, &shares, 1)), [12, 4, 0, 0]);
        assert_eq!(fields(guarantees(1, &shares, 1)), [0, 1, 0, 0]);
        // Shares under 1: the rest goes to the shed-last lane.
        assert_eq!(fields(guarantees(10, &[0.3, 0.3, 0.1], 2)), [3, 3, 4, 0]);
        for limit in 1..200 {
            let g = guarantees(limit, &[0.5, 0.25, 0.125, 0.125], 3);
            assert_eq!(total(g), limit as u64);
        }
        assert_eq!(guarantees(16, &[], 0), 16);
    }

    #[test]
    fn a_lane_under_its_guarantee_is_admitted_even_when_borrowers_fill_the_limit() {
        let g = guarantees(4, &[0.5, 0.5], 0); // [2, 2]
                                               // Lane 1 borrowed: it holds all four slots.
        let counts = 4 << 16;
        assert!(admits(counts, g, 0), "lane 0 has its two");
        assert!(
            !admits(counts, g, 1),
            "lane 1 is over its share and the limit"
        );
        // Lane 0 holds one, lane 1 one: either may borrow.
        assert!(admits(1 | 1 << 16, g, 1));
        assert!(admits(1 | 1 << 16, g, 0));
        // At the limit, with each at its share: neither.
        assert!(!admits(2 | 2 << 16, g, 0));
        assert!(!admits(2 | 2 << 16, g, 1));
    }

    #[test]
    fn take_and_give_back_count_per_lane() {
        let g = guarantees(2, &[0.5, 0.5], 0);
        let shares = Shares::new(g);
        assert_eq!(shares.take(1), Ok((1 << 16, g)));
        assert_eq!(
            shares.take(1),
            Ok((2 << 16, g)),
            "borrows lane 0's idle slot"
        );
        assert_eq!(
            shares.take(0),
            Ok((1 | 2 << 16, g)),
            "lane 0 keeps its guarantee"
        );
        assert_eq!(shares.take(0), Err(shares.guarantees()));
        assert!(shares.full(0) && shares.full(1));
        shares.give_back(1);
        shares.give_back(1);
        shares.give_back(0);
        assert_eq!(shares.counts(), 0);
    }
}
