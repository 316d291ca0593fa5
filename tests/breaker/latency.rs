//! Latency-primary tripping through the public API, on quanta's mock clock.
//!
//! Each call's latency is made by advancing the mock inside the wrapped
//! closure, exactly as a slow dependency would hold the call. Windows are
//! aligned to the moment the breaker was built and close on the first call
//! recorded after their end.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use fusebox::{
    Breaker, BreakerBuilder, CallError, CallPath, Classifier, LatencyTrip, Reason, State,
    StateChange, Verdict,
};
use quanta::Mock;

const WINDOW: Duration = Duration::from_secs(1);
const THRESHOLD: Duration = Duration::from_millis(50);
const OPEN: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// P99 above 50 ms for 3 windows of 1 s, at least 5 calls a window, and no
/// other trip condition, so that only the policy under test can open it.
fn policy() -> LatencyTrip {
    LatencyTrip::new()
        .percentile(0.99)
        .threshold(THRESHOLD)
        .window(WINDOW)
        .consecutive_windows(3)
        .minimum_samples(5)
        .error_rate(None)
}

fn builder(clock: quanta::Clock, policy: LatencyTrip) -> BreakerBuilder {
    Breaker::builder("pricing")
        .call_path(CallPath::custom("pricing"))
        // A timeout is the vendor's failure; `InvalidData` stands for a bad
        // request of the caller's own, which says nothing about the vendor.
        .classifier(Classifier::new(|e| match e.downcast_ref::<io::Error>() {
            Some(e) if e.kind() == io::ErrorKind::InvalidData => Verdict::Ignore,
            _ => Verdict::Failure,
        }))
        .consecutive_failure_threshold(None)
        .failure_rate_threshold(None)
        .latency_trip(policy)
        .open_duration(OPEN)
        .backoff_multiplier(2.0)
        .max_open_duration(Duration::from_secs(300))
        .jitter(0.0)
        .clock(clock)
}

/// A breaker on a mock clock, with the time elapsed since it was built.
struct Sim {
    breaker: Breaker,
    mock: Arc<Mock>,
    now: Duration,
    changes: fusebox::Subscription,
}

impl Sim {
    fn new(policy: LatencyTrip) -> Sim {
        Sim::with(|clock| builder(clock, policy))
    }

    fn with(make: impl FnOnce(quanta::Clock) -> BreakerBuilder) -> Sim {
        let (clock, mock) = quanta::Clock::mock();
        let breaker = make(clock).build().expect("valid configuration");
        let changes = breaker.subscribe(64).unwrap();
        Sim {
            breaker,
            mock,
            now: Duration::ZERO,
            changes,
        }
    }

    /// One call that holds for `latency` and then succeeds.
    fn ok(&mut self, latency: Duration) -> Result<(), CallError<io::Error>> {
        self.call(latency, None)
    }

    /// One call that holds for `latency` and then fails with `kind`.
    fn fail(&mut self, latency: Duration, kind: io::ErrorKind) -> Result<(), CallError<io::Error>> {
        self.call(latency, Some(kind))
    }

    fn call(
        &mut self,
        latency: Duration,
        error: Option<io::ErrorKind>,
    ) -> Result<(), CallError<io::Error>> {
        let mock = Arc::clone(&self.mock);
        let result = self.breaker.call(|| {
            mock.increment(latency);
            match error {
                None => Ok(()),
                Some(kind) => Err(io::Error::from(kind)),
            }
        });
        if !matches!(result, Err(CallError::Rejected(_))) {
            self.now += latency;
        }
        result
    }

    /// Moves the clock forward to `at` (since the breaker was built).
    fn advance_to(&mut self, at: Duration) {
        assert!(at >= self.now, "the clock only moves forward");
        self.mock.increment(at - self.now);
        self.now = at;
    }

    /// Fills window number `n` (from 0) with `calls` calls of `latency`
    /// each, then moves to the start of window `n + 1`. The last window is
    /// only closed by the next recorded call.
    fn window(&mut self, n: u32, calls: u32, latency: Duration) {
        self.advance_to(WINDOW * n);
        for _ in 0..calls {
            self.ok(latency)
                .expect("a closed breaker lets calls through");
        }
        self.advance_to(WINDOW * (n + 1));
    }

    fn state(&self) -> State {
        self.breaker.state()
    }

