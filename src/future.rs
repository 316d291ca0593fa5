//! A future through the breaker (feature `async`): [`Breaker::call_async`]
//! and [`Breaker::call_any_async`], and the [`Guarded`] future they return;
//! and the one poll of a guarded future that the bulkhead's and tower's
//! futures share.
//!
//! A guarded future asks the breaker when it is first polled, not when it
//! is made, and holds its permit between polls set aside ([`Parked`]). Its
//! outcome is reported the moment its inner future completes; dropped
//! before that, it reports a cancelled call: neither a success nor a
//! failure. `std::future` only: no runtime, no allocation.

use std::future::{Future, IntoFuture};
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::breaker::Breaker;
use crate::error::{CallError, IsStdError};
use crate::permit::{Parked, Permit};
use crate::Verdict;

impl Breaker {
    /// Runs `future` through the breaker: the async [`call`](Self::call).
    ///
    /// Nothing happens until the returned future is first polled: then the
    /// breaker is asked, and if it refuses, the result is
    /// [`CallError::Rejected`] at once and `future` is dropped without ever
    /// being polled. Otherwise `future` runs, and its result is classified
    /// when it completes, as `call` classifies a closure's: an `Err`
    /// through the breaker's [`Classifier`](crate::Classifier) (returned
    /// unchanged in [`CallError::Failed`]), an `Ok` through its result
    /// classifier if it has one. A half-open probe's outcome counts the
    /// moment `future` completes. A panic while `future` is polled counts as
    /// a failure and unwinds to the caller.
    ///
    /// **Dropped before it completes** (a `select!` that took another
    /// branch, a timeout put around it, a task aborted at shutdown), the
    /// call counts as **cancelled**: neither a success nor a failure, in
    /// [`Totals::cancelled`](crate::Totals::cancelled); a probe gives its
    /// place back. A synchronous [`Permit`] dropped without an outcome, by
    /// contrast, is a failure.
    ///
    /// # A timeout is the call's failure when it is inside
    ///
    /// A timeout put **around** the guarded future drops it: cancelled,
    /// and the breaker learns nothing of a vendor that hangs. Put it
    /// **inside**, so that the elapsed deadline is the call's error and the
    /// classifier counts it: with tokio,
    /// `breaker.call_async(async { tokio::time::timeout(d, fetch()).await? })`,
    /// where tokio's `Elapsed` converts into an `io::Error` of kind
    /// `TimedOut` ([`Classifier::every_error_is_a_failure`](crate::Classifier::every_error_is_a_failure) and the HTTP
    /// classifier count both as failures). The runtime's timer is the
    /// caller's: this crate brings none.
    ///
    /// ```
    /// use fusebox::{Breaker, CallError, CallPath, Classifier, State};
    /// use std::future::{self, Future};
    /// use std::io;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    ///
    /// // One poll, as a runtime would make it.
    /// fn poll<F: Future>(future: F) -> Poll<F::Output> {
    ///     pin!(future).poll(&mut Context::from_waker(Waker::noop()))
    /// }
    ///
    /// let breaker = Breaker::builder("quotes")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .consecutive_failure_threshold(1)
    ///     .build()?;
    ///
    /// // A timeout inside the guarded future is the call's error: a failure.
    /// let timed_out = async { Err::<f64, _>(io::Error::from(io::ErrorKind::TimedOut)) };
    /// let answer = poll(breaker.call_async(timed_out));
    /// assert!(matches!(answer, Poll::Ready(Err(CallError::Failed(_)))));
    /// assert_eq!(breaker.state(), State::Open);
    ///
    /// // Refused at its first poll: the vendor's future is never polled.
    /// let never = async { unreachable!("never polled") };
    /// let answer: Poll<Result<f64, CallError<io::Error>>> = poll(breaker.call_async(never));
    /// assert!(matches!(answer, Poll::Ready(Err(CallError::Rejected(_)))));
    ///
    /// // Made and dropped before its first poll: nothing asked, nothing counted.
    /// drop(breaker.call_async(future::ready(Ok::<_, io::Error>(1.0))));
    /// let totals = breaker.snapshot().totals;
    /// assert_eq!((totals.calls, totals.short_circuits, totals.cancelled), (1, 1, 0));
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    ///
    /// # Cost
    ///
    /// The returned future borrows the breaker (a `&Breaker` lives across
    /// `.await` in an async fn; for a `'static` task, move a clone of the
    /// breaker into the task). It allocates nothing, and a success on a
    /// healthy closed breaker costs what `call`'s does, plus the poll:
    /// `docs/performance.md` has the paired figures. A cancellation takes
    /// one lock round trip.
    #[inline]
    pub fn call_async<F, T, E>(&self, future: F) -> Guarded<'_, F::IntoFuture>
    where
        F: IntoFuture<Output = Result<T, E>>,
        T: 'static,
        E: IsStdError,
    {
        Guarded::new(self, future.into_future(), finish::<T, E>)
    }

