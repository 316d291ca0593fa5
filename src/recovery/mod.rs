//! The recovery rules the machine applies: the ramp after a breaker closes,
//! maintenance windows during which failures are neutral, and deadlines a
//! probe must go out before. The settings as the builder collects them
//! ([`Recovery`]), the schedule on the breaker's monotonic clock ([`Plan`]),
//! and the machine's part ([`Recovering`]).
//!
//! The public types are re-exported by `trading`, with the builder's
//! setters for them; `docs/trading.md` is the guide.

#[cfg(feature = "calendar")]
pub(crate) mod calendar;
pub(crate) mod declare;
pub(crate) mod health_probe;
pub(crate) mod schedule;

use std::time::{Duration, SystemTime};

use crate::check::check;
use crate::ramp::{RampUp, Ramping};
use crate::{ConfigError, Verdict};
use health_probe::HealthProbe;
use schedule::{Anchor, Deadlines, MaintenanceWindow, WallClock};

/// The trading-aware settings, as the builder collects them.
#[derive(Clone, Debug)]
pub(crate) struct Recovery {
    pub(crate) ramp: Option<RampUp>,
    pub(crate) windows: Vec<MaintenanceWindow>,
    pub(crate) short_circuit: bool,
    pub(crate) deadlines: Vec<Deadlines>,
    pub(crate) lead: Duration,
    pub(crate) wall_clock: Option<WallClock>,
    pub(crate) probe: Option<HealthProbe>,
    /// Set when the breaker is built: the one wall-clock reading.
    anchor: Option<Anchor>,
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            ramp: None,
            windows: Vec::new(),
            short_circuit: false,
            deadlines: Vec::new(),
            lead: DEFAULT_LEAD,
            wall_clock: None,
            probe: None,
            anchor: None,
        }
    }
}

/// The default [`probe_lead`](crate::BreakerBuilder::probe_lead).
const DEFAULT_LEAD: Duration = Duration::from_secs(300);

impl Recovery {
    fn has_schedule(&self) -> bool {
        !self.windows.is_empty() || !self.deadlines.is_empty()
    }

    /// Reads the wall clock as the monotonic instant `mono`: for the
    /// windows and deadlines given, and for windows declared later. Returns
    /// the clock if it is to be read again as the breaker runs.
    pub(crate) fn anchor(&mut self, mono: u64) -> Option<WallClock> {
        let clock = self.wall_clock.clone().unwrap_or_else(WallClock::system);
        self.anchor = Some(Anchor {
            wall: clock.read(),
            mono,
        });
        clock.is_live().then_some(clock)
    }

    /// Whether calls must be checked against the maintenance windows when
    /// they start.
    pub(crate) fn watches_calls(&self) -> bool {
        self.short_circuit && !self.windows.is_empty()
    }

    /// The health probe, for the breaker to hand to the probe thread.
    pub(crate) fn health_probe(&self) -> Option<HealthProbe> {
        self.probe.clone()
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(p) = &self.probe {
            p.validate()?;
        }
        if let Some(r) = &self.ramp {
            r.validate()?;
        }
        for w in &self.windows {
            w.validate()?;
        }
        for d in &self.deadlines {
            d.validate()?;
        }
        if self.short_circuit {
            check(
                "short_circuit_in_maintenance",
                !self.windows.is_empty(),
                "needs at least one maintenance_window",
                "none",
            )?;
        }
        Ok(())
    }
}

/// The schedule on the breaker's monotonic clock.
#[derive(Clone, Debug)]
struct Plan {
    anchor: Anchor,
    windows: Vec<MaintenanceWindow>,
    deadlines: Vec<Deadlines>,
    lead: u64,
    /// The latest end of the windows dropped from `windows` once they had
    /// ended (`declare.rs`), for [`last_end`](Self::last_end).
    ended: Option<SystemTime>,
}

impl Plan {
    /// The maintenance window around `now`, as monotonic start and end.
    fn window_at(&self, now: u64) -> Option<(u64, u64)> {
        let wall = self.anchor.to_wall(now);
        self.windows
            .iter()
            .filter_map(|w| w.around_or_after(wall))
            .filter(|(start, _)| *start <= wall)
            .map(|(s, e)| (self.anchor.to_mono(s), self.anchor.to_mono(e)))
            .max_by_key(|(_, e)| *e)
    }

