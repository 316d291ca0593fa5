//! Why a link did not answer.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::name::Inline;
use crate::Rejected;

/// Why one link of a [`Chain`](super::Chain) did not answer a lookup.
///
/// The first four say **nothing was attempted** on that link (a fallback
/// was always safe); [`Failed`](Skip::Failed), [`Declined`](Skip::Declined)
/// and, with a deadline pool (feature `isolation`), `TimedOut` say the
/// provider was called.
#[derive(Debug)]
#[non_exhaustive]
pub enum Skip<E> {
    /// The link's breaker refused: open (with its `retry_after`), half-open
    /// with its probe out, forced open, ramping or in maintenance. Or the
    /// link's call returned an error that holds a breaker's refusal (a
    /// provider calling through an endpoint breaker of its own): that
    /// refusal, the error around it dropped. The provider was not called.
    Refused(Rejected),
    /// The link's bulkhead or deadline pool had no free slot. The provider
    /// was not called.
    #[cfg(feature = "isolation")]
    Full(crate::isolation::Full),
    /// The lookup's deadline ([`ChainBuilder::deadline`](super::ChainBuilder::deadline))
    /// had passed before this link's turn. The provider was not called.
    DeadlinePassed {
        /// The lookup's deadline.
        deadline: Duration,
    },
    /// A cache link held nothing for this lookup.
    NotCached,
    /// A cache link held an answer older than its `max_staleness`.
    TooOld {
        /// How old the kept answer is.
        age: Duration,
    },
    /// The provider was called and failed (the classifier counted it
    /// against the provider).
    Failed(E),
    /// The provider was called and abandoned at its deadline pool's
    /// deadline; it may still be running.
    #[cfg(feature = "isolation")]
    TimedOut(crate::isolation::TimedOut),
    /// The provider gave a deterministic "no" (its classifier's `Ignore`,
    /// an HTTP 404) on a link built to go on past one
    /// ([`ChainBuilder::continue_past_no`](super::ChainBuilder::continue_past_no)).
    Declined(E),
}

impl<E> Skip<E> {
    /// Whether the provider was never called for this lookup (a fallback
    /// was safe and a retry would duplicate nothing on this link).
    pub fn nothing_attempted(&self) -> bool {
        !matches!(
            self.reason(),
            SkipReason::Failed | SkipReason::TimedOut | SkipReason::Declined
        )
    }

    /// The breaker's refusal, if the link was refused.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            Skip::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// Why, without what the skip carries: what the chain's counts and
    /// metrics are kept by.
    pub fn reason(&self) -> SkipReason {
        match self {
            Skip::Refused(_) => SkipReason::Refused,
            #[cfg(feature = "isolation")]
            Skip::Full(_) => SkipReason::Full,
            Skip::DeadlinePassed { .. } => SkipReason::Deadline,
            Skip::NotCached => SkipReason::NotCached,
            Skip::TooOld { .. } => SkipReason::TooOld,
            Skip::Failed(_) => SkipReason::Failed,
            #[cfg(feature = "isolation")]
            Skip::TimedOut(_) => SkipReason::TimedOut,
            Skip::Declined(_) => SkipReason::Declined,
        }
    }
}

/// The kind of a [`Skip`], one per variant: what a link's skips are
/// counted by ([`SkipCounts`](super::SkipCounts)). It prints as the
/// `reason` label of the chain's metrics (`refused`, `full`, `deadline`,
/// `not_cached`, `too_old`, `failed`, `timed_out`, `declined`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkipReason {
    /// [`Skip::Refused`].
    Refused,
    /// `Skip::Full` (feature `isolation`).
    Full,
    /// [`Skip::DeadlinePassed`].
    Deadline,
    /// [`Skip::NotCached`].
    NotCached,
    /// [`Skip::TooOld`].
    TooOld,
    /// [`Skip::Failed`].
    Failed,
    /// `Skip::TimedOut` (feature `isolation`).
    TimedOut,
    /// [`Skip::Declined`].
    Declined,
}

