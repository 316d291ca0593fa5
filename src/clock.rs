//! Where a breaker's time comes from.
//!
//! Time is monotonic, from `quanta`, never the wall clock. Inside the crate it
//! is a count of nanoseconds since the breaker was built.
//!
//! By default a breaker reads `quanta::Instant::recent()`: one atomic load,
//! kept fresh by quanta's upkeep thread. The first breaker built this way
//! starts that thread (ticking every millisecond) unless one is already
//! running, and keeps it for the life of the process. If the upkeep thread an
//! application started itself is stopped later (its handle dropped), recent
//! time would stand still, and an open breaker would refuse forever; so the
//! slow paths compare recent time with a direct clock read now and then, and
//! when it has fallen behind they start the upkeep thread again and log it.
//!
//! A clock injected with [`BreakerBuilder::clock`](crate::BreakerBuilder::clock)
//! (a mock in tests) is read directly, and no thread is started.

use std::time::Duration;

use parking_lot::Mutex;

/// How often the upkeep thread refreshes recent time.
const UPKEEP_INTERVAL: Duration = Duration::from_millis(1);
/// How far recent time may lag a direct read before it counts as stopped.
const STALE_AFTER: Duration = Duration::from_millis(250);

/// The upkeep thread this crate started, kept for the life of the process.
static UPKEEP: Mutex<Option<quanta::Handle>> = parking_lot::const_mutex(None);

/// Starts quanta's upkeep thread unless one is running.
fn ensure_upkeep() {
    let mut ours = UPKEEP.lock();
    match quanta::Upkeep::new(UPKEEP_INTERVAL).start() {
        Ok(handle) => {
            // Replacing a handle of ours would stop its thread; ours are
            // never stopped, so a new start only succeeds when none is ours.
            if let Some(old) = ours.replace(handle) {
                std::mem::forget(old);
            }
        }
        // Someone else's thread is running: recent time is fresh.
        Err(quanta::Error::UpkeepRunning) => {}
        Err(e) => log::warn!(
            "fusebox: could not start quanta's upkeep thread ({e}); \
             breakers read the clock directly"
        ),
    }
}

pub(crate) enum Time {
    /// quanta's recent time.
    Recent { base: quanta::Instant },
    /// An injected clock (a mock in tests).
    Clock {
        clock: quanta::Clock,
        base: quanta::Instant,
    },
}

impl Time {
    /// The default source: recent time, with the upkeep thread running.
    pub(crate) fn recent() -> Self {
        ensure_upkeep();
        Time::Recent {
            base: quanta::Instant::now(),
        }
    }

    /// An injected clock.
    pub(crate) fn clock(clock: quanta::Clock) -> Self {
        Time::Clock {
            base: clock.now(),
            clock,
        }
    }

    /// Nanoseconds since the breaker was built.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        let (t, base) = match self {
            Time::Recent { base } => (quanta::Instant::recent(), *base),
            Time::Clock { clock, base } => (clock.now(), *base),
        };
        t.duration_since(base).as_nanos() as u64
    }

    /// The instant `nanos` after the breaker was built.
    pub(crate) fn instant(&self, nanos: u64) -> quanta::Instant {
        match self {
            Time::Recent { base } | Time::Clock { base, .. } => *base + Duration::from_nanos(nanos),
        }
    }

    /// Off the hot path, now and then: if recent time has stopped, restart
    /// the upkeep thread.
    #[cold]
    pub(crate) fn check_fresh(&self) {
        if let Time::Recent { .. } = self {
            let lag = quanta::Instant::now().duration_since(quanta::Instant::recent());
            if lag > STALE_AFTER {
                log::warn!(
                    "fusebox: quanta's recent time is {lag:?} behind the clock (was its upkeep \
                     thread stopped?); restarting it"
                );
                ensure_upkeep();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopped_recent_time_is_noticed_and_restarted() {
        let time = Time::recent();
        // What a dropped upkeep handle leaves behind: recent time frozen.
        let ours = UPKEEP
            .lock()
            .take()
            .expect("the first breaker starts upkeep");
        drop(ours);
        quanta::set_recent(quanta::Instant::now() - STALE_AFTER * 4);
        let frozen = time.now();
        assert_eq!(time.now(), frozen, "nothing refreshes recent time");
        time.check_fresh();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while time.now() == frozen && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(time.now() > frozen, "recent time moves again");
    }
}