    /// The end of the last window that has ended by `now`, if any.
    fn last_end(&self, now: u64) -> Option<u64> {
        let wall = self.anchor.to_wall(now);
        self.windows
            .iter()
            .filter_map(|w| w.ended_by(wall))
            .chain(self.ended)
            .max()
            .map(|end| self.anchor.to_mono(end).min(now))
    }

    /// The start of the window around `now` or of the next one.
    fn next_window_start(&self, now: u64) -> u64 {
        let wall = self.anchor.to_wall(now);
        self.windows
            .iter()
            .filter_map(|w| w.around_or_after(wall))
            .map(|(s, _)| self.anchor.to_mono(s))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The latest instant at which a probe still goes out the lead time
    /// before the next deadline that leaves room for it.
    fn probe_by(&self, now: u64) -> Option<u64> {
        let earliest = self
            .anchor
            .to_wall(now)
            .checked_add(Duration::from_nanos(self.lead))?;
        self.deadlines
            .iter()
            .filter_map(|d| d.next_after(earliest))
            .min()
            .map(|d| self.anchor.to_mono(d).saturating_sub(self.lead))
    }
}

/// The machine's part of trading-aware recovery: the ramp in progress, the
/// schedule, and the failures made neutral by a maintenance window.
#[derive(Clone, Debug)]
pub(crate) struct Recovering {
    /// Boxed: a breaker without a ramp keeps a pointer.
    ramp: Option<Box<Ramp>>,
    /// Boxed: a breaker without windows or deadlines keeps a pointer.
    plan: Option<Box<Plan>>,
    /// The wall-clock reading taken at build, for windows declared later.
    anchor: Option<Anchor>,
    short_circuit: bool,
    neutral: u64,
    /// Whether only the health-probe thread probes.
    background: bool,
}

/// A ramp after recovery: the policy, and the ramp in progress.
#[derive(Clone, Debug)]
struct Ramp {
    policy: RampUp,
    running: Option<Ramping>,
}

impl Recovering {
    pub(crate) fn new(r: &Recovery) -> Self {
        Recovering {
            ramp: r.ramp.map(|policy| {
                Box::new(Ramp {
                    policy,
                    running: None,
                })
            }),
            plan: r.anchor.filter(|_| r.has_schedule()).map(|anchor| {
                Box::new(Plan {
                    anchor,
                    windows: r.windows.clone(),
                    deadlines: r.deadlines.clone(),
                    lead: crate::check::nanos(r.lead),
                    ended: None,
                })
            }),
            anchor: r.anchor,
            short_circuit: r.short_circuit,
            neutral: 0,
            background: r.probe.is_some(),
        }
    }

    /// Whether a schedule (windows or deadlines) converts wall-clock time.
    pub(crate) fn has_schedule(&self) -> bool {
        self.plan.is_some()
    }

    /// A fresh reading of the wall clock, `wall` at the monotonic instant
    /// `mono`, in place of the last: every wall-clock instant is converted
    /// through it from now on.
    pub(crate) fn reanchor(&mut self, wall: SystemTime, mono: u64) {
        let anchor = Anchor { wall, mono };
        self.anchor = Some(anchor);
        if let Some(plan) = &mut self.plan {
            plan.anchor = anchor;
        }
    }

    /// Whether only the health-probe thread may probe: live callers are
    /// refused while the breaker is half-open.
    pub(crate) fn probes_in_background(&self) -> bool {
        self.background
    }

    /// The health-probe thread cannot take this breaker: live calls probe.
    pub(crate) fn probe_live(&mut self) {
        self.background = false;
    }

    /// Whether a closed breaker must send every call through the lock:
    /// while a ramp runs.
    pub(crate) fn routes_through_lock(&self) -> bool {
        self.ramping().is_some()
    }

    /// The ramp in progress.
    fn ramping(&self) -> Option<&Ramping> {
        self.ramp.as_ref()?.running.as_ref()
    }

