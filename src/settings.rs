//! The validated settings a breaker runs on: what the machine reads, and
//! what the builder (`src/config.rs`) sets and checks.
//!
//! Read-only once a breaker is built. The breakers a [`BreakerConfig`]
//! stamps, and those built from clones of one builder, share one copy
//! behind an `Arc`: each holds a handle, and the copy goes with the last.
//!
//! [`BreakerConfig`]: crate::BreakerConfig

use std::borrow::Cow;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::histogram::DEFAULT_BUCKETS;
use crate::latency::LatencyTrip;
use crate::policy::{HalfOpenRate, OpenPeriod, TripPredicate};

/// The validated numeric settings a breaker runs on.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) failure_threshold: Option<u32>,
    pub(crate) failure_window: Duration,
    pub(crate) window_failure_threshold: Option<u32>,
    pub(crate) failure_rate_threshold: Option<f64>,
    pub(crate) minimum_calls: u32,
    pub(crate) slow_call_duration: Option<Duration>,
    pub(crate) slow_call_rate_threshold: Option<f64>,
    pub(crate) backoff: Backoff,
    pub(crate) half_open_max_concurrent: u32,
    pub(crate) half_open_success_threshold: u32,
    pub(crate) max_probe_duration: Duration,
    /// Boxed: a breaker without a latency policy keeps a pointer.
    pub(crate) latency_trip: Option<Box<LatencyTrip>>,
    pub(crate) flapping_trips: Option<u32>,
    pub(crate) flapping_window: Duration,
    pub(crate) trip_predicate: Option<TripPredicate>,
    pub(crate) open_period: Option<OpenPeriod>,
    pub(crate) count_window: Option<u32>,
    pub(crate) closed_interval: Option<Duration>,
    pub(crate) half_open_max_probes: Option<u32>,
    pub(crate) half_open_rate: Option<HalfOpenRate>,
    pub(crate) count_in_flight: bool,
    /// Calls in flight past `slow_call_duration` that open the breaker.
    pub(crate) stuck_call_threshold: Option<u32>,
    /// One call in flight past this opens the breaker.
    pub(crate) hung_call_duration: Option<Duration>,
    /// The bounds of the call-duration histogram (used only by a breaker
    /// that times its calls); the default ones are not copied per breaker.
    pub(crate) call_duration_buckets: Cow<'static, [Duration]>,
    /// State changes the breaker keeps for its snapshot's `recent_changes`.
    pub(crate) event_log_capacity: usize,
}

impl Settings {
    /// Whether any condition needs the sliding window.
    pub(crate) fn uses_window(&self) -> bool {
        self.window_failure_threshold.is_some()
            || self.failure_rate_threshold.is_some()
            || self.slow_call_rate_threshold.is_some()
            || self.trip_predicate.is_some()
    }

    /// Whether the breaker keeps a table of its calls in flight
    /// (`src/in_flight.rs`).
    pub(crate) fn tracks_in_flight(&self) -> bool {
        self.stuck_call_threshold.is_some() || self.hung_call_duration.is_some()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            failure_threshold: Some(5),
            failure_window: Duration::from_secs(60),
            window_failure_threshold: None,
            failure_rate_threshold: Some(0.5),
            minimum_calls: 20,
            slow_call_duration: None,
            slow_call_rate_threshold: None,
            backoff: Backoff {
                base: Duration::from_secs(10),
                multiplier: 2.0,
                max: Duration::from_secs(300),
                jitter: 0.1,
            },
            half_open_max_concurrent: 1,
            half_open_success_threshold: 1,
            max_probe_duration: Duration::from_secs(30),
            latency_trip: None,
            flapping_trips: Some(3),
            flapping_window: Duration::from_secs(600),
            trip_predicate: None,
            open_period: None,
            count_window: None,
            closed_interval: None,
            half_open_max_probes: None,
            half_open_rate: None,
            count_in_flight: false,
            stuck_call_threshold: None,
            hung_call_duration: None,
            call_duration_buckets: Cow::Borrowed(&DEFAULT_BUCKETS),
            event_log_capacity: 16,
        }
    }
}
