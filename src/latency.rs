//! Latency-primary tripping: open when a latency percentile stays above a
//! threshold for several consecutive windows.
//!
//! Latencies go into a fixed-size ring allocated when the breaker is built.
//! The percentile is computed once, when a window closes (on the first call
//! recorded after its end), by selection over a preallocated scratch copy:
//! never per call, never allocating.

use std::time::Duration;

use crate::events::Reason;

/// A latency-primary trip policy, given to
/// [`BreakerBuilder::latency_trip`](crate::BreakerBuilder::latency_trip).
///
/// The breaker opens when the `percentile` of call latencies in a window is
/// above `threshold` for `consecutive_windows` windows in a row, or, when
/// `error_rate` is set, when one window's failure rate reaches it.
///
/// A window that ends with fewer than `minimum_samples` calls is not judged
/// yet: it stays open until it has them. A slow dependency answers less
/// often (a caller with a bounded pool gets at most `pool / latency` answers
/// a second), so a policy that dropped short windows would trip later, or
/// never, the slower the dependency got. A window still short after
/// four window lengths is dropped, and
/// a whole window length with no call at all; either breaks a run of
/// breaching windows.
///
/// Latencies are known when calls end, so a step from 8 ms to 900 ms is
/// first seen ~900 ms after it happens; the trip follows `consecutive_windows`
/// windows later.
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `percentile` | 0.99 |
/// | `threshold` | 50 ms |
/// | `window` | 1 s |
/// | `consecutive_windows` | 3 |
/// | `error_rate` | 0.5 |
/// | `minimum_samples` | 10 |
/// | `capacity` | 256 latencies per window (the most recent are kept) |
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyTrip {
    pub(crate) percentile: f64,
    pub(crate) threshold: Duration,
    pub(crate) window: Duration,
    pub(crate) consecutive_windows: u32,
    pub(crate) error_rate: Option<f64>,
    pub(crate) minimum_samples: u32,
    pub(crate) capacity: usize,
}

impl Default for LatencyTrip {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyTrip {
    /// How many window lengths a window with too few calls may stay open.
    pub(crate) const MAX_WINDOW_SPAN: u32 = 4;

    /// The policy with its defaults.
    pub const fn new() -> Self {
        LatencyTrip {
            percentile: 0.99,
            threshold: Duration::from_millis(50),
            window: Duration::from_secs(1),
            consecutive_windows: 3,
            error_rate: Some(0.5),
            minimum_samples: 10,
            capacity: 256,
        }
    }

    /// The percentile to watch, in `(0, 1]` (0.99 for P99).
    pub fn percentile(mut self, p: f64) -> Self {
        self.percentile = p;
        self
    }

    /// The latency above which a window breaches.
    pub fn threshold(mut self, d: Duration) -> Self {
        self.threshold = d;
        self
    }

    /// The length of one window.
    pub fn window(mut self, d: Duration) -> Self {
        self.window = d;
        self
    }

    /// Breaching windows in a row that open the breaker (K).
    pub fn consecutive_windows(mut self, k: u32) -> Self {
        self.consecutive_windows = k;
        self
    }

    /// A failure rate in `(0, 1]` that opens the breaker within one window,
    /// or `None` for latency only.
    pub fn error_rate(mut self, rate: impl Into<Option<f64>>) -> Self {
        self.error_rate = rate.into();
        self
    }

    /// Calls a window needs before it is judged; a window with fewer stays
    /// open until it has them (up to
    /// four window lengths).
    pub fn minimum_samples(mut self, n: u32) -> Self {
        self.minimum_samples = n;
        self
    }

    /// How many latencies one window keeps (the most recent).
    pub fn capacity(mut self, n: usize) -> Self {
        self.capacity = n;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), crate::ConfigError> {
        use crate::check::{check, check_rate};
        check_rate("latency_trip.percentile", self.percentile)?;
        check(
            "latency_trip.threshold",
            !self.threshold.is_zero(),
            "must be greater than zero",
            crate::duration::display(self.threshold),
        )?;
        check(
            "latency_trip.window",
            self.window >= Duration::from_millis(1),
            "must be at least 1 ms",
            crate::duration::display(self.window),
        )?;
        check(
            "latency_trip.consecutive_windows",
            self.consecutive_windows > 0,
            "must be at least 1",
            self.consecutive_windows,
        )?;
        if let Some(rate) = self.error_rate {
            check_rate("latency_trip.error_rate", rate)?;
        }
        check(
            "latency_trip.minimum_samples",
            self.minimum_samples > 0,
            "must be at least 1",
            self.minimum_samples,
        )?;
        check(
            "latency_trip.capacity",
            (1..=1 << 20).contains(&self.capacity),
            "must be between 1 and 1048576",
            self.capacity,
        )?;
        Ok(())
    }
}

/// The per-breaker state of the policy.
#[derive(Clone, Debug)]
pub(crate) struct LatencyWindow {
    policy: LatencyTrip,
    window_nanos: u64,
    started: u64,
    /// When the last call was recorded.
    last: u64,
    ring: Box<[u64]>,
    scratch: Box<[u64]>,
    len: usize,
    next: usize,
    /// 64-bit, so that no count saturates and the error rate stays true.
    calls: u64,
    failures: u64,
    breaches: u32,
    last_percentile: Option<Duration>,
}

impl LatencyWindow {
    pub(crate) fn new(policy: LatencyTrip, now: u64) -> Self {
        let cap = policy.capacity;
        LatencyWindow {
            window_nanos: policy.window.as_nanos().min(u64::MAX as u128) as u64,
            policy,
            started: now,
            last: now,
            ring: vec![0; cap].into_boxed_slice(),
            scratch: vec![0; cap].into_boxed_slice(),
            len: 0,
            next: 0,
            calls: 0,
            failures: 0,
            breaches: 0,
            last_percentile: None,
        }
    }

