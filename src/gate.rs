//! The gate: the word the hot path reads instead of taking the lock, and the
//! quiet successes it lets through without the lock.
//!
//! The word is the machine's state as the hot path needs it
//! (`Machine::gate`), and for a closed breaker a 32-bit **tag** naming the
//! period it was published in. Quiet successes are counted in the
//! per-thread lines of a [`PerThread`], whose quiet counts carry the tag of
//! the current period; the
//! lock side gives them a new tag (a **seal**) before it publishes a word a
//! quiet success must not be counted under. So:
//!
//! 1. A quiet success is counted, by one compare-and-swap on its thread's
//!    slot, only if the slot still carries the tag of the word the caller
//!    checked its ticket against: it lands in that word's period or nowhere.
//! 2. Every locked operation first takes the counts (`take_quiet`), which
//!    all belong to the published period, and files them as successes of
//!    that period, in the window's head bucket, before it changes anything.
//! 3. When a locked operation leaves the machine with a different word or
//!    quiet deadline, [`Gate::publish`] seals before it stores: the seal
//!    returns the successes that landed after step 2 (they are filed as
//!    ordinary successes after the operation, as if each had waited for the
//!    lock), and no success for the old tag can land after it.
//! 4. A caller that fails the check or the compare-and-swap takes the lock
//!    and records its success there, ticket and all.
//!
//! A word is only ever published together with a tag no earlier word of
//! the breaker carried, except after 2^32 seals: a caller would have to stall
//! between its load of the word and its compare-and-swap while 2^32 locked
//! operations change the state, for its success to land in the wrong period.
//! `tests/loom/gate.rs` checks the protocol under a model checker.

use crate::counter::PerThread;
use crate::sync::{AtomicU64, Ordering};

/// What the hot path needs of the machine's state, in the one place that
/// packs it into the gate's 64-bit word ([`encode`](Self::encode)) and
/// takes it apart again ([`decode`](Self::decode)). The machine says which
/// word its state calls for (`Machine::gate`); the gate stores it with its
/// tag; a caller matches on the decoded word.
///
/// The layout: the low two bits are the kind. Closed: bit 2 says quiet,
/// bits 3 to 34 hold the gate's tag, bits 35 to 63 the generation. Open and
/// forced open: the instant, in clock nanoseconds, in bits 2 to 63 (forced
/// open with 0 there is forced open until a reset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// Closed, in the closed period numbered `generation` (modulo
    /// [`GENERATIONS`](Self::GENERATIONS)). `quiet`: a success in it would
    /// change nothing but counts, so it may be counted without the lock.
    Closed { generation: u64, quiet: bool },
    /// Every call takes the lock: half-open, forced closed, or a ramp-up
    /// under way.
    Locked,
    /// Forced open until `until` on the breaker's clock, or until a reset
    /// (`None`).
    ForcedOpen { until: Option<u64> },
    /// Open until `until` on the breaker's clock.
    Open { until: u64 },
}

const CLOSED: u64 = 0;
const LOCKED: u64 = 1;
const FORCED_OPEN: u64 = 2;
const OPEN: u64 = 3;
const KIND: u64 = 3;
/// Closed: a success changes nothing but counts.
const QUIET: u64 = 4;
/// Where a closed word's tag starts (32 bits).
const TAG_SHIFT: u32 = 3;
/// The bits of a closed word that hold the tag.
const TAG_FIELD: u64 = (u32::MAX as u64) << TAG_SHIFT;
/// Where a closed word's generation starts (29 bits).
const GENERATION_SHIFT: u32 = 35;
/// Where an open or forced-open word's instant starts.
const INSTANT_SHIFT: u32 = 2;
/// The latest instant a word holds; a later one is held as this.
const LAST_INSTANT: u64 = u64::MAX >> INSTANT_SHIFT;

impl Word {
    /// How many generations a closed word tells apart: the machine counts
    /// them modulo this.
    pub(crate) const GENERATIONS: u64 = 1 << (64 - GENERATION_SHIFT);

