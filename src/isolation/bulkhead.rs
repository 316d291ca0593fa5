//! The bulkhead: at most N calls to one dependency at a time.

use std::error::Error as StdError;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::error::{at_least_one, settle, Full, IsolationError, Layer};
use crate::{Breaker, ConfigError, Permit, State};

/// At most `max_concurrent` calls to one dependency at a time, so that a
/// slow dependency cannot hold every thread of the process.
///
/// A caller beyond the limit is refused at once, or after waiting at most
/// `max_wait` for a slot, with [`Full`]: nothing was attempted, and the
/// refusal is never counted as the dependency's failure. A call that panics
/// counts as the breaker's failure and gives its slot back; the panic
/// unwinds to the caller.
///
/// Cheap to clone (the clones share one bulkhead), `Send + Sync`.
///
/// ```
/// use fusebox::isolation::Bulkhead;
/// use fusebox::{Breaker, CallPath, Classifier};
///
/// let breaker = Breaker::builder("pricing")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .build()?;
/// let bulkhead = Bulkhead::builder("pricing").max_concurrent(16).build()?;
///
/// let price = bulkhead.call(&breaker, || Ok::<_, std::io::Error>(101.5));
/// assert_eq!(price.unwrap(), 101.5);
/// assert_eq!(bulkhead.snapshot().peak, 1);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// # Cost
///
/// Admission is one compare-and-swap on the count of slots in use (one line
/// shared by every caller of this bulkhead) and one relaxed load of the
/// peak; release is one atomic decrement and one load of the waiter count.
/// No lock and no allocation unless a caller waits. A refusal with a closed
/// breaker is two atomic loads and a relaxed increment; with a breaker in
/// any other state the breaker is asked first, and a permit it grants is
/// handed back with [`Permit::ignore`] (one lock round trip in the
/// breaker). A caller that waits takes a lock and parks on a condition
/// variable; a release then takes the same lock to wake one waiter.
#[derive(Clone)]
pub struct Bulkhead {
    inner: Arc<Inner>,
}

struct Inner {
    slots: Slots,
    name: crate::name::Inline,
    limit: usize,
    max_wait: Duration,
    refusals: AtomicU64,
    lock: Mutex<()>,
    freed: Condvar,
}

/// What every admission and release touches, on a line of its own.
#[repr(align(128))]
struct Slots {
    in_use: AtomicUsize,
    peak: AtomicUsize,
    waiters: AtomicUsize,
}

/// Settings for a [`Bulkhead`], checked by [`build`](Self::build).
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `max_concurrent` | required |
/// | `max_wait` | zero: a caller beyond the limit is refused at once |
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until build() is called"]
pub struct BulkheadBuilder {
    name: String,
    max_concurrent: Option<usize>,
    max_wait: Duration,
}

impl BulkheadBuilder {
    /// The most calls in flight at once. Required; at least 1.
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = Some(n);
        self
    }

    /// How long a caller beyond the limit may wait for a slot before it is
    /// refused. Zero (the default) refuses at once, which is what a thread
    /// with its own deadline usually wants.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// Checks the settings and builds the bulkhead.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Missing`] without `max_concurrent`;
    /// [`ConfigError::Invalid`] when it is zero.
    pub fn build(self) -> Result<Bulkhead, ConfigError> {
        // The same rules as a breaker's name: it goes into refusals and logs.
        crate::name::check(&self.name)?;
        let limit = self.max_concurrent.ok_or(ConfigError::Missing {
            field: "max_concurrent",
            why: "how many calls a dependency may hold at once depends on the process's threads",
        })?;
        if limit == 0 {
            return Err(at_least_one("max_concurrent", limit));
        }
        Ok(Bulkhead {
            inner: Arc::new(Inner {
                slots: Slots {
                    in_use: AtomicUsize::new(0),
                    peak: AtomicUsize::new(0),
                    waiters: AtomicUsize::new(0),
                },
                name: crate::name::Inline::new(&self.name),
                limit,
                max_wait: self.max_wait,
                refusals: AtomicU64::new(0),
                lock: Mutex::new(()),
                freed: Condvar::new(),
            }),
        })
    }
}

