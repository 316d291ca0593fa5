//! The kernel's coarse monotonic clock, for one question only: has a quiet
//! success's bucket ended?
//!
//! A closed success of a breaker with a failure-rate window is counted
//! without the lock while the window's head bucket is current (`src/gate.rs`).
//! Asking that of the breaker's own clock is a full read of the time-stamp
//! counter, about 11 ns on the machines of `docs/performance.md`, and most of
//! such a success's cost. Linux keeps a coarse copy of `CLOCK_MONOTONIC`,
//! updated at each timer tick, that the vDSO reads in about 4 ns without the
//! counter. This file turns the head bucket's end, in the breaker's time, into
//! a deadline on the coarse clock that is reached **no later** than the
//! breaker's time reaches the bucket's end, so that the quiet path files a
//! success in the head bucket only when the breaker's own clock would have.
//!
//! The conversion ([`deadline`]) anchors the two clocks under the lock (the
//! coarse one read first, then the breaker's), and takes off what could make
//! the coarse clock look early:
//!
//! - **its lag**: a coarse reading trails `CLOCK_MONOTONIC` by less than one
//!   tick, its resolution; twice the resolution is taken off, for a tick
//!   handled late;
//! - **the rates**: the breaker's clock (the time-stamp counter, calibrated
//!   once by quanta) and `CLOCK_MONOTONIC` (slewed by NTP, at most 500 parts
//!   per million) may run at different rates; [`RATE_SLACK`] of the span to
//!   the deadline is taken off, one part per thousand.
//!
//! So a success counted without the lock happened, by the breaker's clock,
//! before its bucket ended, as long as the kernel updates its coarse clock
//! within two ticks; if a tick is handled later than that (a stalled virtual
//! machine), a success may be filed in the bucket before its own by at most
//! the excess delay. Successes near a bucket's end (the last two ticks and
//! the slack) take the lock and read the breaker's clock, as before.
//! `tests` below check the rule against a model of the two clocks.

use std::sync::OnceLock;

use rustix::time::{clock_getres, clock_gettime, ClockId};

/// The share of the span to a deadline taken off for the clocks' rates:
/// the deadline moves in by one part in `RATE_SLACK`.
const RATE_SLACK: u64 = 1_000;

/// The coarsest resolution worth reading: with ticks longer than this a
/// coarse deadline would send too many successes to the lock.
const MAX_RESOLUTION: u64 = 10_000_000;

/// The coarse clock, where it is good enough.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coarse {
    /// Nanoseconds per tick, as the kernel reports it. Never 0, which
    /// keeps an `Option<Coarse>` to 8 bytes, on the line every call reads.
    resolution: std::num::NonZeroU64,
}

impl Coarse {
    /// The coarse clock, if the kernel has one with ticks of at most 10 ms
    /// that reads faster than `precise` (once per process).
    pub(crate) fn probe(precise: &quanta::Clock) -> Option<Coarse> {
        static PROBED: OnceLock<Option<Coarse>> = OnceLock::new();
        *PROBED.get_or_init(|| {
            let coarse = Coarse::with_resolution(clock_getres(ClockId::MonotonicCoarse))?;
            coarse.is_faster_than(precise).then_some(coarse)
        })
    }

    pub(crate) fn with_resolution(res: rustix::time::Timespec) -> Option<Coarse> {
        let resolution = u64::try_from(res.tv_sec)
            .ok()?
            .checked_mul(1_000_000_000)?
            .checked_add(u64::try_from(res.tv_nsec).ok()?)?;
        let resolution = std::num::NonZeroU64::new(resolution)?;
        (resolution.get() <= MAX_RESOLUTION).then_some(Coarse { resolution })
    }

    /// Whether a coarse read costs less than a read of `precise`: where
    /// the vDSO is missing (some sandboxes), a coarse read is a system call,
    /// far dearer than the time-stamp counter. The fastest of a few batches
    /// of each, so that a descheduled batch does not decide; a wrong answer
    /// costs only speed, never correctness.
    fn is_faster_than(self, precise: &quanta::Clock) -> bool {
        const READS: usize = 64;
        let fastest = |read: &dyn Fn()| {
            (0..5)
                .map(|_| {
                    let start = precise.raw();
                    for _ in 0..READS {
                        read();
                    }
                    precise.raw().wrapping_sub(start)
                })
                .min()
                .unwrap_or(u64::MAX)
        };
        let coarse = fastest(&|| {
            std::hint::black_box(self.now());
        });
        let direct = fastest(&|| {
            std::hint::black_box(precise.now());
        });
        coarse < direct
    }