    /// The word as the gate stores it, with `tag` in a closed word (other
    /// words have no room for it and need none: no quiet success is
    /// counted under them).
    #[inline(always)]
    pub(crate) fn encode(self, tag: u32) -> u64 {
        match self {
            Word::Closed { generation, quiet } => {
                ((generation % Self::GENERATIONS) << GENERATION_SHIFT)
                    | (u64::from(tag) << TAG_SHIFT)
                    | if quiet { QUIET } else { 0 }
                    | CLOSED
            }
            Word::Locked => LOCKED,
            // 0 is "until a reset": an expiry is held as 1 at least.
            Word::ForcedOpen { until } => {
                (until.map_or(0, |u| u.clamp(1, LAST_INSTANT)) << INSTANT_SHIFT) | FORCED_OPEN
            }
            Word::Open { until } => (until.min(LAST_INSTANT) << INSTANT_SHIFT) | OPEN,
        }
    }

    /// The word a caller loaded, taken apart (the tag aside).
    #[inline(always)]
    pub(crate) fn decode(word: u64) -> Word {
        match word & KIND {
            CLOSED => Word::Closed {
                generation: word >> GENERATION_SHIFT,
                quiet: word & QUIET != 0,
            },
            LOCKED => Word::Locked,
            FORCED_OPEN => Word::ForcedOpen {
                until: match word >> INSTANT_SHIFT {
                    0 => None,
                    until => Some(until),
                },
            },
            _ => Word::Open {
                until: word >> INSTANT_SHIFT,
            },
        }
    }

    /// The tag of a stored closed word.
    #[inline(always)]
    fn tag(word: u64) -> u32 {
        ((word & TAG_FIELD) >> TAG_SHIFT) as u32
    }
}

/// The word and the quiet deadline, on one read-mostly line, with `hot`:
/// what the holder's hot path reads beside the word and never writes (its
/// time source and flags), so that a call reads one shared line and its
/// thread's count line.
#[repr(align(128))]
struct Line<H> {
    word: AtomicU64,
    quiet_until: AtomicU64,
    hot: H,
}

/// The lock-free face of a breaker. Written only under its lock, but for
/// the counts of its per-thread lines; `H` rides on the word's line.
pub(crate) struct Gate<H = ()> {
    line: Line<H>,
    /// The quiet successes, and the other counts the hot path keeps without
    /// the lock (refusals, admissions), on a line per thread slot: at a
    /// fixed offset from the word's line.
    counts: PerThread,
}

/// What the gate last published: kept under the lock, so the gate is
/// written only when something changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Published {
    /// The machine's word.
    word: Word,
    quiet_until: u64,
    tag: u32,
}

impl<H> Gate<H> {
    /// A gate publishing `word` (from `Machine::gate`) and `quiet_until`,
    /// which it holds as `deadline` (see [`publish`](Self::publish)), with
    /// `hot` on the word's line.
    pub(crate) fn new(word: Word, quiet_until: u64, deadline: u64, hot: H) -> (Gate<H>, Published) {
        let p = Published {
            word,
            quiet_until,
            tag: 0,
        };
        let gate = Gate {
            line: Line {
                word: AtomicU64::new(word.encode(0)),
                quiet_until: AtomicU64::new(deadline),
                hot,
            },
            counts: PerThread::new(0),
        };
        (gate, p)
    }

    /// What rides on the word's line.
    #[inline(always)]
    pub(crate) fn hot(&self) -> &H {
        &self.line.hot
    }

    /// The word, as the hot path reads it.
    #[inline(always)]
    pub(crate) fn word(&self) -> Word {
        Word::decode(self.line.word.load(Ordering::Acquire))
    }

    /// Counts a success of a call admitted while closed in `generation`,
    /// without the lock, if that is the same as recording it under the lock:
    /// the gate is closed and quiet in that generation, and (with a window,
    /// `windowed`) `now()` is before the head bucket's end. Returns whether it
    /// was counted; if not, the caller must record it under the lock.
    #[inline(always)]
    pub(crate) fn count_quiet(
        &self,
        generation: u64,
        windowed: bool,
        now: impl FnOnce() -> u64,
    ) -> bool {
        let quiet = Word::Closed {
            generation,
            quiet: true,
        }
        .encode(0);
        let word = self.line.word.load(Ordering::Acquire);
        if word & !TAG_FIELD != quiet {
            return false;
        }
        // Acquire: a deadline stored after a seal makes the
        // compare-and-swap below see the seal.
        if windowed && now() >= self.line.quiet_until.load(Ordering::Acquire) {
            return false;
        }
        self.counts.try_add_quiet(Word::tag(word))
    }

