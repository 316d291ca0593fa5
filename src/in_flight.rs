//! The calls a closed breaker has admitted and not yet heard back from, with
//! when each started: the evidence of a dependency that has stopped
//! answering before any slow call returns (`stuck_call_threshold`,
//! `hung_call_duration`; `docs/design.md`, "Calls in flight").
//!
//! [`SLOTS`] words, allocated only for a breaker with one of those
//! settings. A word is empty (0) or holds one call: a present bit, the low
//! 15 bits of the closed period (the machine's generation) it was admitted
//! in, and the low 48 bits of its start in nanoseconds of the breaker's
//! clock. Ages are taken modulo 2^48 (78 hours), so a call out for longer
//! than that reads as young again; it has long been counted by then.
//!
//! - **claim** (a closed admission, with or without the lock): from a place
//!   picked from the start, the first empty word is compare-and-swapped
//!   from empty to the call's value. With every word held the call goes
//!   untracked: it counts in nothing here, and reports as any call does.
//!   Sixty-four calls at once are plenty to reach a threshold of at most
//!   64.
//! - **release** (under the breaker's lock, where the call's outcome or its
//!   cancellation is recorded): the word holding its value is found by
//!   plain loads from the claim's first place and stored empty. Nothing is
//!   kept on the permit: the value is its generation and start, which the
//!   permit holds anyway. Two calls of one period with the same start hold
//!   the same value and either may free either's word; they are alike to
//!   every count, unless one went untracked, when the count is one low
//!   until the other reports.
//! - **scan** (under the lock): the ages of the calls of the current
//!   period (from their start, or from the end of a maintenance window
//!   they were out through: time inside one counts for nothing), how many
//!   are past each mark, and when the next one crosses a mark; words of
//!   earlier periods (calls that never reported, or that claimed as the
//!   period ended) are emptied.
//!
//! Why plain accesses are exact for a release and a scan: only a claim
//! writes a word without the lock, and a claim only writes an empty one. A
//! word holding a call is written by the release of that call or by a scan
//! that empties it, both under the lock, so a release's load and store see
//! no other writer between them, and the lock orders every earlier release
//! and scan before them. A load that misses a racing claim reads the word
//! empty: that call started no earlier than the scan read the clock, and
//! the breaker scans again no later than one mark after
//! (`Breaker::scan_in_flight`). The words carry nothing but themselves and
//! every decision taken from them is taken under the lock, against the
//! machine's generation, so relaxed accesses suffice.
//! `tests/loom/in_flight.rs` checks claims, releases, scans and reclaims
//! under a model checker, with the lock.

use crate::sync::{AtomicU64, Ordering};

/// Calls tracked at once.
#[cfg(not(loom))]
pub(crate) const SLOTS: usize = 64;
/// Under the model checker, two: enough for a claim to find its first
/// choice taken, and for a stale word to stand in a claim's way.
#[cfg(loom)]
pub(crate) const SLOTS: usize = 2;

const PRESENT: u64 = 1 << 63;
const GENERATION_SHIFT: u32 = 48;
const GENERATION_MASK: u64 = (1 << 15) - 1;
const START_MASK: u64 = (1 << GENERATION_SHIFT) - 1;

/// A call's word: present, its period, its start.
#[inline(always)]
fn encode(generation: u64, start: u64) -> u64 {
    PRESENT | (generation & GENERATION_MASK) << GENERATION_SHIFT | start & START_MASK
}

/// The period a held word's call was admitted in (low 15 bits).
#[inline(always)]
fn generation_of(word: u64) -> u64 {
    (word >> GENERATION_SHIFT) & GENERATION_MASK
}

/// Where a call starting at `start` looks first: spread by its start, so
/// that calls at once rarely contend for a word.
#[inline(always)]
fn first(start: u64) -> usize {
    ((start ^ (start >> 7) ^ (start >> 13)) as usize) % SLOTS
}

/// The marks a scan counts calls past, in nanoseconds (`u64::MAX`: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Marks {
    /// `slow_call_duration`, with `stuck_call_threshold`.
    pub(crate) stuck: u64,
    /// `hung_call_duration`.
    pub(crate) hung: u64,
}

