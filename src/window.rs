//! The sliding time window: a ring of buckets with running totals.
//!
//! The window's span is cut into [`BUCKETS`] buckets of `width` nanoseconds.
//! An event is filed in the bucket of the instant it is recorded at; a bucket
//! is cleared (and its counts subtracted from the totals) once the whole span
//! lies after its end. The ring holds one bucket more than the span, for the
//! partly elapsed oldest one. Recording is O(1) amortised and allocates only
//! once in a window's life, if ever, when the ring widens (below).
//!
//! Because ageing happens a bucket at a time, an event counts for at least the
//! window's length and at most the window's length plus one bucket width
//! (a tenth of the window).
//!
//! The counts are exact: a bucket never saturates, so a bucket that ages
//! out subtracts exactly what it added, and the rates stay true however many
//! calls a bucket holds. The buckets hold 32-bit counts (12 bytes a bucket)
//! until one of them would pass 2^32 - 1; the ring is then widened to 64-bit
//! counts, boxed, for the rest of the window's life: one allocation, under
//! the breaker's lock, after some four billion calls in one bucket.

/// Number of buckets the span is cut into.
pub(crate) const BUCKETS: usize = 10;
/// Slots in the ring: the span's buckets plus the partly elapsed oldest one.
const SLOTS: usize = BUCKETS + 1;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
}

// 64-bit counts cannot overflow in practice (2^64 calls at one a nanosecond
// take 584 years); the wrapping operations only keep arithmetic panics out
// of the breaker. Every subtraction takes away what an addition put in.
impl Counts {
    fn add(&mut self, other: Counts) {
        self.calls = self.calls.wrapping_add(other.calls);
        self.failures = self.failures.wrapping_add(other.failures);
        self.slow = self.slow.wrapping_add(other.slow);
    }

    fn sub(&mut self, other: Counts) {
        self.calls = self.calls.wrapping_sub(other.calls);
        self.failures = self.failures.wrapping_sub(other.failures);
        self.slow = self.slow.wrapping_sub(other.slow);
    }
}

/// A bucket's counts while each fits in 32 bits.
#[derive(Clone, Copy, Debug, Default)]
struct Narrow {
    calls: u32,
    failures: u32,
    slow: u32,
}

impl Narrow {
    fn wide(self) -> Counts {
        Counts {
            calls: self.calls.into(),
            failures: self.failures.into(),
            slow: self.slow.into(),
        }
    }

    /// `self` plus `more`, if every count still fits in 32 bits.
    fn plus(self, more: Counts) -> Option<Narrow> {
        let add = |a: u32, b: u64| u32::try_from(b).ok().and_then(|b| a.checked_add(b));
        Some(Narrow {
            calls: add(self.calls, more.calls)?,
            failures: add(self.failures, more.failures)?,
            slow: add(self.slow, more.slow)?,
        })
    }
}

/// The buckets: 32-bit counts until a bucket would overflow them.
#[derive(Clone, Debug)]
enum Ring {
    Narrow([Narrow; SLOTS]),
    Wide(Box<[Counts; SLOTS]>),
}

impl Ring {
    /// Empties bucket `slot` and returns what it held.
    fn take(&mut self, slot: usize) -> Counts {
        match self {
            Ring::Narrow(b) => std::mem::take(&mut b[slot]).wide(),
            Ring::Wide(b) => std::mem::take(&mut b[slot]),
        }
    }

    /// Adds `more` to bucket `slot`, widening the ring if it must.
    fn add(&mut self, slot: usize, more: Counts) {
        if let Ring::Narrow(b) = self {
            match b[slot].plus(more) {
                Some(sum) => {
                    b[slot] = sum;
                    return;
                }
                None => *self = Ring::Wide(Box::new(b.map(Narrow::wide))),
            }
        }
        if let Ring::Wide(b) = self {
            b[slot].add(more);
        }
    }

