//! Maintenance windows: failures inside one are neutral, the snapshot says
//! maintenance, and calls may be short-circuited for the fallback.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fusebox::trading::{MaintenanceWindow, WallClock};
use fusebox::{Breaker, BreakerBuilder, State, Verdict};

use crate::support::breaker::*;

/// The wall-clock instant the breakers are built at.
fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// A window from 10 s to 20 s after the breaker is built.
fn window() -> MaintenanceWindow {
    MaintenanceWindow::once(t0() + 10 * SEC, t0() + 20 * SEC)
}

/// Consecutive(3) and a 50 % failure rate over at least 4 calls, 60 s open.
fn with_window(
    extra: impl FnOnce(BreakerBuilder) -> BreakerBuilder,
) -> (Breaker, Arc<quanta::Mock>) {
    let (builder, mock) = quiet("corporate-actions");
    let b = extra(
        builder
            .consecutive_failure_threshold(3)
            .failure_rate_threshold(0.5)
            .minimum_calls(4)
            .open_duration(60 * SEC)
            .wall_clock(WallClock::fixed(t0()))
            .maintenance_window(window()),
    )
    .build()
    .unwrap();
    (b, mock)
}

#[test]
fn failures_inside_a_maintenance_window_leave_every_counter_unchanged() {
    let (b, mock) = with_window(|b| b);
    succeed(&b).unwrap();
    let before = b.snapshot();
    mock.increment(10 * SEC);
    for _ in 0..50 {
        fail(&b).unwrap_err();
    }
    let mut s = b.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(s.neutral_failures, 50);
    assert_eq!(s.maintenance, Some(10 * SEC));
    // Everything else reads as before the window.
    let (neutral, maintenance) = (s.neutral_failures, s.maintenance);
    s.neutral_failures = 0;
    s.maintenance = None;
    assert_eq!(counters(&s), counters(&before));
    s.neutral_failures = neutral;
    s.maintenance = maintenance;
    assert_eq!(s.maintenance, Some(10 * SEC));
    assert_eq!(s.status(), "maintenance");
}

#[test]
fn failures_count_again_when_the_window_ends() {
    let (b, mock) = with_window(|b| b);
    mock.increment(20 * SEC - NS);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().consecutive_failures, 0, "one nanosecond early");
    mock.increment(NS);
    assert_eq!(b.snapshot().maintenance, None);
    trip(&b, 3);
    assert_eq!(b.snapshot().neutral_failures, 1);
}

#[test]
fn the_snapshot_shows_maintenance_rather_than_open() {
    let (b, mock) = with_window(|b| b);
    trip(&b, 3);
    assert_eq!(b.snapshot().status(), "open");
    mock.increment(10 * SEC);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(s.status(), "maintenance");
    assert_eq!(s.status_gauge(), 5, "past the states' 0 to 4");
    mock.increment(10 * SEC);
    assert_eq!(b.snapshot().status(), "open");
}

