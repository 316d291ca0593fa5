//! Recovery before a deadline: the open period is capped so that the probe
//! goes out the lead time before the next deadline, however long the
//! escalated backoff has grown.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fusebox::trading::{Deadlines, WallClock};
use fusebox::{Breaker, BreakerBuilder, State};

use crate::support::breaker::*;

const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// Consecutive(1), a day's open period doubling up to a week, a 5-minute
/// lead, the wall clock stopped at `built`.
fn with_deadlines(
    built: SystemTime,
    deadlines: Deadlines,
    extra: impl FnOnce(BreakerBuilder) -> BreakerBuilder,
) -> (Breaker, Arc<quanta::Mock>) {
    let (builder, mock) = quiet("corporate-actions");
    let b = extra(
        builder
            .consecutive_failure_threshold(1)
            .open_duration(24 * HOUR)
            .backoff_multiplier(2.0)
            .max_open_duration(7 * 24 * HOUR)
            .probe_lead(5 * MIN)
            .wall_clock(WallClock::fixed(built))
            .deadlines(deadlines),
    )
    .build()
    .unwrap();
    (b, mock)
}

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

#[test]
fn the_probe_goes_out_the_lead_time_before_an_explicit_deadline() {
    let (b, _mock) = with_deadlines(t0(), Deadlines::at([t0() + HOUR]), |b| b);
    trip(&b, 1);
    assert_eq!(b.snapshot().retry_after, Some(55 * MIN));
}

#[test]
fn the_cap_holds_however_long_the_backoff_has_grown() {
    let deadlines = Deadlines::at([t0() + 100 * HOUR]);
    let (b, mock) = with_deadlines(t0(), deadlines, |b| b);
    trip(&b, 1);
    // 24 h, then failed probes: 48 h would pass the deadline.
    mock.increment(24 * HOUR);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().open_duration, 48 * HOUR);
    mock.increment(48 * HOUR);
    fail(&b).unwrap_err();
    let s = b.snapshot();
    assert_eq!(s.open_duration, 28 * HOUR - 5 * MIN, "not 96 h");
    mock.increment(s.retry_after.unwrap());
    assert_eq!(b.state(), State::HalfOpen);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed, "recovered by the deadline");
}

#[test]
fn inside_the_lead_time_the_next_deadline_caps_the_period() {
    let deadlines = Deadlines::at([t0() + 2 * MIN, t0() + 3 * HOUR]);
    let (b, _mock) = with_deadlines(t0(), deadlines, |b| b);
    trip(&b, 1);
    assert_eq!(b.snapshot().retry_after, Some(3 * HOUR - 5 * MIN));
}

#[test]
fn a_period_shorter_than_the_cap_is_left_alone() {
    let (b, _mock) = with_deadlines(t0(), Deadlines::at([t0() + 100 * HOUR]), |b| {
        b.open_duration(10 * SEC).max_open_duration(10 * SEC)
    });
    trip(&b, 1);
    assert_eq!(b.snapshot().retry_after, Some(10 * SEC));
}

#[test]
fn build_refuses_an_empty_list_of_deadlines() {
    let (builder, _mock) = quiet("corporate-actions");
    let err = builder
        .consecutive_failure_threshold(1)
        .deadlines(Deadlines::at([]))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "deadlines");
}

#[cfg(feature = "calendar")]
mod calendar {
    use super::*;
    use fusebox::trading::jiff::civil::{date, time, Date};
    use fusebox::trading::jiff::tz::TimeZone;
    use fusebox::trading::MONDAY_TO_FRIDAY;

    fn ny(y: i16, m: i8, d: i8, h: i8, min: i8) -> SystemTime {
        let tz = TimeZone::get("America/New_York").unwrap();
        SystemTime::from(tz.to_timestamp(date(y, m, d).at(h, min, 0, 0)).unwrap())
    }

    fn utc(y: i16, m: i8, d: i8, h: i8, min: i8) -> SystemTime {
        SystemTime::from(
            TimeZone::UTC
                .to_timestamp(date(y, m, d).at(h, min, 0, 0))
                .unwrap(),
        )
    }

