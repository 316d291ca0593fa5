//! Maintenance windows and deadlines as declared, in wall-clock time, and
//! the one conversion of wall-clock time into the breaker's monotonic clock.

use std::fmt;
use std::time::{Duration, SystemTime};

#[cfg(feature = "calendar")]
use jiff::civil::{Date, Time, Weekday};

#[cfg(feature = "calendar")]
use super::calendar::{Daily, Weekly};
use crate::check::check;
use crate::ConfigError;

/// A span of wall-clock time during which a dependency is known to be down
/// for maintenance: its failures are **neutral** (they touch no counter and
/// never trip the breaker), the snapshot shows it
/// ([`Snapshot::maintenance`](crate::Snapshot::maintenance)), and with
/// [`short_circuit_in_maintenance`](crate::BreakerBuilder::short_circuit_in_maintenance)
/// calls are refused for the fallback without being attempted.
///
/// One-off with [`once`](Self::once); recurring in a named time zone with
/// `weekly` (feature `calendar`).
#[derive(Clone, Debug)]
pub struct MaintenanceWindow(pub(crate) WindowKind);

#[derive(Clone, Debug)]
pub(crate) enum WindowKind {
    Once {
        start: SystemTime,
        end: SystemTime,
    },
    #[cfg(feature = "calendar")]
    Weekly(Weekly),
}

impl MaintenanceWindow {
    /// One window, from `start` (inclusive) to `end` (exclusive). `build()`
    /// refuses one that ends before it starts.
    pub fn once(start: SystemTime, end: SystemTime) -> Self {
        MaintenanceWindow(WindowKind::Once { start, end })
    }

    /// A window every week on `day`, from local time `start` in the IANA
    /// zone `zone`, lasting `length` (less than a week). `build()` refuses
    /// an unknown zone.
    ///
    /// ```
    /// use fusebox::trading::MaintenanceWindow;
    /// use jiff::civil::{time, Weekday};
    /// use std::time::Duration;
    ///
    /// let sunday = MaintenanceWindow::weekly(
    ///     "America/New_York",
    ///     Weekday::Sunday,
    ///     time(2, 0, 0, 0),
    ///     Duration::from_secs(4 * 3600),
    /// );
    /// ```
    #[cfg(feature = "calendar")]
    pub fn weekly(zone: &str, day: Weekday, start: Time, length: Duration) -> Self {
        MaintenanceWindow(WindowKind::Weekly(Weekly::new(zone, day, start, length)))
    }

    /// The window that contains `at`, or else the first that starts after
    /// it: its start and end.
    pub(crate) fn around_or_after(&self, at: SystemTime) -> Option<(SystemTime, SystemTime)> {
        match &self.0 {
            WindowKind::Once { start, end } => (*end > at).then_some((*start, *end)),
            #[cfg(feature = "calendar")]
            WindowKind::Weekly(w) => w.around_or_after(at),
        }
    }

    /// The end of the last window that has ended by `at` (its end at or
    /// before it), if any.
    pub(crate) fn ended_by(&self, at: SystemTime) -> Option<SystemTime> {
        match &self.0 {
            WindowKind::Once { end, .. } => (*end <= at).then_some(*end),
            #[cfg(feature = "calendar")]
            WindowKind::Weekly(w) => w.ended_by(at),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match &self.0 {
            WindowKind::Once { start, end } => Ok(check(
                "maintenance_window",
                end > start,
                "must end after it starts",
                format_args!("{start:?} .. {end:?}"),
            )?),
            #[cfg(feature = "calendar")]
            WindowKind::Weekly(w) => w.validate(),
        }
    }
}

/// Instants by which a dependency must have recovered: market open, a
/// vendor's end-of-day file. A breaker given deadlines caps every open
/// period so that its probe goes out at least
/// [`probe_lead`](crate::BreakerBuilder::probe_lead) before the next one,
/// however long the escalated backoff has grown.
///
/// Explicit instants with [`at`](Self::at); times of day in a named time
/// zone on a set of weekdays, less holidays, with `daily` (feature
/// `calendar`).
#[derive(Clone, Debug)]
pub struct Deadlines(pub(crate) DeadlineKind);

#[derive(Clone, Debug)]
pub(crate) enum DeadlineKind {
    At(Vec<SystemTime>),
    #[cfg(feature = "calendar")]
    Daily(Daily),
}

impl Deadlines {
    /// These instants, in any order.
    pub fn at(instants: impl IntoIterator<Item = SystemTime>) -> Self {
        let mut v: Vec<SystemTime> = instants.into_iter().collect();
        v.sort();
        v.dedup();
        Deadlines(DeadlineKind::At(v))
    }

