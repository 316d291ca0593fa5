//! The builder, its defaults, the checks `build()` makes, and the reusable
//! configuration that stamps many breakers.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::Parts;
use crate::check::{check, check_rate};
use crate::events::{Delivery, StateChange};
use crate::{Breaker, CallPath, Classifier, ConfigError, LatencyTrip, ResultClassifier};

impl Breaker {
    /// Starts building a breaker called `name` (used in errors, logs and
    /// metrics). See [`BreakerBuilder`] for the settings and their defaults.
    ///
    /// `build()` refuses a name that is empty, longer than 32 bytes, or not
    /// printable ASCII (space to `~`) without a backtick, so that it fits in
    /// a refusal and cannot forge a log line.
    pub fn builder(name: impl Into<String>) -> BreakerBuilder {
        BreakerBuilder::new(name)
    }
}

/// Builds a [`Breaker`] (made by [`Breaker::builder`]), or a reusable
/// [`BreakerConfig`] (made by [`BreakerConfig::builder`]).
///
/// Setters are named like the settings; `build()` checks everything once and
/// names the field at fault. Trip conditions are independent and any one
/// opens the breaker; a condition set to `None` is off. The builder is
/// `Clone`, so one partly set can be the start of several.
///
/// # Default
///
/// | setting | default | meaning |
/// |---|---|---|
/// | `call_path` | required | what the breaker guards; order, cancel, kill-switch and risk-check paths are refused |
/// | `classifier` | required | which errors are the dependency's failures |
/// | `consecutive_failure_threshold` | `Some(5)` | consecutive failures that open it (a success resets the run) |
/// | `failure_window` | 60 s | the sliding window the next three conditions look at |
/// | `window_failure_threshold` | `None` | failures inside the window that open it, successes or not |
/// | `failure_rate_threshold` | `Some(0.5)` | failure rate over the window that opens it |
/// | `minimum_calls` | 20 | calls the window needs before either rate is judged |
/// | `slow_call_duration` | `None` | a successful call longer than this is slow |
/// | `slow_call_rate_threshold` | `None` | slow-call rate over the window that opens it |
/// | `latency_trip` | `None` | a [`LatencyTrip`] percentile policy |
/// | `open_duration` | 10 s | the first open period of an outage |
/// | `backoff_multiplier` | 2.0 | growth of the open period per failed probe |
/// | `max_open_duration` | 300 s | hard ceiling of every open period, a throttled one included |
/// | `jitter` | 0.1 | the open period is shortened by up to this fraction, at random |
/// | `jitter_seed` | random | seed for the jitter, for exact tests |
/// | `half_open_max_concurrent` | 1 | probes out at once while half-open |
/// | `half_open_success_threshold` | 1 | probe successes in a row that close it |
/// | `max_probe_duration` | 30 s | a probe that has not reported back by then counts as failed |
/// | `flapping_trips` | `Some(3)` | trips within `flapping_window` that mark the breaker as flapping (a signal only) |
/// | `flapping_window` | 10 min | the window `flapping_trips` looks at |
/// | `result_classifier` | none | judges an `Ok` result: a stale feed or a zero price can be a failure |
/// | `trip_predicate` | none | a named [`TripPredicate`](crate::TripPredicate) over the window's counts that opens it |
/// | `open_period` | none (the backoff) | an [`OpenPeriod`](crate::OpenPeriod) function deciding each open period, under `max_open_duration` |
/// | `count_window` | `None` (the time window) | judge the window conditions over the last N calls instead of `failure_window` |
/// | `closed_interval` | `None` | clear the closed-state counts every interval (gobreaker `Interval`) |
/// | `half_open_max_probes` | `None` (no cap) | probes admitted over a whole half-open period (gobreaker `MaxRequests`) |
/// | `count_calls_in_flight` | `false` | count calls admitted and not yet reported, for `Snapshot::calls_in_flight` |
/// | `stuck_call_threshold` | `None` | calls in flight past `slow_call_duration` that open it (1 to 64) |
/// | `hung_call_duration` | `None` | one call in flight past this opens it |
/// | `half_open_rate` | `None` | judge half-open by a [`HalfOpenRate`](crate::HalfOpenRate) over N probes instead of N successes in a row |
/// | `call_duration_buckets` | 100 µs to 10 s, 16 bounds | the histogram buckets of call durations (`Snapshot::call_durations`), for a breaker that times its calls |
/// | `event_log_capacity` | 16 | state changes kept for `Snapshot::recent_changes` (0 to 1024) |
/// | `clock` | `quanta::Clock::new()`, read directly on every decision | the monotonic clock; tests pass `quanta::Clock::mock()` |
/// | `on_state_change` | none | a callback run after every state change, outside the lock |
/// | `delivery` | [`Delivery::Caller`] | which thread runs the callback, subscribers and log lines |
#[must_use = "a builder does nothing until `build()` is called"]
#[derive(Clone)]
pub struct BreakerBuilder<T = Breaker> {
    /// What the breaker is built from, as set so far.
    pub(crate) parts: Parts,
    /// What `build()` makes: a [`Breaker`] or a [`BreakerConfig`].
    target: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for BreakerBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerBuilder")
            .field("name", &self.parts.name)
            .field("call_path", &self.parts.call_path)
            .field("settings", &self.parts.settings)
            .field("recovery", &self.parts.recovery)
            .finish_non_exhaustive()
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty => $($path:ident).+) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            Arc::make_mut(&mut self.parts.settings).$($path).+ = value;
            self
        }
    };
    ($(#[$doc:meta])* $name:ident: into $ty:ty => $($path:ident).+) => {
        $(#[$doc])*
        pub fn $name(mut self, value: impl Into<Option<$ty>>) -> Self {
            Arc::make_mut(&mut self.parts.settings).$($path).+ = value.into();
            self
        }
    };
}

impl<T> BreakerBuilder<T> {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        BreakerBuilder {
            parts: Parts::new(name.into()),
            target: PhantomData,
        }
    }

    /// The call path this breaker guards. Required.
    pub fn call_path(mut self, path: CallPath) -> Self {
        self.parts.call_path = Some(path);
        self
    }

    /// Which errors count against the dependency. Required. Anything that
    /// converts into a [`Classifier`] is taken as it is (the `http`
    /// feature's `HttpClassifier`).
    pub fn classifier(mut self, classifier: impl Into<Classifier>) -> Self {
        self.parts.classifier = Some(classifier.into());
        self
    }

    /// The clock to read. Pass the clock half of `quanta::Clock::mock()` in
    /// tests and move time with its handle.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.parts.clock = Some(clock);
        self
    }

    /// Runs `f` after each state change, with the breaker's lock released,
    /// on the thread that [`delivery`](Self::delivery) picks.
    /// `f` may call the breaker back; a panic in `f` is caught and logged and
    /// changes nothing.
    pub fn on_state_change<F>(mut self, f: F) -> Self
    where
        F: Fn(&StateChange) + Send + Sync + 'static,
    {
        self.parts.on_state_change = Some(Arc::new(f));
        self
    }

    /// Which thread delivers state changes (runs `on_state_change`, sends
    /// to subscribers and writes the log line): the caller that caused the
    /// change, or the process's notifier thread. See [`Delivery`].
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.parts.delivery = delivery;
        self
    }

    /// Seeds the jitter so that open periods are exactly reproducible.
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.parts.jitter_seed = Some(seed);
        self
    }

    setter!(
        /// Consecutive failures that open the breaker, or `None` for off.
        consecutive_failure_threshold: into u32 => failure_threshold);
    setter!(
        /// The sliding window for the window, rate and slow-call conditions.
        failure_window: Duration => failure_window);
    setter!(
        /// Failures within the window that open the breaker, or `None`.
        window_failure_threshold: into u32 => window_failure_threshold);
    setter!(
        /// A failure rate in `(0, 1]` over the window that opens the breaker.
        failure_rate_threshold: into f64 => failure_rate_threshold);
    setter!(
        /// Calls the window must hold before a rate is judged.
        minimum_calls: u32 => minimum_calls);
    setter!(
        /// A successful call that took longer than this is slow.
        slow_call_duration: into Duration => slow_call_duration);
    setter!(
        /// A slow-call rate in `(0, 1]` over the window that opens the breaker.
        slow_call_rate_threshold: into f64 => slow_call_rate_threshold);
    /// A latency-percentile trip policy.
    pub fn latency_trip(mut self, value: impl Into<Option<LatencyTrip>>) -> Self {
        Arc::make_mut(&mut self.parts.settings).latency_trip = value.into().map(Box::new);
        self
    }
    setter!(
        /// The first open period of an outage.
        open_duration: Duration => backoff.base);
    setter!(
        /// Growth of the open period per re-open (at least 1.0).
        backoff_multiplier: f64 => backoff.multiplier);
    setter!(
        /// The hard ceiling on every open period: the backoff's, and one
        /// a `Verdict::Throttled` asked for too (a longer one is cut to it).
        max_open_duration: Duration => backoff.max);
    setter!(
        /// Fraction in `[0, 1]` by which each open period may be shortened at random.
        jitter: f64 => backoff.jitter);
    setter!(
        /// Probes admitted at once while half-open.
        half_open_max_concurrent: u32 => half_open_max_concurrent);
    setter!(
        /// Probe successes in a row that close the breaker.
        half_open_success_threshold: u32 => half_open_success_threshold);
    setter!(
        /// How long a probe may stay out before it counts as failed.
        max_probe_duration: Duration => max_probe_duration);
    setter!(
        /// Trips (openings from closed) within `flapping_window` that mark
        /// the breaker as flapping, or `None` for off. Flapping changes no
        /// decision: it shows in the snapshot and metrics and is logged at
        /// warn. Between 2 and 64.
        flapping_trips: into u32 => flapping_trips);
    setter!(
        /// The window `flapping_trips` looks at.
        flapping_window: Duration => flapping_window);

    /// Judges each `Ok` result of [`Breaker::call`], [`call_any`](Breaker::call_any)
    /// and a permit's `finish`: an HTTP
    /// 200 whose body says "stale feed", a quote with a zero price can be a
    /// failure (Polly's `ShouldHandle` on results). The result is returned
    /// to the caller unchanged either way. Results of other types than the
    /// classifier's are successes.
    ///
    /// Cost: a closed success with one set takes the locked path when the
    /// classifier says anything but `Success`; a `Success` stays lock-free.
    pub fn result_classifier(mut self, classifier: impl Into<Option<ResultClassifier>>) -> Self {
        self.parts.result_classifier = classifier.into();
        self
    }

    setter!(
        /// A named condition over the window's counts that opens the
        /// breaker, judged after every call besides the built-in conditions
        /// (gobreaker's `ReadyToTrip`). It does not wait for
        /// `minimum_calls`; it sees the window of `failure_window` (or
        /// `count_window`) and the current runs.
        ///
        /// Cost: with one set, every success takes the breaker's lock (a
        /// success could make the predicate true), about the cost of a
        /// failure.
        trip_predicate: into crate::TripPredicate => trip_predicate);
    setter!(
        /// A function that decides each open period from the re-open count,
        /// the window's failure rate and the last period, in place of
        /// `open_duration`, `backoff_multiplier` and `jitter` (Polly's
        /// `BreakDurationGenerator`). `max_open_duration` stays the
        /// ceiling; a `Verdict::Throttled` request still lengthens the
        /// period up to it. Called under the breaker's lock: keep it quick.
        open_period: into crate::OpenPeriod => open_period);
    setter!(
        /// Judge `window_failure_threshold`, `failure_rate_threshold`,
        /// `slow_call_rate_threshold` and the trip predicate over the last
        /// `n` calls (1 to 1 000 000), however old, instead of over
        /// `failure_window` (Resilience4j's `COUNT_BASED` window).
        /// `minimum_calls` must not exceed `n`, and at least one of those
        /// conditions must be set, or `build()` refuses `count_window`.
        ///
        /// Cost: `n` bytes, allocated at build; every success takes the
        /// breaker's lock, about the cost of a failure.
        count_window: into u32 => count_window);
    setter!(
        /// Clears the closed-state counts (the failure run, the success
        /// run and the window) every `interval`, counted from when the
        /// breaker last closed: "failures per minute, reset each minute"
        /// (gobreaker's `Interval`). Lifetime totals are kept.
        closed_interval: into Duration => closed_interval);
    setter!(
        /// Probes admitted over a whole half-open period, beside
        /// `half_open_max_concurrent` at once (gobreaker's `MaxRequests`). A
        /// probe whose outcome is ignored, or whose failure is neutral in a
        /// maintenance window, gives its place back. Must be at
        /// least `half_open_success_threshold` (or the `half_open_rate`
        /// round), so that the breaker can close.
        half_open_max_probes: into u32 => half_open_max_probes);
    setter!(
        /// Judge half-open by the failure rate of a round of probes instead
        /// of `half_open_success_threshold` successes in a row.
        half_open_rate: into crate::HalfOpenRate => half_open_rate);

    setter!(
        /// Counts the calls admitted and not yet reported, for
        /// [`Snapshot::calls_in_flight`](crate::Snapshot::calls_in_flight)
        /// (gobreaker's `Requests`, less those that reported).
        ///
        /// Cost: one increment on the thread's own counter line per
        /// admission; successes stay lock-free. Off by default.
        count_calls_in_flight: bool => count_in_flight);

    /// Opens the breaker when `n` calls admitted in the current closed
    /// period (1 to 64) are still in flight after `slow_call_duration`,
    /// which must be set: a dependency that has stopped answering is seen
    /// before any of its slow calls returns, which a slow-call rate or a
    /// latency percentile must wait for. The state change carries
    /// [`Reason::StuckCalls`](crate::Reason::StuckCalls). In half-open, a
    /// probe in flight past its slow mark re-opens at once
    /// ([`Reason::ProbeStuck`](crate::Reason::ProbeStuck)) rather than at
    /// `max_probe_duration`.
    ///
    /// The breaker counts only the calls it admitted while closed (or
    /// ramping up), at most 64 at once (more go untracked), and notices
    /// them when a call arrives, a full bulkhead refuses one, or anyone
    /// looks ([`Breaker::state`](crate::Breaker::state),
    /// [`would_permit`](crate::Breaker::would_permit),
    /// [`snapshot`](crate::Breaker::snapshot), and so a scrape): a look
    /// opens it as the next call would. There is no watcher thread. Calls
    /// admitted before a state change never count in the next state; a
    /// stuck call that returns after the trip is counted in the totals
    /// only; one that never returns is forgotten when the breaker next
    /// closes. Time inside a maintenance window counts for nothing: a call
    /// is aged from its start or from the end of the last window it was
    /// out through, whichever is later. With `hung_call_duration` too, a
    /// trip on both rules at once carries
    /// [`Reason::StuckAndHungCalls`](crate::Reason::StuckAndHungCalls).
    ///
    /// Choosing `n`: below the calls the dependency has in flight at its
    /// normal load over `slow_call_duration` plus a margin, so that normal
    /// jitter never reaches it and an outage does at once. With a bulkhead
    /// in front, at most its limit.
    ///
    /// Cost: allocates a table of 64 words (512 bytes) at build; each
    /// closed call claims a word when admitted (one compare-and-swap, no
    /// lock) and frees it when it reports or is cancelled (a plain store,
    /// under the lock its outcome is recorded under); about once per
    /// `slow_call_duration` under load one admission, or one look, takes
    /// the lock to scan the table. Off (`None`) by default; a breaker without it or
    /// `hung_call_duration` pays nothing.
    ///
    /// ```
    /// use fusebox::{Breaker, CallPath, Classifier, State};
    /// use std::time::Duration;
    ///
    /// let (clock, time) = fusebox::quanta::Clock::mock();
    /// let breaker = Breaker::builder("pricing")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .clock(clock)
    ///     .slow_call_duration(Duration::from_millis(50))
    ///     .stuck_call_threshold(2)
    ///     .build()?;
    ///
    /// // Two calls go out and do not come back.
    /// let stuck = [breaker.try_acquire_owned()?, breaker.try_acquire_owned()?];
    /// time.increment(Duration::from_millis(60));
    /// // The next call finds them past 50 ms: the breaker opens.
    /// assert!(breaker.try_acquire().is_err());
    /// assert_eq!(breaker.state(), State::Open);
    /// let why = breaker.snapshot().last_transition.unwrap().reason;
    /// assert_eq!(why.to_string(), "2 calls in flight for over 50ms");
    /// drop(stuck); // their late failures count in the totals only
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stuck_call_threshold(mut self, n: impl Into<Option<u32>>) -> Self {
        Arc::make_mut(&mut self.parts.settings).stuck_call_threshold = n.into();
        self
    }

    /// Opens the breaker when any one call admitted in the current closed
    /// period is still in flight after `d`
    /// ([`Reason::StuckCalls`](crate::Reason::StuckCalls) with a count of
    /// the calls past `d`): a dependency that hangs opens the breaker even
    /// with fewer callers than `stuck_call_threshold`. Works alone or with
    /// it, and needs no `slow_call_duration`; with one set, `d` must be
    /// longer. Without `slow_call_duration` or a latency policy, a probe
    /// in flight past `d` re-opens at once
    /// ([`Reason::ProbeStuck`](crate::Reason::ProbeStuck)).
    ///
    /// Choose `d` as the longest a healthy call ever takes, well above
    /// the client's own timeout if it has one: it is for the call that
    /// never returns. Notice, limits and cost as for
    /// [`stuck_call_threshold`](Self::stuck_call_threshold), which shares
    /// the table. Off (`None`) by default.
    ///
    /// ```
    /// use fusebox::{Breaker, CallPath, Classifier, Reason, State};
    /// use std::time::Duration;
    ///
    /// let (clock, time) = fusebox::quanta::Clock::mock();
    /// let breaker = Breaker::builder("settlement-feed")
    ///     .call_path(CallPath::ReferenceData)
    ///     .classifier(Classifier::every_error_is_a_failure())
    ///     .clock(clock)
    ///     .hung_call_duration(Duration::from_secs(5))
    ///     .build()?;
    ///
    /// let hung = breaker.try_acquire_owned()?;
    /// time.increment(Duration::from_secs(6));
    /// assert!(breaker.try_acquire().is_err());
    /// assert_eq!(breaker.state(), State::Open);
    /// assert_eq!(
    ///     breaker.snapshot().last_transition.unwrap().reason,
    ///     Reason::StuckCalls { count: 1, over: Duration::from_secs(5) }
    /// );
    /// # drop(hung);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hung_call_duration(mut self, d: impl Into<Option<Duration>>) -> Self {
        Arc::make_mut(&mut self.parts.settings).hung_call_duration = d.into();
        self
    }

    /// The upper bounds of the buckets a breaker that times its calls
    /// (`slow_call_duration` or a `latency_trip`) files each call's duration
    /// under, for [`Snapshot::call_durations`](crate::Snapshot::call_durations)
    /// and the `fusebox_breaker_call_duration_seconds` histogram: 1 to 64
    /// bounds, strictly increasing, none zero. A breaker that does not time
    /// its calls keeps no histogram.
    ///
    /// Cost: one search over the bounds per timed call, under the lock the
    /// call takes anyway; no clock read of its own.
    pub fn call_duration_buckets(mut self, bounds: impl Into<Vec<Duration>>) -> Self {
        Arc::make_mut(&mut self.parts.settings).call_duration_buckets =
            std::borrow::Cow::Owned(bounds.into());
        self
    }

    setter!(
        /// How many of its last state changes the breaker keeps for
        /// [`Snapshot::recent_changes`](crate::Snapshot::recent_changes) and
        /// the admin endpoint's `GET /breakers/{name}/events`: 0 (none) to
        /// 1024.
        ///
        /// Cost: the changes themselves (about 100 bytes each); a state
        /// change copies the list, a snapshot shares it.
        event_log_capacity: usize => event_log_capacity);

    /// The same settings, building the other kind of thing.
    fn retarget<U>(self) -> BreakerBuilder<U> {
        BreakerBuilder {
            parts: self.parts,
            target: PhantomData,
        }
    }

    fn validate_name(&self) -> Result<(), ConfigError> {
        crate::name::check(&self.parts.name)
    }

    /// Checks everything but the name.
    fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.parts.settings;
        let path = self.parts.call_path.as_ref().ok_or(ConfigError::Missing {
            field: "call_path",
            why: "declare what the breaker guards, so that order, cancel, kill-switch and \
                  risk-check paths can be refused",
        })?;
        if let Some(why) = path.refusal() {
            return Err(ConfigError::ForbiddenCallPath {
                path: path.clone(),
                why,
            });
        }
        if self.parts.classifier.is_none() {
            return Err(ConfigError::Missing {
                field: "classifier",
                why: "say which errors are the dependency's failures; there is no default that \
                      counts every error",
            });
        }
        if let Some(n) = s.failure_threshold {
            check(
                "consecutive_failure_threshold",
                n > 0,
                "must be at least 1 (or None)",
                n,
            )?;
        }
        check(
            "failure_window",
            s.failure_window >= Duration::from_millis(1),
            "must be at least 1 ms",
            crate::duration::display(s.failure_window),
        )?;
        if let Some(n) = s.window_failure_threshold {
            check(
                "window_failure_threshold",
                n > 0,
                "must be at least 1 (or None)",
                n,
            )?;
        }
        if let Some(r) = s.failure_rate_threshold {
            check_rate("failure_rate_threshold", r)?;
        }
        check(
            "minimum_calls",
            s.minimum_calls > 0,
            "must be at least 1",
            s.minimum_calls,
        )?;
        if let Some(d) = s.slow_call_duration {
            check(
                "slow_call_duration",
                !d.is_zero(),
                "must be greater than zero",
                crate::duration::display(d),
            )?;
        }
        if let Some(r) = s.slow_call_rate_threshold {
            check_rate("slow_call_rate_threshold", r)?;
            if s.slow_call_duration.is_none() {
                return Err(ConfigError::Missing {
                    field: "slow_call_duration",
                    why: "slow_call_rate_threshold needs a duration beyond which a call is slow",
                });
            }
        }
        if let Some(policy) = &s.latency_trip {
            policy.validate()?;
        }
        validate_in_flight(s)?;
        self.parts.recovery.validate()?;
        let b = &s.backoff;
        check(
            "open_duration",
            !b.base.is_zero(),
            "must be greater than zero",
            crate::duration::display(b.base),
        )?;
        check(
            "backoff_multiplier",
            b.multiplier.is_finite() && b.multiplier >= 1.0,
            "must be a finite number of at least 1.0",
            b.multiplier,
        )?;
        check(
            "max_open_duration",
            b.max >= b.base,
            "must not be shorter than open_duration",
            format_args!(
                "{} < {}",
                crate::duration::display(b.max),
                crate::duration::display(b.base)
            ),
        )?;
        check(
            "jitter",
            (0.0..=1.0).contains(&b.jitter),
            "must be within [0, 1]",
            b.jitter,
        )?;
        check(
            "half_open_max_concurrent",
            (1..=1024).contains(&s.half_open_max_concurrent),
            "must be between 1 and 1024",
            s.half_open_max_concurrent,
        )?;
        check(
            "half_open_success_threshold",
            s.half_open_success_threshold > 0,
            "must be at least 1",
            s.half_open_success_threshold,
        )?;
        check(
            "max_probe_duration",
            !s.max_probe_duration.is_zero(),
            "must be greater than zero",
            crate::duration::display(s.max_probe_duration),
        )?;
        if let Some(n) = s.flapping_trips {
            check(
                "flapping_trips",
                (2..=64).contains(&n),
                "must be between 2 and 64 (or None)",
                n,
            )?;
        }
        check(
            "flapping_window",
            s.flapping_window >= Duration::from_millis(1),
            "must be at least 1 ms",
            crate::duration::display(s.flapping_window),
        )?;
        self.validate_parity()?;
        let any_condition = s.failure_threshold.is_some()
            || s.uses_window()
            || s.latency_trip.is_some()
            || s.tracks_in_flight();
        check(
            "consecutive_failure_threshold",
            any_condition,
            "is off along with every other trip condition, so the breaker could never open",
            "None",
        )?;
        Ok(())
    }
}