    fn market_open(zone: &str, holidays: impl IntoIterator<Item = Date>) -> Deadlines {
        Deadlines::daily(zone, [time(9, 30, 0, 0)], MONDAY_TO_FRIDAY, holidays)
    }

    #[test]
    fn the_probe_is_scheduled_the_lead_time_before_the_open_across_a_dst_change() {
        // Tripped on Friday 30 October 2026 at 16:00 New York time (EDT,
        // UTC-4). Daylight saving ends on Sunday 1 November: Monday's 09:30
        // open is 14:30 UTC (EST, UTC-5), so the probe is due at 14:25 UTC.
        let built = ny(2026, 10, 30, 16, 0);
        assert_eq!(built, utc(2026, 10, 30, 20, 0));
        let (b, mock) = with_deadlines(built, market_open("America/New_York", []), |b| {
            b.open_duration(7 * 24 * HOUR)
        });
        trip(&b, 1);
        let due = utc(2026, 11, 2, 14, 25).duration_since(built).unwrap();
        assert_eq!(due, 66 * HOUR + 25 * MIN);
        assert_eq!(b.snapshot().retry_after, Some(due));
        mock.increment(due - NS);
        assert_eq!(b.state(), State::Open);
        mock.increment(NS);
        assert_eq!(b.state(), State::HalfOpen);
    }

    #[test]
    fn a_fixed_offset_would_miss_the_dst_change_by_an_hour() {
        // The same week read at a fixed UTC-4 (what an offset computed on
        // Friday would give): the probe would be due an hour early, which is
        // what the test above tells apart.
        let built = ny(2026, 10, 30, 16, 0);
        let (b, _mock) = with_deadlines(built, market_open("Etc/GMT+4", []), |b| {
            b.open_duration(7 * 24 * HOUR)
        });
        trip(&b, 1);
        assert_eq!(b.snapshot().retry_after, Some(65 * HOUR + 25 * MIN));
    }

    #[test]
    fn a_holiday_has_no_deadline() {
        // Wednesday 25 November 2026, noon; Thursday is Thanksgiving.
        let built = ny(2026, 11, 25, 12, 0);
        let holiday = [date(2026, 11, 26)];
        let (b, _mock) = with_deadlines(built, market_open("America/New_York", holiday), |b| {
            b.open_duration(7 * 24 * HOUR)
        });
        trip(&b, 1);
        let friday = ny(2026, 11, 27, 9, 25).duration_since(built).unwrap();
        assert_eq!(b.snapshot().retry_after, Some(friday));
        assert_eq!(friday, 45 * HOUR + 25 * MIN);

        let (b, _mock) = with_deadlines(built, market_open("America/New_York", []), |b| {
            b.open_duration(7 * 24 * HOUR)
        });
        trip(&b, 1);
        assert_eq!(
            b.snapshot().retry_after,
            Some(21 * HOUR + 25 * MIN),
            "without the holiday, Thursday's open"
        );
    }

    #[test]
    fn the_weekend_has_no_deadline() {
        let built = ny(2026, 11, 27, 10, 0); // Friday, after the open
        let (b, _mock) = with_deadlines(built, market_open("America/New_York", []), |b| {
            b.open_duration(7 * 24 * HOUR)
        });
        trip(&b, 1);
        let monday = ny(2026, 11, 30, 9, 25).duration_since(built).unwrap();
        assert_eq!(b.snapshot().retry_after, Some(monday));
    }

    #[test]
    fn build_refuses_an_unknown_zone_and_an_empty_calendar() {
        let (builder, _mock) = quiet("corporate-actions");
        let err = builder
            .consecutive_failure_threshold(1)
            .deadlines(market_open("Mars/Olympus_Mons", []))
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "deadlines");
        let (builder, _mock) = quiet("corporate-actions");
        let err = builder
            .consecutive_failure_threshold(1)
            .deadlines(Deadlines::daily(
                "America/New_York",
                [],
                MONDAY_TO_FRIDAY,
                [],
            ))
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "deadlines");
    }
}
