//! The JSON the endpoint serves: snapshots, overrides and audit records.

use serde::Serialize;

use crate::events::Reason;
use crate::registry::AuditRecord;
use crate::utc::rfc3339;
use crate::{Breaker, Snapshot};

#[derive(Serialize)]
pub(crate) struct BreakerJson {
    name: String,
    call_path: String,
    state: &'static str,
    /// `maintenance` inside a maintenance window, else the state.
    status: &'static str,
    /// Time left in the maintenance window, inside one.
    maintenance_seconds_left: Option<f64>,
    neutral_failures: u64,
    critical: bool,
    consecutive_failures: u32,
    window_calls: u64,
    window_failures: u64,
    window_slow_calls: u64,
    failure_rate: f64,
    slow_call_rate: f64,
    retry_after_seconds: Option<f64>,
    open_duration_seconds: f64,
    trips: u64,
    totals: TotalsJson,
    time_in_state_seconds: f64,
    probes_in_flight: u32,
    latency_percentile_seconds: Option<f64>,
    latency_breaches: u32,
    last_transition: Option<ChangeJson>,
    flapping: bool,
    backoff_step: u32,
    /// Who overrode the breaker, why, since when and until when, while it
    /// is forced.
    #[serde(rename = "override")]
    override_: Option<OverrideJson>,
}

#[derive(Serialize)]
struct TotalsJson {
    calls: u64,
    successes: u64,
    failures: u64,
    ignored: u64,
    slow: u64,
    short_circuits: u64,
}

#[derive(Serialize)]
struct ChangeJson {
    from: &'static str,
    to: &'static str,
    reason: String,
    actor: Option<String>,
    seq: u64,
}

#[derive(Serialize)]
struct OverrideJson {
    state: &'static str,
    actor: String,
    reason: String,
    since_seconds_ago: f64,
    /// `None`: until the next override.
    expires_in_seconds: Option<f64>,
}

impl BreakerJson {
    pub(crate) fn new(breaker: &Breaker, snap: &Snapshot, critical: bool) -> Self {
        let t = &snap.totals;
        let override_ = snap.last_transition.as_ref().and_then(|c| {
            let (actor, note) = match &c.reason {
                Reason::ForcedOpen { actor, note } | Reason::ForcedClosed { actor, note } => {
                    (actor, note)
                }
                _ => return None,
            };
            (c.to == snap.state).then(|| OverrideJson {
                state: c.to.as_str(),
                actor: actor.to_string(),
                reason: note.to_string(),
                since_seconds_ago: snap.time_in_state.as_secs_f64(),
                expires_in_seconds: snap.override_remaining.map(|d| d.as_secs_f64()),
            })
        });
        BreakerJson {
            name: snap.name.to_string(),
            call_path: breaker.call_path().as_str().to_owned(),
            state: snap.state.as_str(),
            status: snap.status(),
            maintenance_seconds_left: snap.maintenance.map(|d| d.as_secs_f64()),
            neutral_failures: snap.neutral_failures,
            critical,
            consecutive_failures: snap.consecutive_failures,
            window_calls: snap.window_calls,
            window_failures: snap.window_failures,
            window_slow_calls: snap.window_slow_calls,
            failure_rate: snap.failure_rate,
            slow_call_rate: snap.slow_call_rate,
            retry_after_seconds: snap.retry_after.map(|d| d.as_secs_f64()),
            open_duration_seconds: snap.open_duration.as_secs_f64(),
            trips: snap.trips,
            totals: TotalsJson {
                calls: t.calls,
                successes: t.successes,
                failures: t.failures,
                ignored: t.ignored,
                slow: t.slow,
                short_circuits: t.short_circuits,
            },
            time_in_state_seconds: snap.time_in_state.as_secs_f64(),
            probes_in_flight: snap.probes_in_flight,
            latency_percentile_seconds: snap.latency_percentile.map(|d| d.as_secs_f64()),
            latency_breaches: snap.latency_breaches,
            last_transition: snap.last_transition.as_ref().map(|c| ChangeJson {
                from: c.from.as_str(),
                to: c.to.as_str(),
                reason: c.reason.to_string(),
                actor: c.reason.actor().map(str::to_owned),
                seq: c.seq,
            }),
            flapping: snap.flapping,
            backoff_step: snap.backoff_step,
            override_,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct AuditJson {
    seq: u64,
    breaker: String,
    action: &'static str,
    actor: String,
    reason: String,
    expires_after_seconds: Option<f64>,
    /// A declared maintenance window's start and end, RFC 3339, UTC.
    maintenance_start: Option<String>,
    maintenance_end: Option<String>,
    /// RFC 3339, UTC.
    wall_time: String,
}

impl AuditJson {
    pub(crate) fn new(r: &AuditRecord) -> Self {
        AuditJson {
            seq: r.seq,
            breaker: r.breaker.to_string(),
            action: r.action.as_str(),
            actor: r.actor.to_string(),
            reason: r.reason.to_string(),
            expires_after_seconds: r.expires_after.map(|d| d.as_secs_f64()),
            maintenance_start: r.window.map(|(start, _)| rfc3339(start)),
            maintenance_end: r.window.map(|(_, end)| rfc3339(end)),
            wall_time: rfc3339(r.wall_time),
        }
    }
}
