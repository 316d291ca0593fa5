//! Ramp-up after recovery: the arithmetic of admitting a rising fraction of
//! calls for a while after a breaker closes.
//!
//! Pure: everything takes `now` in the breaker's clock nanoseconds. The
//! machine holds a [`Ramping`] while a ramp runs and asks it about each call
//! under the breaker's lock.

use std::time::Duration;

use crate::check::check;

/// Parts per million: the unit of a fraction here, so that the admission
/// count is exact integer arithmetic.
const MILLION: u64 = 1_000_000;

/// A ramp-up after recovery: for `duration` after a breaker closes on a
/// successful probe, it admits a fraction of calls that rises in a straight
/// line from `start` to all of them, and refuses the rest without attempting
/// them (as fast as an open breaker, with [`State::Closed`] in the
/// [`Rejected`]). A failure during the ramp re-opens the breaker with the
/// escalated open period of the outage it was recovering from, not the base.
///
/// Without it, every thread waiting on a breaker hits a just-recovered
/// dependency at the instant it closes.
///
/// ```
/// use fusebox::{Breaker, CallPath, Classifier, RampUp};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder("corporate-actions")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .ramp_up(RampUp::linear(Duration::from_secs(30), 0.1))
///     .build()?;
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// [`State::Closed`]: crate::State::Closed
/// [`Rejected`]: crate::Rejected
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RampUp {
    pub(crate) duration: Duration,
    pub(crate) start: f64,
}

impl RampUp {
    /// A ramp that lasts `duration` and starts by admitting `start` of the
    /// calls, in `(0, 1)`: `build()` checks both, and refuses a `start`
    /// of 1 (all of the calls from the start: no ramp at all) with a
    /// [`ConfigError`](crate::ConfigError) naming `ramp_up`.
    pub const fn linear(duration: Duration, start: f64) -> Self {
        RampUp { duration, start }
    }

    /// The fraction of calls admitted `elapsed` into the ramp: `start`,
    /// rising linearly to 1 at `duration`.
    #[cfg(test)]
    fn fraction_at(&self, elapsed: Duration) -> f64 {
        self.ppm_at(elapsed.as_nanos().min(u128::from(u64::MAX)) as u64) as f64 / MILLION as f64
    }

    /// The fraction `elapsed` nanoseconds in, in parts per million.
    fn ppm_at(&self, elapsed: u64) -> u64 {
        let total = self.duration.as_nanos().min(u128::from(u64::MAX)) as u64;
        let start = (self.start.clamp(0.0, 1.0) * MILLION as f64) as u64;
        if elapsed >= total || total == 0 {
            return MILLION;
        }
        let rise = u128::from(MILLION - start) * u128::from(elapsed) / u128::from(total);
        start + rise as u64
    }

    pub(crate) fn validate(&self) -> Result<(), crate::ConfigError> {
        check(
            "ramp_up",
            !self.duration.is_zero(),
            "must last longer than zero",
            crate::duration::display(self.duration),
        )?;
        check(
            "ramp_up",
            self.start > 0.0 && self.start < 1.0,
            "must start with a fraction within (0, 1) (from 1 it never ramps)",
            self.start,
        )?;
        Ok(())
    }
}

/// A ramp in progress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ramping {
    ramp: RampUp,
    began: u64,
    /// The re-opens of the outage it recovers from: a failure during the
    /// ramp re-opens with one more.
    pub(crate) escalation: u32,
    /// Admission credit in parts per million: each call offered adds the
    /// current fraction, each call admitted spends a whole one.
    credit: u64,
}

impl Ramping {
    /// A ramp beginning at `now`, after an outage of `escalation` re-opens.
    /// The probe that closed the breaker was its first admitted call.
    pub(crate) fn begin(ramp: RampUp, now: u64, escalation: u32) -> Self {
        Ramping {
            ramp,
            began: now,
            escalation,
            credit: 0,
        }
    }

    /// Whether the ramp has ended by `now`.
    pub(crate) fn is_over(&self, now: u64) -> bool {
        self.ppm(now) >= MILLION
    }

    fn ppm(&self, now: u64) -> u64 {
        self.ramp.ppm_at(now.saturating_sub(self.began))
    }

    /// The fraction admitted at `now`.
    pub(crate) fn fraction(&self, now: u64) -> f64 {
        self.ppm(now) as f64 / MILLION as f64
    }

    /// Whether [`admit`](Self::admit) would admit a call offered at `now`,
    /// changing nothing.
    pub(crate) fn would_admit(&self, now: u64) -> bool {
        self.is_over(now) || self.credit.saturating_add(self.ppm(now)) >= MILLION
    }

    /// Decides on one call offered at `now`: over any run of calls at one
    /// fraction, at most one more than that fraction of them is admitted,
    /// and at least one fewer.
    pub(crate) fn admit(&mut self, now: u64) -> bool {
        self.credit = self.credit.saturating_add(self.ppm(now));
        if self.credit >= MILLION {
            self.credit -= MILLION;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn the_fraction_rises_in_a_straight_line_to_all_calls() {
        let r = RampUp::linear(Duration::from_secs(10), 0.2);
        assert_eq!(r.fraction_at(Duration::ZERO), 0.2);
        assert_eq!(r.fraction_at(Duration::from_secs(5)), 0.6);
        assert_eq!(r.fraction_at(Duration::from_secs(10)), 1.0);
        assert_eq!(r.fraction_at(Duration::from_secs(99)), 1.0);
    }

    #[test]
    fn admits_the_fraction_of_the_calls_offered_at_one_instant() {
        let mut r = Ramping::begin(RampUp::linear(Duration::from_secs(10), 0.25), SEC, 0);
        let admitted = (0..1000).filter(|_| r.admit(SEC)).count();
        assert!((250..=251).contains(&admitted), "{admitted}");
        assert!(!r.is_over(SEC + 10 * SEC - 1));
        assert!(r.is_over(SEC + 10 * SEC));
    }

    #[test]
    fn the_probe_counts_as_the_first_admitted_call() {
        let mut r = Ramping::begin(RampUp::linear(Duration::from_secs(10), 0.25), 0, 3);
        let admitted: Vec<bool> = (0..8).map(|_| r.admit(0)).collect();
        assert_eq!(
            admitted,
            [false, false, false, true, false, false, false, true]
        );
        assert_eq!(r.escalation, 3);
    }
}
