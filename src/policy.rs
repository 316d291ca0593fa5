//! Trip and break policies given as functions: a trip predicate over the
//! window's counts (gobreaker's `ReadyToTrip`, failsafe's `FailurePolicy`),
//! an open-period function (Polly's `BreakDurationGenerator`), and a
//! half-open judged by a rate over a fixed number of probes (Resilience4j's
//! `permittedNumberOfCallsInHalfOpenState`).
//!
//! Each is a setting of [`BreakerBuilder`](crate::BreakerBuilder); the
//! machine calls them under the breaker's lock, so they must be quick and
//! must not call the breaker back.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The counts a [`TripPredicate`] judges, as of the call just recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowCounts {
    /// Calls in the window (successes and failures, not ignored ones).
    pub calls: u64,
    /// Failures in the window.
    pub failures: u64,
    /// Slow calls in the window.
    pub slow: u64,
    /// The current run of consecutive failures.
    pub consecutive_failures: u32,
    /// The current run of consecutive successes.
    pub consecutive_successes: u64,
}

impl WindowCounts {
    /// `failures / calls`, or 0 with no calls.
    pub fn failure_rate(&self) -> f64 {
        crate::snapshot::rate(self.failures, self.calls)
    }
}

type TripFn = dyn Fn(&WindowCounts) -> bool + Send + Sync;

/// A named condition over the window's counts that opens the breaker when
/// it returns `true`: gobreaker's `ReadyToTrip`. Judged after every
/// recorded call, besides the built-in conditions (which go first); its
/// name is in [`Reason::TripPredicate`](crate::Reason::TripPredicate).
///
/// It runs under the breaker's lock, on the thread that records the call:
/// keep it quick, and never call the breaker from it (that would
/// deadlock). A predicate that panics does not hold.
///
/// ```
/// use fusebox::{Breaker, CallPath, Classifier, State, TripPredicate, WindowCounts};
/// use std::time::Duration;
///
/// // gobreaker's classic: more than 5 calls, at least 60 % of them failed.
/// let p = TripPredicate::new("gobreaker-60%", |c: &WindowCounts| {
///     c.calls > 5 && c.failure_rate() >= 0.6
/// });
/// let breaker = Breaker::builder("vendor")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .failure_window(Duration::from_secs(60))
///     .trip_predicate(p)
///     .build()?;
/// let fail = || breaker.call(|| Err::<(), _>(std::io::Error::other("down")));
/// let _ = breaker.call(|| Ok::<_, std::io::Error>(()));
/// let _ = breaker.call(|| Ok::<_, std::io::Error>(()));
/// let _ = (fail(), fail(), fail());
/// assert_eq!(breaker.state(), State::Closed); // 5 calls: not more than 5
/// let _ = fail(); // 6 calls, 4 failed
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct TripPredicate {
    name: Arc<str>,
    f: Arc<TripFn>,
}

impl TripPredicate {
    /// A predicate called `name` (for the [`Reason`](crate::Reason) and the
    /// log line).
    pub fn new<F>(name: &str, f: F) -> Self
    where
        F: Fn(&WindowCounts) -> bool + Send + Sync + 'static,
    {
        TripPredicate {
            name: Arc::from(name),
            f: Arc::new(f),
        }
    }

    /// Whether it holds for `counts`.
    pub(crate) fn holds(&self, counts: &WindowCounts) -> bool {
        (self.f)(counts)
    }

    pub(crate) fn shared_name(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }
}

impl fmt::Debug for TripPredicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TripPredicate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What an [`OpenPeriod`] function is told when the breaker opens.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct OpenPeriodInput {
    /// Re-opens in this outage: 0 when a closed breaker trips, 1 after the
    /// first failed probe round, and so on.
    pub reopens: u32,
    /// The window's failure rate as the breaker opens, or `None` when no
    /// window condition is configured.
    pub failure_rate: Option<f64>,
    /// The previous open period of this outage (zero for its first).
    pub last_period: Duration,
}