    /// The percentile of the last closed window that had enough samples.
    pub(crate) fn last_percentile(&self) -> Option<Duration> {
        self.last_percentile
    }

    /// Breaching windows in a row so far.
    pub(crate) fn breaches(&self) -> u32 {
        self.breaches
    }

    /// Records one call that ended at `now` after `elapsed` nanoseconds, and
    /// returns a trip reason if a window closed in breach of the policy.
    pub(crate) fn record(&mut self, now: u64, elapsed: u64, failed: bool) -> Option<Reason> {
        let reason = self.roll(now);
        self.ring[self.next] = elapsed;
        self.next = (self.next + 1) % self.ring.len();
        self.len = (self.len + 1).min(self.ring.len());
        self.calls = self.calls.wrapping_add(1);
        self.failures = self.failures.wrapping_add(u64::from(failed));
        self.last = now;
        reason
    }

    /// Starts afresh at `now` (after the breaker closes).
    pub(crate) fn clear(&mut self, now: u64) {
        self.started = now;
        self.last = now;
        self.len = 0;
        self.next = 0;
        self.calls = 0;
        self.failures = 0;
        self.breaches = 0;
    }

    /// Closes the current window if `now` is past its end and it can be
    /// judged, or has been open too long to wait any more.
    fn roll(&mut self, now: u64) -> Option<Reason> {
        let elapsed = now.saturating_sub(self.started);
        if elapsed < self.window_nanos {
            return None;
        }
        // A whole window length without a call breaks any run.
        let silent = now.saturating_sub(self.last) >= self.window_nanos;
        let max_span = self
            .window_nanos
            .saturating_mul(u64::from(LatencyTrip::MAX_WINDOW_SPAN));
        let reason = if self.calls >= u64::from(self.policy.minimum_samples) {
            self.close_window()
        } else if !silent && elapsed < max_span {
            // Too few calls to judge: keep collecting.
            return None;
        } else {
            self.breaches = 0;
            None
        };
        if silent {
            self.breaches = 0;
        }
        self.started = now - elapsed % self.window_nanos;
        self.len = 0;
        self.next = 0;
        self.calls = 0;
        self.failures = 0;
        reason
    }

    fn close_window(&mut self) -> Option<Reason> {
        debug_assert!(self.calls >= u64::from(self.policy.minimum_samples) && self.len > 0);
        // Computed whatever trips, so that the snapshot shows every judged
        // window's percentile.
        let observed = Duration::from_nanos(self.percentile());
        self.last_percentile = Some(observed);
        if let Some(limit) = self.policy.error_rate {
            let rate = self.failures as f64 / self.calls as f64;
            if rate >= limit {
                self.breaches = 0;
                return Some(Reason::WindowErrorRate {
                    rate,
                    calls: self.calls.min(u64::from(u32::MAX)) as u32,
                });
            }
        }
        if observed > self.policy.threshold {
            self.breaches += 1;
            if self.breaches >= self.policy.consecutive_windows {
                let consecutive_windows = self.breaches;
                self.breaches = 0;
                return Some(Reason::LatencyBreach {
                    observed,
                    consecutive_windows,
                });
            }
        } else {
            self.breaches = 0;
        }
        None
    }

