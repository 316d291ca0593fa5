//! Errors of a call: a refused call and a failed call. (A refused
//! configuration is a `ConfigError`, in `src/check.rs`.)

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::name::Inline;
use crate::State;

/// The breaker refused the call: **nothing was attempted**.
///
/// The wrapped closure was not invoked and no request left the process, so a
/// fallback is always safe and a retry cannot duplicate a side effect.
///
/// `Copy`, with the breaker's name inline (names are at most 32 bytes): no
/// allocation and no reference count, so building and returning one costs a
/// copy of 40 bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Rejected {
    // The name first, so that copying it in from the breaker and copying
    // the whole refusal afterwards move the same 16-byte pieces.
    breaker: Inline,
    /// The state in the top two bits, `retry_after` in nanoseconds below
    /// (all ones for none).
    word: u64,
}

const NO_RETRY: u64 = (1 << 62) - 1;

impl Rejected {
    #[inline(always)]
    pub(crate) fn new(breaker: Inline, state: State, retry_after: Option<u64>) -> Self {
        let code = match state {
            State::Open => 0,
            State::HalfOpen => 1,
            State::ForcedOpen | State::ForcedClosed => 2,
            State::Closed => 3,
        };
        let retry = retry_after.map_or(NO_RETRY, |n| n.min(NO_RETRY - 1));
        Rejected {
            breaker,
            word: (code << 62) | retry,
        }
    }

    /// The name of the breaker that refused the call.
    pub fn breaker(&self) -> &str {
        self.breaker.as_str()
    }

    /// The state the breaker was in: [`State::Open`], [`State::HalfOpen`]
    /// (a probe is already out), [`State::ForcedOpen`], or
    /// [`State::Closed`]: closed, but ramping up after recovery
    /// ([`RampUp`](crate::RampUp); no `retry_after`) or in a maintenance
    /// window that short-circuits calls (`retry_after` is the time left in
    /// the window).
    pub fn state(&self) -> State {
        match self.word >> 62 {
            0 => State::Open,
            1 => State::HalfOpen,
            2 => State::ForcedOpen,
            _ => State::Closed,
        }
    }

    /// How long until the breaker will admit a probe, when that is known:
    /// while open, until the open period ends; while half-open, until the
    /// first probe out reaches its deadline (`max_probe_duration`), when a
    /// probe slot frees up at the latest; `None` when forced open (an
    /// operator decides). The error that opened the breaker is not carried
    /// here, to keep a refusal a small `Copy` value: ask
    /// [`Breaker::last_failure`](crate::Breaker::last_failure).
    pub fn retry_after(&self) -> Option<Duration> {
        match self.word & NO_RETRY {
            NO_RETRY => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// Whether some error in `err`'s `source()` chain, `err` included, is a
    /// [`Rejected`]: the call was refused by a breaker somewhere below.
    ///
    /// Breakers use this so that a rejection by an inner breaker is never
    /// counted as a failure by an outer one, even when the caller has wrapped
    /// it in its own error type. The walk looks inside an `io::Error`
    /// (`io::Error::other(rejected)`, whose `source()` skips the wrapped
    /// error), sees a `Box<Rejected>` or `Arc<Rejected>` as a refusal, and
    /// follows at most 32 links, so that a cyclic chain ends.
    pub fn in_chain(err: &(dyn StdError + 'static)) -> bool {
        Rejected::find(err).is_some()
    }

    /// The first refusal in `err`'s `source()` chain, `err` included, as
    /// [`in_chain`](Self::in_chain) looks for it.
    pub(crate) fn find<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a Rejected> {
        chain(err).find_map(|e| {
            e.downcast_ref::<Rejected>()
                .or_else(|| e.downcast_ref::<Box<Rejected>>().map(|r| &**r))
                .or_else(|| e.downcast_ref::<Arc<Rejected>>().map(|r| &**r))
        })
    }
}

/// The most links of a `source()` chain a walk follows.
pub(crate) const CHAIN_LIMIT: usize = 32;

/// The errors of `err`'s chain, `err` first, at most [`CHAIN_LIMIT`] of them.
///
/// An `io::Error` that wraps an error is followed into the wrapped error:
/// its own `source()` returns the wrapped error's source, which would skip
/// the wrapped error itself.
pub(crate) fn chain<'a>(
    err: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    let mut next = Some(err);
    std::iter::from_fn(move || {
        let cur = next?;
        next = match cur.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(wrapped) => Some(wrapped),
            None => cur.source(),
        };
        Some(cur)
    })
    .take(CHAIN_LIMIT)
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("breaker", &self.breaker())
            .field("state", &self.state())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.state(), self.retry_after()) {
            (State::Closed, None) => write!(f, "breaker `{}` is ramping up", self.breaker())?,
            (State::Closed, Some(_)) => {
                write!(f, "breaker `{}` is in maintenance", self.breaker())?;
            }
            (state, _) => write!(f, "breaker `{}` is {state}", self.breaker())?,
        }
        if let Some(d) = self.retry_after() {
            write!(f, ", retry after {}", crate::duration::display(d))?;
        }
        Ok(())
    }
}

