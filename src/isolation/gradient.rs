//! The adaptive limit's arithmetic: each window of latencies is judged
//! against a baseline, and the limit is cut or grown.
//!
//! Pure: samples and times come in, the limit goes out. The lock, the
//! clock and the table of calls in flight live around it, in `adaptive.rs`.
//!
//! - A **window** gathers the latencies of the timed calls that returned
//!   since the last judgement. It is judged once it holds `min_samples`
//!   samples, each timed call still in flight counting as one, and spans at
//!   least twice the baseline (so that it holds calls that started in it)
//!   and at least a millisecond (so that calls of microseconds are not
//!   judged, nor timed, a million times a second).
//! - Its **latency** is the median of those samples. A call still in flight
//!   counts with its age: a latency it has at least, so a vendor that has
//!   stopped answering is judged slow while nothing returns, and the median
//!   of such samples is a latency half the calls have at least. One slow
//!   outlier does not move a median; half the calls do.
//! - The **baseline** is a moving average of the windows' latencies taken on
//!   their logarithms (a geometric mean), each window weighted by its span
//!   against `baseline_window`. It follows a latency that drifts over
//!   minutes (the time of day); five seconds of a vendor a hundred times
//!   slower move it by about half, not a hundredfold, with the default
//!   minute.
//! - The **gradient** is `tolerance × baseline ÷ latency`, the baseline
//!   rounded to the nanosecond as a snapshot shows it. The limit is a whole
//!   number of calls `L`, the one a snapshot shows, and the rule acts on it
//!   directly. At 1 or more the window is healthy, and `L` grows by
//!   `⌊L/2⌋`, at least one call, up to the ceiling. Below 1, `L` falls to
//!   `⌊L × gradient⌋` (so at least one call fewer), but never below
//!   `⌈L/2⌉` nor below the floor.

/// Returned latencies a window keeps; later ones in the same window are
/// counted, not kept.
pub(crate) const KEPT: usize = 64;

/// The least any sample is taken to be: 1 µs (a latency's logarithm must
/// be finite).
const LEAST: u64 = 1_000;

/// The least a window spans, in nanoseconds: 1 ms.
const MIN_SPAN: u64 = 1_000_000;

/// The settings the arithmetic reads, checked by the builder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Settings {
    /// The least the limit falls to.
    pub(crate) floor: usize,
    /// The most it grows to, and where it starts.
    pub(crate) ceiling: usize,
    /// How far a window's latency may rise above the baseline before the
    /// limit is cut: at least 1.
    pub(crate) tolerance: f64,
    /// Samples a window needs to be judged, calls in flight included.
    pub(crate) min_samples: usize,
    /// The baseline's time constant, in nanoseconds.
    pub(crate) baseline_window: u64,
}

/// One judged window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Judged {
    /// The window's latency (the median of its samples), in nanoseconds.
    pub(crate) latency: u64,
    /// The baseline it was judged against (none for the first window,
    /// which sets it), in nanoseconds.
    pub(crate) baseline: Option<u64>,
    /// Timed calls that returned in the window, kept or not.
    pub(crate) returned: usize,
    /// Timed calls in flight when it was judged.
    pub(crate) in_flight: usize,
    /// How long the window lasted, in nanoseconds.
    pub(crate) span: u64,
    /// The limit before and after.
    pub(crate) from: usize,
    pub(crate) to: usize,
}

/// The limit and what it is judged on.
#[derive(Debug)]
pub(crate) struct Gradient {
    settings: Settings,
    /// In whole calls, from the floor to the ceiling: the limit published
    /// and shown, the one the rule acts on.
    limit: usize,
    /// The baseline's logarithm (of nanoseconds); none before the first
    /// window.
    ln_baseline: Option<f64>,
    /// When the window began.
    start: u64,
    /// Its samples: returned latencies, then (while judging) the ages of
    /// the calls in flight.
    samples: Vec<u64>,
    /// Timed calls that returned in it, kept or not.
    returned: usize,
}

impl Gradient {
    /// A limit at the ceiling, its first window beginning at `now`.
    /// `in_flight_capacity` is the most in-flight ages a judgement is
    /// given: the samples are allocated once, here.
    pub(crate) fn new(settings: Settings, now: u64, in_flight_capacity: usize) -> Gradient {
        Gradient {
            settings,
            limit: settings.ceiling,
            ln_baseline: None,
            start: now,
            samples: Vec::with_capacity(KEPT + in_flight_capacity),
            returned: 0,
        }
    }

    /// The limit, in whole calls: never below the floor, never above the
    /// ceiling.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The baseline, in nanoseconds, once the first window has set it.
    pub(crate) fn baseline(&self) -> Option<u64> {
        self.ln_baseline.map(|b| b.exp().round() as u64)
    }

