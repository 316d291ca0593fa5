//! The sliding time window: a ring of buckets with running totals.
//!
//! The window's span is cut into [`BUCKETS`] buckets of `width` nanoseconds.
//! An event is filed in the bucket of the instant it is recorded at; a bucket
//! is cleared (and its counts subtracted from the totals) once the whole span
//! lies after its end. The ring holds one bucket more than the span, for the
//! partly elapsed oldest one. Recording is O(1) amortised and never allocates.
//!
//! Because ageing happens a bucket at a time, an event counts for at least the
//! window's length and at most the window's length plus one bucket width
//! (a tenth of the window).
//!
//! The counts are 64-bit and exact: a bucket never saturates, so a bucket
//! that ages out subtracts exactly what it added, and the rates stay true
//! however many calls a bucket holds.

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

#[derive(Clone, Debug)]
pub(crate) struct Window {
    width: u64,
    head: u64,
    /// Where the head bucket ends: saves a division on most records.
    head_end: u64,
    buckets: [Counts; SLOTS],
    totals: Counts,
}

impl Window {
    /// A window of `span` nanoseconds (`span` must be at least [`BUCKETS`]).
    pub(crate) fn new(span: u64) -> Self {
        Window {
            width: (span / BUCKETS as u64).max(1),
            head: 0,
            head_end: (span / BUCKETS as u64).max(1),
            buckets: [Counts::default(); SLOTS],
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
            let old = std::mem::take(&mut self.buckets[slot]);
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
        self.buckets[slot].add(one);
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
        self.buckets[slot].add(some);
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
        self.buckets = [Counts::default(); SLOTS];
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
    fn a_clock_that_stands_still_does_not_slide() {
        let mut w = Window::new(10 * SEC);
        w.record(3 * SEC, true, false);
        w.advance(2 * SEC);
        assert_eq!(w.totals().failures, 1);
    }
}