#[test]
fn a_failed_probe_inside_the_window_is_neutral_and_frees_the_probe() {
    let (b, mock) = with_window(|b| b.open_duration(5 * SEC));
    mock.increment(5 * SEC);
    trip(&b, 3);
    mock.increment(5 * SEC); // 10 s: half-open, in the window
    fail(&b).unwrap_err();
    let s = b.snapshot();
    assert_eq!(s.state, State::HalfOpen);
    assert_eq!(s.probes_in_flight, 0);
    assert_eq!(s.trips, 1);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_probe_failing_after_its_deadline_inside_the_window_reopens_as_the_state_read() {
    let (b, mock) = with_window(|b| {
        b.open_duration(5 * SEC)
            .backoff_multiplier(1.0)
            .max_probe_duration(2 * SEC)
    });
    mock.increment(3 * SEC);
    trip(&b, 3);
    mock.increment(5 * SEC); // 8 s: half-open
    let probe = b.try_acquire().unwrap();
    mock.increment(3 * SEC); // 11 s: inside the window, a second past the deadline
    assert_eq!(b.state(), State::Open, "the next call would re-open it");
    let open = b.snapshot().state_times.open;
    probe.record(Verdict::Failure);
    let s = b.snapshot();
    assert_eq!(s.neutral_failures, 1, "the failure itself is neutral");
    assert_eq!(s.state, State::Open, "the round failed at its deadline");
    assert_eq!(
        s.last_transition.unwrap().reason,
        fusebox::Reason::ProbeExpired
    );
    assert_eq!(s.probes.expired, 1);
    assert_eq!(s.state_times.open, open, "no open time moved back");
}

#[test]
fn short_circuits_calls_for_the_fallback_inside_the_window_only() {
    let (b, mock) = with_window(|b| b.short_circuit_in_maintenance(true));
    succeed(&b).unwrap();
    mock.increment(15 * SEC);
    let mut attempted = false;
    let r = refused(b.call(|| {
        attempted = true;
        Ok::<_, DepError>(1)
    }));
    assert!(!attempted);
    assert_eq!(r.state(), State::Closed);
    assert_eq!(r.retry_after(), Some(5 * SEC));
    assert_eq!(
        r.to_string(),
        "breaker `corporate-actions` is in maintenance, retry after 5s"
    );
    assert_eq!(b.snapshot().totals.short_circuits, 1);
    mock.increment(5 * SEC);
    for _ in 0..3 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.snapshot().totals.successes, 4);
}

#[test]
fn without_short_circuiting_calls_go_through_the_window() {
    let (b, mock) = with_window(|b| b);
    mock.increment(15 * SEC);
    succeed(&b).unwrap();
    assert_eq!(b.snapshot().totals.successes, 1);
}

#[test]
fn build_refuses_a_window_that_ends_before_it_starts() {
    let (builder, _mock) = quiet("corporate-actions");
    let err = builder
        .consecutive_failure_threshold(3)
        .maintenance_window(MaintenanceWindow::once(t0() + SEC, t0()))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "maintenance_window");
}

#[test]
fn build_refuses_short_circuiting_with_no_window() {
    let (builder, _mock) = quiet("corporate-actions");
    let err = builder
        .consecutive_failure_threshold(3)
        .short_circuit_in_maintenance(true)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "short_circuit_in_maintenance");
}

#[cfg(feature = "calendar")]
mod weekly {
    use super::*;
    use fusebox::trading::jiff::civil::{date, time, Weekday};
    use fusebox::trading::jiff::tz::TimeZone;

    fn ny(y: i16, m: i8, d: i8, h: i8, min: i8) -> SystemTime {
        let tz = TimeZone::get("America/New_York").unwrap();
        let ts = tz.to_timestamp(date(y, m, d).at(h, min, 0, 0)).unwrap();
        SystemTime::from(ts)
    }

    #[test]
    fn a_sunday_window_recurs_every_week_in_local_time() {
        // Built on Saturday 2026-10-24, noon in New York.
        let (builder, mock) = quiet("corporate-actions");
        let b = builder
            .consecutive_failure_threshold(1)
            .wall_clock(WallClock::fixed(ny(2026, 10, 24, 12, 0)))
            .maintenance_window(MaintenanceWindow::weekly(
                "America/New_York",
                Weekday::Sunday,
                time(2, 0, 0, 0),
                4 * 3600 * SEC,
            ))
            .build()
            .unwrap();
        let at = |t: SystemTime| t.duration_since(ny(2026, 10, 24, 12, 0)).unwrap();
        let mut elapsed = Duration::ZERO;
        let mut go_to = |t: SystemTime| {
            mock.increment(at(t) - elapsed);
            elapsed = at(t);
        };
        go_to(ny(2026, 10, 25, 1, 59));
        assert_eq!(b.snapshot().maintenance, None);
        go_to(ny(2026, 10, 25, 3, 0));
        assert_eq!(b.snapshot().maintenance, Some(3 * 3600 * SEC));
        fail(&b).unwrap_err();
        assert_eq!(b.state(), State::Closed);
        // A week later, across the end of daylight saving time
        // (1 November): 02:00 local is still the start.
        go_to(ny(2026, 11, 1, 1, 59));
        assert_eq!(b.snapshot().maintenance, None);
        go_to(ny(2026, 11, 1, 2, 0));
        assert_eq!(b.snapshot().maintenance, Some(4 * 3600 * SEC));
        go_to(ny(2026, 11, 1, 6, 0));
        assert_eq!(b.snapshot().maintenance, None);
        fail(&b).unwrap_err();
        assert_eq!(b.state(), State::Open);
    }

