//! Escalating open periods: min(max, base × multiplier^n), jitter within its
//! ratio, and back to base once the breaker closes.

use std::time::Duration;

use fusebox::{Breaker, State, Verdict};
use quanta::Mock;

use crate::support::breaker::*;

fn escalating(
    base: Duration,
    multiplier: f64,
    max: Duration,
    jitter: f64,
    seed: u64,
) -> (Breaker, std::sync::Arc<Mock>) {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(base)
        .backoff_multiplier(multiplier)
        .max_open_duration(max)
        .jitter(jitter)
        .jitter_seed(seed)
        .build()
        .unwrap();
    (b, mock)
}

/// Waits out the current open period to the nanosecond, checking that the
/// probe is refused just before its end, and returns the period's length.
fn wait_out(b: &Breaker, mock: &Mock) -> Duration {
    let period = b.snapshot().open_duration;
    assert_eq!(b.snapshot().retry_after, Some(period));
    if period > Duration::ZERO {
        mock.increment(period - NS);
        let rej = b.try_acquire().unwrap_err();
        assert_eq!(rej.state(), State::Open);
        assert_eq!(rej.retry_after(), Some(NS));
        mock.increment(NS);
    }
    period
}

/// Trips the breaker, then fails `probes` probes in a row; returns each open
/// period of that outage.
fn outage(b: &Breaker, mock: &Mock, probes: usize) -> Vec<Duration> {
    trip(b, 1);
    let mut periods = vec![wait_out(b, mock)];
    for _ in 0..probes {
        let probe = b
            .try_acquire()
            .expect("the probe goes at the end of the period");
        assert!(probe.is_probe());
        probe.record(Verdict::Failure);
        periods.push(wait_out(b, mock));
    }
    periods
}

fn secs(v: &[f64]) -> Vec<Duration> {
    v.iter().map(|&s| Duration::from_secs_f64(s)).collect()
}

#[test]
fn grows_by_the_multiplier_on_each_failed_probe_up_to_the_maximum() {
    let (b, mock) = escalating(SEC, 2.0, 10 * SEC, 0.0, 0);
    let periods = outage(&b, &mock, 6);
    assert_eq!(periods, secs(&[1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]));
    // One outage: one trip, six re-opens on six failed probes.
    let s = b.snapshot();
    assert_eq!((s.trips, s.reopens), (1, 6));
    assert_eq!((s.probes.failures, s.probes.successes), (6, 0));
    // Every open period was waited out to its end, and each probe went at
    // once: the outage was open time only.
    assert_eq!(s.state_times.open, periods.iter().sum::<Duration>());
    assert_eq!(s.state_times.half_open, Duration::ZERO);
}

#[test]
fn a_fractional_multiplier_grows_exactly() {
    let (b, mock) = escalating(2 * SEC, 1.5, 60 * SEC, 0.0, 0);
    let periods = outage(&b, &mock, 4);
    assert_eq!(periods, secs(&[2.0, 3.0, 4.5, 6.75, 10.125]));
}

#[test]
fn a_multiplier_of_one_keeps_the_period_constant() {
    let (b, mock) = escalating(3 * SEC, 1.0, 60 * SEC, 0.0, 0);
    assert_eq!(outage(&b, &mock, 4), vec![3 * SEC; 5]);
}

#[test]
fn an_expired_probe_escalates_like_a_failed_one() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(SEC)
        .max_probe_duration(SEC)
        .build()
        .unwrap();
    trip(&b, 1);
    for expected in [1u32, 2, 4, 8] {
        assert_eq!(wait_out(&b, &mock), expected * SEC);
        std::mem::forget(b.try_acquire().unwrap());
        mock.increment(SEC);
        assert_eq!(b.try_acquire().unwrap_err().state(), State::Open);
    }
}

#[test]
fn returns_to_base_once_closed() {
    let (b, mock) = escalating(SEC, 2.0, 60 * SEC, 0.0, 0);
    assert_eq!(outage(&b, &mock, 3), secs(&[1.0, 2.0, 4.0, 8.0]));
    b.try_acquire().unwrap().record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().open_duration, Duration::ZERO);
    assert_eq!(outage(&b, &mock, 2), secs(&[1.0, 2.0, 4.0]));
}

#[test]
fn jitter_shortens_each_period_by_at_most_its_ratio() {
    for (jitter, seed) in [(0.1, 1u64), (0.25, 42), (0.5, 7), (1.0, 99)] {
        let (b, mock) = escalating(SEC, 2.0, 30 * SEC, jitter, seed);
        let mut cut = Vec::new();
        for _ in 0..40 {
            let periods = outage(&b, &mock, 6);
            for (n, period) in periods.into_iter().enumerate() {
                let nominal = (SEC * 2u32.pow(n as u32)).min(30 * SEC);
                assert!(period <= nominal, "{period:?} above {nominal:?}");
                assert!(
                    period >= nominal.mul_f64(1.0 - jitter),
                    "{period:?} shortened by more than {jitter} of {nominal:?}"
                );
                cut.push(1.0 - period.as_secs_f64() / nominal.as_secs_f64());
            }
            b.try_acquire().unwrap().record(Verdict::Success);
        }
        // The draws spread over the allowed range rather than sitting at
        // one end of it.
        let lowest = cut.iter().copied().fold(f64::MAX, f64::min);
        let highest = cut.iter().copied().fold(f64::MIN, f64::max);
        assert!(
            lowest < jitter * 0.2,
            "jitter {jitter}: smallest cut {lowest}"
        );
        assert!(
            highest > jitter * 0.8,
            "jitter {jitter}: largest cut {highest}"
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_open_periods() {
    let run = |seed: u64| {
        let (b, mock) = escalating(SEC, 2.0, 30 * SEC, 0.5, seed);
        let mut all = Vec::new();
        for _ in 0..10 {
            all.extend(outage(&b, &mock, 4));
            b.try_acquire().unwrap().record(Verdict::Success);
        }
        all
    };
    let first = run(2024);
    assert_eq!(first, run(2024), "seeded jitter is exactly reproducible");
    assert_ne!(first, run(2025), "another seed draws other periods");
}

#[test]
fn jitter_never_lengthens_the_maximum() {
    let (b, mock) = escalating(SEC, 10.0, 5 * SEC, 0.3, 3);
    let periods = outage(&b, &mock, 20);
    assert!(periods.iter().all(|&p| p <= 5 * SEC));
    assert!(periods[2..].iter().all(|&p| p >= (5 * SEC).mul_f64(0.7)));
}

#[test]
fn a_throttle_longer_than_max_open_duration_is_cut_to_it() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .classifier(fusebox::Classifier::new(|_| {
            fusebox::Verdict::Throttled(Duration::MAX)
        }))
        .consecutive_failure_threshold(1)
        .open_duration(SEC)
        .max_open_duration(10 * SEC)
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    let s = b.snapshot();
    assert_eq!(
        s.retry_after,
        Some(10 * SEC),
        "max_open_duration is the ceiling"
    );
    assert_eq!(s.open_duration, 10 * SEC);
    mock.increment(10 * SEC);
    assert!(
        b.try_acquire().unwrap().is_probe(),
        "probing after the ceiling"
    );
}

#[test]
fn a_throttled_probe_reopens_for_no_longer_than_max_open_duration() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .classifier(fusebox::Classifier::new(|_| {
            fusebox::Verdict::Throttled(Duration::from_secs(3_600))
        }))
        .consecutive_failure_threshold(1)
        .open_duration(SEC)
        .max_open_duration(10 * SEC)
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    mock.increment(10 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().retry_after, Some(10 * SEC));
}
