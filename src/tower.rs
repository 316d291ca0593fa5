//! A breaker around a tower service (feature `tower`): [`BreakerLayer`]
//! and the [`BreakerService`] it wraps a service in, on the `tower-layer`
//! and `tower-service` crates.
//!
//! ```
//! use fusebox::tower::BreakerLayer;
//! use fusebox::{Breaker, CallPath, Classifier, Rejected};
//! use tower::{BoxError, ServiceBuilder, ServiceExt};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! let breaker = Breaker::builder("quotes")
//!     .call_path(CallPath::ReferenceData)
//!     .classifier(Classifier::every_error_is_a_failure())
//!     .build()?;
//! let quotes = ServiceBuilder::new()
//!     .layer(BreakerLayer::new(breaker.clone()))
//!     // Inside the breaker: an elapsed timeout is the call's failure.
//!     .timeout(Duration::from_secs(2))
//!     .service_fn(|symbol: &'static str| async move { Ok::<_, BoxError>(symbol.len()) });
//!
//! match quotes.oneshot("EURUSD").await {
//!     Ok(n) => assert_eq!(n, 6),
//!     // Nothing was sent: serve the last known price.
//!     Err(e) if e.is::<Rejected>() => {}
//!     Err(e) => return Err(e),
//! }
//! assert_eq!(breaker.snapshot().totals.successes, 1);
//! # Ok(())
//! # }
//! ```
//!
//! - **Readiness** is the inner service's: an open breaker is not
//!   backpressure. It refuses each call at once, so a caller that waits
//!   for readiness never waits for a breaker.
//! - **A call** asks the breaker before the inner service is called;
//!   refused, the inner service is not called and the future is ready at
//!   once with the refusal. Admitted, the call's outcome is classified when
//!   its future completes, and a future dropped before that counts as
//!   cancelled, neither success nor failure (see
//!   [`Breaker::call_async`]).
//! - **Errors box**, as tower's own layers' do: the inner
//!   service's error unchanged, a refusal as a [`Rejected`]
//!   (`Box<dyn Error + Send + Sync>`, tower's `BoxError`), so that a
//!   retry policy or a fallback tells them apart with
//!   `err.downcast_ref::<Rejected>()` (and finds the refusal's
//!   `retry_after` there). The breaker's [`Classifier`](crate::Classifier)
//!   sees the inner service's error boxed, as a `dyn Error`
//!   ([`Classifier::new`](crate::Classifier::new) downcasts it), the way
//!   [`Breaker::call_any`] sees a `Box<dyn Error + Send + Sync>`.
//! - **Responses** are judged by the breaker's
//!   [`ResultClassifier`](crate::ResultClassifier), if it has one, so that
//!   one breaker judges a vendor's answers the same way through the layer,
//!   through [`Breaker::call_async`] and on a thread: an HTTP 503 response
//!   a failure, a 404 not, say, with
//!   `ResultClassifier::for_type(|r: &http::Response<B>| ..)`.
//! - **Place the layer outside a timeout** (`tower::timeout`, as above), so
//!   that the timeout's error is the call's failure. A timeout outside the
//!   breaker drops the call: cancelled, and a vendor that hangs never opens
//!   the breaker. Place it inside a retry, so that each attempt asks the
//!   breaker and a refusal is seen by the policy.
//!
//! # Cost
//!
//! Beside the breaker's own (as [`Breaker::call_async`]), each call clones
//! the breaker's handle into its future (one reference-count increment and
//! one decrement), since a service's future may not borrow the service. A
//! refusal boxes the [`Rejected`]: one allocation of 40 bytes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::future::{conclude, finish_any, Stage};
use crate::{Breaker, Rejected};

/// A boxed error, as tower's layers return them (`tower::BoxError`).
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Wraps a tower service in a [`BreakerService`] that asks `breaker`
/// before each call.
#[derive(Clone, Debug)]
pub struct BreakerLayer {
    breaker: Breaker,
}

impl BreakerLayer {
    /// A layer that puts `breaker` in front of the services it wraps. Every
    /// service it wraps shares the breaker: one state for the one
    /// dependency.
    pub fn new(breaker: Breaker) -> Self {
        BreakerLayer { breaker }
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = BreakerService<S>;

    fn layer(&self, inner: S) -> BreakerService<S> {
        BreakerService {
            breaker: self.breaker.clone(),
            inner,
        }
    }
}

/// A tower service behind a breaker, made by [`BreakerLayer`]: see
/// [the module](self). `Clone` when the inner service is; the clones share
/// the breaker.
#[derive(Clone, Debug)]
pub struct BreakerService<S> {
    breaker: Breaker,
    inner: S,
}

impl<S> BreakerService<S> {
    /// The breaker, for snapshots and overrides.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

impl<S, Request> Service<Request> for BreakerService<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
    S::Response: 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        let (stage, future, refused) = match self.breaker.try_acquire() {
            Ok(permit) => {
                // The inner call with the permit alive: a panic there is
                // the call's failure.
                let future = self.inner.call(request);
                (Stage::Out(permit.park()), Some(future), None)
            }
            Err(refused) => (Stage::Done, None, Some(refused)),
        };
        ResponseFuture {
            breaker: self.breaker.clone(),
            stage,
            refused,
            future,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`BreakerService`]'s call: the inner service's
    /// response, or its error or a refusal, boxed.
    #[must_use = "futures do nothing unless polled; dropped before it completes, the call counts as cancelled"]
    pub struct ResponseFuture<F> {
        breaker: Breaker,
        stage: Stage,
        refused: Option<Rejected>,
        #[pin]
        future: Option<F>,
    }

    impl<F> PinnedDrop for ResponseFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.stage.cancel(this.breaker);
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    T: 'static,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, BoxError>> {
        let this = self.project();
        let (Stage::Out(parked), Some(future)) = (this.stage.take(), this.future.as_pin_mut())
        else {
            let refused = this.refused.take();
            let refused =
                refused.expect("a fusebox::tower::ResponseFuture polled after it completed");
            return Poll::Ready(Err(Box::new(refused)));
        };
        let permit = parked.resume(this.breaker);
        let poll = future.poll(cx).map(|r| r.map_err(Into::into));
        conclude(
            this.breaker,
            permit,
            this.stage,
            poll,
            finish_any::<T, BoxError>,
        )
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("breaker", &self.breaker.name())
            .field("stage", &self.stage)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}
