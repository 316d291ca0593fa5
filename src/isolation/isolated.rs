//! Breaker, bulkhead and deadline composed in one call path.

use std::error::Error as StdError;
use std::time::Duration;

use super::bulkhead::Refusal;
use super::error::{settle, IsolationError};
use super::{Bulkhead, DeadlinePool};
use crate::Breaker;

/// One dependency's breaker with its bulkhead and its deadline pool, in the
/// order that keeps each one honest:
///
/// 1. the **breaker** is asked first: a refusal takes no slot and starts
///    nothing;
/// 2. the **bulkhead** bounds how many of the caller's threads can be
///    inside this dependency at once (waiting for it, with a pool); a
///    refusal hands the breaker's permit back unused;
/// 3. the **deadline pool** runs the call on one of its threads and the
///    caller waits at most the deadline; at the deadline the breaker counts
///    a failure, while the call keeps its pool thread until it returns.
///
/// Either of the last two may be left out. `docs/isolation.md` says when
/// each is worth having.
///
/// ```
/// use fusebox::isolation::{Bulkhead, DeadlinePool, Isolated};
/// use fusebox::{Breaker, CallPath, Classifier};
/// use std::time::Duration;
///
/// let pricing = Isolated::new(
///     Breaker::builder("pricing")
///         .call_path(CallPath::ReferenceData)
///         .classifier(Classifier::every_error_is_a_failure())
///         .build()?,
/// )
/// .with_bulkhead(Bulkhead::builder("pricing").max_concurrent(8).build()?)
/// .with_deadline_pool(
///     DeadlinePool::builder("pricing")
///         .threads(16)
///         .deadline(Duration::from_millis(20))
///         .build()?,
/// );
/// match pricing.call(|| Ok::<_, std::io::Error>(101.25)) {
///     Ok(price) => assert_eq!(price, 101.25),
///     Err(e) if e.nothing_attempted() => { /* nothing attempted: last known price */ }
///     Err(e) => { /* attempted: timed out or failed */ }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Isolated {
    breaker: Breaker,
    bulkhead: Option<Bulkhead>,
    pool: Option<DeadlinePool>,
}

impl Isolated {
    /// Calls through `breaker` alone, until a bulkhead or pool is added.
    pub fn new(breaker: Breaker) -> Self {
        Isolated {
            breaker,
            bulkhead: None,
            pool: None,
        }
    }

    /// Adds a bulkhead inside the breaker.
    pub fn with_bulkhead(mut self, bulkhead: Bulkhead) -> Self {
        self.bulkhead = Some(bulkhead);
        self
    }

    /// Runs calls on `pool`, inside the breaker and the bulkhead.
    pub fn with_deadline_pool(mut self, pool: DeadlinePool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The breaker, for snapshots and overrides.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The bulkhead, if there is one.
    pub fn bulkhead(&self) -> Option<&Bulkhead> {
        self.bulkhead.as_ref()
    }

    /// The deadline pool, if there is one.
    pub fn deadline_pool(&self) -> Option<&DeadlinePool> {
        self.pool.as_ref()
    }

    /// Runs `f` through every layer, with the pool's deadline.
    ///
    /// `f` must be `Send + 'static` because, with a pool, it runs on
    /// another thread and may outlive the call. Without a pool it runs on
    /// the caller's thread.
    ///
    /// # Errors
    ///
    /// [`IsolationError::Rejected`] or [`IsolationError::Full`] when nothing
    /// was attempted; [`IsolationError::TimedOut`] when the call was
    /// abandoned at its deadline; [`IsolationError::Failed`] with `f`'s
    /// error.
    pub fn call<T, E, F>(&self, f: F) -> Result<T, IsolationError<E>>
    where
        F: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: StdError + Send + 'static,
    {
        let deadline = self.pool.as_ref().map(DeadlinePool::deadline);
        self.call_inner(deadline, f)
    }

    /// [`call`](Self::call) with this call's own deadline (ignored without
    /// a pool).
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    pub fn call_within<T, E, F>(&self, deadline: Duration, f: F) -> Result<T, IsolationError<E>>
    where
        F: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: StdError + Send + 'static,
    {
        self.call_inner(Some(deadline), f)
    }

    fn call_inner<T, E, F>(&self, deadline: Option<Duration>, f: F) -> Result<T, IsolationError<E>>
    where
        F: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: StdError + Send + 'static,
    {
        let breaker = &self.breaker;
        let (permit, _slot) = match &self.bulkhead {
            Some(bulkhead) => {
                let (permit, slot) = bulkhead.admit(breaker).map_err(Refusal::into_error)?;
                (permit, Some(slot))
            }
            None => (
                breaker.try_acquire().map_err(IsolationError::Rejected)?,
                None,
            ),
        };
        // The bulkhead slot, if any, is held until the caller returns: at
        // the result, or at the deadline.
        match (&self.pool, deadline) {
            (Some(pool), Some(deadline)) => pool.run_with_permit(permit, deadline, f),
            _ => settle(permit, f()),
        }
    }
}