    fn last_change(&self) -> Option<StateChange> {
        let mut last = None;
        while let Some(c) = self.changes.try_recv() {
            last = Some(c);
        }
        last
    }
}

#[test]
fn opens_on_the_first_call_after_the_kth_breaching_window() {
    let mut sim = Sim::new(policy());
    sim.window(0, 6, ms(80));
    sim.window(1, 6, ms(80));
    sim.window(2, 6, ms(80));
    assert_eq!(
        sim.state(),
        State::Closed,
        "the third window has ended, but nothing has closed it yet"
    );
    assert_eq!(sim.breaker.snapshot().latency_breaches, 2);

    // This call is the first recorded after window 2 ended: it runs (it was
    // admitted while closed), closes the window, and the breaker opens.
    sim.ok(ms(80)).expect("admitted while closed");
    assert_eq!(sim.state(), State::Open);
    let change = sim.last_change().expect("the trip was published");
    assert_eq!(change.from, State::Closed);
    assert_eq!(
        change.reason,
        Reason::LatencyBreach {
            observed: ms(80),
            consecutive_windows: 3
        }
    );

    let refused = sim.ok(ms(1)).expect_err("open breakers refuse");
    assert_eq!(
        refused.rejected().map(|r| r.state()),
        Some(State::Open),
        "nothing was attempted"
    );
}

#[test]
fn stays_closed_through_fewer_than_k_breaching_windows() {
    let mut sim = Sim::new(policy().consecutive_windows(4));
    for n in 0..3 {
        sim.window(n, 6, ms(150));
    }
    sim.ok(ms(1)).expect("closed");
    assert_eq!(sim.state(), State::Closed);
    assert_eq!(sim.breaker.snapshot().latency_breaches, 3);
}

#[test]
fn a_healthy_window_resets_the_run() {
    let mut sim = Sim::new(policy());
    sim.window(0, 6, ms(80));
    sim.window(1, 6, ms(80));
    sim.window(2, 6, ms(5));
    sim.window(3, 6, ms(80));
    sim.window(4, 6, ms(80));
    sim.ok(ms(1)).expect("closed");
    assert_eq!(
        sim.state(),
        State::Closed,
        "four breaching windows out of five, but never three in a row"
    );
    assert_eq!(sim.breaker.snapshot().latency_breaches, 2);

    sim.advance_to(WINDOW * 6);
    sim.ok(ms(1)).expect("closed");
    assert_eq!(
        sim.breaker.snapshot().latency_breaches,
        0,
        "window 5 had one call"
    );
}

#[test]
fn a_window_with_too_few_calls_stays_open_until_it_has_enough() {
    let mut sim = Sim::new(policy());
    sim.window(0, 6, ms(80));
    sim.window(1, 6, ms(80));
    // Four calls, one short of minimum_samples: a slow dependency answers
    // less often, and this window is judged once it has a fifth.
    sim.window(2, 4, ms(200));
    sim.ok(ms(80)).expect("closed");
    assert_eq!(sim.state(), State::Closed, "window 2 is still open");
    assert_eq!(sim.breaker.snapshot().latency_breaches, 2);

    sim.ok(ms(80)).expect("admitted while closed");
    assert_eq!(sim.state(), State::Open);
    assert_eq!(
        sim.last_change().map(|c| c.reason),
        Some(Reason::LatencyBreach {
            observed: ms(200),
            consecutive_windows: 3
        })
    );
}

#[test]
fn a_trickle_of_calls_that_never_fills_a_window_breaks_the_run() {
    let mut sim = Sim::new(policy().minimum_samples(10));
    sim.window(0, 10, ms(80));
    sim.window(1, 10, ms(80));
    // One call every 900 ms: no window length passes without a call, but
    // four window lengths hold fewer than ten.
    for i in 0..6 {
        sim.advance_to(WINDOW * 2 + ms(900) * i);
        sim.ok(ms(80)).expect("closed");
    }
    assert_eq!(sim.state(), State::Closed);
    assert_eq!(sim.breaker.snapshot().latency_breaches, 0);
}

#[test]
fn a_silent_window_breaks_the_run() {
    let mut sim = Sim::new(policy());
    sim.window(0, 6, ms(80));
    sim.window(1, 6, ms(80));
    // No call at all in window 2.
    sim.window(3, 6, ms(80));
    sim.ok(ms(1)).expect("closed");
    assert_eq!(sim.state(), State::Closed);
    assert_eq!(sim.breaker.snapshot().latency_breaches, 1);
}