    #[test]
    fn build_refuses_an_unknown_time_zone() {
        let (builder, _mock) = quiet("corporate-actions");
        let err = builder
            .consecutive_failure_threshold(1)
            .maintenance_window(MaintenanceWindow::weekly(
                "America/Nowhere",
                Weekday::Sunday,
                time(2, 0, 0, 0),
                SEC,
            ))
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "maintenance_window");
        assert!(err.to_string().contains("America/Nowhere"), "{err}");
    }
}

mod declared {
    use super::*;
    use fusebox::trading::WindowEnd;

    /// The most windows a breaker holds.
    const MAX_WINDOWS: usize = 64;
    use fusebox::ConfigError;

    #[test]
    fn a_window_declared_on_a_breaker_without_a_schedule_makes_failures_neutral() {
        let (builder, mock) = quiet("corporate-actions");
        let b = builder
            .consecutive_failure_threshold(2)
            .open_duration(60 * SEC)
            .wall_clock(WallClock::fixed(t0()))
            .build()
            .unwrap();
        mock.increment(5 * SEC);
        let window = b
            .declare_maintenance(None, WindowEnd::After(30 * SEC), "carol", "migration")
            .unwrap();
        // Now is the build-time reading carried forward by the breaker's clock.
        assert_eq!(window, (t0() + 5 * SEC, t0() + 35 * SEC));
        for _ in 0..5 {
            fail(&b).unwrap_err();
        }
        let snap = b.snapshot();
        assert_eq!(snap.state, State::Closed);
        assert_eq!(snap.totals.failures, 0);
        assert_eq!(snap.neutral_failures, 5);
        assert_eq!(snap.maintenance, Some(30 * SEC));
        mock.increment(30 * SEC);
        assert_eq!(b.snapshot().maintenance, None);
        fail(&b).unwrap_err();
        fail(&b).unwrap_err();
        assert_eq!(b.state(), State::Open);
    }

    #[test]
    fn a_declared_window_short_circuits_calls_on_a_breaker_that_does_so() {
        // The configured window is 10 s to 20 s; the declared one 30 s to 40 s.
        let (b, mock) = with_window(|b| b.short_circuit_in_maintenance(true));
        mock.increment(25 * SEC);
        succeed(&b).unwrap();
        b.declare_maintenance(
            Some(t0() + 30 * SEC),
            WindowEnd::At(t0() + 40 * SEC),
            "carol",
            "migration",
        )
        .unwrap();
        succeed(&b).unwrap();
        mock.increment(5 * SEC);
        let refused = succeed(&b).unwrap_err();
        assert_eq!(refused.rejected().unwrap().retry_after(), Some(10 * SEC));
        mock.increment(10 * SEC);
        succeed(&b).unwrap();
    }

    #[test]
    fn a_window_that_ends_before_it_starts_or_before_now_is_refused() {
        let (b, mock) = with_window(|b| b);
        mock.increment(30 * SEC);
        for (start, end) in [
            (None, WindowEnd::After(Duration::ZERO)),
            (None, WindowEnd::At(t0())),
            (Some(t0() + 40 * SEC), WindowEnd::At(t0() + 35 * SEC)),
            (Some(t0()), WindowEnd::At(t0() + 20 * SEC)),
            (None, WindowEnd::After(Duration::MAX)),
        ] {
            let err = b.declare_maintenance(start, end, "carol", "x").unwrap_err();
            assert!(
                matches!(
                    err,
                    ConfigError::Invalid {
                        field: "maintenance_window",
                        ..
                    }
                ),
                "{err}"
            );
        }
        assert_eq!(b.snapshot().maintenance, None);
    }