/// Checks `stuck_call_threshold` and `hung_call_duration`.
fn validate_in_flight(s: &crate::settings::Settings) -> Result<(), ConfigError> {
    if let Some(n) = s.stuck_call_threshold {
        check(
            "stuck_call_threshold",
            (1..=64).contains(&n),
            "must be between 1 and 64 (or None)",
            n,
        )?;
        check(
            "stuck_call_threshold",
            s.slow_call_duration.is_some(),
            "needs slow_call_duration, the time past which a call in flight is stuck",
            n,
        )?;
    }
    if let Some(d) = s.hung_call_duration {
        check(
            "hung_call_duration",
            !d.is_zero(),
            "must be greater than zero (or None)",
            crate::duration::display(d),
        )?;
        if let Some(slow) = s.slow_call_duration {
            check(
                "hung_call_duration",
                d > slow,
                "must be longer than slow_call_duration",
                format_args!(
                    "{} <= {}",
                    crate::duration::display(d),
                    crate::duration::display(slow)
                ),
            )?;
        }
    }
    Ok(())
}

impl<T> BreakerBuilder<T> {
    /// Checks the settings brought over from the peers' policies.
    fn validate_parity(&self) -> Result<(), ConfigError> {
        let s = &self.parts.settings;
        if let Some(n) = s.count_window {
            check(
                "count_window",
                (1..=1_000_000).contains(&n),
                "must be between 1 and 1000000 calls (or None)",
                n,
            )?;
            check(
                "minimum_calls",
                s.minimum_calls <= n,
                "must not exceed count_window, or no rate is ever judged",
                format_args!("{} > {n}", s.minimum_calls),
            )?;
            check(
                "count_window",
                s.uses_window(),
                "needs a window condition (window_failure_threshold, failure_rate_threshold, \
                 slow_call_rate_threshold or trip_predicate) to judge, or it is never read",
                n,
            )?;
        }
        if let Some(d) = s.closed_interval {
            check(
                "closed_interval",
                d >= Duration::from_millis(1),
                "must be at least 1 ms (or None)",
                crate::duration::display(d),
            )?;
        }
        if let Some(r) = s.half_open_rate {
            check(
                "half_open_rate",
                r.probes > 0,
                "must judge at least 1 probe",
                r.probes,
            )?;
            check_rate("half_open_rate", r.failure_rate_threshold)?;
        }
        let buckets = &s.call_duration_buckets;
        check(
            "call_duration_buckets",
            (1..=crate::histogram::MAX_BUCKETS).contains(&buckets.len()),
            "must hold 1 to 64 bounds",
            buckets.len(),
        )?;
        if let Some(pair) = buckets.windows(2).find(|w| w[0] >= w[1]) {
            check(
                "call_duration_buckets",
                false,
                "must increase strictly",
                format_args!(
                    "{} is followed by {}",
                    crate::duration::display(pair[0]),
                    crate::duration::display(pair[1])
                ),
            )?;
        }
        check(
            "call_duration_buckets",
            !buckets[0].is_zero(),
            "must not hold a zero bound",
            "0s",
        )?;
        check(
            "event_log_capacity",
            s.event_log_capacity <= 1024,
            "must be between 0 and 1024",
            s.event_log_capacity,
        )?;
        if let Some(n) = s.half_open_max_probes {
            let needed = s
                .half_open_rate
                .map_or(s.half_open_success_threshold, |r| r.probes);
            check(
                "half_open_max_probes",
                n >= needed,
                "must be at least half_open_success_threshold (or the half_open_rate round), \
                 or the breaker could never close",
                format_args!("{n} < {needed}"),
            )?;
        }
        Ok(())
    }
}