    /// Decides on a call offered to a closed breaker at `now`: `Err` with
    /// the refusal's `retry_after` if the ramp or a maintenance window
    /// refuses it. Ends a ramp that is over.
    pub(crate) fn admit_closed(&mut self, now: u64) -> Result<(), Option<u64>> {
        if self.short_circuit {
            if let Some((_, end)) = self.plan.as_ref().and_then(|p| p.window_at(now)) {
                return Err(Some(end.saturating_sub(now)));
            }
        }
        let Some(ramp) = &mut self.ramp else {
            return Ok(());
        };
        let Some(r) = &mut ramp.running else {
            return Ok(());
        };
        if r.is_over(now) {
            ramp.running = None;
            Ok(())
        } else if r.admit(now) {
            Ok(())
        } else {
            Err(None)
        }
    }

    /// Whether [`admit_closed`](Self::admit_closed) would admit a call
    /// offered at `now`, changing nothing.
    pub(crate) fn would_admit_closed(&self, now: u64) -> bool {
        let in_window = self.short_circuit
            && self
                .plan
                .as_ref()
                .is_some_and(|p| p.window_at(now).is_some());
        !in_window && self.ramping().is_none_or(|r| r.would_admit(now))
    }

    /// Whether `outcome`, reported at `now`, is neutral: a failure inside a
    /// maintenance window. Counts it as such.
    pub(crate) fn is_neutral(&mut self, now: u64, outcome: Verdict) -> bool {
        let failed = matches!(outcome, Verdict::Failure | Verdict::Throttled(_));
        let neutral = failed
            && self
                .plan
                .as_ref()
                .is_some_and(|p| p.window_at(now).is_some());
        self.neutral += u64::from(neutral);
        neutral
    }

    /// A call admitted during a ramp failed at `now`: ends the ramp and
    /// returns the re-opens of the outage it recovered from, if it was still
    /// running.
    pub(crate) fn ramp_failed(&mut self, now: u64) -> Option<u32> {
        let r = self.ramp.as_mut()?.running.take()?;
        (!r.is_over(now)).then_some(r.escalation)
    }

    /// The breaker closed on a probe at `now`, after `reopens` re-opens.
    pub(crate) fn closed_on_probe(&mut self, now: u64, reopens: u32) {
        if let Some(ramp) = &mut self.ramp {
            ramp.running = Some(Ramping::begin(ramp.policy, now, reopens));
        }
    }

    /// The breaker closed by an operator, or left closed: no ramp.
    pub(crate) fn end_ramp(&mut self) {
        if let Some(ramp) = &mut self.ramp {
            ramp.running = None;
        }
    }

    /// `until`, the end of an open period starting at `now`, capped so that
    /// the probe goes out the lead time before the next deadline.
    pub(crate) fn cap(&self, now: u64, until: u64) -> u64 {
        match self.plan.as_ref().and_then(|p| p.probe_by(now)) {
            Some(by) => until.min(by).max(now),
            None => until,
        }
    }

    /// From when a call to a closed breaker must take the lock to be
    /// checked against the maintenance windows: the start of the window
    /// around `now` or the next one; never without short-circuiting.
    pub(crate) fn watch_from(&self, now: u64) -> u64 {
        match &self.plan {
            Some(p) if self.short_circuit => p.next_window_start(now),
            _ => u64::MAX,
        }
    }

    /// The fraction of calls a closed breaker admits at `now`, while a ramp
    /// runs.
    pub(crate) fn ramp_fraction(&self, now: u64) -> Option<f64> {
        self.ramping()
            .filter(|r| !r.is_over(now))
            .map(|r| r.fraction(now))
    }

    /// The end of the maintenance window around `now`.
    pub(crate) fn maintenance_until(&self, now: u64) -> Option<u64> {
        self.plan.as_ref()?.window_at(now).map(|(_, end)| end)
    }

    /// From when time counts at `now`, for the calls in flight: `now`
    /// inside a maintenance window, else the end of the last one (0
    /// without one).
    pub(crate) fn maintenance_floor(&self, now: u64) -> u64 {
        let Some(plan) = &self.plan else {
            return 0;
        };
        if plan.window_at(now).is_some() {
            return now;
        }
        plan.last_end(now).unwrap_or(0)
    }