    fn clear(&mut self) {
        match self {
            Ring::Narrow(b) => *b = [Narrow::default(); SLOTS],
            Ring::Wide(b) => **b = [Counts::default(); SLOTS],
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Window {
    width: u64,
    head: u64,
    /// Where the head bucket ends: saves a division on most records.
    head_end: u64,
    buckets: Ring,
    totals: Counts,
}

impl Window {
    /// A window of `span` nanoseconds (`span` must be at least [`BUCKETS`]).
    pub(crate) fn new(span: u64) -> Self {
        Window {
            width: (span / BUCKETS as u64).max(1),
            head: 0,
            head_end: (span / BUCKETS as u64).max(1),
            buckets: Ring::Narrow([Narrow::default(); SLOTS]),
            totals: Counts::default(),
        }
    }

    /// Slides the window so that it ends at `now`.
    #[inline]
    pub(crate) fn advance(&mut self, now: u64) {
        if now < self.head_end {
            return;
        }
        let epoch = now / self.width;
        if epoch <= self.head {
            return;
        }
        let steps = (epoch - self.head).min(SLOTS as u64);
        for step in 1..=steps {
            let slot = ((self.head + step) % SLOTS as u64) as usize;
            let old = self.buckets.take(slot);
            self.totals.sub(old);
        }
        self.head = epoch;
        self.head_end = epoch.saturating_add(1).saturating_mul(self.width);
    }

    /// Files one call at `now`.
    pub(crate) fn record(&mut self, now: u64, failed: bool, slow: bool) {
        self.advance(now);
        let one = Counts {
            calls: 1,
            failures: u64::from(failed),
            slow: u64::from(slow),
        };
        let slot = (self.head % SLOTS as u64) as usize;
        self.buckets.add(slot, one);
        self.totals.add(one);
    }

    /// Files `n` successes counted elsewhere in the head bucket: successes
    /// the breaker counted without its lock while the head bucket was current.
    pub(crate) fn absorb_successes(&mut self, n: u64) {
        let slot = (self.head % SLOTS as u64) as usize;
        let some = Counts {
            calls: n,
            failures: 0,
            slow: 0,
        };
        self.buckets.add(slot, some);
        self.totals.add(some);
    }

    /// Where the head bucket ends.
    pub(crate) fn head_end(&self) -> u64 {
        self.head_end
    }

    /// The counts currently inside the window (as of the last `advance`).
    pub(crate) fn totals(&self) -> Counts {
        self.totals
    }

    /// Empties the window.
    pub(crate) fn clear(&mut self) {
        self.buckets.clear();
        self.totals = Counts::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn events_age_out_after_one_span() {
        let mut w = Window::new(10 * SEC);
        w.record(0, true, false);
        w.record(5 * SEC, false, true);
        assert_eq!(
            w.totals(),
            Counts {
                calls: 2,
                failures: 1,
                slow: 1
            }
        );
        w.advance(10 * SEC);
        assert_eq!(w.totals().failures, 1, "one window old: still counted");
        w.advance(11 * SEC - 1);
        assert_eq!(w.totals().failures, 1, "its bucket is not wholly out yet");
        w.advance(11 * SEC);
        let only_the_slow_call = Counts {
            calls: 1,
            failures: 0,
            slow: 1,
        };
        assert_eq!(w.totals(), only_the_slow_call);
        w.advance(16 * SEC);
        assert_eq!(w.totals(), Counts::default());
    }

    #[test]
    fn a_long_gap_clears_everything() {
        let mut w = Window::new(10 * SEC);
        for i in 0..10 {
            w.record(i * SEC, true, false);
        }
        assert_eq!(w.totals().failures, 10);
        w.advance(1_000 * SEC);
        assert_eq!(w.totals(), Counts::default());
        w.record(1_000 * SEC, true, false);
        assert_eq!(w.totals().failures, 1);
    }

    #[test]
    fn a_bucket_of_more_than_four_billion_successes_ages_out_exactly() {
        let mut w = Window::new(10 * SEC);
        // More successes in one bucket than a 32-bit count holds.
        for _ in 0..2 {
            w.absorb_successes(u32::MAX.into());
        }
        w.advance(5 * SEC);
        for _ in 0..101 {
            w.record(5 * SEC, true, false);
        }
        w.advance(11 * SEC);
        assert_eq!(
            w.totals(),
            Counts {
                calls: 101,
                failures: 101,
                slow: 0
            },
            "the first bucket aged out and took exactly its own calls with it"
        );
        w.advance(16 * SEC);
        assert_eq!(w.totals(), Counts::default());
    }

    #[test]
    fn widening_a_bucket_keeps_what_the_others_hold() {
        let mut w = Window::new(10 * SEC);
        for _ in 0..3 {
            w.record(0, true, true);
        }
        w.advance(5 * SEC);
        w.absorb_successes(u64::from(u32::MAX) - 1);
        assert!(matches!(w.buckets, Ring::Narrow(_)), "still fits");
        w.absorb_successes(2);
        assert!(
            matches!(w.buckets, Ring::Wide(_)),
            "widened at the overflow"
        );
        w.advance(11 * SEC);
        assert_eq!(
            w.totals(),
            Counts {
                calls: u64::from(u32::MAX) + 1,
                failures: 0,
                slow: 0
            },
            "the first bucket's three calls went, and only they"
        );
        w.clear();
        w.record(12 * SEC, true, false);
        assert_eq!(w.totals().failures, 1);
    }

    #[test]
    fn the_ring_takes_twelve_bytes_a_bucket() {
        // docs/performance.md counts the window's bytes.
        assert!(std::mem::size_of::<Window>() <= 48 + 12 * SLOTS + 8);
    }

    #[test]
    fn a_clock_that_stands_still_does_not_slide() {
        let mut w = Window::new(10 * SEC);
        w.record(3 * SEC, true, false);
        w.advance(2 * SEC);
        assert_eq!(w.totals().failures, 1);
    }
}