    /// One coarse reading, in nanoseconds. Out of line: a call through the
    /// vDSO, kept out of the callers' bodies so that their other paths do
    /// not make room for it.
    #[inline(never)]
    pub(crate) fn now(self) -> u64 {
        let t = clock_gettime(ClockId::MonotonicCoarse);
        (t.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(t.tv_nsec as u64)
    }

    /// The coarse deadline for `until` on the clock read by `precise`
    /// (nanoseconds), anchored now; see [`deadline`].
    pub(crate) fn deadline(self, until: u64, precise: impl FnOnce() -> u64) -> u64 {
        let coarse_at = self.now();
        deadline(coarse_at, precise(), until, self.resolution.get())
    }
}

/// The coarse deadline for `until` on the precise clock, from the coarse
/// reading `coarse_at` and the precise reading `precise_at` taken after it:
/// a coarse reading below the result is taken at a moment the precise clock
/// reads below `until` (see the module docs for what is assumed).
pub(crate) fn deadline(coarse_at: u64, precise_at: u64, until: u64, resolution: u64) -> u64 {
    let span = until.saturating_sub(precise_at);
    coarse_at
        .saturating_add(span - span / RATE_SLACK)
        .saturating_sub(2 * resolution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Parts per million the model lets the two clocks' rates differ by.
    const MAX_SKEW_PPM: i64 = 900;

    proptest! {
        /// A model of the two clocks: `CLOCK_MONOTONIC` at the anchor is
        /// `mono_at`; the coarse clock trails it by less than two ticks at
        /// each reading; the precise clock is read some time after the
        /// coarse one, and from there runs at a rate within 900 ppm of the
        /// monotonic one. Whenever the coarse reading is below the
        /// deadline, the precise reading is below `until`.
        #[test]
        fn a_coarse_reading_before_the_deadline_is_a_precise_one_before_the_end(
            mono_at in 0u64..1 << 50,
            resolution in 1_000u64..=MAX_RESOLUTION,
            anchor_lag in 0u64..1_000_000_000,
            read_gap in 0u64..1_000_000,
            precise_at in 0u64..1 << 50,
            span in 0u64..1 << 40,
            elapsed in 0u64..1 << 41,
            later_lag in 0u64..1_000_000_000,
            skew_ppm in -MAX_SKEW_PPM..=MAX_SKEW_PPM,
        ) {
            let anchor_lag = anchor_lag % (2 * resolution);
            let later_lag = later_lag % (2 * resolution);
            let coarse_at = mono_at - anchor_lag.min(mono_at);
            let until = precise_at + span;
            let d = deadline(coarse_at, precise_at, until, resolution);
            // The precise clock was read `read_gap` after the coarse one;
            // `elapsed` later by the monotonic clock, it has moved by
            // `elapsed - read_gap`, scaled by its rate.
            let moved = elapsed.saturating_sub(read_gap) as i128;
            let precise_then = precise_at as i128 + moved + moved * skew_ppm as i128 / 1_000_000;
            let coarse_then = (mono_at + elapsed).saturating_sub(later_lag);
            if coarse_then < d {
                prop_assert!(
                    precise_then < until as i128,
                    "coarse {coarse_then} < deadline {d}, but precise {precise_then} >= {until}"
                );
            }
        }

        /// The quiet path stays open for nearly the whole bucket: up to
        /// two ticks and one part in a thousand before its end.
        #[test]
        fn the_deadline_gives_up_only_two_ticks_and_the_slack(
            coarse_at in 0u64..1 << 50,
            precise_at in 0u64..1 << 50,
            resolution in 1_000u64..=MAX_RESOLUTION,
            span in 0u64..1 << 40,
        ) {
            let d = deadline(coarse_at, precise_at, precise_at + span, resolution);
            let given_up = (coarse_at + span).saturating_sub(d);
            prop_assert!(given_up <= 2 * resolution + span / RATE_SLACK);
        }
    }

    #[test]
    fn a_bucket_already_ended_sends_every_success_to_the_lock() {
        let d = deadline(1_000_000_000, 900, 800, 4_000_000);
        assert!(
            d < 1_000_000_000,
            "deadline {d} is before the coarse clock now"
        );
    }

    #[test]
    fn the_kernel_has_a_coarse_clock_that_moves_with_the_monotonic_one() {
        let coarse = Coarse::with_resolution(clock_getres(ClockId::MonotonicCoarse))
            .expect("Linux has CLOCK_MONOTONIC_COARSE with ticks of at most 10 ms");
        let first = coarse.now();
        let later = std::time::Instant::now() + std::time::Duration::from_millis(30);
        while std::time::Instant::now() < later {
            std::hint::spin_loop();
        }
        let second = coarse.now();
        assert!(
            second >= first + 30_000_000 - 2 * coarse.resolution.get(),
            "{first} then {second}"
        );
    }
}