#[test]
fn two_slow_calls_in_a_hundred_breach_p99_but_not_p50() {
    let traffic = |sim: &mut Sim| {
        for n in 0..3 {
            sim.advance_to(WINDOW * n);
            for i in 0..100 {
                let latency = if i < 2 { ms(300) } else { ms(2) };
                sim.ok(latency).expect("closed");
            }
        }
        sim.advance_to(WINDOW * 3);
        sim.ok(ms(2))
    };

    let mut p99 = Sim::new(policy());
    let _ = traffic(&mut p99);
    assert_eq!(p99.state(), State::Open);

    let mut p50 = Sim::new(policy().percentile(0.5));
    let _ = traffic(&mut p50);
    assert_eq!(p50.state(), State::Closed);
    assert_eq!(p50.breaker.snapshot().latency_percentile, Some(ms(2)));
}

#[test]
fn the_threshold_is_strict() {
    let mut sim = Sim::new(policy());
    for n in 0..4 {
        sim.window(n, 6, THRESHOLD);
    }
    sim.ok(ms(1)).expect("closed");
    assert_eq!(
        sim.state(),
        State::Closed,
        "at the threshold is not above it"
    );
    assert_eq!(sim.breaker.snapshot().latency_percentile, Some(THRESHOLD));
}

#[test]
fn the_window_length_and_k_are_configurable() {
    let policy = policy()
        .window(ms(100))
        .consecutive_windows(2)
        .minimum_samples(2);
    let mut sim = Sim::new(policy);
    sim.ok(ms(60)).expect("closed");
    sim.ok(ms(30)).expect("closed");
    sim.advance_to(ms(100));
    sim.ok(ms(60)).expect("closed");
    sim.ok(ms(30)).expect("closed");
    assert_eq!(sim.breaker.snapshot().latency_breaches, 1);
    sim.advance_to(ms(200));
    sim.ok(ms(1)).expect("admitted while closed");
    assert_eq!(sim.state(), State::Open, "two windows of 100 ms");
}

#[test]
fn a_window_error_rate_at_the_ratio_opens_it_without_waiting_for_k() {
    let mut sim = Sim::new(policy().error_rate(0.5));
    for i in 0..6 {
        if i % 2 == 0 {
            let _ = sim.fail(ms(5), io::ErrorKind::TimedOut);
        } else {
            sim.ok(ms(5)).expect("closed");
        }
    }
    sim.advance_to(WINDOW);
    assert_eq!(
        sim.state(),
        State::Closed,
        "the window has not been closed yet"
    );
    sim.ok(ms(5)).expect("admitted while closed");
    assert_eq!(sim.state(), State::Open);
    assert_eq!(
        sim.last_change().map(|c| c.reason),
        Some(Reason::WindowErrorRate {
            rate: 0.5,
            calls: 6
        })
    );
}

#[test]
fn a_window_error_rate_below_the_ratio_does_not_open_it() {
    let mut sim = Sim::new(policy().error_rate(0.5));
    for window in 0..5 {
        sim.advance_to(WINDOW * window);
        for i in 0..6 {
            if i < 2 {
                let _ = sim.fail(ms(5), io::ErrorKind::TimedOut);
            } else {
                sim.ok(ms(5)).expect("closed");
            }
        }
    }
    sim.advance_to(WINDOW * 5);
    sim.ok(ms(5)).expect("closed");
    assert_eq!(sim.state(), State::Closed, "a third of calls failed");
}

#[test]
fn without_an_error_rate_only_latency_opens_it() {
    let mut sim = Sim::new(policy().error_rate(None));
    for window in 0..4 {
        sim.advance_to(WINDOW * window);
        for _ in 0..6 {
            let _ = sim.fail(ms(5), io::ErrorKind::TimedOut);
        }
    }
    assert_eq!(sim.state(), State::Closed);
    assert_eq!(sim.breaker.snapshot().totals.failures, 24);
}

