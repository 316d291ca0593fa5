//! Trading-aware recovery: ramp-up after close, maintenance windows, and
//! recovery before a deadline.
//!
//! - [`RampUp`]: for a while after a breaker closes, admit a
//!   rising fraction of calls, so that a just-recovered vendor is not hit
//!   by every waiting thread at once.
//! - [`MaintenanceWindow`]: declared windows during which a vendor's
//!   failures are neutral, shown in the snapshot as maintenance, optionally
//!   short-circuited to the fallback.
//! - [`HealthProbe`]: a cheap call that one background thread per process
//!   makes when the open period ends, instead of a live request.
//! - [`Deadlines`]: market open, an end-of-day file: the open period is
//!   capped so that a probe goes out at least a lead time before the next
//!   one.
//!
//! A one-off window can also be declared on a running breaker
//! ([`Breaker::declare_maintenance`](crate::Breaker::declare_maintenance)).
//!
//! Wall-clock time is used for scheduling only. It is read when the
//! breaker is built ([`WallClock`]) and carried forward by the breaker's
//! monotonic clock, and read again now and then so that the two do not
//! drift apart; every decision is taken on the monotonic clock.
//! Recurring windows and deadlines in a named IANA time zone need the
//! `calendar` feature (the `jiff` crate does the time-zone arithmetic).
//! `docs/trading.md` is the guide.

mod probe;

use std::time::Duration;

#[cfg(feature = "calendar")]
pub use crate::recovery::calendar::MONDAY_TO_FRIDAY;
pub use crate::recovery::declare::WindowEnd;
pub use crate::recovery::health_probe::HealthProbe;
pub use crate::recovery::schedule::{Deadlines, MaintenanceWindow, WallClock};
/// The `jiff` crate, whose civil times, dates, weekdays and zones the
/// calendar takes.
#[cfg(feature = "calendar")]
pub use jiff;

use crate::config::BreakerBuilder;
use crate::ramp::RampUp;

/// The settings of this module.
impl<T> BreakerBuilder<T> {
    /// Ramps up after recovery (see [`RampUp`]). Default: none, every call
    /// is admitted from the instant the breaker closes.
    pub fn ramp_up(mut self, ramp: impl Into<Option<RampUp>>) -> Self {
        self.parts.recovery.ramp = ramp.into();
        self
    }

    /// Adds a maintenance window (see [`MaintenanceWindow`]). Default: none.
    pub fn maintenance_window(mut self, window: MaintenanceWindow) -> Self {
        self.parts.recovery.windows.push(window);
        self
    }

    /// Whether calls made during a maintenance window are refused without
    /// being attempted, for the caller's fallback: the [`Rejected`] has
    /// state [`State::Closed`] (the breaker did not open) and a
    /// `retry_after` of the time left in the window. Default: `false`, calls
    /// go through and their failures are neutral. Costs one clock read and
    /// one atomic load on every call while set.
    ///
    /// [`Rejected`]: crate::Rejected
    /// [`State::Closed`]: crate::State::Closed
    pub fn short_circuit_in_maintenance(mut self, yes: bool) -> Self {
        self.parts.recovery.short_circuit = yes;
        self
    }

    /// Adds deadlines the dependency must have recovered by (see
    /// [`Deadlines`]). Default: none.
    pub fn deadlines(mut self, deadlines: Deadlines) -> Self {
        self.parts.recovery.deadlines.push(deadlines);
        self
    }

    /// How long before a deadline the probe must go out, at the latest.
    /// Default: 5 minutes.
    pub fn probe_lead(mut self, lead: Duration) -> Self {
        self.parts.recovery.lead = lead;
        self
    }

    /// Probes recovery with `probe` on the process's health-probe thread
    /// instead of a live call (see [`HealthProbe`]). Default: none, the
    /// first call after the open period is the probe.
    pub fn health_probe(mut self, probe: HealthProbe) -> Self {
        self.parts.recovery.probe = Some(probe);
        self.parts.probe_thread = Some(probe::watch);
        self
    }

    /// The wall clock that maintenance windows and deadlines are scheduled
    /// by (see [`WallClock`]). Default: `SystemTime::now`, read once at
    /// `build()`.
    pub fn wall_clock(mut self, clock: WallClock) -> Self {
        self.parts.recovery.wall_clock = Some(clock);
        self
    }
}
