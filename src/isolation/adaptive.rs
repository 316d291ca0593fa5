//! The adaptive limit: its settings ([`AdaptiveLimit`]), and what runs
//! around the arithmetic of `gradient.rs`: which calls are timed, the table
//! of timed calls in flight, the lock a judgement takes (never waited for),
//! and the sampled log line.
//!
//! **Which calls are timed.** Timing costs two clock reads, more than the
//! rest of an admission and release together, so a bulkhead that is less
//! than a quarter full times one admission in `2^shift` (counted per thread,
//! so that no shared counter is touched), and a fuller one times every
//! admission. `shift` follows the call rate, set at each judgement so that
//! a window of the least span (twice the baseline, at least 1 ms) holds
//! about four times `min_samples` timed calls: 0 at a few hundred calls a
//! second, 10 (the most) at tens of millions. A vendor that stalls fills the bulkhead, and then every call
//! is timed and tracked, whatever the rate.
//!
//! **Who judges.** No thread of its own: a timed call that returns files
//! its latency and judges the window if it is due; a refusal counted in by
//! the same per-thread tick looks at the calls in flight and judges it too,
//! so a bulkhead whose calls have all stopped returning is still judged by
//! the callers it refuses. Either only tries the lock: a caller that finds
//! it held leaves the judgement (and, for a returned call, its latency) to
//! the next one.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::gradient::{Gradient, Judged, Settings, KEPT};
use super::tracked::{Tracked, SLOTS};
use crate::check::{check, nanos, Invalid};
use crate::clock::Time;
use crate::name::Inline;

/// A limit that moves with the dependency's latency, between a floor and
/// the bulkhead's `max_concurrent`, for
/// [`BulkheadBuilder::adaptive`](super::BulkheadBuilder::adaptive).
///
/// The limit is a whole number of calls, the one
/// [`BulkheadSnapshot::limit`](super::BulkheadSnapshot::limit) and
/// [`Full::limit`](super::Full::limit) show, and it starts at
/// `max_concurrent`. Each window of calls is judged by its median latency
/// (calls still in flight counting with their age so far) against a
/// baseline, a slow moving average of the windows. With `L` the limit and
/// `gradient` = `tolerance` × baseline ÷ latency (the two as the snapshot's
/// [`adaptive`](super::BulkheadSnapshot::adaptive) part shows them, the
/// baseline as it stood before the window):
///
/// - a healthy window (`gradient` at least 1) grows `L` by `⌊L/2⌋`, at
///   least one call, up to `max_concurrent`: 2, 3, 4, 6, 9, 13, 19, …;
/// - a slower one cuts `L` to `⌊L × gradient⌋`, at least one call fewer,
///   but never below `⌈L/2⌉` (half, rounded up) nor below `floor`: 15 falls
///   to 8 at most.
///
/// `docs/isolation.md` has the rule and why it was chosen.
///
/// ```
/// use fusebox::isolation::{AdaptiveLimit, Bulkhead};
///
/// let pricing = Bulkhead::builder("pricing")
///     .max_concurrent(32)
///     .adaptive(AdaptiveLimit::new().floor(2))
///     .build()?;
/// assert_eq!(pricing.snapshot().limit, 32);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `floor` | 1 |
/// | `tolerance` | 1.5 |
/// | `min_samples` | 10 |
/// | `baseline_window` | 60 s |
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use = "settings do nothing until given to BulkheadBuilder::adaptive"]
pub struct AdaptiveLimit {
    floor: usize,
    tolerance: f64,
    min_samples: usize,
    baseline_window: Duration,
}

impl Default for AdaptiveLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl AdaptiveLimit {
    /// The defaults above.
    pub const fn new() -> Self {
        AdaptiveLimit {
            floor: 1,
            tolerance: 1.5,
            min_samples: 10,
            baseline_window: Duration::from_secs(60),
        }
    }

    /// The least the limit falls to, however slow the dependency: the
    /// calls that find out when it has recovered. At least 1, at most
    /// `max_concurrent`.
    pub fn floor(mut self, n: usize) -> Self {
        self.floor = n;
        self
    }

    /// How far a window's latency may rise above the baseline before the
    /// limit is cut: 1.5 cuts at half as slow again. At least 1.
    pub fn tolerance(mut self, t: f64) -> Self {
        self.tolerance = t;
        self
    }

    /// Calls a window needs before it is judged, those still in flight
    /// included: fewer judge sooner and on less. 1 to 64.
    pub fn min_samples(mut self, n: usize) -> Self {
        self.min_samples = n;
        self
    }

    /// How fast the baseline follows the latency: each window moves it by
    /// the window's span over this (on the logarithm of the latency), so a
    /// latency that drifts over this long is followed, and a step lasting
    /// a tenth of it moves the baseline by about a tenth of the way (on a
    /// logarithmic scale). More than zero.
    pub fn baseline_window(mut self, d: Duration) -> Self {
        self.baseline_window = d;
        self
    }

