//! A call through the breaker as one closure: [`Breaker::call`] and
//! [`Breaker::call_any`].

use crate::breaker::Breaker;
use crate::classify::{ErrorView, Verdict};
use crate::error::{CallError, IsStdError};
use crate::permit::Permit;

impl Breaker {
    /// Runs `f` through the breaker.
    ///
    /// If the breaker refuses, `f` is not invoked and the result is
    /// [`CallError::Rejected`]. Otherwise `f` runs with no lock held; an `Err`
    /// is classified, counted if it is a failure, and returned unchanged in
    /// [`CallError::Failed`]. A panic in `f` counts as a failure and resumes
    /// unwinding to the caller.
    ///
    /// `call` takes errors that implement `std::error::Error` (the
    /// [`IsStdError`] bound); the classifier sees them as both their type
    /// and a `dyn Error`. **`anyhow::Error` is not one**, nor are
    /// `Box<dyn Error + Send + Sync>`, `String` or an enum of the
    /// application's own without an `Error` impl: for those use
    /// [`call_any`](Self::call_any). A closure returning `anyhow::Result`
    /// here fails to compile (E0277) with a note that says so. In a function
    /// returning `anyhow::Result`, `?` takes `call`'s error as it is, and
    /// `call_any`'s after `CallError::into_anyhow` (feature `anyhow`).
    ///
    /// Cost of a success on a healthy closed breaker: two loads of the gate,
    /// `f`, and one compare-and-swap on the thread's own counter line (plus
    /// a clock read with a window), no lock and no allocation. A failure, a probe, or a call timed for
    /// slow-call or latency detection takes one lock round trip and one or
    /// two clock reads. A refusal: one atomic load, one clock read, and one
    /// plain add on the thread's own counter line (an atomic one on a line
    /// shared by threads past the third). `docs/design.md` has the details,
    /// `docs/performance.md` the measurements.
    ///
    /// Always inlined, so that the result never makes a round trip through
    /// memory on its way back to the caller.
    #[inline(always)]
    pub fn call<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        T: 'static,
        E: IsStdError,
    {
        self.guarded(f, |permit, err| {
            let view = ErrorView::of_error(err);
            let verdict = self.classifier().classify_view(view);
            permit.record_failed::<E>(verdict, view);
        })
    }

    /// Runs `f` through the breaker, for an error type of any kind:
    /// `anyhow::Error`, `Box<dyn Error + Send + Sync>`, `String`, an enum
    /// with no `Error` impl.
    ///
    /// Everything else is as in [`call`](Self::call), which is the one to use
    /// for error types that implement `std::error::Error`: here the
    /// classifier sees the error as its type (for
    /// [`Classifier::for_type`](crate::Classifier::for_type)), and as a `dyn Error` only for these
    /// shapes: `Box<dyn Error>` (with or without `Send` and `Sync`),
    /// `Arc<dyn Error + Send + Sync>`, [`Rejected`](crate::Rejected), `io::Error`,
    /// `anyhow::Error` (with the crate's `anyhow` feature), and a
    /// [`CallError`] of any of these (or of `String` or `&'static str`) from
    /// an inner breaker. A [`Classifier::new`](crate::Classifier::new) handed anything else counts
    /// it as a failure; an inner breaker's refusal is found in those shapes
    /// (in anyhow's chain too, with the crate's `anyhow` feature). An inner
    /// breaker's `CallError<E>` with any other `E` is an error type: nest it
    /// with `call`, which finds the refusal through any `source()` chain.
    ///
    /// In a function returning `anyhow::Result`, pass the error through
    /// `CallError::into_anyhow` (feature `anyhow`, on by default) before
    /// `?`: `breaker.call_any(|| fetch()).map_err(CallError::into_anyhow)?`.
    /// A refusal then downcasts to [`Rejected`](crate::Rejected).
    ///
    /// ```
    /// use fusebox::{Breaker, CallPath, Classifier, Verdict};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum Quote { NoDataForDate, Timeout }
    ///
    /// let breaker = Breaker::builder("eod-prices")
    ///     .call_path(CallPath::HistoricalData)
    ///     .classifier(Classifier::for_type(|e: &Quote| match e {
    ///         Quote::NoDataForDate => Verdict::Success,
    ///         Quote::Timeout => Verdict::Failure,
    ///     }))
    ///     .build()?;
    ///
    /// let missing = breaker.call_any(|| Err::<f64, _>(Quote::NoDataForDate));
    /// assert_eq!(missing.unwrap_err().into_failed(), Some(Quote::NoDataForDate));
    /// assert_eq!(breaker.snapshot().totals.successes, 1);
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    #[inline(always)]
    pub fn call_any<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        T: 'static,
        E: 'static,
    {
        self.guarded(f, |permit, err| {
            let verdict = self.classifier().classify_value(err);
            permit.record_failed::<E>(verdict, ErrorView::of_value(err));
        })
    }

    /// What `call` and `call_any` share: admission, the call,
    /// a success (judged by the result classifier only when there is one),
    /// and `failed` to classify and report an error.
    #[inline(always)]
    fn guarded<T, E, F, R>(&self, f: F, failed: R) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        R: FnOnce(Permit<'_>, &E),
        T: 'static,
    {
        let permit = self.try_acquire().map_err(CallError::Rejected)?;
        match f() {
            Ok(value) if !self.has_result_classifier() => {
                permit.record(Verdict::Success);
                Ok(value)
            }
            Ok(value) => Ok(permit.judged_value(value)),
            Err(err) => {
                failed(permit, &err);
                Err(CallError::Failed(err))
            }
        }
    }
}
