//! Which errors count against the dependency.

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::chain;
use crate::{CallError, Rejected};

/// What a call's result says about the dependency's health.
///
/// A [`Classifier`] gives one for each error a call returns, and a
/// [`Permit`](crate::Permit) reports one for each call it admitted.
///
/// Non-exhaustive: a later release may add a verdict (as `Throttled` was
/// added), so a `match` on one needs a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The dependency did its job. From a permit: the call succeeded (it may
    /// still be slow). From a classifier: this error is one of the
    /// dependency's normal answers (a vendor's "no data for this date"), and
    /// counts as a success.
    Success,
    /// The dependency failed (timeout, refused connection, 5xx...): counts
    /// against it.
    Failure,
    /// The dependency asked the caller to back off for at least this long
    /// (an HTTP 429 with `Retry-After`, say). Counts as a failure, and if the
    /// breaker opens, its open period is at least this long, up to
    /// `max_open_duration`, the ceiling of every open period.
    Throttled(Duration),
    /// Not the dependency's fault (a 4xx, a business rejection, a parse error
    /// in the caller's code), or the call was not made after all: passed
    /// through unchanged, touches no counter, and in half-open frees the probe
    /// slot without deciding anything.
    Ignore,
}

/// Judges a call's `Ok` result, beside the [`Classifier`] that judges its
/// errors: an HTTP 200 whose body says "stale feed", a quote with a zero
/// price (Polly's `ShouldHandle` on results). Set with
/// [`BreakerBuilder::result_classifier`](crate::BreakerBuilder::result_classifier).
///
/// ```
/// use fusebox::{Breaker, CallPath, Classifier, ResultClassifier, State, Verdict};
///
/// struct Quote { price: f64 }
///
/// let breaker = Breaker::builder("quotes")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .result_classifier(ResultClassifier::for_type(|q: &Quote| {
///         if q.price > 0.0 { Verdict::Success } else { Verdict::Failure }
///     }))
///     .consecutive_failure_threshold(2)
///     .build()?;
///
/// for _ in 0..2 {
///     // The zero price reaches the caller, and counts against the vendor.
///     let q = breaker.call(|| Ok::<_, std::io::Error>(Quote { price: 0.0 }));
///     assert_eq!(q.unwrap().price, 0.0);
/// }
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ResultClassifier(Arc<ResultFn>);

type ResultFn = dyn Fn(&dyn Any) -> Verdict + Send + Sync;

impl ResultClassifier {
    /// A result classifier for calls that return a `T`; a result of
    /// another type is a success.
    pub fn for_type<T, F>(f: F) -> Self
    where
        T: 'static,
        F: Fn(&T) -> Verdict + Send + Sync + 'static,
    {
        ResultClassifier(Arc::new(move |value: &dyn Any| {
            value.downcast_ref::<T>().map_or(Verdict::Success, &f)
        }))
    }

    /// The verdict on `value`.
    pub(crate) fn classify<T: 'static>(&self, value: &T) -> Verdict {
        (self.0)(value)
    }
}

impl fmt::Debug for ResultClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResultClassifier(..)")
    }
}

/// An error as a [`Classifier`] sees it: the value the call returned, and
/// that value as a [`std::error::Error`] when it is one.
///
/// [`Breaker::call`](crate::Breaker::call) fills both for its error type.
/// [`Breaker::call_any`](crate::Breaker::call_any) fills the value, and the
/// error view for the shapes that hold one: `Box<dyn Error>` (with or without
/// `Send` and `Sync`), `Arc<dyn Error + Send + Sync>`, [`Rejected`],
/// `io::Error`, `anyhow::Error` (with the crate's `anyhow` feature), and a
/// [`CallError`] of any of these (or of `String` or `&'static str`) from an
/// inner breaker. Any other error type is seen as its value only.
#[derive(Clone, Copy)]
pub(crate) struct ErrorView<'a> {
    value: Option<&'a dyn Any>,
    error: Option<&'a (dyn StdError + 'static)>,
    /// An inner breaker's refusal, found where no `dyn Error` chain shows it.
    refused: Option<&'a Rejected>,
}