    /// The per-thread counts, for the refusals and admissions the hot path
    /// counts beside the quiet successes.
    #[inline(always)]
    pub(crate) fn counts(&self) -> &PerThread {
        &self.counts
    }

    /// Under the lock: the quiet successes counted since the last take, all
    /// in the period `p` names.
    #[inline]
    pub(crate) fn take_quiet(&self, p: &Published) -> u64 {
        self.counts.take_quiet(p.tag)
    }

    /// Under the lock, after an operation on the machine `m`: publishes
    /// `key(m)` (the word and the quiet deadline) if it differs from `p`.
    /// The gate holds the quiet deadline as `deadline(quiet_until)`: the
    /// reading of the clock quiet successes check (`count_quiet`'s `now`)
    /// before which that clock is sure to be before `quiet_until`.
    ///
    /// If the published word let quiet successes through, it seals first,
    /// and hands the successes that landed since the last take to
    /// `late(m, n, generation)`, which must record them as `n` successes
    /// of calls admitted in `generation`; then it reads `key(m)` again and
    /// stores it. Returns what `late` returned.
    #[inline]
    pub(crate) fn publish<M, R>(
        &self,
        p: &mut Published,
        m: &mut M,
        key: impl Fn(&M) -> (Word, u64),
        late: impl FnOnce(&mut M, u64, u64) -> Option<R>,
        deadline: impl FnOnce(u64) -> u64,
    ) -> Option<R> {
        if key(m) == (p.word, p.quiet_until) {
            return None;
        }
        let mut result = None;
        if let Word::Closed {
            generation,
            quiet: true,
        } = p.word
        {
            p.tag = p.tag.wrapping_add(1);
            let n = self.counts.retag_quiet(p.tag);
            if n > 0 {
                result = late(m, n, generation);
            }
        }
        let (word, quiet_until) = key(m);
        // The deadline first: a caller that sees the new word must not pair
        // it with an older deadline.
        if quiet_until != p.quiet_until {
            self.line
                .quiet_until
                .store(deadline(quiet_until), Ordering::Release);
        }
        self.line.word.store(word.encode(p.tag), Ordering::Release);
        p.word = word;
        p.quiet_until = quiet_until;
        result
    }
}

/// The protocol's entry points, public for the model checker's test
/// (`tests/loom/gate.rs`) and only under `--cfg loom`.
#[cfg(loom)]
#[allow(missing_docs, missing_debug_implementations)]
pub mod model {
    use super::Word;

    /// Makes this thread count in slot `i` of every counter.
    pub fn use_slot(i: usize) {
        crate::counter::use_slot(i);
    }

    /// A closed word for `generation`, quiet or not, as the machine's
    /// stand-in gives it (encoded, without a tag).
    pub fn closed(generation: u64, quiet: bool) -> u64 {
        Word::Closed { generation, quiet }.encode(0)
    }

    pub struct Gate(super::Gate);
    pub struct Published(super::Published);

    impl Gate {
        pub fn new(word: u64) -> (Gate, Published) {
            let (g, p) = super::Gate::new(Word::decode(word), u64::MAX, u64::MAX, ());
            (Gate(g), Published(p))
        }

        pub fn count_quiet(&self, generation: u64) -> bool {
            self.0.count_quiet(generation, false, || 0)
        }

        pub fn take_quiet(&self, p: &Published) -> u64 {
            self.0.take_quiet(&p.0)
        }

        pub fn publish<M, R>(
            &self,
            p: &mut Published,
            m: &mut M,
            word: impl Fn(&M) -> u64,
            late: impl FnOnce(&mut M, u64, u64) -> Option<R>,
        ) -> Option<R> {
            self.0.publish(
                &mut p.0,
                m,
                |m| (Word::decode(word(m)), u64::MAX),
                late,
                |d| d,
            )
        }
    }
}
