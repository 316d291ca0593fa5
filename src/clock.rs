//! Where a breaker's time comes from.
//!
//! Time is monotonic, from a `quanta::Clock`, never the wall clock. Inside the
//! crate it is a count of nanoseconds since the breaker was built.
//!
//! Every read is a direct read of that clock (`Clock::now`: the CPU's
//! time-stamp counter scaled to nanoseconds where quanta trusts it, otherwise
//! `CLOCK_MONOTONIC`). Nothing is cached between reads, and no thread keeps
//! anything fresh, so no other code in the process can make a breaker's time
//! stale: not by stopping or slowing quanta's upkeep thread (quanta's "recent"
//! time, which this crate does not read), and not by forking (the child reads
//! the same clock). No thread keeps a breaker's time: the threads the crate
//! may start (the notifier, the health-probe watcher; see the crate docs)
//! read this clock as any caller does.
//!
//! By default the clock is `quanta::Clock::new()` (made once per process);
//! tests inject the clock half of `quanta::Clock::mock()` with
//! [`BreakerBuilder::clock`](crate::BreakerBuilder::clock) and move time with
//! its handle.

use std::sync::OnceLock;
use std::time::Duration;

/// The default clock, set up once per process (quanta probes the CPU and
/// calibrates the counter when it makes one) and cloned into each breaker.
fn monotonic() -> quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new).clone()
}

pub(crate) struct Time {
    clock: quanta::Clock,
    /// When the breaker was built.
    base: quanta::Instant,
}

impl Time {
    /// Reads `clock`, or quanta's monotonic clock when none is injected.
    pub(crate) fn new(clock: Option<quanta::Clock>) -> Self {
        let clock = clock.unwrap_or_else(monotonic);
        Time {
            base: clock.now(),
            clock,
        }
    }

    /// Nanoseconds since the breaker was built: one direct clock read.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now().duration_since(self.base).as_nanos() as u64
    }

    /// The instant `nanos` after the breaker was built.
    pub(crate) fn instant(&self, nanos: u64) -> quanta::Instant {
        self.base + Duration::from_nanos(nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nanoseconds_from_the_clock_as_it_was_at_build() {
        let (clock, mock) = quanta::Clock::mock();
        mock.increment(Duration::from_secs(7));
        let time = Time::new(Some(clock));
        assert_eq!(time.now(), 0);
        mock.increment(Duration::from_nanos(1_500));
        assert_eq!(time.now(), 1_500);
        assert_eq!(time.instant(1_500), time.base + Duration::from_nanos(1_500));
    }

    #[test]
    fn the_default_clock_moves_without_any_upkeep_thread() {
        // Recent time frozen, as a stopped upkeep thread would leave it.
        quanta::set_recent(quanta::Instant::now());
        let time = Time::new(None);
        let first = time.now();
        let later = std::time::Instant::now() + Duration::from_millis(5);
        while std::time::Instant::now() < later {
            std::hint::spin_loop();
        }
        assert!(time.now() >= first + 4_000_000, "time moved by 5 ms");
    }
}
