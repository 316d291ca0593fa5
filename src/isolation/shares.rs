//! A bulkhead's calls in flight per lane and each lane's guaranteed share
//! of the limit, and the one compare-and-swap that admits a call.
//!
//! Two words of four 16-bit fields: one per lane (a bulkhead without lanes
//! uses the first) and, in the top field, their sum:
//!
//! - **counts**: the calls each lane has in flight, and in all;
//! - **guarantees**: the slots each lane is guaranteed, and the limit, their
//!   sum. The adaptive limit publishes a new word whenever it moves; a
//!   fixed limit publishes once.
//!
//! A call in lane `i` is admitted when the bulkhead as a whole holds fewer
//! calls than the limit (it may borrow a slot another lane is not using),
//! or when the lane holds fewer than its guarantee. Admission reads the
//! guarantees and compare-and-swaps the counts from the word it judged, so
//! each decision is made on one consistent view of every lane's calls; a
//! call adds one to its lane's field and to the total in the same word.
//! A guarantee is kept even when lanes that borrowed fill the limit: the
//! total in flight is then above the limit by at most the guarantees, for
//! as long as the borrowed calls are out. Calls are never preempted: when
//! the limit falls, the calls in flight stay, and the lanes above their new
//! guarantee are refused until enough of them return.
//!
//! The common case, a bulkhead under its limit, is decided on the two top
//! fields alone, with no arithmetic beyond a shift. A limit is at most
//! [`MAX_LIMIT`], so that the total (at most the limit, plus the
//! guarantees, plus one per lane for rounding) fits its 16 bits.
//! `tests/loom_gate.rs` checks admission and release under a model checker.

use crate::sync::{AtomicU64, Ordering};

/// The most lanes a bulkhead has: the fourth field is the total.
pub(crate) const MAX_LANES: usize = 3;

/// The largest limit, 2^14: the calls in flight (with guarantees kept over
/// borrowed slots, at most the limit, plus the guarantees, plus one per lane
/// for rounding) must fit a 16-bit field.
pub(crate) const MAX_LIMIT: usize = 16_384;

const FIELD: u32 = 16;
const MASK: u64 = (1 << FIELD) - 1;
const TOTAL: u32 = 3 * FIELD;

/// Lane `lane`'s field of `word`.
#[inline(always)]
pub(crate) fn field(word: u64, lane: usize) -> u64 {
    (word >> (FIELD * lane as u32)) & MASK
}

/// The total of `word`: the calls in flight, or the limit.
#[inline(always)]
pub(crate) fn total(word: u64) -> u64 {
    word >> TOTAL
}

/// One call in lane `lane`, as a count: one in its field and one in the
/// total.
#[inline(always)]
fn one(lane: usize) -> u64 {
    (1 << (FIELD * lane as u32)) | (1 << TOTAL)
}

/// The guarantees of a limit of `limit` shared by lanes with `shares`: each
/// lane but `shed_last` is guaranteed its share rounded down; `shed_last`
/// is guaranteed the rest, so that the guarantees add up to the limit and,
/// as the limit falls, the other lanes lose theirs first. Without lanes
/// (`shares` empty) the one field holds the limit.
pub(crate) fn guarantees(limit: usize, shares: &[f64], shed_last: usize) -> u64 {
    let limit = limit.min(MAX_LIMIT) as u64;
    if shares.is_empty() {
        return limit | limit << TOTAL;
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
    word | (limit - given) << (FIELD * shed_last as u32) | limit << TOTAL
}

/// Whether a call in lane `lane` is admitted with `counts` in flight under
/// `guarantees`.
#[inline(always)]
pub(crate) fn admits(counts: u64, guarantees: u64, lane: usize) -> bool {
    total(counts) < total(guarantees) || field(counts, lane) < field(guarantees, lane)
}

/// The two words as one admission saw them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Look {
    pub(crate) counts: u64,
    pub(crate) guarantees: u64,
}

impl Look {
    /// Whether a call in `lane` would be admitted.
    #[inline(always)]
    pub(crate) fn admits(&self, lane: usize) -> bool {
        admits(self.counts, self.guarantees, lane)
    }
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

    /// The two words as they are now.
    #[inline(always)]
    pub(crate) fn look(&self) -> Look {
        // A guarantee a moment old is as good as the current one: the
        // limit only says how many calls to let through now.
        Look {
            guarantees: self.guarantees.load(Ordering::Relaxed),
            counts: self.counts.load(Ordering::Relaxed),
        }
    }