    /// [`call_async`](Self::call_async) for an error type of any kind
    /// (`anyhow::Error`, `Box<dyn Error + Send + Sync>`, an enum of the
    /// application's own), classified as [`call_any`](Self::call_any)
    /// classifies it.
    #[inline]
    pub fn call_any_async<F, T, E>(&self, future: F) -> Guarded<'_, F::IntoFuture>
    where
        F: IntoFuture<Output = Result<T, E>>,
        T: 'static,
        E: 'static,
    {
        Guarded::new(self, future.into_future(), finish_any::<T, E>)
    }
}

/// How a guarded future reports a result that is not a plain success
/// (an error, or an `Ok` for the result classifier): [`Permit::finish`]
/// or [`Permit::finish_any`], chosen when the future is made.
pub(crate) type Finish<O> = for<'p> fn(Permit<'p>, &O) -> Verdict;

/// [`Permit::finish`], as a [`Finish`].
pub(crate) fn finish<T: 'static, E: IsStdError>(permit: Permit<'_>, r: &Result<T, E>) -> Verdict {
    permit.finish(r)
}

/// [`Permit::finish_any`], as a [`Finish`].
pub(crate) fn finish_any<T: 'static, E: 'static>(permit: Permit<'_>, r: &Result<T, E>) -> Verdict {
    permit.finish_any(r)
}

pin_project_lite::pin_project! {
    /// A future run through a breaker, from [`Breaker::call_async`] or
    /// [`Breaker::call_any_async`]: its output is the inner future's, with
    /// the error in a [`CallError`].
    ///
    /// `Send` when the inner future is, `Unpin` when it is. Dropped after
    /// its first poll and before it completes, it reports its call as
    /// cancelled.
    #[must_use = "futures do nothing unless polled: a guarded future asks the breaker at its first poll"]
    pub struct Guarded<'a, F: Future> {
        breaker: &'a Breaker,
        stage: Stage,
        finish: Finish<F::Output>,
        #[pin]
        future: F,
    }

    impl<F: Future> PinnedDrop for Guarded<'_, F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.stage.cancel(this.breaker);
        }
    }
}

impl<'a, F: Future> Guarded<'a, F> {
    #[inline(always)]
    fn new(breaker: &'a Breaker, future: F, finish: Finish<F::Output>) -> Self {
        Guarded {
            breaker,
            stage: Stage::Unpolled,
            finish,
            future,
        }
    }
}

impl<F, T, E> Future for Guarded<'_, F>
where
    F: Future<Output = Result<T, E>>,
    T: 'static,
{
    type Output = Result<T, CallError<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let breaker = *this.breaker;
        let permit = match this.stage.take() {
            Stage::Out(parked) => parked.resume(breaker),
            Stage::Unpolled => match breaker.try_acquire() {
                Ok(permit) => permit,
                Err(refused) => return Poll::Ready(Err(CallError::Rejected(refused))),
            },
            Stage::Done => panic!("a fusebox::Guarded future polled after it completed"),
        };
        let poll = this.future.poll(cx);
        conclude(breaker, permit, this.stage, poll, *this.finish)
            .map(|result| result.map_err(CallError::Failed))
    }
}

impl<F: Future> std::fmt::Debug for Guarded<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("breaker", &self.breaker.name())
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}

/// Where a guarded future is: not yet polled (nothing asked), out (its
/// permit parked between polls), or done (completed or refused, its outcome
/// reported).
#[derive(Debug)]
pub(crate) enum Stage {
    Unpolled,
    Out(Parked),
    Done,
}

impl Stage {
    /// Where it was; `Done` from now on, until [`conclude`] parks the
    /// permit again.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Stage {
        mem::replace(self, Stage::Done)
    }

    /// Reports a call still out as cancelled; nothing otherwise.
    #[inline]
    pub(crate) fn cancel(&mut self, breaker: &Breaker) {
        if let Stage::Out(parked) = self.take() {
            parked.cancel(breaker);
        }
    }
}

/// One poll of the inner future of a guarded one, made under its `permit`,
/// concluded: pending, the permit is parked in `stage`; complete, the
/// outcome is reported (a plain success as `call` reports it, anything else
/// through `finish`) and `stage` stays done. The caller polls with the
/// permit alive, so that a panic in the inner future drops it, which counts
/// a failure, as in `call`.
#[inline(always)]
pub(crate) fn conclude<T, E>(
    breaker: &Breaker,
    permit: Permit<'_>,
    stage: &mut Stage,
    poll: Poll<Result<T, E>>,
    finish: Finish<Result<T, E>>,
) -> Poll<Result<T, E>>
where
    T: 'static,
{
    match poll {
        Poll::Pending => {
            *stage = Stage::Out(permit.park());
            Poll::Pending
        }
        Poll::Ready(result) => {
            match result {
                Ok(_) if !breaker.has_result_classifier() => permit.record(Verdict::Success),
                _ => {
                    finish(permit, &result);
                }
            }
            Poll::Ready(result)
        }
    }
}