#[test]
fn ignored_errors_are_not_calls_of_the_window() {
    let mut sim = Sim::new(policy().error_rate(0.5));
    for _ in 0..6 {
        let _ = sim.fail(ms(100), io::ErrorKind::InvalidData);
    }
    sim.advance_to(WINDOW);
    sim.ok(ms(5)).expect("closed");
    let snap = sim.breaker.snapshot();
    assert_eq!(snap.totals.ignored, 6);
    assert_eq!(
        snap.latency_percentile, None,
        "six ignored calls left the window empty"
    );
}

#[test]
fn the_snapshot_shows_the_percentile_of_the_last_closed_window() {
    let mut sim = Sim::new(policy().threshold(Duration::from_secs(1)));
    assert_eq!(sim.breaker.snapshot().latency_percentile, None);

    // Window 0: 1 µs, 2 µs, ... 100 µs in shuffled order. Its P99 is 99 µs.
    for i in 0..100u64 {
        sim.ok(Duration::from_micros(1 + (i * 37) % 100))
            .expect("closed");
    }
    assert_eq!(
        sim.breaker.snapshot().latency_percentile,
        None,
        "computed when the window closes, not per call"
    );
    sim.advance_to(WINDOW);
    sim.ok(ms(3)).expect("closed");
    let p99 = Some(Duration::from_micros(99));
    assert_eq!(sim.breaker.snapshot().latency_percentile, p99);

    // Window 1 has too few calls to be judged: the value stays.
    sim.advance_to(WINDOW * 2);
    sim.ok(ms(3)).expect("closed");
    assert_eq!(sim.breaker.snapshot().latency_percentile, p99);

    // Window 3 is judged again.
    sim.window(3, 5, ms(7));
    sim.ok(ms(3)).expect("closed");
    assert_eq!(sim.breaker.snapshot().latency_percentile, Some(ms(7)));
}

/// Trips `sim` with three windows of 80 ms calls; returns when it is open.
fn trip(sim: &mut Sim, first_window: u32) {
    for n in first_window..first_window + 3 {
        sim.window(n, 6, ms(80));
    }
    let _ = sim.ok(ms(80));
    assert_eq!(sim.state(), State::Open);
}

#[test]
fn a_fast_probe_closes_it_and_the_run_starts_over() {
    let mut sim = Sim::new(policy());
    trip(&mut sim, 0);
    let opened_at = sim.now;

    sim.advance_to(opened_at + OPEN);
    sim.ok(ms(5)).expect("the probe is admitted");
    assert_eq!(sim.state(), State::Closed);
    assert!(matches!(
        sim.last_change().map(|c| c.reason),
        Some(Reason::ProbeSucceeded { .. })
    ));
    assert_eq!(sim.breaker.snapshot().latency_breaches, 0);

    // The windows restart when it closes: two breaching windows are not
    // enough, even though the last run before the trip was three long.
    let restart = sim.now;
    for n in 0..2 {
        sim.advance_to(restart + WINDOW * n);
        for _ in 0..6 {
            sim.ok(ms(80)).expect("closed");
        }
    }
    sim.advance_to(restart + WINDOW * 2);
    sim.ok(ms(80)).expect("closed");
    assert_eq!(sim.state(), State::Closed);
    assert_eq!(sim.breaker.snapshot().latency_breaches, 2);
}

#[test]
fn while_half_open_a_second_call_is_refused() {
    let mut sim = Sim::new(policy());
    trip(&mut sim, 0);
    sim.advance_to(sim.now + OPEN);

    let breaker = sim.breaker.clone();
    let mock = Arc::clone(&sim.mock);
    let probe = breaker.call(|| {
        mock.increment(ms(5));
        // While the probe is out, nothing else goes.
        let second = breaker.call(|| Ok::<_, io::Error>(()));
        assert_eq!(
            second
                .expect_err("one probe at a time")
                .rejected()
                .map(|r| r.state()),
            Some(State::HalfOpen)
        );
        Ok::<_, io::Error>(())
    });
    probe.expect("the probe ran");
    assert_eq!(sim.state(), State::Closed);
    assert_eq!(sim.breaker.snapshot().latency_breaches, 0);
}

