//! The RAII permits for calls that are not a single closure: one that
//! borrows its breaker, and one that owns a handle to it; and
//! [`Breaker::try_acquire`], which hands them out.

use std::fmt;
use std::mem::ManuallyDrop;

use crate::breaker::Breaker;
use crate::cause::Note;
use crate::classify::ErrorView;
use crate::error::{IsStdError, Rejected};
use crate::machine::Ticket;
use crate::Verdict;

impl Breaker {
    /// Asks to make one call, for code that is not a single closure.
    ///
    /// On success, report the outcome on the returned [`Permit`]. A refusal
    /// means nothing should be attempted.
    ///
    /// # Errors
    ///
    /// [`Rejected`] when the breaker is open, forced open, or half-open with
    /// its probes already out.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        self.admit()
            .map(|(ticket, started)| Permit::new(self, ticket, started))
    }

    /// [`try_acquire`](Self::try_acquire), with a permit that holds its own
    /// handle to the breaker: it can move into a closure or another thread.
    /// Costs one reference-count increment more than `try_acquire`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    #[inline]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Rejected> {
        self.try_acquire().map(|permit| {
            let this = ManuallyDrop::new(permit);
            OwnedPermit {
                breaker: this.breaker.clone(),
                ticket: this.ticket,
                started: this.started,
                settled: false,
            }
        })
    }
}

/// Permission to make one call, from [`Breaker::try_acquire`].
///
/// Report what happened with [`finish`](Self::finish) (the call's result,
/// classified by the breaker's classifier), or directly with
/// [`record`](Self::record) and a [`Verdict`]; each consumes the permit.
///
/// **A permit dropped without an outcome counts as a failure.** The usual
/// ways to get there are an early return on an error (`?`) and a panic, and
/// both mean the call did not succeed. If the call turned out not to be
/// needed, record [`Verdict::Ignore`]; to keep the caller's own errors
/// (a parse error after the vendor answered) off the vendor's count, report
/// the vendor's result with [`finish`](Self::finish) before going on. A
/// permit that is never dropped (leaked with `mem::forget`, or held by a
/// thread that hangs) is not lost either: as a half-open probe it expires
/// after `max_probe_duration`.
///
/// ```
/// # use fusebox::{Breaker, CallPath, Classifier};
/// # let breaker = Breaker::builder("alt-data").call_path(CallPath::AltData)
/// #     .classifier(Classifier::every_error_is_a_failure()).build().unwrap();
/// # fn fetch() -> Result<String, std::io::Error> { Ok("42".into()) }
/// # fn run(breaker: &Breaker) -> Result<u32, Box<dyn std::error::Error>> {
/// let permit = breaker.try_acquire()?;
/// let body = fetch();
/// permit.finish(&body); // the vendor's result, classified and counted
/// let value: u32 = body?.parse()?; // a parse error here is not the vendor's
/// # Ok(value)
/// # }
/// # assert_eq!(run(&breaker).unwrap(), 42);
/// ```
#[must_use = "a permit counts as a failure when dropped without an outcome"]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    ticket: Ticket,
    started: u64,
}

/// Permission to make one call, from [`Breaker::try_acquire_owned`]: a
/// [`Permit`] that holds its own handle to the breaker, so that it can move
/// into a closure, a task or another thread (`Send + 'static`).
///
/// Reported the same way as a [`Permit`], and **like a permit, counts as a
/// failure when dropped without an outcome.**
///
/// ```
/// # use fusebox::{Breaker, CallPath, Classifier};
/// # let breaker = Breaker::builder("alt-data").call_path(CallPath::AltData)
/// #     .classifier(Classifier::every_error_is_a_failure()).build().unwrap();
/// let permit = breaker.try_acquire_owned().expect("closed");
/// let worker = std::thread::spawn(move || {
///     let answer = Ok::<_, std::io::Error>(7);
///     permit.finish(&answer);
///     answer
/// });
/// assert_eq!(worker.join().unwrap().unwrap(), 7);
/// ```
#[must_use = "a permit counts as a failure when dropped without an outcome"]
pub struct OwnedPermit {
    breaker: Breaker,
    ticket: Ticket,
    started: u64,
    /// Set once the outcome is recorded: the drop then only lets go of the
    /// breaker handle.
    settled: bool,
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

    /// [`judged`](Self::judged), taking the value and handing it back, so
    /// that `call` never makes it round-trip through memory on its default
    /// path.
    #[inline(never)]
    pub(crate) fn judged_value<T: 'static>(self, value: T) -> T {
        self.judged(&value);
        value
    }

    /// Records the outcome once; the drop, which would count a failure,
    /// does not run.
    #[inline(always)]
    fn settle_once(self, verdict: Verdict, note: Option<&Note>) {
        let this = ManuallyDrop::new(self);
        this.breaker
            .settle_noted(this.ticket, this.started, verdict, note);
    }
}

impl Permit<'_> {
    /// This permit set aside, reporting nothing, while its call is out of
    /// the caller's hands: an async caller's future between two polls
    /// (`src/future.rs`).
    // Only the async guards (feature `async`) park permits; the core does
    // not change shape with the features.
    #[allow(dead_code)]
    #[inline(always)]
    pub(crate) fn park(self) -> Parked {
        let this = ManuallyDrop::new(self);
        Parked {
            ticket: this.ticket,
            started: this.started,
        }
    }
}

