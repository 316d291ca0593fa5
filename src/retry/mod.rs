//! A retry policy above a breaker or a chain (feature `retry`).
//!
//! A breaker's refusal says "nothing was attempted, and the breaker will
//! refuse again until `retry_after`". A retry loop that treats it as one
//! more failure spends its attempts against a breaker that refuses by
//! design. A [`RetryPolicy`]:
//!
//! - treats a **refusal as terminal for the attempt**, whether the
//!   breaker refused or the call's error holds the refusal of a breaker
//!   it goes through ([`Rejected::in_chain`](crate::Rejected::in_chain)):
//!   it waits out the refusal's `retry_after` when that fits
//!   `max_retry_after` and the deadline, or gives up at once; a refusal is
//!   never counted as a failed attempt against the vendor, and waiting one
//!   out takes nothing from the budget;
//! - backs off exponentially with **full jitter** (seedable) between
//!   attempts that failed, and honours a vendor's `Retry-After` (a
//!   [`Verdict::Throttled`]), capped;
//! - never retries a **deterministic** failure (the classifier's `Ignore`,
//!   a declined lookup);
//! - never repeats a call declared **non-idempotent** after an attempt that
//!   may have reached the vendor, only after a refusal, when nothing was
//!   sent;
//! - stops at a **total deadline** and, with a [`RetryBudget`], when the
//!   retries after attempts, of every call sharing it, reach their share
//!   of the calls;
//! - waits through a [`Sleeper`], which tests replace with one that moves
//!   the mock clock.
//!
//! ```
//! use fusebox::retry::{GaveUp, RetryPolicy};
//! use fusebox::{Breaker, CallPath, Classifier};
//! use std::sync::{Arc, Mutex};
//! use std::{io, time::Duration};
//!
//! let breaker = Breaker::builder("fx-rates")
//!     .call_path(CallPath::ReferenceData)
//!     .classifier(Classifier::every_error_is_a_failure())
//!     .build()?;
//! let waits = Arc::new(Mutex::new(Vec::new()));
//! let policy = RetryPolicy::builder()
//!     .idempotent(true)
//!     .max_attempts(3)
//!     .backoff(Duration::from_millis(100), Duration::from_secs(1))
//!     .jitter(0.0)
//!     .sleeper({
//!         let waits = Arc::clone(&waits);
//!         move |d| waits.lock().unwrap().push(d)
//!     })
//!     .build()?;
//!
//! let mut calls = 0;
//! let rate = policy.call(&breaker, || {
//!     calls += 1;
//!     if calls < 3 { Err(io::Error::from(io::ErrorKind::TimedOut)) } else { Ok(1.0842) }
//! });
//! assert_eq!(rate.unwrap(), 1.0842);
//! assert_eq!(*waits.lock().unwrap(), [Duration::from_millis(100), Duration::from_millis(200)]);
//! # Ok::<(), fusebox::ConfigError>(())
//! ```
//!
//! Why not a backoff crate: `docs/design.md` ("Retry") says why the
//! loop is the crate's own.

mod budget;
mod builder;
mod error;
mod sleeper;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

pub use budget::RetryBudget;
pub use builder::RetryPolicyBuilder;
pub use error::{GaveUp, RetryError};
pub use sleeper::Sleeper;
use sleeper::ThreadSleeper;

use crate::backoff::Rng;
use crate::classify::ErrorView;
use crate::{Breaker, CallError, IsStdError, Verdict};

/// Retries a call through a breaker (or a chain lookup) by the rules of the
/// [module docs](self). Built with [`RetryPolicy::builder`]; cheap to clone
/// (clones share the jitter's generator and the sleeper).
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    idempotent: bool,
    max_attempts: u32,
    base: Duration,
    max_backoff: Duration,
    jitter: f64,
    rng: Mutex<Rng>,
    deadline: Option<Duration>,
    max_retry_after: Duration,
    budget: Option<RetryBudget>,
    sleeper: sleeper::Boxed,
    clock: quanta::Clock,
}

/// What one attempt came to.
enum Step<T, E> {
    /// An answer.
    Done(T),
    /// Nothing was sent; the breaker may admit a call after this long.
    Refused(E, Option<Duration>),
    /// The attempt may have reached the provider and failed; the provider
    /// asked for at least this long (a `Retry-After`).
    Failed(E, Option<Duration>),
    /// A deterministic failure.
    Final(E),
}

