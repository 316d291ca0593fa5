//! The breaker seen without making a call: whether a call would be
//! admitted, the state a call would meet, what opened it, the snapshot of
//! its counters, and the stream of its state changes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::Breaker;
use crate::cause::FailureCause;
use crate::delivery::Outbox;
use crate::events::Subscription;
use crate::gate::Word;
use crate::snapshot::{rate, Snapshot, StateTimes, Totals};
use crate::{ConfigError, State};

impl Breaker {
    /// Whether a call made now would be admitted, without making one: for a
    /// dashboard, or a scheduler deciding whether to queue work.
    ///
    /// Takes no permit, never uses up a half-open probe, never moves an
    /// open breaker to half-open and counts no refusal. The answer can be
    /// stale by the time a call is made; only
    /// [`try_acquire`](Self::try_acquire) decides. An open breaker whose
    /// period has elapsed answers `true` (the next call would be a probe).
    ///
    /// With `stuck_call_threshold` or `hung_call_duration`, calls in flight
    /// that the next call would open the breaker on open it here, as they
    /// would there (the change is delivered as any other), and the answer
    /// is `false`: a look at a breaker whose calls are stuck sees it open,
    /// with nobody calling.
    ///
    /// Costs one atomic load (and a clock read while open, with calls in
    /// flight tracked, or with a short-circuiting maintenance window
    /// scheduled); half-open, ramping, inside such a window, or with a scan
    /// of the calls in flight due (about once per `slow_call_duration`),
    /// one lock round trip.
    pub fn would_permit(&self) -> bool {
        let now = || self.now();
        match self.inner.gate.word() {
            Word::Closed { .. } => {
                // From when the next closed call takes the lock: a
                // maintenance window that may have begun, or the calls in
                // flight to scan.
                let watch = self.inner.watch_from.load(Ordering::Relaxed);
                if watch == u64::MAX {
                    return true;
                }
                let now = now();
                if now < watch {
                    return true;
                }
                self.look(now, |core| core.machine.would_admit(now))
            }
            Word::ForcedOpen { until } if until.is_none_or(|until| now() < until) => false,
            Word::Open { until } if now() < until => false,
            _ => {
                let now = self.now();
                self.look(now, |core| core.machine.would_admit(now))
            }
        }
    }

    /// What opened the breaker: the last failure recorded before it opened
    /// on its own, with its message and type name (see [`FailureCause`]),
    /// while it is open or half-open; `None` while closed, when forced
    /// open, or when no call that failed showed its error. For a caller
    /// holding a [`Rejected`](crate::Rejected), which stays a small `Copy` value: one lock
    /// round trip. A look like [`state`](Self::state): calls in flight the
    /// next call would open the breaker on open it here first.
    pub fn last_failure(&self) -> Option<Arc<FailureCause>> {
        let now = self.now();
        self.look(now, |core| core.opened_by.clone())
    }

