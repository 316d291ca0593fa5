//! The wall clock a breaker reads again as it runs (`docs/design.md`,
//! "Time"), and the maintenance watch that depends on it.
//!
//! The wall clock is read at build, and that reading is paired with the
//! breaker's clock's. Once a schedule converts wall-clock time (windows or
//! deadlines given, or a window declared), the pair is renewed at most once
//! a second, before a locked operation takes the lock, so that the breaker
//! clock's rate error cannot add up over days: one atomic load otherwise,
//! and only that load for a breaker without a schedule. The machine only
//! receives the new pair (`Machine::reanchor`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::machine::Machine;
use crate::recovery::schedule::WallClock;

/// How often, at most, the wall clock is read again, in nanoseconds.
const REANCHOR_EVERY: u64 = crate::recovery::schedule::REANCHOR_EVERY.as_nanos() as u64;

/// The wall clock a breaker reads again as it runs, and when it next does:
/// only locked operations read them, so they live in a box of their own,
/// off the shared state's lines.
pub(crate) struct Wall {
    clock: WallClock,
    /// From when the next locked operation reads the wall clock again
    /// (`u64::MAX`: not while no schedule converts wall-clock time).
    reanchor_at: AtomicU64,
}

impl Wall {
    /// The wall clock of a breaker whose machine was built at `now`: read
    /// again from a second on if the machine's schedule converts wall-clock
    /// time, else not until a window is declared.
    pub(crate) fn new(clock: WallClock, machine: &Machine, now: u64) -> Wall {
        let reanchor_at = if machine.has_schedule() {
            now.saturating_add(REANCHOR_EVERY)
        } else {
            u64::MAX
        };
        Wall {
            clock,
            reanchor_at: AtomicU64::new(reanchor_at),
        }
    }

    /// A reading of the wall clock, now.
    pub(crate) fn read(&self) -> SystemTime {
        self.clock.read()
    }

    /// A schedule converts wall-clock time from `now` on: the clock is read
    /// again a second later, if it was not read again already.
    pub(crate) fn start(&self, now: u64) {
        let _ = self.reanchor_at.compare_exchange(
            u64::MAX,
            now.saturating_add(REANCHOR_EVERY),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// A reading of the wall clock, and of the breaker's clock (`now`)
    /// after it, when one is due: at most once a second, and only while a
    /// schedule converts wall-clock time. Taken before the lock, so that no
    /// wall clock is read under it. One atomic load otherwise.
    #[inline]
    pub(crate) fn reading(&self, now: impl Fn() -> u64) -> Option<(SystemTime, u64)> {
        let due = self.reanchor_at();
        if due == u64::MAX {
            return None;
        }
        let at = now();
        let next = at.saturating_add(REANCHOR_EVERY);
        if at < due
            || self
                .reanchor_at
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        Some((self.read(), now()))
    }

    /// From when the next locked operation reads the wall clock again.
    fn reanchor_at(&self) -> u64 {
        self.reanchor_at.load(Ordering::Relaxed)
    }
}

/// From when a closed call takes the lock to be checked against a
/// maintenance window: the start of the next one, or sooner, the next wall
/// reading (from `wall`, if there is one), so that a breaker whose calls
/// all succeed without the lock still re-reads the wall clock before a
/// window it watches for.
pub(crate) fn watch_from(machine: &Machine, now: u64, wall: Option<&Wall>) -> u64 {
    match machine.watch_from(now) {
        u64::MAX => u64::MAX,
        from => from.min(wall.map_or(u64::MAX, Wall::reanchor_at)),
    }
}