    /// A timed call returned after `latency` nanoseconds.
    pub(crate) fn record(&mut self, latency: u64) {
        self.returned += 1;
        if self.samples.len() < KEPT {
            self.samples.push(latency.max(LEAST));
        }
    }

    /// Whether the window can be judged at `now`, with `in_flight` timed
    /// calls out.
    pub(crate) fn due(&self, now: u64, in_flight: usize) -> bool {
        self.samples.len() + in_flight >= self.settings.min_samples
            && now.saturating_sub(self.start) >= self.min_span()
    }

    /// The least a window spans: twice the baseline, at least 1 ms (none
    /// for the first window, which sets the baseline).
    pub(crate) fn min_span(&self) -> u64 {
        self.baseline()
            .map_or(0, |b| b.saturating_mul(2).max(MIN_SPAN))
    }

    /// Judges the window at `now` with the ages of the timed calls in
    /// flight (at most the capacity given to [`new`](Self::new)), moves
    /// the limit and the baseline, and begins the next window.
    pub(crate) fn judge(&mut self, now: u64, ages: &[u64]) -> Judged {
        let from = self.limit();
        let returned = self.returned;
        let room = self.samples.capacity() - self.samples.len();
        self.samples
            .extend(ages.iter().take(room).map(|&age| age.max(LEAST)));
        let n = self.samples.len();
        let latency = if n == 0 {
            // Nothing to judge: keep the baseline's view.
            self.baseline().unwrap_or(LEAST)
        } else {
            *self.samples.select_nth_unstable(n / 2).1
        };
        let span = now.saturating_sub(self.start);
        let judged_against = self.baseline();
        let ln_latency = (latency as f64).ln();
        self.ln_baseline = Some(match (self.ln_baseline, judged_against) {
            (Some(ln_baseline), Some(baseline)) => {
                let s = &self.settings;
                self.limit = next_limit(
                    self.limit,
                    s,
                    s.tolerance * baseline as f64 / latency as f64,
                );
                let weight = 1.0 - (-(span as f64) / s.baseline_window as f64).exp();
                ln_baseline + weight * (ln_latency - ln_baseline)
            }
            _ => ln_latency,
        });
        self.samples.clear();
        self.returned = 0;
        self.start = now;
        Judged {
            latency,
            baseline: judged_against,
            returned,
            in_flight: ages.len(),
            span,
            from,
            to: self.limit(),
        }
    }
}