impl RetryPolicy {
    /// Starts building a policy.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::new()
    }

    /// The nominal wait before retry `n` (1 for the first), before jitter.
    fn nominal(&self, retry: u32) -> Duration {
        let inner = &self.inner;
        let factor = 2f64.powi(retry.saturating_sub(1).min(62) as i32);
        let secs = inner.base.as_secs_f64() * factor;
        if secs >= inner.max_backoff.as_secs_f64() {
            inner.max_backoff
        } else {
            Duration::from_secs_f64(secs)
        }
    }

    /// The wait before retry `n`: the nominal wait shortened by up to
    /// `jitter` of itself.
    fn backoff(&self, retry: u32) -> Duration {
        let nominal = self.nominal(retry);
        if self.inner.jitter == 0.0 {
            return nominal;
        }
        let cut = self.inner.jitter * self.inner.rng.lock().next_unit();
        nominal.mul_f64(1.0 - cut)
    }

    /// Runs `f` through `breaker`, retrying by the policy's rules.
    ///
    /// An error that holds a breaker's refusal (`f` calls through an inner
    /// breaker that refused) is a refusal, as the breaker's own is: nothing
    /// was sent. The breaker's classifier judges every other error: a
    /// failure (or a throttle, whose `Retry-After` is honoured up to
    /// `max_retry_after`) is retried after a backoff; anything it ignores,
    /// or counts as a success, is deterministic and returned at once.
    ///
    /// # Errors
    ///
    /// [`RetryError`] with the last [`CallError`] (the breaker's refusal, or
    /// the error `f` returned, an inner breaker's refusal included), the
    /// attempts made and why the policy stopped.
    pub fn call<T, E, F>(&self, breaker: &Breaker, mut f: F) -> Result<T, RetryError<CallError<E>>>
    where
        F: FnMut() -> Result<T, E>,
        T: 'static,
        E: IsStdError,
    {
        self.run(|| {
            let permit = match breaker.try_acquire() {
                Ok(permit) => permit,
                Err(r) => return Step::Refused(CallError::Rejected(r), r.retry_after()),
            };
            let result = f();
            let verdict = permit.finish(&result);
            let e = match result {
                Ok(value) => return Step::Done(value),
                Err(e) => e,
            };
            if let Some(refused) = ErrorView::of_error(&e).refusal() {
                // A breaker the call goes through refused it.
                let wait = refused.retry_after();
                return Step::Refused(CallError::Failed(e), wait);
            }
            match verdict {
                Verdict::Failure => Step::Failed(CallError::Failed(e), None),
                Verdict::Throttled(d) => Step::Failed(CallError::Failed(e), Some(d)),
                _ => Step::Final(CallError::Failed(e)),
            }
        })
    }

    /// Looks `query` up in `chain`, retrying the whole lookup by the
    /// policy's rules: a declined lookup (a deterministic "no") is final;
    /// a lookup in which every link was refused or skipped without a call
    /// is a refusal, waited out for the shortest `retry_after` among its
    /// refused links (none: the call ends); any other is a failure.
    ///
    /// # Errors
    ///
    /// [`RetryError`] with the last lookup's [`LookupError`](crate::chain::LookupError).
    #[cfg(feature = "chain")]
    pub fn lookup<Q, T, E, L>(
        &self,
        chain: &crate::chain::Chain<Q, T, E, L>,
        query: &Q,
    ) -> Result<crate::chain::Answer<T, E>, RetryError<crate::chain::LookupError<E>>>
    where
        Q: ?Sized,
        L: crate::chain::FirstLink<Q, T, E>,
    {
        self.run(|| match chain.lookup(query) {
            Ok(answer) => Step::Done(answer),
            Err(e) if e.declined().is_some() => Step::Final(e),
            Err(e) if e.skipped().iter().all(|s| s.skip().nothing_attempted()) => {
                // The first link a breaker will admit again; a cache that
                // missed or a full bulkhead gives no time to wait for.
                let wait = e
                    .skipped()
                    .iter()
                    .filter_map(|s| s.skip().rejected().and_then(|r| r.retry_after()))
                    .min();
                Step::Refused(e, wait)
            }
            Err(e) => Step::Failed(e, None),
        })
    }

    /// The loop every entry point shares.
    fn run<T, E>(&self, mut attempt: impl FnMut() -> Step<T, E>) -> Result<T, RetryError<E>> {
        let inner = &*self.inner;
        let started = inner.deadline.map(|_| inner.clock.now());
        if let Some(budget) = &inner.budget {
            budget.record_call();
        }
        let (mut attempts, mut refusals) = (0u32, 0u32);
        loop {
            let give_up = |error, attempts, refusals, gave_up| {
                Err(RetryError {
                    error,
                    attempts,
                    refusals,
                    gave_up,
                })
            };
            // A retry after an attempt is taken from the budget; a wait
            // for a breaker to admit the call is not: nothing was sent.
            let (error, wait, retry) = match attempt() {
                Step::Done(value) => return Ok(value),
                Step::Final(error) => {
                    return give_up(error, attempts + 1, refusals, GaveUp::Deterministic)
                }
                Step::Refused(error, retry_after) => {
                    refusals += 1;
                    match retry_after {
                        Some(wait)
                            if wait <= inner.max_retry_after && refusals <= inner.max_attempts =>
                        {
                            (error, wait, false)
                        }
                        _ => return give_up(error, attempts, refusals, GaveUp::Refused),
                    }
                }
                Step::Failed(error, retry_after) => {
                    attempts += 1;
                    if !inner.idempotent {
                        return give_up(error, attempts, refusals, GaveUp::NotIdempotent);
                    }
                    if attempts >= inner.max_attempts {
                        return give_up(error, attempts, refusals, GaveUp::Attempts);
                    }
                    let asked =
                        retry_after.map_or(Duration::ZERO, |d| d.min(inner.max_retry_after));
                    (error, self.backoff(attempts).max(asked), true)
                }
            };
            if let (Some(deadline), Some(started)) = (inner.deadline, started) {
                let elapsed = inner.clock.now().saturating_duration_since(started);
                if elapsed.saturating_add(wait) >= deadline {
                    return give_up(error, attempts, refusals, GaveUp::Deadline);
                }
            }
            if let (true, Some(budget)) = (retry, &inner.budget) {
                if !budget.try_retry() {
                    return give_up(error, attempts, refusals, GaveUp::Budget);
                }
            }
            inner.sleeper.0.sleep(wait);
        }
    }
}
