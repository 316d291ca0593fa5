//! Building a retry policy, checked once at `build()`.

use std::time::Duration;

use parking_lot::Mutex;

use super::sleeper::Boxed;
use super::{Inner, RetryBudget, RetryPolicy, Sleeper, ThreadSleeper};
use crate::backoff::Rng;
use crate::check::check;
use crate::ConfigError;

/// Builds a [`RetryPolicy`]; start with [`RetryPolicy::builder`].
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `idempotent` | required: say whether a call may be repeated |
/// | `max_attempts` | 3 (calls that reach the provider) |
/// | `backoff` | 50 ms base, doubling, at most 2 s |
/// | `jitter` | 1.0, full jitter: each wait is shortened by up to this fraction, at random (uniform in [0, nominal]) |
/// | `jitter_seed` | random per policy |
/// | `deadline` | none |
/// | `max_retry_after` | 5 s (longest wait taken from a breaker or a vendor) |
/// | `budget` | none |
/// | `sleeper` | `std::thread::sleep` |
/// | `clock` | a real `quanta::Clock` (the deadline's) |
pub struct RetryPolicyBuilder {
    idempotent: Option<bool>,
    max_attempts: u32,
    base: Duration,
    max_backoff: Duration,
    jitter: f64,
    jitter_seed: Option<u64>,
    deadline: Option<Duration>,
    max_retry_after: Duration,
    budget: Option<RetryBudget>,
    sleeper: Box<dyn Sleeper>,
    clock: Option<quanta::Clock>,
}

impl std::fmt::Debug for RetryPolicyBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicyBuilder")
            .field("idempotent", &self.idempotent)
            .field("max_attempts", &self.max_attempts)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl RetryPolicyBuilder {
    pub(super) fn new() -> Self {
        RetryPolicyBuilder {
            idempotent: None,
            max_attempts: 3,
            base: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            jitter: 1.0,
            jitter_seed: None,
            deadline: None,
            max_retry_after: Duration::from_secs(5),
            budget: None,
            sleeper: Box::new(ThreadSleeper),
            clock: None,
        }
    }

    /// Whether the call may be repeated after an attempt that may have
    /// reached the provider (a read: yes; an order, a payment, a
    /// non-idempotent write: no). Required. A call declared `false` is
    /// retried only after a refusal, when nothing was sent.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// The most attempts that reach the provider, the first included (at
    /// least 1). Refusals are not attempts; they are bounded separately by
    /// the same number.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Exponential backoff: the nominal wait before retry `n` (1 for the
    /// first) is `min(max, base × 2^(n-1))`.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base = base;
        self.max_backoff = max;
        self
    }

    /// Each wait is shortened by up to this fraction of the nominal wait,
    /// at random: it lies in `[nominal × (1 − jitter), nominal]`, as a
    /// breaker's open period does
    /// ([`BreakerBuilder::jitter`](crate::BreakerBuilder::jitter)). 1.0 (the
    /// default) is full jitter, uniform in `[0, nominal]`; 0.0 waits the
    /// nominal time.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Seeds the jitter, for a reproducible sequence of waits.
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// The most time a call may take across all its attempts and waits: a
    /// wait that would end past it is not taken ([`GaveUp::Deadline`](super::GaveUp::Deadline)).
    /// Attempts themselves are bounded by the provider's own timeout.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The longest wait taken from outside: a vendor's `Retry-After` (a
    /// [`Verdict::Throttled`](crate::Verdict::Throttled)) is cut to it, and
    /// a breaker's refusal whose `retry_after` is longer ends the call.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// Takes each retry after an attempt from `budget`. A wait for a
    /// breaker to admit the call takes nothing: nothing was sent.
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// How the policy waits: `std::thread::sleep` by default; a closure that
    /// moves the mock clock in tests.
    pub fn sleeper(mut self, sleeper: impl Sleeper + 'static) -> Self {
        self.sleeper = Box::new(sleeper);
        self
    }

    /// The clock the deadline is read from: the clock half of
    /// `quanta::Clock::mock()` in tests, moved by the sleeper.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Checks the policy and builds it.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the field: `idempotent` (not given),
    /// `max_attempts` (zero), `backoff` (a zero base or a max below the
    /// base), `jitter` (outside `[0, 1]`), `deadline` (zero).
    pub fn build(self) -> Result<RetryPolicy, ConfigError> {
        let idempotent = self.idempotent.ok_or(ConfigError::Missing {
            field: "idempotent",
            why: "say whether a call may be repeated after it may have reached the provider; \
                  a call with side effects must not be retried",
        })?;
        check(
            "max_attempts",
            self.max_attempts > 0,
            "must be at least 1",
            self.max_attempts,
        )?;
        check(
            "backoff",
            !self.base.is_zero() && self.max_backoff >= self.base,
            "needs a base above zero and a max at least the base",
            format_args!(
                "{} to {}",
                crate::duration::display(self.base),
                crate::duration::display(self.max_backoff)
            ),
        )?;
        check(
            "jitter",
            (0.0..=1.0).contains(&self.jitter),
            "must be within [0, 1]",
            self.jitter,
        )?;
        if let Some(deadline) = self.deadline {
            check(
                "deadline",
                !deadline.is_zero(),
                "must be greater than zero",
                "0s",
            )?;
        }
        Ok(RetryPolicy {
            inner: std::sync::Arc::new(Inner {
                idempotent,
                max_attempts: self.max_attempts,
                base: self.base,
                max_backoff: self.max_backoff,
                jitter: self.jitter,
                rng: Mutex::new(Rng::new(self.jitter_seed.unwrap_or_else(Rng::random_seed))),
                deadline: self.deadline,
                max_retry_after: self.max_retry_after,
                budget: self.budget,
                sleeper: Boxed(self.sleeper),
                clock: self.clock.unwrap_or_default(),
            }),
        })
    }
}