/// The limit after a window of `gradient` judged at `limit`: grown by
/// half of it rounded down (at least one call) up to the ceiling, or cut
/// to `⌊limit × gradient⌋` but to no less than half of it rounded up, nor
/// than the floor.
fn next_limit(limit: usize, s: &Settings, gradient: f64) -> usize {
    if gradient >= 1.0 {
        limit.saturating_add((limit / 2).max(1)).min(s.ceiling)
    } else {
        // Below `limit`, since the gradient is below 1: a slow window always
        // cuts, down to what the half and the floor allow.
        let cut = (limit as f64 * gradient).floor() as usize;
        cut.max(limit.div_ceil(2)).max(s.floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn settings() -> Settings {
        Settings {
            floor: 2,
            ceiling: 16,
            tolerance: 1.5,
            min_samples: 10,
            baseline_window: 60_000 * MS,
        }
    }

    /// A gradient whose baseline is `latency`, set by one window at 0.
    fn settled(latency: u64) -> Gradient {
        let mut g = Gradient::new(settings(), 0, 32);
        for _ in 0..10 {
            g.record(latency);
        }
        let first = g.judge(100 * MS, &[]);
        assert_eq!(first.baseline, None, "the first window sets the baseline");
        assert_eq!((first.from, first.to), (16, 16), "and moves nothing");
        g
    }

    #[test]
    fn a_window_is_judged_at_its_samples_and_twice_the_baseline() {
        let mut g = settled(8 * MS);
        for _ in 0..9 {
            g.record(8 * MS);
        }
        assert!(!g.due(200 * MS, 0), "nine samples");
        assert!(g.due(200 * MS, 1), "nine returned and one in flight");
        g.record(8 * MS);
        assert!(!g.due(115 * MS, 0), "15 ms is under twice the baseline");
        assert!(g.due(116 * MS, 0));
    }

    #[test]
    fn a_healthy_window_grows_the_limit_by_half_up_to_the_ceiling() {
        let mut g = settled(8 * MS);
        g.limit = 2;
        let mut now = 100 * MS;
        let mut seen = vec![];
        for _ in 0..8 {
            for _ in 0..10 {
                g.record(9 * MS);
            }
            now += 100 * MS;
            seen.push(g.judge(now, &[]).to);
        }
        assert_eq!(seen, [3, 4, 6, 9, 13, 16, 16, 16]);
    }

    #[test]
    fn a_slow_window_cuts_by_the_gradient_and_no_more_than_half() {
        let mut g = settled(10 * MS);
        // 20 ms against 1.5 × 10 ms: a gradient of 0.75.
        for _ in 0..10 {
            g.record(20 * MS);
        }
        let j = g.judge(200 * MS, &[]);
        assert_eq!((j.from, j.to, j.latency), (16, 12, 20 * MS));
        // 100 ms: 0.15, cut to half.
        for _ in 0..10 {
            g.record(100 * MS);
        }
        assert_eq!(g.judge(400 * MS, &[]).to, 6);
        for _ in 0..10 {
            g.record(100 * MS);
        }
        assert_eq!(g.judge(600 * MS, &[]).to, 3);
        for _ in 0..10 {
            g.record(100 * MS);
        }
        assert_eq!(g.judge(800 * MS, &[]).to, 2, "never below the floor");
    }

    #[test]
    fn the_rule_acts_on_the_whole_limit_a_snapshot_shows() {
        let s = Settings {
            floor: 1,
            ..settings()
        };
        // Growth: half of the limit rounded down, at least one call.
        let grown: Vec<usize> = [1, 2, 3, 6, 9, 13, 15]
            .iter()
            .map(|&l| next_limit(l, &s, 1.0))
            .collect();
        assert_eq!(grown, [2, 3, 4, 9, 13, 16, 16]);
        // A cut: to half rounded up at most, one call at least.
        assert_eq!(next_limit(15, &s, 0.1), 8);
        assert_eq!(next_limit(15, &s, 0.6), 9, "⌊15 × 0.6⌋");
        assert_eq!(next_limit(16, &s, 0.99), 15);
        assert_eq!(next_limit(1, &s, 0.1), 1, "never below the floor");
        assert_eq!(next_limit(5, &Settings { floor: 4, ..s }, 0.1), 4);
    }

    #[test]
    fn within_the_tolerance_nothing_is_cut() {
        let mut g = settled(10 * MS);
        for _ in 0..10 {
            g.record(15 * MS);
        }
        assert_eq!(g.judge(200 * MS, &[]).to, 16);
    }

    #[test]
    fn one_slow_outlier_in_a_window_moves_nothing() {
        let mut g = settled(8 * MS);
        for _ in 0..9 {
            g.record(8 * MS);
        }
        g.record(900 * MS);
        let j = g.judge(200 * MS, &[]);
        assert_eq!((j.latency, j.to), (8 * MS, 16));
    }

    #[test]
    fn calls_in_flight_count_with_their_ages_when_nothing_returns() {
        let mut g = settled(8 * MS);
        // Nothing returned; ten calls out for 10 to 100 ms.
        let ages: Vec<u64> = (1..=10).map(|i| i * 10 * MS).collect();
        assert!(g.due(200 * MS, ages.len()));
        let j = g.judge(200 * MS, &ages);
        assert_eq!((j.returned, j.in_flight), (0, 10));
        assert_eq!(j.latency, 60 * MS, "the median of the ages");
        assert_eq!(j.to, 8, "cut by half");
    }

    #[test]
    fn the_baseline_follows_a_slow_drift_and_barely_moves_for_an_outage() {
        let mut g = settled(8 * MS);
        // Five seconds of 900 ms windows.
        let mut now = 100 * MS;
        for _ in 0..50 {
            for _ in 0..10 {
                g.record(900 * MS);
            }
            now += 100 * MS;
            g.judge(now, &[]);
        }
        let after = g.baseline().unwrap() as f64 / MS as f64;
        assert!((10.0..14.0).contains(&after), "{after} ms");
        assert_eq!(g.limit(), 2);
        // An hour of a latency drifting from 8 to 16 ms cuts nothing.
        let mut g = settled(8 * MS);
        let mut now = 100 * MS;
        for i in 0..36_000u64 {
            let latency = 8 * MS + 8 * MS * i / 36_000;
            for _ in 0..10 {
                g.record(latency);
            }
            now += 100 * MS;
            assert_eq!(g.judge(now, &[]).to, 16, "window {i}");
        }
    }

    #[test]
    fn a_window_with_more_returns_than_it_keeps_still_counts_them() {
        let mut g = settled(8 * MS);
        for _ in 0..1_000 {
            g.record(8 * MS);
        }
        let j = g.judge(200 * MS, &[1; 40]);
        assert_eq!((j.returned, j.in_flight), (1_000, 40));
        assert!(g.samples.capacity() >= KEPT + 32, "no reallocation");
    }
}
