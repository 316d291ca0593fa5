//! The RAII permit for calls that are not a single closure.

use std::fmt;
use std::mem::ManuallyDrop;

use crate::machine::Ticket;
use crate::{Breaker, Outcome};

/// Permission to make one call, from [`Breaker::try_acquire`].
///
/// Report what happened with [`success`](Self::success),
/// [`failure`](Self::failure), [`ignore`](Self::ignore) or
/// [`record`](Self::record); each consumes the permit.
///
/// **A permit dropped without an outcome counts as a failure.** The usual
/// ways to get there are an early return on an error (`?`) and a panic, and
/// both mean the call did not succeed. If the call turned out not to be
/// needed, call [`ignore`](Self::ignore). A permit that is never dropped
/// (leaked with `mem::forget`, or held by a thread that hangs) is not lost
/// either: as a half-open probe it expires after `max_probe_duration`.
///
/// ```
/// # use fusebox::{Breaker, CallPath, Classifier};
/// # let breaker = Breaker::builder("alt-data").call_path(CallPath::AltData)
/// #     .classifier(Classifier::every_error_is_a_failure()).build().unwrap();
/// match breaker.try_acquire() {
///     Ok(permit) => {
///         // ... make the call ...
///         permit.success();
///     }
///     Err(rejected) => {
///         // Nothing was attempted: take the fallback.
///         assert!(rejected.retry_after().is_some());
///     }
/// };
/// ```
#[must_use = "a permit counts as a failure when dropped without an outcome"]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    ticket: Ticket,
    started: u64,
}

impl<'a> Permit<'a> {
    #[inline(always)]
    pub(crate) fn new(breaker: &'a Breaker, ticket: Ticket, started: u64) -> Self {
        Permit {
            breaker,
            ticket,
            started,
        }
    }

    /// Whether this permit is a half-open probe: its outcome decides whether
    /// the breaker closes.
    pub fn is_probe(&self) -> bool {
        matches!(self.ticket, Ticket::Probe { .. })
    }

    /// The call succeeded.
    #[inline(always)]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// The call failed in a way that counts against the dependency.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// The call's result says nothing about the dependency (or the call was
    /// not made after all). Frees a probe slot without deciding anything.
    pub fn ignore(self) {
        self.record(Outcome::Ignored);
    }

    /// Reports `outcome`.
    #[inline(always)]
    pub fn record(self, outcome: Outcome) {
        // Settled here, so the drop (which would count a failure) must not run.
        let this = ManuallyDrop::new(self);
        this.breaker.settle(this.ticket, this.started, outcome);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.breaker
            .settle(self.ticket, self.started, Outcome::Failure);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("breaker", &self.breaker.name())
            .field("probe", &self.is_probe())
            .finish()
    }
}