impl StdError for Rejected {}

/// The result of a call through a breaker that did not succeed.
///
/// The two variants answer the question a caller with side effects must ask:
/// was anything attempted?
///
/// Exhaustive, as a commitment: that question has two answers, and a
/// `match` with two arms is the way to ask it. Any other kind of refusal is
/// a [`Rejected`] with its own state; a third variant would come only in a
/// breaking release.
#[derive(Debug)]
pub enum CallError<E> {
    /// The breaker refused the call; the closure was not invoked.
    Rejected(Rejected),
    /// The closure ran and returned this error, passed through unchanged.
    /// Whether it counted against the dependency is up to the classifier.
    Failed(E),
}

impl<E> CallError<E> {
    /// The refusal, if the breaker refused the call: the one question "was
    /// it the breaker?" (`err.rejected().is_some()`), with the refusal's
    /// breaker, state and `retry_after` when it was.
    ///
    /// ```
    /// use fusebox::{Breaker, CallPath, Classifier};
    ///
    /// let breaker = Breaker::builder("fx")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .consecutive_failure_threshold(1)
    ///     .build()?;
    /// let failed = breaker.call(|| Err::<(), _>(std::io::Error::other("reset"))).unwrap_err();
    /// assert!(failed.rejected().is_none()); // attempted: the vendor's error
    ///
    /// let refused = breaker.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
    /// let rejected = refused.rejected().expect("nothing was attempted");
    /// assert_eq!(rejected.breaker(), "fx");
    /// assert!(rejected.retry_after().is_some());
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Failed(_) => None,
        }
    }

    /// The dependency's own error, if the call was attempted.
    pub fn into_failed(self) -> Option<E> {
        match self {
            CallError::Failed(e) => Some(e),
            CallError::Rejected(_) => None,
        }
    }

    /// The same outcome with the dependency's error mapped, a refusal kept
    /// as it is: what a layer boundary that turns a vendor's error into its
    /// own uses, so that "nothing was attempted" survives the mapping.
    ///
    /// ```
    /// use fusebox::{Breaker, CallError, CallPath, Classifier};
    ///
    /// #[derive(Debug)]
    /// enum LookupError {
    ///     Vendor(String),
    /// }
    ///
    /// fn lookup(breaker: &Breaker) -> Result<f64, CallError<LookupError>> {
    ///     breaker
    ///         .call(|| Err::<f64, _>(std::io::Error::other("timed out")))
    ///         .map_err(|e| e.map_failed(|io| LookupError::Vendor(io.to_string())))
    /// }
    ///
    /// let breaker = Breaker::builder("prices")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .consecutive_failure_threshold(1)
    ///     .build()?;
    /// assert!(matches!(lookup(&breaker), Err(CallError::Failed(LookupError::Vendor(m))) if m == "timed out"));
    /// assert!(matches!(lookup(&breaker), Err(CallError::Rejected(_)))); // open now
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    pub fn map_failed<F>(self, op: impl FnOnce(E) -> F) -> CallError<F> {
        match self {
            CallError::Rejected(r) => CallError::Rejected(r),
            CallError::Failed(e) => CallError::Failed(op(e)),
        }
    }

    /// The error as an `anyhow::Error`, for `?` in a function that returns
    /// `anyhow::Result`: a refusal becomes the [`Rejected`] itself, a
    /// failure the dependency's own error, unchanged (its context chain
    /// included). "Nothing was attempted" stays visible:
    /// `err.downcast_ref::<Rejected>()` is `Some` for a refusal only.
    ///
    /// `?` cannot do this alone for [`call_any`](crate::Breaker::call_any)'s
    /// `CallError<anyhow::Error>`: anyhow converts every
    /// `std::error::Error`, and Rust's coherence rules forbid a second
    /// conversion beside it, because the compiler cannot rule out that
    /// `anyhow::Error` becomes one. (`CallError<E>` of a `std::error::Error`
    /// `E`, from [`call`](crate::Breaker::call), converts with `?` already,
    /// and [`Rejected::in_chain`] finds a refusal in it.)
    ///
    /// ```
    /// use fusebox::{Breaker, CallError, CallPath, Classifier, Rejected};
    ///
    /// fn price(breaker: &Breaker) -> anyhow::Result<f64> {
    ///     let px = breaker
    ///         .call_any(|| -> anyhow::Result<f64> { anyhow::bail!("vendor down") })
    ///         .map_err(CallError::into_anyhow)?;
    ///     Ok(px)
    /// }
    ///
    /// let breaker = Breaker::builder("prices")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .consecutive_failure_threshold(1)
    ///     .build()?;
    /// let failed = price(&breaker).unwrap_err();
    /// assert!(failed.downcast_ref::<Rejected>().is_none());
    /// assert_eq!(format!("{failed:#}"), "vendor down");
    ///
    /// let refused = price(&breaker).unwrap_err(); // the breaker is open now
    /// let rejected = refused.downcast_ref::<Rejected>().expect("nothing was attempted");
    /// assert_eq!(rejected.breaker(), "prices");
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    #[cfg(feature = "anyhow")]
    pub fn into_anyhow(self) -> anyhow::Error
    where
        E: Into<anyhow::Error>,
    {
        match self {
            CallError::Rejected(r) => anyhow::Error::new(r),
            CallError::Failed(e) => e.into(),
        }
    }
}