    /// Nearest-rank percentile of the samples in the ring.
    fn percentile(&mut self) -> u64 {
        let n = self.len;
        let samples = &mut self.scratch[..n];
        samples.copy_from_slice(&self.ring[..n]);
        let rank = (self.policy.percentile * n as f64).ceil() as usize;
        let idx = rank.clamp(1, n) - 1;
        *samples.select_nth_unstable(idx).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn policy() -> LatencyTrip {
        LatencyTrip::new()
            .threshold(Duration::from_millis(50))
            .window(Duration::from_secs(1))
            .consecutive_windows(3)
            .minimum_samples(5)
    }

    fn fill(w: &mut LatencyWindow, start: u64, lat_ms: u64, n: u64) -> Option<Reason> {
        let mut out = None;
        for i in 0..n {
            if let Some(r) = w.record(start + i * MS, lat_ms * MS, false) {
                out = Some(r);
            }
        }
        out
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let mut w = LatencyWindow::new(policy().percentile(0.5), 0);
        for (i, v) in [5u64, 1, 4, 2, 3].into_iter().enumerate() {
            w.record(i as u64, v, false);
        }
        assert_eq!(w.percentile(), 3);
        let mut w = LatencyWindow::new(policy().percentile(0.99), 0);
        for v in 1..=100u64 {
            w.record(v, v, false);
        }
        assert_eq!(w.percentile(), 99);
    }

    #[test]
    fn trips_after_k_breaching_windows() {
        let mut w = LatencyWindow::new(policy(), 0);
        assert_eq!(fill(&mut w, 0, 100, 10), None);
        assert_eq!(fill(&mut w, 1_000 * MS, 100, 10), None, "window 1 closed");
        assert_eq!(w.breaches(), 1);
        assert_eq!(fill(&mut w, 2_000 * MS, 100, 10), None, "window 2 closed");
        assert_eq!(w.breaches(), 2);
        let r = fill(&mut w, 3_000 * MS, 100, 10).expect("window 3 trips");
        assert!(matches!(
            r,
            Reason::LatencyBreach {
                consecutive_windows: 3,
                ..
            }
        ));
        assert_eq!(w.last_percentile(), Some(Duration::from_millis(100)));
    }

    #[test]
    fn a_healthy_window_breaks_the_run() {
        let mut w = LatencyWindow::new(policy(), 0);
        fill(&mut w, 0, 100, 10);
        fill(&mut w, 1_000 * MS, 100, 10);
        fill(&mut w, 2_000 * MS, 5, 10);
        assert_eq!(w.breaches(), 2);
        fill(&mut w, 3_000 * MS, 100, 10);
        assert_eq!(w.breaches(), 0, "the healthy window reset the run");
    }

    #[test]
    fn a_short_window_stays_open_until_it_can_be_judged() {
        let mut w = LatencyWindow::new(policy(), 0);
        fill(&mut w, 0, 100, 4);
        // Past the window's end, but with four calls of five it is not
        // judged: this fifth call joins it.
        assert_eq!(w.record(1_000 * MS, 100 * MS, false), None);
        assert_eq!(w.last_percentile(), None);
        w.record(1_100 * MS, MS, false);
        assert_eq!(w.last_percentile(), Some(Duration::from_millis(100)));
        assert_eq!(w.breaches(), 1);
    }

    #[test]
    fn a_window_short_for_too_long_is_dropped_and_breaks_the_run() {
        let mut w = LatencyWindow::new(policy().minimum_samples(10), 0);
        fill(&mut w, 0, 100, 10);
        // One call every 900 ms: never a silent window, never ten calls in
        // four window lengths.
        for i in 1..=5 {
            w.record(i * 900 * MS, 100 * MS, false);
        }
        assert_eq!(w.breaches(), 1, "window 0 breached");
        w.record(5_400 * MS, 100 * MS, false);
        assert_eq!(w.breaches(), 0, "the short window was dropped");
    }

    #[test]
    fn a_whole_window_without_calls_breaks_the_run() {
        let mut w = LatencyWindow::new(policy(), 0);
        fill(&mut w, 0, 100, 10);
        fill(&mut w, 1_000 * MS, 100, 10);
        assert_eq!(w.breaches(), 1);
        w.record(2_500 * MS, 100 * MS, false);
        assert_eq!(w.breaches(), 0);
    }

    #[test]
    fn error_rate_trips_within_one_window() {
        let mut w = LatencyWindow::new(policy().error_rate(0.5), 0);
        for i in 0..10 {
            w.record(i * MS, MS, i % 2 == 0);
        }
        let r = w.record(1_000 * MS, MS, false).expect("error rate trips");
        assert!(matches!(r, Reason::WindowErrorRate { calls: 10, .. }));
        assert_eq!(
            w.last_percentile(),
            Some(Duration::from_millis(1)),
            "the window's percentile is recorded even when its error rate trips"
        );
    }

    #[test]
    fn the_ring_keeps_only_the_most_recent_latencies() {
        let mut w = LatencyWindow::new(policy().capacity(4).minimum_samples(1), 0);
        for v in [900, 900, 900, 1, 1, 1, 1] {
            w.record(0, v, false);
        }
        assert_eq!(w.percentile(), 1);
    }
}
