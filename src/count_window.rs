//! The count-based window: the last `N` calls, however old (Resilience4j's
//! `COUNT_BASED` window, recloser's ring), and [`Tally`], the window the
//! rate conditions judge, time-based or count-based.
//!
//! A ring of `N` one-byte entries, allocated once when the breaker is built;
//! filing a call overwrites the oldest and adjusts the running totals, O(1)
//! and without allocation.

use crate::window::{Counts, Window};

const FAILED: u8 = 1;
const SLOW: u8 = 2;

#[derive(Clone, Debug)]
pub(crate) struct CountWindow {
    ring: Box<[u8]>,
    /// Where the next call goes.
    next: usize,
    /// Entries in use (up to the ring's length).
    len: usize,
    totals: Counts,
}

impl CountWindow {
    /// A window over the last `n` calls (`n` at least 1).
    pub(crate) fn new(n: u32) -> Self {
        CountWindow {
            ring: vec![0; n.max(1) as usize].into_boxed_slice(),
            next: 0,
            len: 0,
            totals: Counts::default(),
        }
    }

    /// Files one call, pushing out the oldest when full.
    pub(crate) fn record(&mut self, failed: bool, slow: bool) {
        let entry = (u8::from(failed) * FAILED) | (u8::from(slow) * SLOW);
        if self.len == self.ring.len() {
            let old = self.ring[self.next];
            self.totals.calls -= 1;
            self.totals.failures -= u64::from(old & FAILED != 0);
            self.totals.slow -= u64::from(old & SLOW != 0);
        } else {
            self.len += 1;
        }
        self.ring[self.next] = entry;
        self.next = (self.next + 1) % self.ring.len();
        self.totals.calls += 1;
        self.totals.failures += u64::from(failed);
        self.totals.slow += u64::from(slow);
    }

    pub(crate) fn totals(&self) -> Counts {
        self.totals
    }

    pub(crate) fn clear(&mut self) {
        self.next = 0;
        self.len = 0;
        self.totals = Counts::default();
    }
}

/// The calls the window conditions judge: a sliding time window, or the
/// last `N` calls.
#[derive(Clone, Debug)]
// One per breaker, built once and never moved: boxing the time window would
// only add a pointer chase to every record.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Tally {
    Time(Window),
    Count(CountWindow),
}

impl Tally {
    /// Files one call at `now`.
    #[inline]
    pub(crate) fn record(&mut self, now: u64, failed: bool, slow: bool) {
        match self {
            Tally::Time(w) => w.record(now, failed, slow),
            Tally::Count(w) => w.record(failed, slow),
        }
    }

    /// Files `n` successes counted without the lock (in the head bucket of
    /// a time window; one by one in a count window).
    pub(crate) fn absorb_successes(&mut self, n: u64) {
        match self {
            Tally::Time(w) => w.absorb_successes(n),
            Tally::Count(w) => {
                let fill = n.min(w.ring.len() as u64);
                (0..fill).for_each(|_| w.record(false, false));
            }
        }
    }

    /// Until when a success may be filed without sliding: the end of the
    /// time window's head bucket; a count window never slides with time.
    pub(crate) fn head_end(&self) -> u64 {
        match self {
            Tally::Time(w) => w.head_end(),
            Tally::Count(_) => u64::MAX,
        }
    }

    pub(crate) fn totals(&self) -> Counts {
        match self {
            Tally::Time(w) => w.totals(),
            Tally::Count(w) => w.totals(),
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            Tally::Time(w) => w.clear(),
            Tally::Count(w) => w.clear(),
        }
    }

    pub(crate) fn advance(&mut self, now: u64) {
        if let Tally::Time(w) = self {
            w.advance(now);
        }
    }

    /// Whether this is a count window.
    pub(crate) fn counts_calls(&self) -> bool {
        matches!(self, Tally::Count(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_call_leaves_when_the_ring_is_full() {
        let mut w = CountWindow::new(3);
        w.record(true, false);
        w.record(false, true);
        w.record(false, false);
        assert_eq!(
            w.totals(),
            Counts {
                calls: 3,
                failures: 1,
                slow: 1
            }
        );
        w.record(false, false);
        assert_eq!(w.totals().failures, 0, "the failure was pushed out");
        assert_eq!(w.totals().calls, 3);
        w.record(false, false);
        assert_eq!(w.totals().slow, 0, "then the slow call");
        w.clear();
        assert_eq!(w.totals(), Counts::default());
    }
}