impl BreakerBuilder<Breaker> {
    /// Checks the configuration and builds the breaker.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first field at fault.
    pub fn build(self) -> Result<Breaker, ConfigError> {
        self.validate_name()?;
        self.validate()?;
        Ok(Breaker::from_parts(self.parts))
    }
}

impl BreakerBuilder<BreakerConfig> {
    /// Checks the configuration once and returns it as a value that stamps
    /// breakers.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first field at fault.
    pub fn build(self) -> Result<BreakerConfig, ConfigError> {
        self.validate()?;
        Ok(BreakerConfig {
            builder: self.retarget(),
        })
    }
}

/// A checked breaker configuration, reusable: every setting of a
/// [`BreakerBuilder`] but the name, from which [`breaker`](Self::breaker)
/// stamps as many breakers as needed (one per vendor, per endpoint, per
/// entry of a configuration file).
///
/// Cheap to clone. The breakers it stamps are independent; they share the
/// classifier, the `on_state_change` callback (which is told which breaker
/// changed) and, when one is set, the clock and the jitter seed.
///
/// ```
/// use fusebox::{BreakerConfig, CallPath, Classifier};
/// use std::time::Duration;
///
/// let vendor = BreakerConfig::builder()
///     .call_path(CallPath::AltData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .consecutive_failure_threshold(3)
///     .open_duration(Duration::from_secs(30))
///     .build()?;
///
/// let news = vendor.breaker("news")?;
/// let sentiment = vendor.breaker("sentiment")?;
/// // One breaker that differs in one setting:
/// let satellite = vendor.to_builder("satellite").open_duration(Duration::from_secs(120)).build()?;
/// assert_eq!(news.name(), "news");
/// assert_eq!(sentiment.call_path(), CallPath::AltData);
/// assert_eq!(satellite.name(), "satellite");
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct BreakerConfig {
    /// Checked, but for its name.
    builder: BreakerBuilder,
}

impl BreakerConfig {
    /// Starts building a configuration. See [`BreakerBuilder`] for the
    /// settings and their defaults; `call_path` and `classifier` are
    /// required here too.
    pub fn builder() -> BreakerBuilder<BreakerConfig> {
        BreakerBuilder::new(String::new())
    }

    /// A breaker called `name` with this configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for the name; the rest was checked by `build()`.
    pub fn breaker(&self, name: impl Into<String>) -> Result<Breaker, ConfigError> {
        let mut builder = self.builder.clone();
        builder.parts.name = name.into();
        builder.validate_name()?;
        Ok(Breaker::from_parts(builder.parts))
    }

    /// A builder for a breaker called `name`, set up with this
    /// configuration, to change a setting or two before `build()`.
    pub fn to_builder(&self, name: impl Into<String>) -> BreakerBuilder {
        let mut builder = self.builder.clone();
        builder.parts.name = name.into();
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_changed_on_a_copy_of_a_builder_stays_on_that_copy() {
        let a = Breaker::builder("a").minimum_calls(3);
        let b = a.clone().minimum_calls(4);
        assert_eq!(a.parts.settings.minimum_calls, 3);
        assert_eq!(b.parts.settings.minimum_calls, 4);
    }
}
