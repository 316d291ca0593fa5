//! The start times of an adaptive bulkhead's timed calls that are still in
//! flight: the evidence of a vendor that has stopped answering.
//!
//! [`SLOTS`] words, each free (0) or holding one call's start plus one, in
//! nanoseconds of the bulkhead's clock. Only the call that claimed a word
//! ever frees it, so a word has one owner at a time and no generation is
//! needed:
//!
//! - **claim** (a timed admission): from a place the caller picks, the first
//!   free word is compare-and-swapped from 0 to the call's start; with every
//!   word taken the call is timed but not tracked (its latency still counts
//!   when it returns);
//! - **free** (the call returns): its word is set to 0;
//! - **look** (a judgement, under the adaptive limit's lock): every held
//!   word's age. A word claimed after the look read the clock has age 0.
//!
//! `tests/loom_gate.rs` checks claims, frees and looks under a model
//! checker.

use crate::sync::{AtomicU64, Ordering};

/// Calls tracked at once.
#[cfg(not(loom))]
pub(crate) const SLOTS: usize = 32;
/// Under the model checker, two: enough for a claim to find its first
/// choice taken.
#[cfg(loom)]
pub(crate) const SLOTS: usize = 2;

/// The start times of the tracked calls.
#[derive(Debug)]
pub(crate) struct Tracked {
    words: [AtomicU64; SLOTS],
}

impl Tracked {
    pub(crate) fn new() -> Tracked {
        Tracked {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Claims a word for a call that started at `start`, trying the words
    /// from `from` on: its index, or `None` when every word is held.
    pub(crate) fn claim(&self, from: usize, start: u64) -> Option<usize> {
        for k in 0..SLOTS {
            let i = (from + k) % SLOTS;
            let word = &self.words[i];
            if word.load(Ordering::Relaxed) == 0
                && word
                    .compare_exchange(0, start + 1, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
            {
                return Some(i);
            }
        }
        None
    }

    /// Frees word `i`, which the caller claimed.
    pub(crate) fn free(&self, i: usize) {
        self.words[i].store(0, Ordering::Release);
    }

    /// Writes the age at `now` of every tracked call into `ages`, and
    /// returns how many there are.
    pub(crate) fn ages(&self, now: u64, ages: &mut [u64; SLOTS]) -> usize {
        let mut n = 0;
        for word in &self.words {
            let w = word.load(Ordering::Acquire);
            if w != 0 {
                ages[n] = now.saturating_sub(w - 1);
                n += 1;
            }
        }
        n
    }
}

/// The table, for the model checker's test only.
#[cfg(loom)]
pub mod model {
    /// The table of timed calls.
    #[derive(Debug)]
    pub struct Tracked(super::Tracked);

    impl Tracked {
        /// Every word free.
        pub fn new() -> Tracked {
            Tracked(super::Tracked::new())
        }

        /// Claims a word for a call that started at `start`.
        pub fn claim(&self, from: usize, start: u64) -> Option<usize> {
            self.0.claim(from, start)
        }

        /// Frees word `i`.
        pub fn free(&self, i: usize) {
            self.0.free(i);
        }

        /// The ages of the tracked calls at `now`.
        pub fn ages(&self, now: u64) -> Vec<u64> {
            let mut ages = [0; super::SLOTS];
            let n = self.0.ages(now, &mut ages);
            ages[..n].to_vec()
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn claims_take_free_words_and_frees_give_them_back() {
        let t = Tracked::new();
        assert_eq!(t.claim(5, 100), Some(5));
        assert_eq!(t.claim(5, 200), Some(6), "the next free word");
        let mut ages = [0; SLOTS];
        assert_eq!(t.ages(1_000, &mut ages), 2);
        assert_eq!(&ages[..2], &[900, 800]);
        t.free(5);
        assert_eq!(t.ages(1_000, &mut ages), 1);
        assert_eq!(ages[0], 800);
        for i in 0..SLOTS - 1 {
            assert!(t.claim(i, 0).is_some());
        }
        assert_eq!(t.claim(0, 0), None, "every word held");
        // A call that started after the look read the clock is 0 old.
        assert_eq!(t.ages(150, &mut ages), SLOTS);
        assert!(ages.contains(&0));
    }
}