/// The error types [`Breaker::call`](crate::Breaker::call) takes: every
/// `std::error::Error + 'static`, and nothing else.
///
/// Implemented for all of them; no type needs to implement it by hand. It
/// stands in `call`'s bound (and [`Permit::finish`](crate::Permit::finish)'s)
/// in place of
/// `std::error::Error` only so that a closure returning another error type
/// (`anyhow::Error`, `Box<dyn Error + Send + Sync>`, `String`) is refused
/// with a message that names [`call_any`](crate::Breaker::call_any), which
/// takes those:
///
/// ```compile_fail,E0277
/// # use fusebox::{Breaker, CallPath, Classifier};
/// # let breaker = Breaker::builder("fx").call_path(CallPath::ReferenceData)
/// #     .classifier(Classifier::every_error_is_a_failure()).build().unwrap();
/// // error[E0277]: `anyhow::Error` is not a `std::error::Error`, which `Breaker::call` needs
/// //   = note: for `anyhow::Error`, `Box<dyn Error + Send + Sync>`, `String` or an enum of
/// //           your own, use `breaker.call_any(..)` ...
/// let rate = breaker.call(|| -> anyhow::Result<f64> { Ok(1.0842) });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `std::error::Error`, which `Breaker::call` needs",
    label = "the closure's error type is `{Self}`",
    note = "for `anyhow::Error`, `Box<dyn Error + Send + Sync>`, `String` or an enum of your own, \
            use `breaker.call_any(..)` (`Permit::finish_any`); \
            with anyhow, `.map_err(CallError::into_anyhow)?` then returns its error"
)]
pub trait IsStdError: StdError + 'static {}

impl<E: StdError + 'static> IsStdError for E {}

/// Says what happened to the call and nothing more: the refusal or the
/// dependency's error is the [`source`](StdError::source), so that a report
/// that prints the chain (anyhow's `{:#}`, say) prints each message once:
/// "call failed: timed out", "call not attempted: breaker `refdata` is open,
/// retry after 5s".
impl<E> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(_) => f.write_str("call not attempted"),
            CallError::Failed(_) => f.write_str("call failed"),
        }
    }
}

impl<E: StdError + 'static> StdError for CallError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            // The refusal itself is the source so that `Rejected::in_chain`
            // finds it through any wrapper.
            CallError::Rejected(r) => Some(r),
            CallError::Failed(e) => Some(e),
        }
    }
}