    /// The least the limit falls to.
    pub(crate) fn floor_value(&self) -> usize {
        self.floor
    }

    /// Checks the settings against a bulkhead of `ceiling`.
    pub(super) fn check(&self, ceiling: usize) -> Result<Settings, Invalid> {
        check(
            "floor",
            (1..=ceiling).contains(&self.floor),
            "must be at least 1 and at most max_concurrent",
            self.floor,
        )?;
        check(
            "tolerance",
            self.tolerance.is_finite() && self.tolerance >= 1.0,
            "must be a number at least 1",
            self.tolerance,
        )?;
        check(
            "min_samples",
            (1..=KEPT).contains(&self.min_samples),
            "must be within 1 to 64",
            self.min_samples,
        )?;
        check(
            "baseline_window",
            !self.baseline_window.is_zero(),
            "must be more than zero",
            crate::duration::display(self.baseline_window),
        )?;
        Ok(Settings {
            floor: self.floor,
            ceiling,
            tolerance: self.tolerance,
            min_samples: self.min_samples,
            baseline_window: nanos(self.baseline_window),
        })
    }
}

thread_local! {
    /// This thread's admissions and refusals, for choosing the timed ones.
    static TICK: Cell<u32> = const { Cell::new(0) };
}

/// The most `shift` grows to: one call in 1,024 timed.
const MAX_SHIFT: u32 = 10;

/// A timed call, in one word so that a slot stays two words, built and
/// read with whole-word moves on the hot path: when it started (its low 58
/// bits, in nanoseconds of the bulkhead's clock; a latency is taken modulo
/// 2^58, so only a call out for nine years would be misread) above the
/// tracking word's index plus one (6 bits, [`UNTRACKED`] when the table had
/// no room). 0 is a call not timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Timed(u64);

const WORD_BITS: u32 = 6;
const WORD_MASK: u64 = (1 << WORD_BITS) - 1;
const START_MASK: u64 = (1 << (64 - WORD_BITS)) - 1;
/// The low bits of a timed call the table had no room for.
const UNTRACKED: u64 = WORD_MASK;

impl Timed {
    /// A call that is not timed.
    pub(super) const NONE: Timed = Timed(0);

    fn new(start: u64, word: Option<usize>) -> Timed {
        let word = word.map_or(UNTRACKED, |i| i as u64 + 1);
        Timed((start & START_MASK) << WORD_BITS | word)
    }

    /// Whether the call is timed.
    #[inline(always)]
    pub(super) fn is_timed(self) -> bool {
        self.0 != 0
    }

    /// The tracking word's index, if it has one.
    fn word(self) -> Option<usize> {
        match self.0 & WORD_MASK {
            UNTRACKED => None,
            w => Some(w as usize - 1),
        }
    }

    /// Nanoseconds from its start to `now`.
    fn latency(self, now: u64) -> u64 {
        now.wrapping_sub(self.0 >> WORD_BITS) & START_MASK
    }
}

/// At most one log line a second per bulkhead.
const LOG_EVERY: u64 = 1_000_000_000;

/// An adaptive bulkhead's timing and judgement.
pub(super) struct Adaptive {
    time: Time,
    tracked: Tracked,
    /// One admission in `2^shift` is timed while the bulkhead is less than
    /// a quarter full.
    shift: AtomicU32,
    state: Mutex<State>,
    floor: usize,
    min_samples: usize,
}

struct State {
    gradient: Gradient,
    last: Option<Judged>,
    /// When a line was last logged, and the limit it showed.
    logged_at: Option<u64>,
    logged_limit: usize,
}

/// What a snapshot shows of the adaptive limit.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub(super) floor: usize,
    pub(super) latency: Option<Duration>,
    pub(super) baseline: Option<Duration>,
}

impl Adaptive {
    pub(super) fn new(settings: Settings, floor: usize, clock: Option<quanta::Clock>) -> Adaptive {
        let time = Time::new(clock);
        let now = time.now();
        Adaptive {
            tracked: Tracked::new(),
            shift: AtomicU32::new(0),
            state: Mutex::new(State {
                gradient: Gradient::new(settings, now, SLOTS),
                last: None,
                logged_at: None,
                logged_limit: settings.ceiling,
            }),
            floor,
            min_samples: settings.min_samples,
            time,
        }
    }

    /// Counts one admission or refusal of this thread, and returns its
    /// tick when it is one of the counted-in ones.
    #[inline(always)]
    pub(super) fn tick(&self) -> Option<u32> {
        let tick = TICK.with(|t| {
            let tick = t.get().wrapping_add(1);
            t.set(tick);
            tick
        });
        let mask = (1u32 << self.shift.load(Ordering::Relaxed)) - 1;
        (tick & mask == 0).then_some(tick)
    }