#[test]
fn a_probe_slower_than_the_latency_threshold_reopens_it_without_a_slow_call_duration() {
    let mut sim = Sim::new(policy());
    trip(&mut sim, 0);
    sim.advance_to(sim.now + OPEN);
    sim.ok(ms(900))
        .expect("the probe ran and the vendor answered");
    assert_eq!(sim.state(), State::Open, "a 900 ms probe is not a recovery");
    assert_eq!(
        sim.last_change().map(|c| c.reason),
        Some(Reason::ProbeSlow { elapsed: ms(900) })
    );
    assert_eq!(sim.breaker.snapshot().open_duration, OPEN * 2);

    // A probe at the threshold is not slow: the threshold is strict.
    sim.advance_to(sim.now + OPEN * 2);
    sim.ok(THRESHOLD).expect("the probe ran");
    assert_eq!(sim.state(), State::Closed);
}

#[test]
fn a_slow_probe_reopens_it_for_longer_when_a_slow_call_is_defined() {
    let mut sim = Sim::with(|clock| builder(clock, policy()).slow_call_duration(THRESHOLD));
    trip(&mut sim, 0);
    assert_eq!(sim.breaker.snapshot().open_duration, OPEN);

    sim.advance_to(sim.now + OPEN);
    sim.ok(ms(900))
        .expect("the probe ran and the vendor answered");
    assert_eq!(sim.state(), State::Open);
    assert_eq!(
        sim.last_change().map(|c| c.reason),
        Some(Reason::ProbeSlow { elapsed: ms(900) })
    );
    assert_eq!(sim.breaker.snapshot().open_duration, OPEN * 2);

    sim.advance_to(sim.now + OPEN * 2);
    let _ = sim.fail(ms(5), io::ErrorKind::TimedOut);
    assert_eq!(sim.breaker.snapshot().open_duration, OPEN * 4);

    // Recovery returns the open period to its base: the next trip of the
    // latency policy opens it for `OPEN` again.
    sim.advance_to(sim.now + OPEN * 4);
    sim.ok(ms(5)).expect("the probe ran");
    assert_eq!(sim.state(), State::Closed);
    let restart = sim.now;
    for n in 0..3 {
        sim.advance_to(restart + WINDOW * n);
        for _ in 0..6 {
            sim.ok(ms(80)).expect("closed");
        }
    }
    sim.advance_to(restart + WINDOW * 3);
    let _ = sim.ok(ms(80));
    assert_eq!(sim.state(), State::Open);
    assert_eq!(sim.breaker.snapshot().open_duration, OPEN);
    // Two outages; the first re-opened on a slow probe and a failed one.
    let s = sim.breaker.snapshot();
    assert_eq!((s.trips, s.reopens), (2, 2));
    assert_eq!((s.probes.successes, s.probes.failures), (1, 2));
    // A breaker that times its calls files every one it measured.
    let durations = s.call_durations.expect("a timed breaker keeps a histogram");
    assert_eq!(durations.count(), s.totals.calls);
}

#[test]
fn it_sits_alongside_the_other_trip_conditions() {
    let mut sim = Sim::with(|clock| builder(clock, policy()).consecutive_failure_threshold(3));
    for _ in 0..3 {
        let _ = sim.fail(ms(1), io::ErrorKind::TimedOut);
    }
    assert_eq!(sim.state(), State::Open);
    assert_eq!(
        sim.last_change().map(|c| c.reason),
        Some(Reason::ConsecutiveFailures { count: 3 })
    );
}

#[test]
fn build_names_the_latency_field_at_fault() {
    let cases = [
        (policy().percentile(0.0), "latency_trip.percentile"),
        (policy().percentile(1.5), "latency_trip.percentile"),
        (policy().threshold(Duration::ZERO), "latency_trip.threshold"),
        (
            policy().window(Duration::from_micros(10)),
            "latency_trip.window",
        ),
        (
            policy().consecutive_windows(0),
            "latency_trip.consecutive_windows",
        ),
        (policy().error_rate(0.0), "latency_trip.error_rate"),
        (policy().minimum_samples(0), "latency_trip.minimum_samples"),
        (policy().capacity(0), "latency_trip.capacity"),
    ];
    for (policy, field) in cases {
        let (clock, _mock) = quanta::Clock::mock();
        let err = builder(clock, policy).build().expect_err(field);
        assert_eq!(err.field(), field);
    }
}

#[test]
fn the_policy_alone_is_enough_to_build_a_breaker() {
    let (clock, _mock) = quanta::Clock::mock();
    let breaker = builder(clock, LatencyTrip::new()).build();
    assert!(breaker.is_ok(), "{breaker:?}");
}