impl<'a> ErrorView<'a> {
    /// The view of an error type: both the value and its `dyn Error`.
    pub(crate) fn of_error<E: StdError + 'static>(err: &'a E) -> Self {
        ErrorView {
            value: Some(err),
            error: Some(err),
            refused: None,
        }
    }

    /// The view of an error whose concrete type is not known here: a typed
    /// classifier ([`Classifier::for_type`]) cannot see its value.
    pub(crate) fn of_dyn_error(err: &'a (dyn StdError + 'static)) -> Self {
        ErrorView {
            value: None,
            error: Some(err),
            refused: None,
        }
    }

    /// The view of any value, with its `dyn Error` filled for the shapes
    /// listed above.
    pub(crate) fn of_value<E: 'static>(err: &'a E) -> Self {
        let value: &dyn Any = err;
        let (error, refused) = match error_of(value) {
            Some(error) => (Some(error), None),
            None => call_error_of(value).unwrap_or((None, None)),
        };
        ErrorView {
            value: Some(value),
            error,
            refused,
        }
    }

    /// The value the call returned, if it is a `T`.
    pub(crate) fn downcast_ref<T: 'static>(&self) -> Option<&'a T> {
        self.value?.downcast_ref::<T>()
    }

    /// The value as a `dyn Error`, when it is one (or holds one, for the
    /// boxed shapes and `anyhow::Error`).
    pub(crate) fn as_error(&self) -> Option<&'a (dyn StdError + 'static)> {
        self.error
    }

    /// Whether the error is, or holds, a refusal by a breaker
    /// ([`Rejected::in_chain`] on the error view, plus an inner breaker's
    /// [`CallError::Rejected`] of one of the shapes above): nothing was
    /// sent. A breaker ignores such an error, a chain skips the link as
    /// refused, and a retry policy waits the refusal out.
    pub(crate) fn is_refusal(&self) -> bool {
        self.refusal().is_some()
    }

    /// The refusal by a breaker that the error is or holds, as
    /// [`is_refusal`](Self::is_refusal) finds it: the one test of "nothing
    /// was sent" that breakers, chains and retry policies share.
    pub(crate) fn refusal(&self) -> Option<&'a Rejected> {
        self.refused.or_else(|| self.error.and_then(Rejected::find))
    }
}

impl fmt::Debug for ErrorView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErrorView")
            .field("error", &self.error.map(|e| e.to_string()))
            .field("refused", &self.refused.is_some())
            .finish_non_exhaustive()
    }
}

/// The `dyn Error` inside the shapes that hold one.
fn error_of(value: &dyn Any) -> Option<&(dyn StdError + 'static)> {
    macro_rules! unbox {
        ($($ty:ty),*) => {$(
            if let Some(e) = value.downcast_ref::<$ty>() {
                return Some(&**e);
            }
        )*};
    }
    unbox!(
        Box<dyn StdError + Send + Sync>,
        Box<dyn StdError + Send>,
        Box<dyn StdError>,
        Arc<dyn StdError + Send + Sync>,
        Arc<dyn StdError>
    );
    #[cfg(feature = "anyhow")]
    unbox!(anyhow::Error);
    if let Some(r) = value.downcast_ref::<Rejected>() {
        return Some(r);
    }
    if let Some(e) = value.downcast_ref::<std::io::Error>() {
        return Some(e);
    }
    None
}

