//! The retry budget: retries at most a share of calls over a window.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::ConfigError;

/// Slots of the sliding window.
const SLOTS: usize = 10;

/// A cap on retries across every call that shares it: over a sliding
/// window, retries may be at most `ratio` of the calls plus
/// `min_retries`, as Finagle's `RetryBudget` and gRPC's retry throttling
/// do, so that a fleet does not multiply its load on a sick vendor.
///
/// Share one budget between the policies of one vendor (clones share it).
/// A retry the budget refuses ends the call with
/// [`GaveUp::Budget`](super::GaveUp::Budget).
///
/// ```
/// use fusebox::retry::RetryBudget;
/// use std::time::Duration;
///
/// // At most 10% of calls retried over 10 s, and 2 retries whatever the traffic.
/// let budget = RetryBudget::new(0.1, 2, Duration::from_secs(10))?;
/// assert!(budget.try_retry());
/// assert!(budget.try_retry());
/// assert!(!budget.try_retry()); // no calls yet: the floor is spent
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// # Cost
///
/// One lock round trip per call and per retry, and a clock read.
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    ratio: f64,
    min_retries: u32,
    slot_nanos: u64,
    clock: quanta::Clock,
    epoch: quanta::Instant,
    ring: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    /// The slot number (time / slot length) each slot counts for.
    slot_of: [u64; SLOTS],
    calls: [u64; SLOTS],
    retries: [u64; SLOTS],
}

impl Ring {
    /// The index of slot number `now`, cleared if it held an older one.
    fn at(&mut self, now: u64) -> usize {
        let i = (now % SLOTS as u64) as usize;
        if self.slot_of[i] != now {
            self.slot_of[i] = now;
            self.calls[i] = 0;
            self.retries[i] = 0;
        }
        i
    }

    /// Calls and retries within the window that ends at slot `now`.
    fn totals(&self, now: u64) -> (u64, u64) {
        (0..SLOTS)
            .filter(|&i| now.saturating_sub(self.slot_of[i]) < SLOTS as u64)
            .fold((0, 0), |(c, r), i| (c + self.calls[i], r + self.retries[i]))
    }
}

impl RetryBudget {
    /// A budget that allows, over the last `window`, retries up to `ratio`
    /// of the calls made plus `min_retries`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming `ratio` (not within [0, 1000]) or
    /// `window` (shorter than 10 ms, for ten slots of at least 1 ms).
    pub fn new(ratio: f64, min_retries: u32, window: Duration) -> Result<Self, ConfigError> {
        crate::check::check(
            "ratio",
            (0.0..=1000.0).contains(&ratio),
            "must be within [0, 1000]",
            ratio,
        )?;
        crate::check::check(
            "window",
            window >= Duration::from_millis(10),
            "must be at least 10ms",
            crate::duration::display(window),
        )?;
        let clock = quanta::Clock::new();
        Ok(RetryBudget {
            inner: Arc::new(Inner {
                ratio,
                min_retries,
                slot_nanos: crate::check::nanos(window / SLOTS as u32).max(1),
                epoch: clock.now(),
                clock,
                ring: Mutex::new(Ring::default()),
            }),
        })
    }

    /// The clock the window is read from: the clock half of
    /// `quanta::Clock::mock()` in tests. Set it before cloning the budget.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.epoch = clock.now();
            inner.clock = clock;
        }
        self
    }

    fn slot(&self) -> u64 {
        let elapsed = self
            .inner
            .clock
            .now()
            .saturating_duration_since(self.inner.epoch);
        // Slot numbers start at 1, so that an untouched slot (0) is never
        // taken for the current one.
        crate::check::nanos(elapsed) / self.inner.slot_nanos + 1
    }

    /// Counts one call (its first attempt).
    pub fn record_call(&self) {
        let now = self.slot();
        let mut ring = self.inner.ring.lock();
        let i = ring.at(now);
        ring.calls[i] += 1;
    }

    /// Takes one retry from the budget if it has one: `false` means the
    /// caller must not retry.
    pub fn try_retry(&self) -> bool {
        let now = self.slot();
        let mut ring = self.inner.ring.lock();
        let i = ring.at(now);
        let (calls, retries) = ring.totals(now);
        let allowed = self.inner.ratio * calls as f64 + f64::from(self.inner.min_retries);
        if (retries + 1) as f64 > allowed {
            return false;
        }
        ring.retries[i] += 1;
        true
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("ratio", &self.inner.ratio)
            .field("min_retries", &self.inner.min_retries)
            .field(
                "window",
                &Duration::from_nanos(self.inner.slot_nanos * SLOTS as u64),
            )
            .finish_non_exhaustive()
    }
}
