//! Maintenance windows: failures inside one are neutral, the snapshot says
//! maintenance, and calls may be short-circuited for the fallback.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::*;
use fusebox::trading::{MaintenanceWindow, WallClock};
use fusebox::{Breaker, BreakerBuilder, State};

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
    use fusebox::trading::{WindowEnd, MAX_WINDOWS};
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