/// A point-in-time view of a [`Bulkhead`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct BulkheadSnapshot {
    /// The bulkhead's name.
    pub name: std::sync::Arc<str>,
    /// Its limit.
    pub max_concurrent: usize,
    /// Slots in use now.
    pub in_use: usize,
    /// The most slots ever in use at once.
    pub peak: usize,
    /// Callers refused for want of a slot, over the bulkhead's life.
    pub refusals: u64,
}

impl Bulkhead {
    /// Starts building a bulkhead called `name` (used in refusals and logs).
    pub fn builder(name: impl Into<String>) -> BulkheadBuilder {
        BulkheadBuilder {
            name: name.into(),
            max_concurrent: None,
            max_wait: Duration::ZERO,
        }
    }

    /// The bulkhead's name.
    pub fn name(&self) -> &str {
        self.inner.name.as_str()
    }

    /// Takes a slot, waiting at most `max_wait` for one. The slot is given
    /// back when the returned [`Slot`] is dropped.
    ///
    /// # Errors
    ///
    /// [`Full`] when no slot came free in time.
    #[inline]
    pub fn try_enter(&self) -> Result<Slot<'_>, Full> {
        match self.enter_now() {
            Some(slot) => Ok(slot),
            None => self.enter_waiting(),
        }
    }

    /// Runs `f` through `breaker`, then this bulkhead, on the caller's
    /// thread.
    ///
    /// The breaker is asked first, so that a call it refuses never takes a
    /// slot. When the bulkhead is full, the breaker's permit is handed back
    /// unused ([`Permit::ignore`]): the refusal is not the dependency's
    /// failure. A caller that waits for a slot asks the breaker again once
    /// it has one, so that the wait is not timed as the dependency's
    /// latency and a probe is not held while nothing is being probed.
    ///
    /// A panic in `f` counts as the breaker's failure (its permit is
    /// dropped without an outcome), gives the slot back, and unwinds to the
    /// caller.
    ///
    /// # Errors
    ///
    /// [`IsolationError::Rejected`] or [`IsolationError::Full`] when nothing
    /// was attempted; [`IsolationError::Failed`] with `f`'s error otherwise.
    #[inline]
    pub fn call<T, E, F>(&self, breaker: &Breaker, f: F) -> Result<T, IsolationError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        T: 'static,
        E: StdError + 'static,
    {
        let (permit, _slot) = self.admit(breaker).map_err(Refusal::into_error)?;
        settle(permit, f())
    }

    /// A breaker permit and a slot, in that order (see [`call`](Self::call)).
    #[inline]
    pub(super) fn admit<'a>(
        &'a self,
        breaker: &'a Breaker,
    ) -> Result<(Permit<'a>, Slot<'a>), Refusal> {
        if self.inner.max_wait.is_zero() {
            return self.admit_at_once(breaker);
        }
        let permit = breaker.try_acquire().map_err(Refusal::Rejected)?;
        if let Some(slot) = self.enter_now() {
            return Ok((permit, slot));
        }
        // Full: the permit goes back unused, whatever happens next.
        permit.ignore();
        let slot = self.enter_waiting().map_err(Refusal::Full)?;
        let permit = breaker.try_acquire().map_err(Refusal::Rejected)?;
        Ok((permit, slot))
    }

    /// [`admit`](Self::admit) without waiting for a slot, whatever
    /// `max_wait` says: what a caller that must not block gets (a future,
    /// `src/isolation/future.rs`), and what every caller gets with no
    /// `max_wait`.
    #[inline]
    pub(super) fn admit_at_once<'a>(
        &'a self,
        breaker: &'a Breaker,
    ) -> Result<(Permit<'a>, Slot<'a>), Refusal> {
        let inner = &*self.inner;
        if inner.slots.in_use.load(Ordering::Relaxed) >= inner.limit
            && breaker.state() == State::Closed
        {
            // Full, and the breaker would admit: refused without asking it,
            // since its permit would only be handed back, and handing back
            // a closed permit takes the breaker's lock. Saturated callers
            // then never contend on it.
            return Err(Refusal::Full(self.refuse(Duration::ZERO)));
        }
        let permit = breaker.try_acquire().map_err(Refusal::Rejected)?;
        match self.enter_now() {
            Some(slot) => Ok((permit, slot)),
            None => {
                // Full: the permit goes back unused.
                permit.ignore();
                Err(Refusal::Full(self.refuse(Duration::ZERO)))
            }
        }
    }

    /// A slot if one is free now.
    #[inline(always)]
    fn enter_now(&self) -> Option<Slot<'_>> {
        let slots = &self.inner.slots;
        let mut current = slots.in_use.load(Ordering::Relaxed);
        loop {
            if current >= self.inner.limit {
                return None;
            }
            // SeqCst pairs with the release's load of `waiters`: see there.
            match slots.in_use.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        let n = current + 1;
        if n > slots.peak.load(Ordering::Relaxed) {
            slots.peak.fetch_max(n, Ordering::Relaxed);
        }
        Some(Slot { bulkhead: self })
    }

    #[cold]
    fn enter_waiting(&self) -> Result<Slot<'_>, Full> {
        let inner = &*self.inner;
        if inner.max_wait.is_zero() {
            return Err(self.refuse(Duration::ZERO));
        }
        let start = Instant::now();
        // A wait too long to represent is a wait without end.
        let deadline = start.checked_add(inner.max_wait);
        let mut guard = inner.lock.lock();
        inner.slots.waiters.fetch_add(1, Ordering::SeqCst);
        let slot = loop {
            if let Some(slot) = self.enter_now() {
                break Some(slot);
            }
            match deadline {
                Some(deadline) => {
                    if inner.freed.wait_until(&mut guard, deadline).timed_out() {
                        break self.enter_now();
                    }
                }
                None => inner.freed.wait(&mut guard),
            }
        };
        inner.slots.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        slot.ok_or_else(|| self.refuse(start.elapsed()))
    }

    #[cold]
    fn refuse(&self, waited: Duration) -> Full {
        self.inner.refusals.fetch_add(1, Ordering::Relaxed);
        Full {
            name: self.inner.name,
            layer: Layer::Bulkhead,
            limit: self.inner.limit,
            waited,
        }
    }

    #[inline(always)]
    fn release(&self) {
        let inner = &*self.inner;
        inner.slots.in_use.fetch_sub(1, Ordering::SeqCst);
        // A waiter registers in `waiters` and then tries to take a slot,
        // both SeqCst, under the lock. If this load sees no waiter, the
        // waiter's attempt comes after the decrement above and succeeds;
        // if it sees one, taking the lock here means the waiter is either
        // parked (and woken) or has not tried yet (and will succeed).
        if inner.slots.waiters.load(Ordering::SeqCst) != 0 {
            let _guard = inner.lock.lock();
            inner.freed.notify_one();
        }
    }

    /// Slots in use, the peak and the refusals. No lock: a few atomic loads.
    pub fn snapshot(&self) -> BulkheadSnapshot {
        let inner = &*self.inner;
        BulkheadSnapshot {
            name: std::sync::Arc::from(inner.name.as_str()),
            max_concurrent: inner.limit,
            in_use: inner.slots.in_use.load(Ordering::Relaxed),
            peak: inner.slots.peak.load(Ordering::Relaxed),
            refusals: inner.refusals.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("name", &self.inner.name)
            .field("max_concurrent", &self.inner.limit)
            .field("max_wait", &self.inner.max_wait)
            .finish_non_exhaustive()
    }
}

/// One slot of a [`Bulkhead`], given back when dropped.
#[must_use = "the slot is given back as soon as it is dropped"]
pub struct Slot<'a> {
    bulkhead: &'a Bulkhead,
}

impl Drop for Slot<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.bulkhead.release();
    }
}

impl fmt::Debug for Slot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("bulkhead", &self.bulkhead.inner.name)
            .finish()
    }
}

/// Why [`Bulkhead::admit`] let nothing through.
pub(super) enum Refusal {
    Rejected(crate::Rejected),
    Full(Full),
}

impl Refusal {
    pub(super) fn into_error<E>(self) -> IsolationError<E> {
        match self {
            Refusal::Rejected(r) => IsolationError::Rejected(r),
            Refusal::Full(f) => IsolationError::Full(f),
        }
    }
}
