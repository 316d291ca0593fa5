//! The trading-aware settings in a file: `ramp_up`, `maintenance_window`,
//! `deadlines`, `probe_lead`, `short_circuit_in_maintenance`. Instants are
//! RFC 3339 text; weekly windows and daily deadlines in a named time zone
//! need the `calendar` feature.

use std::time::SystemTime;

use serde::Deserialize;

use super::duration::Human;
use crate::trading::{Deadlines, MaintenanceWindow};
use crate::{ConfigError, RampUp};

/// `ramp_up = { duration = "30s", start = 0.1 }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Ramp {
    duration: Human,
    start: f64,
}

impl Ramp {
    pub(super) fn ramp(&self) -> RampUp {
        RampUp::linear(self.duration.0, self.start)
    }
}

/// One `[[...maintenance_window]]`: `start` and `end` (RFC 3339) for a
/// one-off window; `zone`, `weekday`, `start` (local time of day) and
/// `length` for a weekly one.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Window {
    start: Option<String>,
    end: Option<String>,
    zone: Option<String>,
    weekday: Option<String>,
    length: Option<Human>,
}

/// One `[[...deadlines]]`: `at` (RFC 3339 instants); or `zone`, `times`,
/// `weekdays` and `holidays` for a daily calendar.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Deadline {
    at: Option<Vec<String>>,
    zone: Option<String>,
    times: Option<Vec<String>>,
    weekdays: Option<Vec<String>>,
    holidays: Option<Vec<String>>,
}

fn invalid(field: &'static str, rule: &'static str, value: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        rule,
        value: value.into(),
    }
}

/// An RFC 3339 instant.
fn instant(field: &'static str, text: &str) -> Result<SystemTime, ConfigError> {
    text.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .map_err(|_| {
            invalid(
                field,
                "must give instants in RFC 3339, such as \"2026-12-06T07:00:00Z\"",
                text,
            )
        })
}

impl Window {
    /// The window, or the field and rule it breaks. `build()` checks the
    /// rest (the end after the start, the zone, the length).
    pub(super) fn window(&self) -> Result<MaintenanceWindow, ConfigError> {
        const FIELD: &str = "maintenance_window";
        if self.zone.is_some() || self.weekday.is_some() || self.length.is_some() {
            return self.weekly();
        }
        match (&self.start, &self.end) {
            (Some(start), Some(end)) => Ok(MaintenanceWindow::once(
                instant(FIELD, start)?,
                instant(FIELD, end)?,
            )),
            _ => Err(invalid(
                FIELD,
                "needs `start` and `end` (RFC 3339) for a one-off window, or `zone`, `weekday`, `start` and `length` for a weekly one",
                format!("{self:?}"),
            )),
        }
    }

    #[cfg(not(feature = "calendar"))]
    fn weekly(&self) -> Result<MaintenanceWindow, ConfigError> {
        Err(invalid(
            "maintenance_window",
            "is weekly in a time zone (`zone`, `weekday`, `length`), which needs the `calendar` feature",
            format!("{self:?}"),
        ))
    }

    #[cfg(feature = "calendar")]
    fn weekly(&self) -> Result<MaintenanceWindow, ConfigError> {
        const FIELD: &str = "maintenance_window";
        let (Some(zone), Some(day), Some(start), Some(length), None) = (
            &self.zone,
            &self.weekday,
            &self.start,
            self.length,
            &self.end,
        ) else {
            return Err(invalid(
                FIELD,
                "needs `zone`, `weekday`, `start` (a time of day) and `length`, and no `end`, for a weekly window",
                format!("{self:?}"),
            ));
        };
        Ok(MaintenanceWindow::weekly(
            zone,
            calendar::weekday(FIELD, day)?,
            calendar::time_of_day(FIELD, start)?,
            length.0,
        ))
    }
}

impl Deadline {
    /// The deadlines, or the field and rule they break.
    pub(super) fn deadlines(&self) -> Result<Deadlines, ConfigError> {
        const FIELD: &str = "deadlines";
        let daily = self.zone.is_some()
            || self.times.is_some()
            || self.weekdays.is_some()
            || self.holidays.is_some();
        match (&self.at, daily) {
            (Some(at), false) => Ok(Deadlines::at(
                at.iter()
                    .map(|t| instant(FIELD, t))
                    .collect::<Result<Vec<_>, _>>()?,
            )),
            (None, true) => self.daily(),
            _ => Err(invalid(
                FIELD,
                "needs `at` (RFC 3339 instants), or `zone`, `times`, `weekdays` and optional `holidays` for a daily calendar, not both",
                format!("{self:?}"),
            )),
        }
    }

    #[cfg(not(feature = "calendar"))]
    fn daily(&self) -> Result<Deadlines, ConfigError> {
        Err(invalid(
            "deadlines",
            "is a daily calendar in a time zone (`zone`, `times`, `weekdays`), which needs the `calendar` feature",
            format!("{self:?}"),
        ))
    }

    #[cfg(feature = "calendar")]
    fn daily(&self) -> Result<Deadlines, ConfigError> {
        const FIELD: &str = "deadlines";
        let (Some(zone), Some(times), Some(weekdays)) = (&self.zone, &self.times, &self.weekdays)
        else {
            return Err(invalid(
                FIELD,
                "needs `zone`, `times` and `weekdays` for a daily calendar",
                format!("{self:?}"),
            ));
        };
        let times = times
            .iter()
            .map(|t| calendar::time_of_day(FIELD, t))
            .collect::<Result<Vec<_>, _>>()?;
        let weekdays = weekdays
            .iter()
            .map(|d| calendar::weekday(FIELD, d))
            .collect::<Result<Vec<_>, _>>()?;
        let holidays = self
            .holidays
            .iter()
            .flatten()
            .map(|d| calendar::date(FIELD, d))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Deadlines::daily(zone, times, weekdays, holidays))
    }
}

#[cfg(feature = "calendar")]
mod calendar {
    use jiff::civil::{Date, Time, Weekday};

    use super::invalid;
    use crate::ConfigError;

    /// `"monday"` or `"mon"`, any case.
    pub(super) fn weekday(field: &'static str, text: &str) -> Result<Weekday, ConfigError> {
        let day = match text.to_ascii_lowercase().as_str() {
            "monday" | "mon" => Weekday::Monday,
            "tuesday" | "tue" => Weekday::Tuesday,
            "wednesday" | "wed" => Weekday::Wednesday,
            "thursday" | "thu" => Weekday::Thursday,
            "friday" | "fri" => Weekday::Friday,
            "saturday" | "sat" => Weekday::Saturday,
            "sunday" | "sun" => Weekday::Sunday,
            _ => {
                return Err(invalid(
                    field,
                    "must name weekdays such as \"sunday\" or \"sun\"",
                    text,
                ))
            }
        };
        Ok(day)
    }

    /// `"09:30"` or `"09:30:00"`.
    pub(super) fn time_of_day(field: &'static str, text: &str) -> Result<Time, ConfigError> {
        text.parse::<Time>()
            .map_err(|_| invalid(field, "must give times of day such as \"09:30\"", text))
    }

    /// `"2026-12-25"`.
    pub(super) fn date(field: &'static str, text: &str) -> Result<Date, ConfigError> {
        text.parse::<Date>().map_err(|_| {
            invalid(
                field,
                "must give holidays as dates such as \"2026-12-25\"",
                text,
            )
        })
    }
}
