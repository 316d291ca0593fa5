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
//! One question is put to a second clock: whether a quiet success's window
//! bucket has ended. With the feature `coarse-clock` on Linux, and the
//! default clock, the gate asks it of the kernel's coarse monotonic clock
//! against a deadline that is reached no later than the breaker's own time
//! reaches the bucket's end (`clock/coarse.rs` says how and what it assumes).
//!
//! By default the clock is `quanta::Clock::new()` (made once per process);
//! tests inject the clock half of `quanta::Clock::mock()` with
//! [`BreakerBuilder::clock`](crate::BreakerBuilder::clock) and move time with
//! its handle.

#[cfg(all(feature = "coarse-clock", target_os = "linux"))]
mod coarse;

use std::sync::OnceLock;
use std::time::Duration;

#[cfg(all(feature = "coarse-clock", target_os = "linux"))]
use coarse::Coarse;

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
    /// The coarse clock quiet successes are checked on, with the default
    /// clock only: an injected one (a test's mock) is the only time.
    #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
    coarse: Option<Coarse>,
}

impl Time {
    /// Reads `clock`, or quanta's monotonic clock when none is injected.
    pub(crate) fn new(clock: Option<quanta::Clock>) -> Self {
        #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
        let injected = clock.is_some();
        let clock = clock.unwrap_or_else(monotonic);
        #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
        let coarse = if injected {
            None
        } else {
            Coarse::probe(&clock)
        };
        Time {
            base: clock.now(),
            clock,
            #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
            coarse,
        }
    }

    /// What a quiet success compares with the gate's deadline
    /// ([`quiet_deadline`](Self::quiet_deadline)): a coarse reading when
    /// the breaker has the coarse clock, else [`now`](Self::now).
    #[inline(always)]
    pub(crate) fn quiet_now(&self) -> u64 {
        #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
        if let Some(coarse) = self.coarse {
            return coarse.now();
        }
        self.now()
    }

    /// The deadline the gate holds for quiet successes that may be counted
    /// until `until` (nanoseconds since the breaker was built; `u64::MAX`,
    /// forever): `until` itself, or with the coarse clock, the coarse
    /// reading before which the breaker's time is sure to be before
    /// `until`. Read under the lock, when the gate publishes.
    pub(crate) fn quiet_deadline(&self, until: u64) -> u64 {
        #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
        if let (Some(coarse), true) = (self.coarse, until != u64::MAX) {
            return coarse.deadline(until, || self.now());
        }
        until
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

    #[test]
    fn an_injected_clock_is_also_the_quiet_successes_clock() {
        let (clock, mock) = quanta::Clock::mock();
        let time = Time::new(Some(clock));
        mock.increment(Duration::from_nanos(2_000));
        assert_eq!(time.quiet_now(), 2_000);
        assert_eq!(time.quiet_deadline(9_000), 9_000);
        assert_eq!(time.quiet_deadline(u64::MAX), u64::MAX);
    }

    #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
    #[test]
    fn the_default_clock_checks_quiet_successes_on_the_coarse_clock_the_probe_chose() {
        // Which clock reads faster is measured once per process, and a
        // busy machine may measure either way: the test checks that the
        // default clock follows the measurement, never what it found.
        let time = Time::new(None);
        assert_eq!(time.coarse.is_some(), Coarse::probe(&monotonic()).is_some());
        let res = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
        assert!(
            Coarse::with_resolution(res).is_some(),
            "Linux has a coarse monotonic clock with ticks of at most 10 ms: {res:?}"
        );
    }

    #[cfg(all(feature = "coarse-clock", target_os = "linux"))]
    #[test]
    fn with_the_coarse_clock_a_bucket_ends_early_by_two_ticks_and_the_slack() {
        let mut time = Time::new(None);
        time.coarse = Coarse::with_resolution(rustix::time::clock_getres(
            rustix::time::ClockId::MonotonicCoarse,
        ));
        assert!(time.coarse.is_some());
        assert_eq!(time.quiet_deadline(u64::MAX), u64::MAX);
        // A bucket that ends in a minute: its coarse deadline is ahead of
        // the coarse clock by nearly a minute, less two ticks and the slack.
        let now = time.now();
        let deadline = time.quiet_deadline(now + 60_000_000_000);
        let ahead = deadline.saturating_sub(time.quiet_now());
        assert!(
            (59_000_000_000..60_000_000_000).contains(&ahead),
            "{ahead} ns ahead"
        );
        // One that has ended: no quiet success until the lock moves it.
        assert!(time.quiet_deadline(now) <= time.quiet_now());
    }
}