/// An inner breaker's `CallError` of a shape that is not itself an error:
/// its refusal, or the error inside it.
fn call_error_of(
    value: &dyn Any,
) -> Option<(Option<&(dyn StdError + 'static)>, Option<&Rejected>)> {
    macro_rules! open {
        ($($ty:ty),*) => {$(
            if let Some(e) = value.downcast_ref::<CallError<$ty>>() {
                return Some(match e {
                    CallError::Rejected(r) => (None, Some(r)),
                    CallError::Failed(inner) => (error_of(inner), None),
                });
            }
        )*};
    }
    open!(
        Box<dyn StdError + Send + Sync>,
        Box<dyn StdError + Send>,
        Box<dyn StdError>,
        Arc<dyn StdError + Send + Sync>,
        Arc<dyn StdError>,
        std::io::Error,
        String,
        &'static str
    );
    #[cfg(feature = "anyhow")]
    open!(anyhow::Error);
    None
}

type ClassifyFn = dyn Fn(ErrorView<'_>) -> Verdict + Send + Sync;

/// Decides, for each error a wrapped call returns, whether it is the
/// dependency's failure.
///
/// There is deliberately no default: a breaker that counts every error
/// turns a bug in the caller's own parsing into a fake outage. Build one from
/// a closure, either over `dyn Error` with a downcast to the client
/// library's error type ([`new`](Self::new)), or typed over the error type
/// the calls return ([`for_type`](Self::for_type)):
///
/// ```
/// use fusebox::{Classifier, Verdict};
/// use std::io;
///
/// let classifier = Classifier::new(|err| match err.downcast_ref::<io::Error>() {
///     Some(e) if matches!(
///         e.kind(),
///         io::ErrorKind::TimedOut | io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
///     ) => Verdict::Failure,
///     _ => Verdict::Ignore,
/// });
/// let timeout = io::Error::from(io::ErrorKind::TimedOut);
/// assert_eq!(classifier.classify(&timeout), Verdict::Failure);
///
/// // An application's own enum, with no `Error` impl and no downcast:
/// #[derive(Debug)]
/// enum Vendor { NoDataForDate, Timeout, BadRequest }
/// let classifier = Classifier::for_type(|e: &Vendor| match e {
///     Vendor::NoDataForDate => Verdict::Success,
///     Vendor::Timeout => Verdict::Failure,
///     Vendor::BadRequest => Verdict::Ignore,
/// });
/// ```
///
/// # An error the classifier cannot read
///
/// A classifier that cannot see the error it is given counts it as a
/// **failure**: a typed classifier handed another type, or a classifier over
/// `dyn Error` handed a value that is not an error (a `String`, a plain
/// enum). That is the safe side for a breaker (a misconfigured classifier
/// trips it rather than blinding it) and it shows in the snapshot's failure
/// counts. Give such calls a classifier for their type.
///
/// # Refusals by inner breakers
///
/// Whatever the closure says, an error that is or holds a
/// [`Rejected`] (a refusal by an inner breaker) is always
/// [`Verdict::Ignore`]: one sick leaf must not open every breaker above it.
/// The search follows `source()` chains (at most 32 links, so a cyclic chain
/// ends), looks inside `io::Error`s, and, in
/// [`call_any`](crate::Breaker::call_any), sees through the shapes it
/// lists.
#[derive(Clone)]
pub struct Classifier(Arc<ClassifyFn>);

impl Classifier {
    /// A classifier from a closure over `dyn Error`; a value that is not an
    /// error counts as a failure.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&(dyn StdError + 'static)) -> Verdict + Send + Sync + 'static,
    {
        Classifier::from_view(move |view| match view.as_error() {
            Some(err) => f(err),
            None => Verdict::Failure,
        })
    }

    /// A typed classifier for calls that return an `E`, any type: an
    /// application's own enum, `String`, `anyhow::Error`... It sees the value
    /// the call returned; a value of another type counts as a failure.
    pub fn for_type<E, F>(f: F) -> Self
    where
        E: 'static,
        F: Fn(&E) -> Verdict + Send + Sync + 'static,
    {
        Classifier::from_view(move |view| match view.downcast_ref::<E>() {
            Some(err) => f(err),
            None => Verdict::Failure,
        })
    }

    /// A classifier from a closure over the whole view of an error.
    fn from_view<F>(f: F) -> Self
    where
        F: Fn(ErrorView<'_>) -> Verdict + Send + Sync + 'static,
    {
        Classifier(Arc::new(f))
    }

    /// Counts every error of type `E` (anywhere in the source chain) as a
    /// failure and ignores everything else.
    pub fn failures_of<E: StdError + 'static>() -> Self {
        Classifier::from_view(|view| {
            let found = view
                .as_error()
                .is_some_and(|err| chain(err).any(|e| e.is::<E>()));
            if found {
                Verdict::Failure
            } else {
                Verdict::Ignore
            }
        })
    }

    /// Counts every error as a failure. Only for call sites where every error
    /// really is the dependency's: choosing this is an explicit decision.
    pub fn every_error_is_a_failure() -> Self {
        // One per process, shared by every breaker that uses it.
        static EVERY: std::sync::OnceLock<Classifier> = std::sync::OnceLock::new();
        EVERY
            .get_or_init(|| Classifier::from_view(|_| Verdict::Failure))
            .clone()
    }

    /// Classifies `err`, ignoring refusals by inner breakers: what a
    /// breaker does with an error of its calls, for a test of the
    /// classifier or a classifier that asks another. A typed classifier
    /// ([`for_type`](Self::for_type)) cannot see the type behind a
    /// `dyn Error`; its verdicts show through a breaker's
    /// [`call_any`](crate::Breaker::call_any) and its snapshot.
    pub fn classify(&self, err: &(dyn StdError + 'static)) -> Verdict {
        self.classify_view(ErrorView::of_dyn_error(err))
    }

    /// Classifies a value of any type, as `Breaker::call_any` does.
    pub(crate) fn classify_value<E: 'static>(&self, err: &E) -> Verdict {
        self.classify_view(ErrorView::of_value(err))
    }

    /// Classifies a view, ignoring refusals by inner breakers.
    #[inline]
    pub(crate) fn classify_view(&self, view: ErrorView<'_>) -> Verdict {
        if view.is_refusal() {
            return Verdict::Ignore;
        }
        (self.0)(view)
    }
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Classifier(..)")
    }
}
