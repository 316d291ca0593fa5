//! Recurring deadlines and maintenance windows in a named IANA time zone,
//! with `jiff` doing the time-zone and daylight-saving arithmetic: the daily
//! and weekly rules that `Deadlines::daily` and `MaintenanceWindow::weekly`
//! (in `schedule.rs`) hold. This file knows nothing of the schedule.

use std::time::{Duration, SystemTime};

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp};

use crate::check::check;
use crate::ConfigError;

/// Monday to Friday, the usual trading week.
pub const MONDAY_TO_FRIDAY: [Weekday; 5] = [
    Weekday::Monday,
    Weekday::Tuesday,
    Weekday::Wednesday,
    Weekday::Thursday,
    Weekday::Friday,
];

/// How far ahead a daily calendar looks for its next deadline: a calendar
/// with no deadline in three years has none.
const HORIZON_DAYS: i64 = 3 * 366;

/// A named zone, looked up once; an unknown name is reported by `build()`.
#[derive(Clone, Debug)]
struct Zone {
    name: String,
    tz: Option<TimeZone>,
}

impl Zone {
    fn new(name: &str) -> Self {
        Zone {
            name: name.to_owned(),
            tz: TimeZone::get(name).ok(),
        }
    }

    fn validate(&self, field: &'static str) -> Result<(), ConfigError> {
        check(
            field,
            self.tz.is_some(),
            "must name an IANA time zone known to this system",
            &self.name,
        )?;
        Ok(())
    }

    /// The local date at `at`, and the zone.
    fn today(&self, at: SystemTime) -> Option<(Date, &TimeZone)> {
        let tz = self.tz.as_ref()?;
        let ts = Timestamp::try_from(at).ok()?;
        Some((ts.to_zoned(tz.clone()).date(), tz))
    }
}

/// The instant of local time `t` on `day` in `tz`. A time skipped by a
/// clock change (02:30 on a spring-forward night) is read as the same
/// distance past the change; a repeated one as its first occurrence.
fn instant(tz: &TimeZone, day: Date, t: Time) -> Option<SystemTime> {
    tz.to_timestamp(day.to_datetime(t))
        .ok()
        .map(SystemTime::from)
}

fn plus_days(day: Date, n: i64) -> Option<Date> {
    day.checked_add(Span::new().try_days(n).ok()?).ok()
}

/// A window every week: from `start` local time on `day`, for `length`.
#[derive(Clone, Debug)]
pub(crate) struct Weekly {
    zone: Zone,
    day: Weekday,
    start: Time,
    length: Duration,
}

impl Weekly {
    pub(crate) fn new(zone: &str, day: Weekday, start: Time, length: Duration) -> Self {
        Weekly {
            zone: Zone::new(zone),
            day,
            start,
            length,
        }
    }

    pub(crate) fn around_or_after(&self, at: SystemTime) -> Option<(SystemTime, SystemTime)> {
        let (today, tz) = self.zone.today(at)?;
        (-7..=7)
            .filter_map(|n| plus_days(today, n))
            .filter(|d| d.weekday() == self.day)
            .filter_map(|d| instant(tz, d, self.start))
            .map(|s| (s, s + self.length))
            .find(|(_, end)| *end > at)
    }

    /// The end of the last window that has ended by `at`: one that started
    /// within the two weeks before, as a window lasts less than one.
    pub(crate) fn ended_by(&self, at: SystemTime) -> Option<SystemTime> {
        let (today, tz) = self.zone.today(at)?;
        (-14..=0)
            .filter_map(|n| plus_days(today, n))
            .filter(|d| d.weekday() == self.day)
            .filter_map(|d| instant(tz, d, self.start))
            .map(|s| s + self.length)
            .filter(|end| *end <= at)
            .max()
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.zone.validate("maintenance_window")?;
        check(
            "maintenance_window",
            !self.length.is_zero() && self.length < Duration::from_secs(7 * 24 * 3600),
            "must last longer than zero and less than a week",
            crate::duration::display(self.length),
        )?;
        Ok(())
    }
}

/// Times of day on a set of weekdays, less holidays.
#[derive(Clone, Debug)]
pub(crate) struct Daily {
    zone: Zone,
    times: Vec<Time>,
    weekdays: Vec<Weekday>,
    holidays: Vec<Date>,
}

impl Daily {
    pub(crate) fn new(
        zone: &str,
        times: impl IntoIterator<Item = Time>,
        weekdays: impl IntoIterator<Item = Weekday>,
        holidays: impl IntoIterator<Item = Date>,
    ) -> Self {
        let mut times: Vec<Time> = times.into_iter().collect();
        times.sort();
        times.dedup();
        Daily {
            zone: Zone::new(zone),
            times,
            weekdays: weekdays.into_iter().collect(),
            holidays: holidays.into_iter().collect(),
        }
    }

    pub(crate) fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        let (today, tz) = self.zone.today(after)?;
        (-1..=HORIZON_DAYS)
            .filter_map(|n| plus_days(today, n))
            .filter(|d| self.weekdays.contains(&d.weekday()) && !self.holidays.contains(d))
            .flat_map(|d| self.times.iter().filter_map(move |t| instant(tz, d, *t)))
            .find(|t| *t > after)
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.zone.validate("deadlines")?;
        check(
            "deadlines",
            !self.times.is_empty() && !self.weekdays.is_empty(),
            "must name at least one time of day and one weekday",
            format_args!(
                "{} times, {} weekdays",
                self.times.len(),
                self.weekdays.len()
            ),
        )?;
        Ok(())
    }
}
