//! The health probe as a breaker is configured with it: a cheap call and its
//! deadline. The process's thread that runs it stands above the breaker, in
//! `src/trading/probe.rs`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::check::check;
use crate::ConfigError;

pub(crate) type ProbeFn = Arc<dyn Fn() -> bool + Send + Sync>;

/// A breaker's health probe: a cheap, idempotent call (a tiny
/// reference-data lookup, a vendor's status endpoint) and how long it may
/// take.
///
/// When the open period ends, the process's health-probe thread
/// (`fusebox-health-probe`, one per process, started with the first
/// breaker built with a probe) runs it, on a short-lived thread of its own
/// (`fusebox-probe`), instead of letting a live request be the probe: recovery does not wait
/// for traffic, and live callers are refused (state
/// [`State::HalfOpen`](crate::State::HalfOpen)) until it succeeds. A probe
/// that fails, panics or outlives its deadline re-opens the breaker with
/// the next, longer open period. Its own `max_probe_duration` still bounds
/// it on the breaker's clock too.
///
/// ```
/// use fusebox::trading::HealthProbe;
/// use fusebox::{Breaker, CallPath, Classifier};
/// use std::time::Duration;
///
/// # fn status_endpoint() -> Result<(), std::io::Error> { Ok(()) }
/// let breaker = Breaker::builder("corporate-actions")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .health_probe(HealthProbe::new(Duration::from_secs(2), status_endpoint))
///     .build()?;
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct HealthProbe {
    pub(crate) f: ProbeFn,
    pub(crate) deadline: Duration,
}

impl HealthProbe {
    /// A probe that calls `f`, which succeeds with `Ok`, and may take up to
    /// `deadline` (more than zero; `build()` checks).
    pub fn new<T, E>(
        deadline: Duration,
        f: impl Fn() -> Result<T, E> + Send + Sync + 'static,
    ) -> Self {
        HealthProbe {
            f: Arc::new(move || f().is_ok()),
            deadline,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        check(
            "health_probe",
            !self.deadline.is_zero(),
            "must have a deadline longer than zero",
            crate::duration::display(self.deadline),
        )?;
        Ok(())
    }
}

impl fmt::Debug for HealthProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthProbe")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