    /// Takes a slot in `lane`: the calls then in flight and the guarantees
    /// it was admitted under, or the guarantees it was refused under.
    #[cfg(any(test, loom))]
    pub(crate) fn take(&self, lane: usize) -> Result<(u64, u64), u64> {
        self.take_from(lane, self.look())
    }

    /// Takes a slot in `lane`, judging first on `seen`, a look taken a
    /// moment ago (the compare-and-swap finds out if it is out of date):
    /// the calls then in flight and the guarantees it was admitted under,
    /// or the guarantees it was refused under.
    #[inline(always)]
    pub(crate) fn take_from(&self, lane: usize, seen: Look) -> Result<(u64, u64), u64> {
        let Look {
            guarantees,
            mut counts,
        } = seen;
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
    fn the_top_field_is_the_sum_of_the_lanes() {
        for limit in 1..200 {
            let g = guarantees(limit, &[0.5, 0.25, 0.25], 2);
            let f = fields(g);
            assert_eq!(f[0] + f[1] + f[2], limit as u64);
            assert_eq!(total(g), limit as u64);
        }
        let shares = Shares::new(guarantees(8, &[0.5, 0.25, 0.25], 0));
        for lane in [0, 1, 1, 2, 0] {
            shares.take(lane).unwrap();
        }
        assert_eq!(fields(shares.counts()), [2, 2, 1, 5]);
        shares.give_back(1);
        assert_eq!(fields(shares.counts()), [2, 1, 1, 4]);
        let most = 2 * MAX_LIMIT as u64 + MAX_LANES as u64;
        assert!(most <= MASK, "the total fits its field");
    }

    #[test]
    fn the_shed_last_lane_is_guaranteed_the_rest_and_keeps_the_limit_longest() {
        let shares = [0.8, 0.2];
        assert_eq!(fields(guarantees(16, &shares, 0)), [13, 3, 0, 16]);
        assert_eq!(fields(guarantees(4, &shares, 0)), [4, 0, 0, 4]);
        assert_eq!(fields(guarantees(1, &shares, 0)), [1, 0, 0, 1]);
        // Shed last the other way round: intraday gives first.
        assert_eq!(fields(guarantees(16, &shares, 1)), [12, 4, 0, 16]);
        assert_eq!(fields(guarantees(1, &shares, 1)), [0, 1, 0, 1]);
        // Shares under 1: the rest goes to the shed-last lane.
        assert_eq!(fields(guarantees(10, &[0.3, 0.3, 0.1], 2)), [3, 3, 4, 10]);
        assert_eq!(fields(guarantees(16, &[], 0)), [16, 0, 0, 16]);
    }

    #[test]
    fn a_lane_under_its_guarantee_is_admitted_even_when_borrowers_fill_the_limit() {
        let g = guarantees(4, &[0.5, 0.5], 0); // [2, 2]
        let counts = |a: u64, b: u64| a | b << 16 | (a + b) << TOTAL;
        // Lane 1 borrowed: it holds all four slots.
        assert!(admits(counts(0, 4), g, 0), "lane 0 has its two");
        assert!(
            !admits(counts(0, 4), g, 1),
            "lane 1 is over its share and the limit"
        );
        // Lane 0 holds one, lane 1 one: either may borrow.
        assert!(admits(counts(1, 1), g, 1));
        assert!(admits(counts(1, 1), g, 0));
        // At the limit, with each at its share: neither.
        assert!(!admits(counts(2, 2), g, 0));
        assert!(!admits(counts(2, 2), g, 1));
    }

    #[test]
    fn take_and_give_back_count_per_lane() {
        let g = guarantees(2, &[0.5, 0.5], 0);
        let shares = Shares::new(g);
        let counts = |a: u64, b: u64| a | b << 16 | (a + b) << TOTAL;
        assert_eq!(shares.take(1), Ok((counts(0, 1), g)));
        assert_eq!(
            shares.take(1),
            Ok((counts(0, 2), g)),
            "borrows lane 0's idle slot"
        );
        assert_eq!(
            shares.take(0),
            Ok((counts(1, 2), g)),
            "lane 0 keeps its guarantee"
        );
        assert_eq!(shares.take(0), Err(shares.guarantees()));
        assert!(!shares.look().admits(0) && !shares.look().admits(1));
        shares.give_back(1);
        shares.give_back(1);
        shares.give_back(0);
        assert_eq!(shares.counts(), 0);
    }
}
