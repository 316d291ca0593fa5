//! How a breaker's [`Snapshot`] and what it holds serialize (feature
//! `serde`), for an application that logs or ships them itself; the admin
//! endpoint serves the same shape.
//!
//! Keys are the fields' names. A duration is a number of seconds (a float,
//! as in the Prometheus metrics) under its name with `_seconds` added; the
//! time left in a maintenance window is `maintenance_seconds_left`. A state
//! is its name as it prints, and the snapshot adds its
//! [`status`](Snapshot::status). A [`Reason`] is its message, a
//! [`FailureCause`] its `type_name` and `message`. A [`StateChange`] leaves
//! out `at`, an instant of the process's monotonic clock that means nothing
//! outside it, and adds the reason's `actor`. [`Snapshot::state_times`] is
//! `state_seconds` (seconds per state, keyed by the state's name),
//! [`Snapshot::call_durations`] is `{count, sum_seconds, buckets}` (or
//! `null`), and [`Snapshot::recent_changes`] a list of state changes,
//! oldest first.

use std::time::Duration;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::{
    CallDurations, FailureCause, ProbeTotals, Reason, Snapshot, State, StateChange, StateTimes,
    Totals,
};

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Serialize for State {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Serialize for FailureCause {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("FailureCause", 2)?;
        out.serialize_field("type_name", self.type_name())?;
        out.serialize_field("message", self.message())?;
        out.end()
    }
}

impl Serialize for Totals {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("Totals", 7)?;
        out.serialize_field("calls", &self.calls)?;
        out.serialize_field("successes", &self.successes)?;
        out.serialize_field("failures", &self.failures)?;
        out.serialize_field("ignored", &self.ignored)?;
        out.serialize_field("slow", &self.slow)?;
        out.serialize_field("short_circuits", &self.short_circuits)?;
        out.serialize_field("cancelled", &self.cancelled)?;
        out.end()
    }
}

impl Serialize for ProbeTotals {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("ProbeTotals", 5)?;
        out.serialize_field("successes", &self.successes)?;
        out.serialize_field("failures", &self.failures)?;
        out.serialize_field("expired", &self.expired)?;
        out.serialize_field("stuck", &self.stuck)?;
        out.serialize_field("ignored", &self.ignored)?;
        out.end()
    }
}

/// Seconds per state, keyed by the states' names.
impl Serialize for StateTimes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("StateTimes", 5)?;
        out.serialize_field("closed", &seconds(self.closed))?;
        out.serialize_field("open", &seconds(self.open))?;
        out.serialize_field("half_open", &seconds(self.half_open))?;
        out.serialize_field("forced_open", &seconds(self.forced_open))?;
        out.serialize_field("forced_closed", &seconds(self.forced_closed))?;
        out.end()
    }
}

/// `count`, `sum_seconds`, and `buckets` as `[bound_seconds, calls]` pairs
/// (cumulative, as Prometheus's `le` buckets).
impl Serialize for CallDurations {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("CallDurations", 3)?;
        out.serialize_field("count", &self.count())?;
        out.serialize_field("sum_seconds", &seconds(self.sum()))?;
        let buckets: Vec<(f64, u64)> = self.buckets().map(|(b, n)| (seconds(b), n)).collect();
        out.serialize_field("buckets", &buckets)?;
        out.end()
    }
}

impl Serialize for StateChange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("StateChange", 7)?;
        out.serialize_field("breaker", &*self.breaker)?;
        out.serialize_field("from", &self.from)?;
        out.serialize_field("to", &self.to)?;
        out.serialize_field("reason", &self.reason)?;
        out.serialize_field("actor", &self.reason.actor())?;
        out.serialize_field("cause", &self.cause.as_deref())?;
        out.serialize_field("seq", &self.seq)?;
        out.end()
    }
}

impl Serialize for Snapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_struct("Snapshot", 34)?;
        out.serialize_field("name", &*self.name)?;
        out.serialize_field("state", &self.state)?;
        out.serialize_field("status", self.status())?;
        out.serialize_field("consecutive_failures", &self.consecutive_failures)?;
        out.serialize_field("window_calls", &self.window_calls)?;
        out.serialize_field("window_failures", &self.window_failures)?;
        out.serialize_field("window_slow_calls", &self.window_slow_calls)?;
        out.serialize_field("failure_rate", &self.failure_rate)?;
        out.serialize_field("slow_call_rate", &self.slow_call_rate)?;
        out.serialize_field("retry_after_seconds", &self.retry_after.map(seconds))?;
        out.serialize_field("open_duration_seconds", &seconds(self.open_duration))?;
        out.serialize_field("trips", &self.trips)?;
        out.serialize_field("reopens", &self.reopens)?;
        out.serialize_field("probes", &self.probes)?;
        out.serialize_field("state_seconds", &self.state_times)?;
        out.serialize_field("call_durations", &self.call_durations)?;
        out.serialize_field("totals", &self.totals)?;
        out.serialize_field("time_in_state_seconds", &seconds(self.time_in_state))?;
        out.serialize_field("probes_in_flight", &self.probes_in_flight)?;
        out.serialize_field("consecutive_successes", &self.consecutive_successes)?;
        out.serialize_field("calls_in_flight", &self.calls_in_flight)?;
        out.serialize_field("calls_stuck", &self.calls_stuck)?;
        out.serialize_field("opened_by", &self.opened_by.as_deref())?;
        out.serialize_field(
            "latency_percentile_seconds",
            &self.latency_percentile.map(seconds),
        )?;
        out.serialize_field("latency_breaches", &self.latency_breaches)?;
        out.serialize_field("last_transition", &self.last_transition)?;
        out.serialize_field("dropped_changes", &self.dropped_changes)?;
        out.serialize_field("backoff_step", &self.backoff_step)?;
        out.serialize_field(
            "override_remaining_seconds",
            &self.override_remaining.map(seconds),
        )?;
        out.serialize_field("flapping", &self.flapping)?;
        out.serialize_field("ramp_fraction", &self.ramp_fraction)?;
        out.serialize_field("maintenance_seconds_left", &self.maintenance.map(seconds))?;
        out.serialize_field("neutral_failures", &self.neutral_failures)?;
        out.serialize_field("recent_changes", &*self.recent_changes)?;
        out.end()
    }
}