/// A [`Permit`] set aside between two polls of the future it guards: what
/// the permit holds, and no borrow of the breaker, so that the future that
/// keeps it may own its breaker or borrow it. Dropped, it reports nothing:
/// its keeper [`resume`](Self::resume)s it, to report an outcome, or
/// [`cancel`](Self::cancel)s it.
#[derive(Debug)]
pub(crate) struct Parked {
    ticket: Ticket,
    started: u64,
}

// Only the async guards (feature `async`) park permits.
#[allow(dead_code)]
impl Parked {
    /// The permit again, from the breaker that issued it.
    #[inline(always)]
    pub(crate) fn resume(self, breaker: &Breaker) -> Permit<'_> {
        Permit::new(breaker, self.ticket, self.started)
    }

    /// The call ended without an outcome: its future was dropped before it
    /// finished. Neither a success nor a failure; a probe gives its place
    /// back.
    pub(crate) fn cancel(self, breaker: &Breaker) {
        breaker.cancel(self.ticket, self.started);
    }
}

impl OwnedPermit {
    /// Records the outcome once; the drop then only lets go of the breaker
    /// handle (a `ManuallyDrop` here would leak the breaker).
    #[inline(always)]
    fn settle_once(mut self, verdict: Verdict, note: Option<&Note>) {
        self.settled = true;
        self.breaker
            .settle_noted(self.ticket, self.started, verdict, note);
    }
}

/// The reporting methods, the same on both permits.
macro_rules! reporting {
    ($permit:ty, $name:literal) => {
        impl $permit {
            /// Whether this permit is a half-open probe: its outcome decides
            /// whether the breaker closes.
            pub fn is_probe(&self) -> bool {
                matches!(self.ticket, Ticket::Probe { .. })
            }

            /// Reports the call's result: `Ok` is a success, an `Err` counts
            /// as the breaker's classifier says (a refusal by an inner
            /// breaker is ignored). Returns the verdict reported.
            ///
            /// For error types that are not `std::error::Error`, use
            /// [`finish_any`](Self::finish_any).
            #[inline]
            pub fn finish<T, E>(self, result: &Result<T, E>) -> Verdict
            where
                T: 'static,
                E: IsStdError,
            {
                match result {
                    Ok(_) if !self.breaker.has_result_classifier() => {
                        self.record(Verdict::Success);
                        Verdict::Success
                    }
                    Ok(v) => self.judged(v),
                    Err(e) => {
                        let view = ErrorView::of_error(e);
                        let verdict = self.breaker.classifier().classify_view(view);
                        self.record_failed::<E>(verdict, view);
                        verdict
                    }
                }
            }

            /// [`finish`](Self::finish) for an error of any type, seen as
            /// [`Breaker::call_any`](crate::Breaker::call_any) sees it.
            #[inline]
            pub fn finish_any<T: 'static, E: 'static>(self, result: &Result<T, E>) -> Verdict {
                match result {
                    Ok(_) if !self.breaker.has_result_classifier() => {
                        self.record(Verdict::Success);
                        Verdict::Success
                    }
                    Ok(v) => self.judged(v),
                    Err(e) => {
                        let view = ErrorView::of_value(e);
                        let verdict = self.breaker.classifier().classify_value(e);
                        self.record_failed::<E>(verdict, view);
                        verdict
                    }
                }
            }

            /// Reports the result classifier's verdict on `value`, out of
            /// line: the default configuration's inlined success path
            /// never carries it.
            #[inline(never)]
            pub(crate) fn judged<T: 'static>(self, value: &T) -> Verdict {
                let verdict = self.breaker.judge_ok(value);
                self.record(verdict);
                verdict
            }

            /// Reports `verdict` on an error of type `E` seen as `view`:
            /// a failure keeps a note of its message, in case the breaker
            /// opens on it. Out of line: the note's buffer must not weigh
            /// on the inlined success and refusal paths of `call`.
            #[inline(never)]
            pub(crate) fn record_failed<E>(self, verdict: Verdict, view: ErrorView<'_>) {
                if !matches!(verdict, Verdict::Failure | Verdict::Throttled(_)) {
                    return self.record(verdict);
                }
                let note = Note::of_error::<E>(view.as_error());
                self.settle_once(verdict, Some(&note));
            }

            /// Reports `verdict`: [`Verdict::Success`], [`Verdict::Failure`]
            /// (counts against the dependency), [`Verdict::Ignore`] (the
            /// result says nothing about the dependency, or the call was
            /// not made after all: frees a probe slot without deciding
            /// anything) or [`Verdict::Throttled`].
            #[inline(always)]
            pub fn record(self, verdict: Verdict) {
                self.settle_once(verdict, None);
            }
        }

        impl fmt::Debug for $permit {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct($name)
                    .field("breaker", &self.breaker.name())
                    .field("probe", &self.is_probe())
                    .finish()
            }
        }
    };
}

reporting!(Permit<'_>, "Permit");
reporting!(OwnedPermit, "OwnedPermit");

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.breaker
            .settle(self.ticket, self.started, Verdict::Failure);
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker
                .settle(self.ticket, self.started, Verdict::Failure);
        }
    }
}