type PeriodFn = dyn Fn(&OpenPeriodInput) -> Duration + Send + Sync;

/// A function that decides each open period, in place of the built-in
/// backoff (`open_duration`, `backoff_multiplier`, `jitter`): Polly's
/// `BreakDurationGenerator`. `max_open_duration` stays the ceiling, and a
/// dependency's `Verdict::Throttled` request still lengthens the period up
/// to it.
///
/// It runs under the breaker's lock, when the breaker opens and when a
/// snapshot predicts a re-open: keep it quick, and never call the breaker
/// from it (that would deadlock). If it panics, the built-in backoff gives
/// the period.
///
/// ```
/// use fusebox::{Breaker, CallPath, Classifier, OpenPeriod, OpenPeriodInput};
/// use std::time::Duration;
///
/// // 5 s, 10 s, 15 s, ... linear in the re-opens.
/// let linear = OpenPeriod::new(|i: &OpenPeriodInput| Duration::from_secs(5 * (u64::from(i.reopens) + 1)));
/// let breaker = Breaker::builder("vendor")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .consecutive_failure_threshold(1)
///     .open_period(linear)
///     .build()?;
/// let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("down")));
/// assert_eq!(breaker.snapshot().open_duration, Duration::from_secs(5));
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct OpenPeriod(Arc<PeriodFn>);

impl OpenPeriod {
    /// The function `f`.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&OpenPeriodInput) -> Duration + Send + Sync + 'static,
    {
        OpenPeriod(Arc::new(f))
    }

    /// The period `f` gives for `input`, before the ceiling.
    pub(crate) fn period(&self, input: &OpenPeriodInput) -> Duration {
        (self.0)(input)
    }
}

impl fmt::Debug for OpenPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpenPeriod(..)")
    }
}

/// Half-open judged by a rate: the breaker lets `probes` probes through
/// (`half_open_max_concurrent` at a time) and re-opens if their failure rate
/// reaches `failure_rate_threshold`, else closes; Resilience4j's
/// `permittedNumberOfCallsInHalfOpenState` with its failure rate. It
/// decides as soon as the rest of the probes cannot change the answer. A
/// slow probe counts as a failed one; an ignored probe does not count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HalfOpenRate {
    /// Probes judged together (at least 1).
    pub probes: u32,
    /// The failure rate, in `(0, 1]`, over those probes that re-opens it.
    pub failure_rate_threshold: f64,
}

/// The decision of a half-open round judged by a rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum RoundDecision {
    Undecided,
    Close,
    Reopen { rate: f64 },
}

impl HalfOpenRate {
    /// After `failures` failed and `successes` succeeded probes: decided,
    /// or not yet. Failures count against the full round of `probes`, so a
    /// round re-opens as soon as the rate is certain to be reached, and
    /// closes as soon as it is certain not to be.
    pub(crate) fn decide(&self, successes: u32, failures: u32) -> RoundDecision {
        let n = f64::from(self.probes);
        let worst = f64::from(self.probes.saturating_sub(successes)) / n;
        if f64::from(failures) / n >= self.failure_rate_threshold {
            RoundDecision::Reopen {
                rate: f64::from(failures) / f64::from((successes + failures).max(1)),
            }
        } else if worst < self.failure_rate_threshold {
            RoundDecision::Close
        } else {
            RoundDecision::Undecided
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_round_decides_as_soon_as_the_rest_cannot_change_it() {
        let r = HalfOpenRate {
            probes: 10,
            failure_rate_threshold: 0.5,
        };
        assert_eq!(r.decide(0, 4), RoundDecision::Undecided);
        assert_eq!(r.decide(5, 4), RoundDecision::Undecided);
        assert_eq!(
            r.decide(6, 0),
            RoundDecision::Close,
            "at most 4 of 10 can fail"
        );
        assert!(matches!(r.decide(1, 5), RoundDecision::Reopen { .. }));
    }
}