    /// An admission with `n` calls then in flight under `limit`: timed
    /// when the tick counts it in, or when the bulkhead is a quarter full
    /// (a vendor that stalls fills it, and then every call is tracked).
    #[inline(always)]
    pub(super) fn admitted(&self, n: u64, limit: u64) -> Timed {
        match self.tick() {
            Some(tick) => self.start(tick),
            None if 4 * n > limit => self.start(n as u32),
            None => Timed::NONE,
        }
    }

    /// Starts timing an admitted call (tracked from word `tick`'s place).
    #[cold]
    #[inline(never)]
    fn start(&self, tick: u32) -> Timed {
        let start = self.time.now();
        let word = self.tracked.claim(tick as usize % SLOTS, start);
        Timed::new(start, word)
    }

    /// A timed call returned: files its latency and judges the window if
    /// it is due, publishing a new limit through `publish`.
    #[cold]
    pub(super) fn finish(&self, timed: Timed, name: Inline, publish: impl FnOnce(usize)) {
        let now = self.time.now();
        if let Some(word) = timed.word() {
            self.tracked.free(word);
        }
        if let Some(mut state) = self.state.try_lock() {
            state.gradient.record(timed.latency(now));
            self.judge(&mut state, now, name, publish);
        }
    }

    /// A counted-in refusal: judges the window if it is due.
    #[cold]
    pub(super) fn look(&self, name: Inline, publish: impl FnOnce(usize)) {
        if let Some(mut state) = self.state.try_lock() {
            let now = self.time.now();
            self.judge(&mut state, now, name, publish);
        }
    }

    fn judge(&self, state: &mut State, now: u64, name: Inline, publish: impl FnOnce(usize)) {
        let mut ages = [0; SLOTS];
        let n = self.tracked.ages(now, &mut ages);
        if !state.gradient.due(now, n) {
            return;
        }
        let judged = state.gradient.judge(now, &ages[..n]);
        self.resample(&judged, state.gradient.min_span());
        if judged.to != judged.from {
            publish(judged.to);
        }
        state.last = Some(judged);
        // Sampled: a limit that moves every window is reported at most
        // once a second, each line with the limit since the last one.
        if judged.to != state.logged_limit && state.logged_at.is_none_or(|at| now - at >= LOG_EVERY)
        {
            log_limit(name, &judged, state.logged_limit, self.floor);
            state.logged_at = Some(now);
            state.logged_limit = judged.to;
        }
    }

    /// Sets `shift` so that a window of the least span holds about four
    /// times `min_samples` timed calls at the rate this one saw.
    fn resample(&self, judged: &Judged, min_span: u64) {
        if min_span == 0 || judged.span == 0 {
            return;
        }
        let shift = self.shift.load(Ordering::Relaxed);
        let calls = (judged.returned as f64) * f64::from(1u32 << shift);
        let per_span = calls * min_span as f64 / judged.span as f64;
        let want = per_span / (4 * self.min_samples) as f64;
        let shift = if want >= 2.0 {
            (want.log2().floor() as u32).min(MAX_SHIFT)
        } else {
            0
        };
        self.shift.store(shift, Ordering::Relaxed);
    }

    /// The limit's floor, the last window's latency and the baseline.
    pub(super) fn seen(&self) -> Seen {
        let state = self.state.lock();
        Seen {
            floor: self.floor,
            latency: state.last.map(|j| Duration::from_nanos(j.latency)),
            baseline: state.gradient.baseline().map(Duration::from_nanos),
        }
    }
}

/// One line for a limit that moved since the last line (`before`): `warn`
/// at the floor, `info` otherwise.
fn log_limit(name: Inline, judged: &Judged, before: usize, floor: usize) {
    let line = Line {
        name,
        judged,
        before,
        floor,
    };
    if judged.to <= floor {
        log::warn!("{line}");
    } else {
        log::info!("{line}");
    }
}

struct Line<'a> {
    name: Inline,
    judged: &'a Judged,
    before: usize,
    floor: usize,
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let j = self.judged;
        write!(
            f,
            "bulkhead `{}`: limit {} ({} at the last report, floor {}); window latency {}",
            self.name,
            j.to,
            self.before,
            self.floor,
            crate::duration::display(Duration::from_nanos(j.latency)),
        )?;
        if let Some(b) = j.baseline {
            write!(
                f,
                " against a baseline of {}",
                crate::duration::display(Duration::from_nanos(b))
            )?;
        }
        write!(f, ", {} returned and {} in flight", j.returned, j.in_flight)
    }
}

impl fmt::Debug for Adaptive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adaptive")
            .field("floor", &self.floor)
            .field("shift", &self.shift.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_call_keeps_its_start_and_word_in_one_nonzero_word() {
        for (start, word) in [
            (0, Some(0)),
            (0, None),
            (12_345, Some(31)),
            (u64::MAX, None),
        ] {
            let t = Timed::new(start, word);
            assert!(t.is_timed());
            assert_eq!(t.word(), word);
            assert_eq!(t.latency(start.wrapping_add(900)), 900);
        }
        assert!(!Timed::NONE.is_timed());
    }
}