    /// Failures made neutral by a maintenance window, in the breaker's life.
    pub(crate) fn neutral_failures(&self) -> u64 {
        self.neutral
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::nanos;

    #[test]
    fn a_fresh_wall_reading_moves_the_schedule_by_the_drift_it_corrects() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let hour = Duration::from_secs(3600);
        let mut r = Recovery {
            windows: vec![MaintenanceWindow::once(t0 + 24 * hour, t0 + 26 * hour)],
            wall_clock: Some(WallClock::fixed(t0)),
            ..Recovery::default()
        };
        assert!(r.anchor(0).is_none(), "a fixed clock is never read again");
        let mut rec = Recovering::new(&r);
        let day = nanos(24 * hour);
        // By the monotonic clock alone the window starts a day after build.
        assert_eq!(rec.maintenance_until(day - 1), None);
        assert!(rec.maintenance_until(day).is_some());
        // The wall clock says the monotonic one ran 52 s slow over that day
        // (600 ppm): read again, the window starts 52 s sooner on it.
        let drift = Duration::from_millis(51_840);
        let mono = day - nanos(drift);
        rec.reanchor(t0 + 24 * hour, mono);
        assert_eq!(rec.maintenance_until(mono - 1), None);
        assert_eq!(rec.maintenance_until(mono), Some(mono + nanos(2 * hour)));
    }

    #[test]
    fn calls_in_flight_age_from_the_end_of_the_last_window_and_from_now_inside_one() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let sec = Duration::from_secs(1);
        let r = Recovery {
            windows: vec![MaintenanceWindow::once(t0 + 10 * sec, t0 + 20 * sec)],
            wall_clock: Some(WallClock::fixed(t0)),
            ..Recovery::default()
        };
        let mut r = r;
        r.anchor(0);
        let mut rec = Recovering::new(&r);
        let at = |s: u64| s * 1_000_000_000;
        assert_eq!(rec.maintenance_floor(at(5)), 0, "before any window");
        assert_eq!(rec.maintenance_floor(at(15)), at(15), "inside: now");
        assert_eq!(rec.maintenance_floor(at(20)), at(20), "its end is outside");
        assert_eq!(rec.maintenance_floor(at(25)), at(20));
        // A window declared later drops the one that ended; its end is kept.
        rec.declare(
            at(30),
            Some(t0 + 40 * sec),
            declare::WindowEnd::At(t0 + 50 * sec),
        )
        .unwrap();
        assert_eq!(rec.maintenance_floor(at(35)), at(20));
        assert_eq!(rec.maintenance_floor(at(45)), at(45));
        assert_eq!(rec.maintenance_floor(at(60)), at(50));
        assert_eq!(
            Recovering::new(&Recovery::default()).maintenance_floor(at(60)),
            0
        );
    }

    #[cfg(feature = "calendar")]
    #[test]
    fn a_weekly_window_ages_calls_from_its_last_end() {
        use jiff::civil::{time, Weekday};
        // Friday 2027-01-15, 08:00 UTC.
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let hour = Duration::from_secs(3600);
        let day = 24 * hour;
        let weekly = MaintenanceWindow::weekly("UTC", Weekday::Friday, time(9, 0, 0, 0), hour);
        let mut r = Recovery {
            windows: vec![weekly],
            wall_clock: Some(WallClock::fixed(t0)),
            ..Recovery::default()
        };
        // The build's monotonic instant 30 days in, so that last week is on
        // the clock.
        let built = nanos(30 * day);
        r.anchor(built);
        let rec = Recovering::new(&r);
        // 08:00: last Friday's window ended at 10:00, 6 days 22 hours ago.
        assert_eq!(
            rec.maintenance_floor(built),
            built - nanos(7 * day) + nanos(2 * hour)
        );
        // 09:30, inside today's.
        let inside = built + nanos(hour + hour / 2);
        assert_eq!(rec.maintenance_floor(inside), inside);
        // 11:00: today's ended at 10:00.
        assert_eq!(
            rec.maintenance_floor(built + nanos(3 * hour)),
            built + nanos(2 * hour)
        );
    }
}