    /// Each of `times` (local time in the IANA zone `zone`, such as
    /// `"America/New_York"`) on each of `weekdays`, except on `holidays`
    /// (local dates). Daylight-saving changes are the zone's: 09:30 is
    /// 09:30 local on both sides of one. `build()` refuses an unknown zone
    /// and an empty list of times or weekdays.
    ///
    /// ```
    /// use fusebox::trading::{Deadlines, MONDAY_TO_FRIDAY};
    /// use jiff::civil::{date, time};
    ///
    /// let nyse_open = Deadlines::daily(
    ///     "America/New_York",
    ///     [time(9, 30, 0, 0)],
    ///     MONDAY_TO_FRIDAY,
    ///     [date(2026, 12, 25), date(2027, 1, 1)],
    /// );
    /// ```
    #[cfg(feature = "calendar")]
    pub fn daily(
        zone: &str,
        times: impl IntoIterator<Item = Time>,
        weekdays: impl IntoIterator<Item = Weekday>,
        holidays: impl IntoIterator<Item = Date>,
    ) -> Self {
        Deadlines(DeadlineKind::Daily(Daily::new(
            zone, times, weekdays, holidays,
        )))
    }

    /// The first deadline strictly after `after`.
    pub(crate) fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        match &self.0 {
            DeadlineKind::At(v) => v.iter().copied().find(|d| *d > after),
            #[cfg(feature = "calendar")]
            DeadlineKind::Daily(d) => d.next_after(after),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match &self.0 {
            DeadlineKind::At(v) => Ok(check(
                "deadlines",
                !v.is_empty(),
                "must name at least one instant",
                "none",
            )?),
            #[cfg(feature = "calendar")]
            DeadlineKind::Daily(d) => d.validate(),
        }
    }
}

/// Where a breaker's wall-clock time comes from, for scheduling only:
/// `SystemTime::now` by default; tests pass a fixed instant.
///
/// It is read when the breaker is built, and that reading is carried
/// forward by the breaker's monotonic clock. A long-running breaker reads
/// it again (at most once a second, when its lock is next taken, and
/// whenever a window is declared), so that the monotonic
/// clock's rate error never adds up: windows and deadlines stay within a
/// millisecond or so of the wall clock after days of uptime. A wall-clock
/// step (NTP, an operator) is followed at the next reading.
#[derive(Clone)]
pub struct WallClock(pub(crate) Source);

#[derive(Clone)]
pub(crate) enum Source {
    /// Read again as the breaker runs.
    Live(std::sync::Arc<dyn Fn() -> SystemTime + Send + Sync>),
    /// Read once: the instant at build, carried forward by the monotonic
    /// clock alone.
    Fixed(SystemTime),
}

/// How often, at most, a breaker reads its wall clock again.
pub(crate) const REANCHOR_EVERY: Duration = Duration::from_secs(1);

impl WallClock {
    /// A wall clock that reads `f`, at build and again as the breaker runs.
    pub fn new(f: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        WallClock(Source::Live(std::sync::Arc::new(f)))
    }

    /// A wall clock that reads `at` when the breaker is built and is then
    /// carried forward by the breaker's monotonic clock alone, never read
    /// again: what tests use, with a mock monotonic clock to move time.
    pub fn fixed(at: SystemTime) -> Self {
        WallClock(Source::Fixed(at))
    }

    /// The system's clock.
    pub(crate) fn system() -> Self {
        // One per process, shared by every breaker that reads it.
        static SYSTEM: std::sync::OnceLock<WallClock> = std::sync::OnceLock::new();
        SYSTEM
            .get_or_init(|| WallClock::new(SystemTime::now))
            .clone()
    }

    /// Reads it.
    pub(crate) fn read(&self) -> SystemTime {
        match &self.0 {
            Source::Live(f) => f(),
            Source::Fixed(at) => *at,
        }
    }

    /// Whether it is read again as the breaker runs.
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.0, Source::Live(_))
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WallClock")
    }
}

/// The wall-clock instant that the monotonic instant `mono` stood for: one
/// reading of each, taken together when the breaker was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub(crate) wall: SystemTime,
    pub(crate) mono: u64,
}

impl Anchor {
    /// The monotonic instant of the wall-clock instant `w` (0 for one before
    /// the clock's start, `u64::MAX` for one past its range).
    pub(crate) fn to_mono(self, w: SystemTime) -> u64 {
        match w.duration_since(self.wall) {
            Ok(d) => self.mono.saturating_add(nanos(d)),
            Err(e) => self.mono.saturating_sub(nanos(e.duration())),
        }
    }

    /// The wall-clock instant of the monotonic instant `m`.
    pub(crate) fn to_wall(self, m: u64) -> SystemTime {
        if m >= self.mono {
            self.wall + Duration::from_nanos(m - self.mono)
        } else {
            self.wall - Duration::from_nanos(self.mono - m)
        }
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}