    #[test]
    fn windows_that_have_ended_make_room_for_new_ones() {
        let (b, mock) = with_window(|b| b);
        // The configured window (to 20 s) is still ahead: it holds a place.
        for i in 0..MAX_WINDOWS as u32 - 1 {
            b.declare_maintenance(
                Some(t0() + (100 + i) * SEC),
                WindowEnd::After(SEC),
                "carol",
                "x",
            )
            .unwrap();
        }
        let far = Some(t0() + 10_000 * SEC);
        let err = b
            .declare_maintenance(far, WindowEnd::After(SEC), "carol", "x")
            .unwrap_err();
        assert!(err.to_string().contains("at most 64"), "{err}");
        // Once the first windows have ended, there is room again.
        mock.increment(110 * SEC);
        b.declare_maintenance(far, WindowEnd::After(SEC), "carol", "x")
            .unwrap();
    }
}

#[test]
fn a_neutral_probe_gives_its_place_back_under_a_probe_cap() {
    let (b, mock) = with_window(|b| b.open_duration(5 * SEC).half_open_max_probes(1u32));
    mock.increment(5 * SEC);
    trip(&b, 3);
    mock.increment(5 * SEC); // 10 s: half-open, in the window
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().probes_in_flight, 0);
    succeed(&b).expect("the neutral probe used up no place: the next call probes");
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn neutral_probes_do_not_use_up_a_half_open_rate_round() {
    let (b, mock) = with_window(|b| {
        b.open_duration(5 * SEC)
            .half_open_rate(fusebox::HalfOpenRate {
                probes: 1,
                failure_rate_threshold: 0.5,
            })
    });
    mock.increment(5 * SEC);
    trip(&b, 3);
    mock.increment(5 * SEC); // 10 s: half-open, in the window
    fail(&b).unwrap_err();
    succeed(&b).expect("the round has not been used up by a neutral failure");
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn would_permit_says_no_inside_a_short_circuiting_window() {
    let (b, mock) = with_window(|b| b.short_circuit_in_maintenance(true));
    assert!(b.would_permit());
    mock.increment(15 * SEC);
    assert!(!b.would_permit(), "a call made now is refused");
    refused(succeed(&b));
    mock.increment(5 * SEC);
    assert!(b.would_permit());
    succeed(&b).unwrap();
}

#[test]
fn a_neutral_failure_is_no_longer_in_flight() {
    let (b, mock) = with_window(|b| b.count_calls_in_flight(true));
    mock.increment(10 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().neutral_failures, 1);
    assert_eq!(b.snapshot().calls_in_flight, Some(0));
}

/// A breaker whose monotonic clock runs 600 ppm slow against its wall
/// clock (the drift a long run of the ops example showed), both moved by
/// the test: the wall clock is re-read as the breaker runs, so windows
/// start when the wall clock says, not when the monotonic one has counted
/// their distance from build.
mod drift {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    const PPM: f64 = 600.0;
    const HOUR: Duration = Duration::from_secs(3600);

    struct Clocks {
        mock: Arc<quanta::Mock>,
        /// Wall-clock nanoseconds since `t0()`.
        wall: Arc<AtomicU64>,
    }

    impl Clocks {
        /// Moves the monotonic clock by `d` and the wall clock by `d`
        /// and 600 ppm of it.
        fn advance(&self, d: Duration) {
            self.mock.increment(d);
            let wall = d.as_nanos() as f64 * (1.0 + PPM * 1e-6);
            self.wall.fetch_add(wall as u64, Ordering::Relaxed);
        }

        fn wall_now(&self) -> SystemTime {
            t0() + Duration::from_nanos(self.wall.load(Ordering::Relaxed))
        }
    }

    fn drifting(window: MaintenanceWindow, short_circuit: bool) -> (Breaker, Clocks) {
        let (builder, mock) = quiet("eod-prices");
        let wall = Arc::new(AtomicU64::new(0));
        let read = Arc::clone(&wall);
        let b = builder
            .consecutive_failure_threshold(3)
            .wall_clock(WallClock::new(move || {
                t0() + Duration::from_nanos(read.load(Ordering::Relaxed))
            }))
            .maintenance_window(window)
            .short_circuit_in_maintenance(short_circuit)
            .build()
            .unwrap();
        (b, Clocks { mock, wall })
    }

    #[test]
    fn a_window_a_day_away_starts_when_the_wall_clock_says() {
        let start = t0() + 24 * HOUR;
        let (b, clocks) = drifting(MaintenanceWindow::once(start, start + HOUR), false);
        // A day on the monotonic clock, less the 51.8 s it loses to the
        // wall clock meanwhile, and 10 s more: by the wall clock the
        // window began 10 s ago.
        let lost = Duration::from_secs_f64(24.0 * 3600.0 * PPM * 1e-6 / (1.0 + PPM * 1e-6));
        clocks.advance(24 * HOUR - lost + 10 * SEC);
        let late = clocks.wall_now().duration_since(start).unwrap();
        assert!(late >= 10 * SEC && late <= 10 * SEC + 10 * MS, "{late:?}");
        let left = b.snapshot().maintenance.expect("inside the window");
        let want = (start + HOUR).duration_since(clocks.wall_now()).unwrap();
        assert!(
            left.abs_diff(want) <= MS,
            "{left:?} left, the wall clock says {want:?}"
        );
    }

    #[test]
    fn between_readings_the_breaker_strays_from_the_wall_clock_by_at_most_a_second_of_drift() {
        let start = t0() + HOUR;
        let (b, clocks) = drifting(MaintenanceWindow::once(start, start + HOUR), false);
        // Two hours, a snapshot every 250 ms; inside the window, the time
        // left by the breaker against the wall clock's.
        let mut worst = Duration::ZERO;
        let mut inside = 0;
        for _ in 0..(2 * 3600 * 4) {
            clocks.advance(250 * MS);
            let now = clocks.wall_now();
            let Some(left) = b.snapshot().maintenance else {
                assert!(
                    now < start - 2 * MS || now > start + HOUR - 2 * MS,
                    "not in maintenance at {:?} into the window",
                    now.duration_since(start)
                );
                continue;
            };
            inside += 1;
            let want = (start + HOUR).duration_since(now).unwrap_or_default();
            worst = worst.max(left.abs_diff(want));
        }
        assert!(
            inside > 3600 * 4 - 10,
            "{inside} snapshots inside the window"
        );
        // One second of 600 ppm between readings: 0.6 ms.
        assert!(worst <= Duration::from_micros(700), "strayed {worst:?}");
    }

    #[test]
    fn calls_that_never_take_the_lock_still_meet_a_short_circuit_on_time() {
        let start = t0() + HOUR;
        let (b, clocks) = drifting(MaintenanceWindow::once(start, start + HOUR), true);
        // Successes only, one every 100 ms: the lock-free path, which
        // checks the clock against when the window starts.
        let mut refused_at = None;
        for _ in 0..(2 * 3600 * 10) {
            clocks.advance(100 * MS);
            if matches!(succeed(&b), Err(fusebox::CallError::Rejected(_))) {
                refused_at = Some(clocks.wall_now());
                break;
            }
        }
        let refused_at = refused_at.expect("short-circuited");
        let late = refused_at
            .duration_since(start)
            .expect("not before the window");
        // By the monotonic clock alone, 2.16 s late; re-read every second,
        // within the 100 ms step.
        assert!(late <= 100 * MS + MS, "short-circuited {late:?} late");
    }
}