    /// How many state changes the breaker keeps for
    /// [`Snapshot::recent_changes`] (`event_log_capacity`).
    // Only the admin endpoint shows it.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn event_log_capacity(&self) -> usize {
        self.inner.core.lock().machine.settings().event_log_capacity
    }

    /// The state a call made now would meet, as [`Snapshot::state`] reads
    /// it: an open breaker whose period has ended reads `HalfOpen` (the next
    /// call is the probe), and a half-open one with a probe past its
    /// deadline reads `Open` (the next call re-opens it). Calls in flight
    /// that the next call would open the breaker on open it here, as for
    /// [`would_permit`](Self::would_permit): it then reads `Open`.
    ///
    /// Closed and forced open: one atomic load (and a clock read more with
    /// calls in flight tracked, and a lock round trip when their scan is
    /// due). Open: one clock read more. Half-open: one lock round trip.
    pub fn state(&self) -> State {
        let now = || self.now();
        match self.inner.gate.word() {
            Word::Closed { .. } => self
                .look_if_due(|m, now| m.state_at(now))
                .unwrap_or(State::Closed),
            Word::ForcedOpen { until } if until.is_none_or(|until| now() < until) => {
                State::ForcedOpen
            }
            Word::ForcedOpen { .. } => State::Closed,
            Word::Open { until } if now() < until => State::Open,
            Word::Open { .. } => State::HalfOpen,
            Word::Locked => {
                let now = self.now();
                self.look(now, |core| core.machine.state_at(now))
            }
        }
    }

    /// A consistent view of the breaker's counters and state, as a call made
    /// now would meet it (see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now();
        let (v, last, recent, dropped_changes, changed, opened_by, in_flight) = {
            let mut core = self.lock();
            // An override past its expiry ends here if no call ended it, and
            // calls in flight open the breaker here if the next call would
            // open it on them.
            let expired = core.machine.expire(now);
            let expired = match expired {
                Some(t) => {
                    self.publish(&mut core, t);
                    true
                }
                None => false,
            };
            let stuck = self.settle_in_flight(&mut core, now);
            core.machine.slide(now);
            core.machine.account(now);
            let synced = self.sync_gate(&mut core);
            let changed = u64::from(expired) + u64::from(stuck) + u64::from(synced);
            let in_flight = self.inner.hot().in_flight.as_ref().map(|t| {
                let marks = core.machine.in_flight_marks();
                let from = core.machine.in_flight_aged_from(now);
                let scan = t.scan(core.machine.generation(), now, marks, from);
                let stuck = match marks.stuck {
                    u64::MAX => scan.hung,
                    _ => scan.stuck,
                };
                (scan.tracked, stuck)
            });
            (
                core.machine.view(now),
                core.last_change(),
                Arc::clone(&core.recent),
                core.dropped_changes(),
                changed,
                core.opened_by.clone(),
                in_flight,
            )
        };
        if changed > 0 {
            self.inner.dispatch(changed);
        }
        Snapshot {
            name: Arc::clone(&self.inner.name),
            taken_at: self.inner.hot().time.instant(now),
            state: v.state,
            consecutive_failures: v.consecutive_failures,
            window_calls: v.window_calls,
            window_failures: v.window_failures,
            window_slow_calls: v.window_slow,
            failure_rate: rate(v.window_failures, v.window_calls),
            slow_call_rate: rate(v.window_slow, v.window_calls),
            retry_after: v.retry_after.map(Duration::from_nanos),
            open_duration: Duration::from_nanos(v.open_period),
            trips: v.trips,
            reopens: v.reopens,
            probes: v.probes,
            state_times: StateTimes::from_nanos(v.state_nanos),
            call_durations: v.call_durations,
            recent_changes: recent,
            totals: Totals {
                calls: v.totals.calls(),
                successes: v.totals.successes,
                failures: v.totals.failures,
                ignored: v.totals.ignored,
                slow: v.totals.slow,
                short_circuits: self.inner.gate.counts().refusals(),
                cancelled: v.totals.cancelled,
            },
            time_in_state: Duration::from_nanos(v.in_state),
            probes_in_flight: v.probes_in_flight,
            consecutive_successes: v.consecutive_successes,
            // Every admitted permit reports exactly once (a dropped one as a
            // failure), and `totals.calls` counts every report, those counted
            // without the lock included once `lock()` has taken them: the
            // difference is what is out (a success counted between that take
            // and now still shows as out). A failure made neutral by a
            // maintenance window and a cancelled call report outside the
            // totals' calls.
            calls_in_flight: match (self.inner.hot().counts_admitted, in_flight) {
                (true, _) => {
                    let reported = (v.totals.calls())
                        .saturating_add(v.neutral_failures)
                        .saturating_add(v.totals.cancelled);
                    Some(self.inner.gate.counts().admitted().saturating_sub(reported))
                }
                (false, Some((tracked, _))) => Some(u64::from(tracked)),
                (false, None) => None,
            },
            calls_stuck: in_flight.map(|(_, stuck)| stuck),
            opened_by,
            latency_percentile: v.latency_percentile,
            latency_breaches: v.latency_breaches,
            last_transition: last,
            dropped_changes,
            backoff_step: v.backoff_step,
            override_remaining: v.override_remaining.map(Duration::from_nanos),
            flapping: v.flapping,
            ramp_fraction: v.ramp_fraction,
            maintenance: v
                .maintenance_until
                .map(|end| Duration::from_nanos(end.saturating_sub(now))),
            neutral_failures: v.neutral_failures,
        }
    }

    /// A bounded stream of this breaker's state changes. A subscriber that
    /// falls more than `capacity` changes behind loses the newer ones
    /// (counted by [`Subscription::dropped`]); callers never wait for it.
    /// Dropping the subscription unsubscribes.
    ///
    /// The buffer is allocated up front, so `capacity` is limited to
    /// 65 536 changes.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming `capacity` when it is 0 or above
    /// 65 536.
    pub fn subscribe(&self, capacity: usize) -> Result<Subscription, ConfigError> {
        // Refused before the list is made: a breaker whose subscriptions
        // were all refused keeps an empty cell.
        crate::events::check_capacity(capacity)?;
        Ok(self
            .inner
            .subscribers
            .get_or_init(Arc::default)
            .subscribe(capacity))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_refused_subscription_leaves_the_subscriber_cell_empty() {
        let b = crate::Breaker::builder("refused-subscription")
            .call_path(crate::CallPath::ReferenceData)
            .classifier(crate::Classifier::every_error_is_a_failure())
            .build()
            .unwrap();
        let err = b.subscribe(0).unwrap_err();
        assert!(err.to_string().contains("capacity"), "{err}");
        assert!(b.inner.subscribers.get().is_none());
        let _ok = b.subscribe(1).unwrap();
        assert!(b.inner.subscribers.get().is_some());
    }
}