impl SkipReason {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [SkipReason; 8] = [
        SkipReason::Refused,
        SkipReason::Full,
        SkipReason::Deadline,
        SkipReason::NotCached,
        SkipReason::TooOld,
        SkipReason::Failed,
        SkipReason::TimedOut,
        SkipReason::Declined,
    ];

    /// Its place in [`ALL`](Self::ALL).
    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// The label, as the metrics write it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SkipReason::Refused => "refused",
            SkipReason::Full => "full",
            SkipReason::Deadline => "deadline",
            SkipReason::NotCached => "not_cached",
            SkipReason::TooOld => "too_old",
            SkipReason::Failed => "failed",
            SkipReason::TimedOut => "timed_out",
            SkipReason::Declined => "declined",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Writes `err` and its `source()` chain, `a: b: c`, leaving out a message
/// that repeats the one before it (a wrapper that prints its source's).
pub(super) fn error_chain(
    f: &mut fmt::Formatter<'_>,
    err: &(dyn StdError + 'static),
) -> fmt::Result {
    let mut last = String::new();
    for (i, link) in crate::error::chain(err).enumerate() {
        let text = link.to_string();
        if text != last {
            write!(f, "{}{text}", if i == 0 { "" } else { ": " })?;
        }
        last = text;
    }
    Ok(())
}

/// Prints what happened, with the provider's error and its chain.
impl<E: StdError + 'static> fmt::Display for Skip<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::Refused(r) => write!(f, "refused ({r})"),
            #[cfg(feature = "isolation")]
            Skip::Full(full) => write!(f, "no slot ({full})"),
            Skip::DeadlinePassed { deadline } => write!(
                f,
                "not tried, the lookup's deadline of {} had passed",
                crate::duration::display(*deadline)
            ),
            Skip::NotCached => f.write_str("nothing cached"),
            Skip::TooOld { age } => write!(
                f,
                "cached answer too old ({})",
                crate::duration::display(*age)
            ),
            Skip::Failed(e) => {
                f.write_str("provider error (")?;
                error_chain(f, e)?;
                f.write_str(")")
            }
            #[cfg(feature = "isolation")]
            Skip::TimedOut(t) => write!(f, "timed out ({t})"),
            Skip::Declined(e) => {
                f.write_str("declined (")?;
                error_chain(f, e)?;
                f.write_str(")")
            }
        }
    }
}

/// One link that did not answer a lookup, and why.
#[derive(Debug)]
pub struct Skipped<E> {
    pub(super) link: Inline,
    pub(super) skip: Skip<E>,
}

impl<E> Skipped<E> {
    /// The link's name.
    pub fn link(&self) -> &str {
        self.link.as_str()
    }

    /// Why it did not answer.
    pub fn skip(&self) -> &Skip<E> {
        &self.skip
    }
}

impl<E: StdError + 'static> fmt::Display for Skipped<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.link, self.skip)
    }
}

/// Writes `skipped` as `` `a`: reason; `b`: reason ``.
pub(super) fn list<E: StdError + 'static>(
    f: &mut fmt::Formatter<'_>,
    skipped: &[Skipped<E>],
) -> fmt::Result {
    for (i, s) in skipped.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{s}")?;
    }
    Ok(())
}

/// The source of a skip, for an error's `source()`.
pub(super) fn source_of<E: StdError + 'static>(
    skip: &Skip<E>,
) -> Option<&(dyn StdError + 'static)> {
    match skip {
        Skip::Refused(r) => Some(r),
        #[cfg(feature = "isolation")]
        Skip::Full(full) => Some(full),
        #[cfg(feature = "isolation")]
        Skip::TimedOut(t) => Some(t),
        Skip::Failed(e) | Skip::Declined(e) => Some(e),
        Skip::DeadlinePassed { .. } | Skip::NotCached | Skip::TooOld { .. } => None,
    }
}
