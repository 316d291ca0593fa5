//! Why a retry policy stopped.

use std::error::Error as StdError;
use std::fmt;

/// Why a [`RetryPolicy`](super::RetryPolicy) stopped without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GaveUp {
    /// `max_attempts` calls were made and the last failed.
    Attempts,
    /// The next wait would have ended past the total deadline.
    Deadline,
    /// The retry budget had no retry left.
    Budget,
    /// The failure was deterministic (the classifier's `Ignore`, a
    /// declined lookup): another attempt would get the same answer.
    Deterministic,
    /// The call was declared non-idempotent and its attempt may have
    /// reached the vendor: it is not repeated.
    NotIdempotent,
    /// The breaker (or one the call goes through) refused and will not
    /// admit a call in time: no `retry_after` (forced open, ramping), one
    /// longer than `max_retry_after`, or more refusals than `max_attempts`.
    Refused,
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GaveUp::Attempts => "attempts exhausted",
            GaveUp::Deadline => "the next attempt would miss the deadline",
            GaveUp::Budget => "retry budget exhausted",
            GaveUp::Deterministic => "deterministic failure, not retried",
            GaveUp::NotIdempotent => "not idempotent, not retried after an attempt",
            GaveUp::Refused => "refused by the breaker",
        })
    }
}

/// The last error of a call a [`RetryPolicy`](super::RetryPolicy) gave up
/// on, how many attempts reached the provider, and why it stopped.
///
/// Its `Display` says why it stopped; the last error is its `source()`.
#[derive(Debug)]
pub struct RetryError<E> {
    pub(super) error: E,
    pub(super) attempts: u32,
    pub(super) refusals: u32,
    pub(super) gave_up: GaveUp,
}

impl<E> RetryError<E> {
    /// The last attempt's error.
    pub fn error(&self) -> &E {
        &self.error
    }

    /// The last attempt's error, moved out: to return or rethrow it once
    /// the policy has given up (after reading [`gave_up`](Self::gave_up)
    /// and the counts, if they matter).
    ///
    /// ```
    /// use std::io;
    ///
    /// use fusebox::retry::RetryPolicy;
    /// use fusebox::{Breaker, CallError, CallPath, Classifier};
    ///
    /// fn fetch(policy: &RetryPolicy, breaker: &Breaker) -> Result<u32, CallError<io::Error>> {
    ///     policy
    ///         .call(breaker, || Err::<u32, _>(io::Error::other("connection reset")))
    ///         .map_err(|gave_up| gave_up.into_error())
    /// }
    ///
    /// let breaker = Breaker::builder("refdata")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .build()?;
    /// let policy = RetryPolicy::builder().idempotent(true).max_attempts(1).build()?;
    /// let err = fetch(&policy, &breaker).unwrap_err();
    /// assert_eq!(err.into_failed().expect("attempted").to_string(), "connection reset");
    /// # Ok::<(), fusebox::ConfigError>(())
    /// ```
    pub fn into_error(self) -> E {
        self.error
    }

    /// Attempts that called the provider (refusals are not attempts).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Times the breaker, or one the call goes through, refused (nothing
    /// was sent).
    pub fn refusals(&self) -> u32 {
        self.refusals
    }

    /// Why the policy stopped.
    pub fn gave_up(&self) -> GaveUp {
        self.gave_up
    }
}

impl<E> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gave up after {} attempt{} and {} refusal{}: {}",
            self.attempts,
            if self.attempts == 1 { "" } else { "s" },
            self.refusals,
            if self.refusals == 1 { "" } else { "s" },
            self.gave_up
        )
    }
}

impl<E: StdError + 'static> StdError for RetryError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.error)
    }
}
