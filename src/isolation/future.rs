//! Isolation for futures (feature `async`): [`Bulkhead::call_async`] and
//! [`Isolated::call_async`], and the [`IsolatedFuture`] they return.
//!
//! A future never waits for a slot, whatever the bulkhead's `max_wait`:
//! waiting would block the runtime's thread, and a future that should wait
//! can be retried by its task. It holds its slot from its first poll until
//! it completes or is dropped. There is no deadline pool for futures: the
//! runtime times a future out, inside the guard (see
//! [`Breaker::call_async`]).

use std::error::Error as StdError;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::bulkhead::Refusal;
use super::{Bulkhead, Isolated, IsolationError, Slot};
use crate::future::{conclude, finish, Stage};
use crate::Breaker;

impl Bulkhead {
    /// Runs `future` through `breaker`, then this bulkhead: the async
    /// [`call`](Self::call).
    ///
    /// At its first poll the breaker is asked, then a slot taken: refused
    /// by either, the result is ready at once and `future` is never polled.
    /// **A full bulkhead refuses at once**, even with a `max_wait`: a
    /// future does not block its runtime's thread waiting for a slot. The
    /// slot is given back the moment `future` completes, or when the
    /// returned future is dropped (then the call counts as cancelled, as
    /// with [`Breaker::call_async`]).
    ///
    /// ```
    /// use fusebox::isolation::Bulkhead;
    /// use fusebox::{Breaker, CallPath, Classifier};
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let breaker = Breaker::builder("pricing")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .build()?;
    /// let bulkhead = Bulkhead::builder("pricing").max_concurrent(1).build()?;
    /// let mut cx = Context::from_waker(Waker::noop());
    ///
    /// // The first call holds the only slot while its vendor is pending.
    /// let mut first = pin!(bulkhead.call_async(&breaker, async {
    ///     std::future::pending::<Result<f64, std::io::Error>>().await
    /// }));
    /// assert!(first.as_mut().poll(&mut cx).is_pending());
    /// // The second is refused at its first poll, and never waits.
    /// let second = pin!(bulkhead.call_async(&breaker, async { Ok::<_, std::io::Error>(1.0) }));
    /// let Poll::Ready(Err(refused)) = second.poll(&mut cx) else { panic!("admitted") };
    /// assert!(matches!(refused, fusebox::isolation::IsolationError::Full(_)));
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    #[inline]
    pub fn call_async<'a, F, T, E>(
        &'a self,
        breaker: &'a Breaker,
        future: F,
    ) -> IsolatedFuture<'a, F::IntoFuture>
    where
        F: IntoFuture<Output = Result<T, E>>,
        T: 'static,
        E: StdError + 'static,
    {
        IsolatedFuture::new(breaker, Some(self), future.into_future())
    }
}

impl Isolated {
    /// Runs `future` through the breaker and the bulkhead, if there is one:
    /// the async [`call`](Self::call), as [`Bulkhead::call_async`] runs it.
    /// The deadline pool, if there is one, is for blocking calls and is not
    /// used: put the runtime's timeout inside `future`, where its error is
    /// the call's failure.
    #[inline]
    pub fn call_async<F, T, E>(&self, future: F) -> IsolatedFuture<'_, F::IntoFuture>
    where
        F: IntoFuture<Output = Result<T, E>>,
        T: 'static,
        E: StdError + 'static,
    {
        IsolatedFuture::new(self.breaker(), self.bulkhead(), future.into_future())
    }
}

pin_project_lite::pin_project! {
    /// A future run through a breaker and a bulkhead, from
    /// [`Bulkhead::call_async`] or [`Isolated::call_async`]: its output is
    /// the inner future's, with the error in an [`IsolationError`].
    ///
    /// `Send` when the inner future is, `Unpin` when it is. Dropped after
    /// its first poll and before it completes, it reports its call as
    /// cancelled and gives its slot back.
    #[must_use = "futures do nothing unless polled: an isolated future asks at its first poll"]
    pub struct IsolatedFuture<'a, F> {
        breaker: &'a Breaker,
        bulkhead: Option<&'a Bulkhead>,
        slot: Option<Slot<'a>>,
        stage: Stage,
        #[pin]
        future: F,
    }

    impl<F> PinnedDrop for IsolatedFuture<'_, F> {
        fn drop(this: Pin<&mut Self>) {
            // The call is reported before its slot is given back.
            let this = this.project();
            this.stage.cancel(this.breaker);
        }
    }
}

impl<'a, F> IsolatedFuture<'a, F> {
    #[inline(always)]
    fn new(breaker: &'a Breaker, bulkhead: Option<&'a Bulkhead>, future: F) -> Self {
        IsolatedFuture {
            breaker,
            bulkhead,
            slot: None,
            stage: Stage::Unpolled,
            future,
        }
    }
}

impl<F, T, E> Future for IsolatedFuture<'_, F>
where
    F: Future<Output = Result<T, E>>,
    T: 'static,
    E: StdError + 'static,
{
    type Output = Result<T, IsolationError<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let breaker = *this.breaker;
        let permit = match this.stage.take() {
            Stage::Out(parked) => parked.resume(breaker),
            Stage::Unpolled => {
                let admitted = match *this.bulkhead {
                    Some(bulkhead) => bulkhead
                        .admit_at_once(breaker)
                        .map(|(permit, slot)| (permit, Some(slot))),
                    None => breaker
                        .try_acquire()
                        .map(|permit| (permit, None))
                        .map_err(Refusal::Rejected),
                };
                match admitted {
                    Ok((permit, slot)) => {
                        *this.slot = slot;
                        permit
                    }
                    Err(refusal) => return Poll::Ready(Err(refusal.into_error())),
                }
            }
            Stage::Done => panic!("a fusebox::isolation::IsolatedFuture polled after it completed"),
        };
        let poll = this.future.poll(cx);
        let poll = conclude(breaker, permit, this.stage, poll, finish::<T, E>);
        if poll.is_ready() {
            // The slot goes back the moment the call is over.
            *this.slot = None;
        }
        poll.map(|result| result.map_err(IsolationError::Failed))
    }
}

impl<F> std::fmt::Debug for IsolatedFuture<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IsolatedFuture")
            .field("breaker", &self.breaker.name())
            .field("bulkhead", &self.bulkhead.map(Bulkhead::name))
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}
