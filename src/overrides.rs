//! An operator's hand on a running breaker: overrides (forced open, forced
//! closed, for a while or until a reset), the reset, and maintenance
//! windows declared on the fly.

use std::time::{Duration, SystemTime};

use crate::breaker::{until, Breaker};
use crate::delivery::Outbox;
use crate::machine::{Machine, Transition};
use crate::recovery::declare::WindowEnd;
use crate::wall::Wall;
use crate::ConfigError;

impl Breaker {
    /// Opens the breaker until [`reset`](Self::reset): every call is refused
    /// and nothing probes. `actor` and `note` say who asked and why; they are
    /// in the state change and the snapshot.
    pub fn force_open(&self, actor: &str, note: &str) {
        self.manual(|m, now| m.force_open(now, actor.into(), note.into(), None));
    }

    /// [`force_open`](Self::force_open) for `lasting`, after which the
    /// breaker returns to normal operation by itself: closed, its counters
    /// cleared as by a reset. The first call or snapshot at or after the
    /// expiry ends the override, with [`Reason::OverrideExpired`]; until
    /// then refusals stay lock-free, with one clock read more.
    ///
    /// [`Reason::OverrideExpired`]: crate::Reason::OverrideExpired
    pub fn force_open_for(&self, actor: &str, note: &str, lasting: Duration) {
        self.manual(|m, now| {
            m.force_open(now, actor.into(), note.into(), Some(until(now, lasting)))
        });
    }

    /// Closes the breaker until [`reset`](Self::reset), for a dependency
    /// known to be good (one flapping on a transient the application
    /// tolerates, or a vendor declared healthy by its own status page):
    /// every call is admitted and no failure counts towards opening
    /// (lifetime totals still count). `actor` and `note` say who asked and
    /// why. While forced closed, each call takes one lock round trip.
    pub fn force_closed(&self, actor: &str, note: &str) {
        self.manual(|m, now| m.force_closed(now, actor.into(), note.into(), None));
    }

    /// [`force_closed`](Self::force_closed) for `lasting`, after which the
    /// breaker returns to normal operation by itself, closed with cleared
    /// counters.
    pub fn force_closed_for(&self, actor: &str, note: &str, lasting: Duration) {
        self.manual(|m, now| {
            m.force_closed(now, actor.into(), note.into(), Some(until(now, lasting)))
        });
    }

    /// Closes the breaker, clears its trip counters and returns the open
    /// period to its base. Lifetime totals are kept.
    pub fn reset(&self, actor: &str, note: &str) {
        self.manual(|m, now| m.reset(now, actor.into(), note.into()));
    }

    /// Declares a one-off maintenance window on the running breaker, from
    /// `start` (`None`: now) to `end`, as if it had been given to the builder
    /// with [`MaintenanceWindow::once`]: failures inside it are neutral and
    /// the snapshot shows it. Wall-clock instants are converted through the
    /// breaker's one wall-clock reading, taken at build; "now" is that
    /// reading carried forward by the breaker's clock. `actor` and `note`
    /// say who declared it and why, in a warn log line. Returns the window's
    /// start and end. Takes the lock once.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for a window that ends before it starts or before
    /// now, or one too many (64 that have not ended); nothing changes.
    ///
    /// [`MaintenanceWindow::once`]: crate::trading::MaintenanceWindow::once
    pub fn declare_maintenance(
        &self,
        start: Option<SystemTime>,
        end: WindowEnd,
        actor: &str,
        note: &str,
    ) -> Result<(SystemTime, SystemTime), ConfigError> {
        // A fresh wall reading: "now" is the wall clock's, however long the
        // breaker has run.
        let wall = self.inner.wall.as_deref().map(Wall::read);
        let now = self.now();
        let window = {
            let mut core = self.lock();
            if let (Some(wall), Some(w)) = (wall, &self.inner.wall) {
                core.machine.reanchor(wall, now);
                w.start(now);
            }
            let window = core.machine.declare_maintenance(now, start, end)?;
            self.store_watch_from(&core, now);
            window
        };
        log::warn!(
            "breaker `{}`: {} declared maintenance from {:?} to {:?}: {}",
            self.inner.name,
            crate::text::shown(actor),
            window.0,
            window.1,
            crate::text::shown(note)
        );
        Ok(window)
    }

    fn manual(&self, op: impl FnOnce(&mut Machine, u64) -> Transition) {
        let now = self.now();
        {
            let mut core = self.lock();
            let t = op(&mut core.machine, now);
            self.publish(&mut core, t);
        }
        self.inner.dispatch(1);
    }
}