/// What a scan saw of the calls of one period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Calls tracked.
    pub(crate) tracked: u32,
    /// Calls in flight for longer than the stuck mark.
    pub(crate) stuck: u32,
    /// Calls in flight for longer than the hung mark.
    pub(crate) hung: u32,
    /// The first instant after the scan's at which a tracked call crosses
    /// a mark it had not crossed (`u64::MAX`: none will).
    pub(crate) next: u64,
}

/// The calls in flight of a closed breaker.
#[derive(Debug)]
pub(crate) struct InFlight {
    words: [AtomicU64; SLOTS],
    /// From when a closed admission scans the table: read and written only
    /// under the breaker's lock (an atomic only so that the table can be
    /// shared without one). 0 at first: the first closed admission scans.
    due: AtomicU64,
}

impl InFlight {
    pub(crate) fn new() -> InFlight {
        InFlight {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            due: AtomicU64::new(0),
        }
    }

    /// Under the lock: from when the next scan is due.
    pub(crate) fn due(&self) -> u64 {
        self.due.load(Ordering::Relaxed)
    }

    /// Under the lock: the next scan is due from `at`.
    pub(crate) fn set_due(&self, at: u64) {
        self.due.store(at, Ordering::Relaxed);
    }

    /// Tracks a call admitted in `generation` that started at `start`;
    /// whether a word was free for it.
    #[inline]
    pub(crate) fn claim(&self, generation: u64, start: u64) -> bool {
        let mine = encode(generation, start);
        let from = first(start);
        for k in 0..SLOTS {
            let word = &self.words[(from + k) % SLOTS];
            if word.load(Ordering::Relaxed) == 0
                && word
                    .compare_exchange(0, mine, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
        }
        false
    }

    /// Under the lock: stops tracking the call admitted in `generation`
    /// that started at `start`, if a word still holds it.
    #[inline]
    pub(crate) fn release(&self, generation: u64, start: u64) {
        let mine = encode(generation, start);
        let from = first(start);
        for k in 0..SLOTS {
            let word = &self.words[(from + k) % SLOTS];
            // The call's own claim came before its report, and no one but
            // this release or a scan (both under the lock) writes a word
            // holding it: a plain load finds it, and a plain store frees it.
            if word.load(Ordering::Relaxed) == mine {
                word.store(0, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Under the lock: the calls of `generation` at `now` against `marks`,
    /// each aged from its start or from `from`, whichever is later (the
    /// end of a maintenance window it was out through, `now` inside one),
    /// emptying the words of other periods. A call that claimed after `now`
    /// was read is 0 old.
    pub(crate) fn scan(&self, generation: u64, now: u64, marks: Marks, from: u64) -> Scan {
        let most = now.saturating_sub(from);
        let current = generation & GENERATION_MASK;
        let mut scan = Scan {
            next: u64::MAX,
            ..Scan::default()
        };
        for word in &self.words {
            let w = word.load(Ordering::Relaxed);
            if w == 0 {
                continue;
            }
            if generation_of(w) != current {
                // Never reported, or claimed as its period ended: nobody
                // releases it in this period. No claim writes a held word.
                word.store(0, Ordering::Relaxed);
                continue;
            }
            let age = now.wrapping_sub(w) & START_MASK;
            // A start after `now` (claimed after the clock was read) wraps
            // to the top half: 0 old.
            let age = if age > START_MASK / 2 {
                0
            } else {
                age.min(most)
            };
            scan.tracked += 1;
            for (mark, count) in [(marks.stuck, &mut scan.stuck), (marks.hung, &mut scan.hung)] {
                if mark == u64::MAX {
                    continue;
                }
                if age > mark {
                    *count += 1;
                } else {
                    scan.next = scan.next.min(now.saturating_add(mark - age + 1));
                }
            }
        }
        scan
    }
}

/// The table, for the model checker's test only.
#[cfg(loom)]
#[allow(missing_docs)]
pub mod model {
    /// Calls tracked at once (two under the model checker).
    pub const SLOTS: usize = super::SLOTS;

    /// A breaker's table of calls in flight, with the breaker's lock that
    /// releases and scans take.
    #[derive(Debug)]
    pub struct InFlight(super::InFlight, loom::sync::Mutex<()>);

    /// What a scan saw: calls tracked, past the stuck mark, past the hung
    /// mark.
    pub type Seen = (u32, u32, u32);

    impl InFlight {
        pub fn new() -> InFlight {
            InFlight(super::InFlight::new(), loom::sync::Mutex::new(()))
        }

        /// A claim, without the lock.
        pub fn claim(&self, generation: u64, start: u64) -> bool {
            self.0.claim(generation, start)
        }

        /// A release, under the lock.
        pub fn release(&self, generation: u64, start: u64) {
            let _lock = self.1.lock().unwrap();
            self.0.release(generation, start);
        }

        /// A scan at `now` with a stuck mark of `stuck` and a hung one of
        /// `hung` nanoseconds, under the lock.
        pub fn scan(&self, generation: u64, now: u64, stuck: u64, hung: u64) -> Seen {
            let _lock = self.1.lock().unwrap();
            let s = self
                .0
                .scan(generation, now, super::Marks { stuck, hung }, 0);
            (s.tracked, s.stuck, s.hung)
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MARKS: Marks = Marks {
        stuck: 50,
        hung: 500,
    };

    #[test]
    fn counts_the_calls_of_its_period_past_each_mark_and_when_the_next_crosses() {
        let t = InFlight::new();
        assert!(t.claim(3, 100));
        assert!(t.claim(3, 160));
        assert!(t.claim(3, 100), "the same start takes another word");
        let s = t.scan(3, 200, MARKS, 0);
        assert_eq!((s.tracked, s.stuck, s.hung), (3, 2, 0));
        // The call of 160 crosses 50 at 211; those of 100 cross 500 at 601.
        assert_eq!(s.next, 211);
        t.release(3, 100);
        let s = t.scan(3, 700, MARKS, 0);
        assert_eq!((s.tracked, s.stuck, s.hung), (2, 2, 2));
        assert_eq!(s.next, u64::MAX, "every call is past every mark");
    }

    #[test]
    fn calls_are_aged_from_their_start_or_from_the_floor_whichever_is_later() {
        let t = InFlight::new();
        assert!(t.claim(3, 100));
        assert!(t.claim(3, 400));
        // Aged from 350: the call of 100 is 50 old (at the mark, which it
        // crosses at 401), the call of 400 is 0 old (crossing at 451).
        let s = t.scan(3, 400, MARKS, 350);
        assert_eq!((s.tracked, s.stuck, s.next), (2, 0, 401));
        let s = t.scan(3, 401, MARKS, 350);
        assert_eq!((s.stuck, s.hung, s.next), (1, 0, 451));
        // A floor at now: nobody is past anything.
        let s = t.scan(3, 2_000, MARKS, 2_000);
        assert_eq!((s.stuck, s.hung, s.next), (0, 0, 2_051));
    }

    #[test]
    fn a_release_frees_only_a_word_holding_its_own_value() {
        let t = InFlight::new();
        assert!(t.claim(3, 100));
        t.release(3, 101);
        t.release(2, 100);
        assert_eq!(t.scan(3, 100, MARKS, 0).tracked, 1);
        t.release(3, 100);
        assert_eq!(t.scan(3, 100, MARKS, 0).tracked, 0);
    }

    #[test]
    fn words_of_another_period_are_emptied_by_a_scan_and_then_free_to_claim() {
        let t = InFlight::new();
        for start in 0..SLOTS as u64 {
            assert!(t.claim(7, start));
        }
        assert!(!t.claim(7, 99), "every word held: untracked");
        assert!(!t.claim(8, 99), "a claim takes only an empty word");
        let s = t.scan(8, 100, MARKS, 0);
        assert_eq!(s.tracked, 0, "the period before's calls are not counted");
        assert!(t.claim(8, 99), "and their words are free");
        assert_eq!(t.scan(9, 100, MARKS, 0).tracked, 0, "all emptied");
        for start in 0..SLOTS as u64 {
            assert!(t.claim(9, start));
        }
    }

    #[test]
    fn ages_are_read_modulo_two_to_the_forty_eight() {
        let t = InFlight::new();
        let start = START_MASK - 10;
        assert!(t.claim(0, start));
        let s = t.scan(0, START_MASK + 1 + 100, MARKS, 0);
        assert_eq!((s.tracked, s.stuck), (1, 1), "111 old, past 50");
        let s = t.scan(0, start - 5, MARKS, 0);
        assert_eq!(s.stuck, 0, "a start after the scan's clock is 0 old");
        // Generations wrap at 2^15 too.
        assert!(t.claim(1 << 15, 7));
        assert_eq!(t.scan(0, 7, MARKS, 0).tracked, 2);
    }
}
