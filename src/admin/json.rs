//! The JSON the endpoint serves: snapshots, overrides and audit records.

use serde::Serialize;

use crate::events::Reason;
use crate::registry::AuditRecord;
use crate::utc::rfc3339;
use crate::{Breaker, Snapshot, StateChange};

/// A breaker as `/breakers` shows it: its snapshot as it serializes
/// (`src/serialize.rs`), with its call path, whether the registry counts it
/// critical, and the override that holds it.
#[derive(Serialize)]
pub(crate) struct BreakerJson {
    #[serde(flatten)]
    snapshot: Snapshot,
    call_path: String,
    critical: bool,
    /// Who overrode the breaker, why, since when and until when, while it
    /// is forced.
    #[serde(rename = "override")]
    override_: Option<OverrideJson>,
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
            snapshot: snap.clone(),
            call_path: breaker.call_path().as_str().to_owned(),
            critical,
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

/// A breaker's last state changes, as `GET /breakers/{name}/events` serves
/// them: oldest first, each as it serializes (`src/serialize.rs`) with how
/// long ago it happened on the breaker's clock and the wall-clock time that
/// makes now.
#[derive(Serialize)]
pub(crate) struct EventsJson {
    breaker: String,
    /// How many the breaker keeps; older ones are gone.
    capacity: usize,
    events: Vec<EventJson>,
}

#[derive(Serialize)]
struct EventJson {
    #[serde(flatten)]
    change: StateChange,
    seconds_ago: f64,
    /// RFC 3339, UTC: now on the wall clock, less `seconds_ago`.
    wall_time: String,
}

impl EventsJson {
    pub(crate) fn new(snap: &Snapshot, capacity: usize) -> Self {
        let now = std::time::SystemTime::now();
        let events = snap
            .recent_changes
            .iter()
            .map(|c| {
                let ago = snap.taken_at.saturating_duration_since(c.at);
                EventJson {
                    change: c.clone(),
                    seconds_ago: ago.as_secs_f64(),
                    wall_time: rfc3339(now.checked_sub(ago).unwrap_or(now)),
                }
            })
            .collect();
        EventsJson {
            breaker: snap.name.to_string(),
            capacity,
            events,
        }
    }
}
