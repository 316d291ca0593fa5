//! The fleet agents' families (features `prometheus` and `redis`), read
//! from each registered agent's [`FleetSnapshot`] at the scrape.
//!
//! [`FleetSnapshot`]: crate::fleet::FleetSnapshot

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::family;
use crate::fleet::{FleetBreaker, FleetSnapshot, OpenedBy};
use crate::registry::Registry;

/// How a counter is read from a fleet snapshot.
type Count = fn(&FleetSnapshot) -> u64;

/// The counters, in the order they are encoded.
const COUNTERS: [(&str, &str, Count); 14] = [
    (
        "fusebox_fleet_outages",
        "Redis outages the fleet agent has seen (one log line each).",
        |s| s.outages,
    ),
    (
        "fusebox_fleet_errors",
        "Redis errors and timeouts the fleet agent has met.",
        |s| s.errors,
    ),
    (
        "fusebox_fleet_published",
        "Local trips, re-opens and closes written to the fleet that changed its state.",
        |s| s.published,
    ),
    (
        "fusebox_fleet_applied",
        "Fleet states applied to local breakers that changed their state.",
        |s| s.applied,
    ),
    (
        "fusebox_fleet_leases_won",
        "Probe leases the fleet agent won.",
        |s| s.leases_won,
    ),
    (
        "fusebox_fleet_leases_returned",
        "Probe leases the fleet agent gave back unused.",
        |s| s.leases_returned,
    ),
    (
        "fusebox_fleet_fenced",
        "Probe results refused because their lease was of an older open period.",
        |s| s.fenced,
    ),
    (
        "fusebox_fleet_messages",
        "Fleet announcements received over pub/sub.",
        |s| s.messages,
    ),
    (
        "fusebox_fleet_reads",
        "Reads of a breaker's fleet state.",
        |s| s.reads,
    ),
    (
        "fusebox_fleet_round_trips",
        "Round trips to Redis the fleet agent has begun (each one pipeline of writes, reads and renewals).",
        |s| s.round_trips,
    ),
    (
        "fusebox_fleet_catch_ups",
        "Times the fleet agent read every breaker it serves because announcements may have been lost.",
        |s| s.catch_ups,
    ),
    (
        "fusebox_fleet_failures_published",
        "Local failures written to the fleet's recent-failures windows.",
        |s| s.failures_published,
    ),
    (
        "fusebox_fleet_window_trips",
        "Fleet trips made when the recent-failures window reached its threshold.",
        |s| s.window_trips,
    ),
    (
        "fusebox_fleet_lone_trips",
        "Local trips that did not open the fleet: no quorum of members had tripped.",
        |s| s.lone_trips,
    ),
];

/// The registered fleet agents' families, labelled with `prefix`.
pub(super) fn fleets(registry: &Registry, e: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
    // The prefix as a label shows text from outside the program.
    let fleets: Vec<(String, _)> = registry
        .fleet_snapshots()
        .into_iter()
        .map(|(prefix, s)| (crate::text::shown(&prefix).to_string(), s))
        .collect();
    if fleets.is_empty() {
        return Ok(());
    }
    let gauges: [(&str, &str, Count); 2] = [
        (
            "fusebox_fleet_connected",
            "1 while the fleet agent holds a working connection to Redis, else 0.",
            |s| u64::from(s.connected),
        ),
        (
            "fusebox_fleet_breakers",
            "Breakers the fleet agent serves.",
            |s| s.breakers as u64,
        ),
    ];
    for (name, help, value) in gauges {
        let mut m = family(e, name, help, None, MetricType::Gauge)?;
        for (prefix, s) in &fleets {
            m.encode_family(&[("prefix", prefix.as_str())])?
                .encode_gauge(&(value(s) as i64))?;
        }
    }
    for (name, help, value) in COUNTERS {
        let mut m = family(e, name, help, None, MetricType::Counter)?;
        for (prefix, s) in &fleets {
            m.encode_family(&[("prefix", prefix.as_str())])?
                .encode_counter::<NoLabelSet, _, f64>(&value(s), None)?;
        }
    }
    breakers(&fleets, e)
}

/// How a per-breaker gauge is read from what an agent last read of it.
type PerBreaker = fn(&FleetBreaker) -> u64;

/// Each served breaker's quorum, labelled with `prefix` and `breaker`:
/// its live members, those tripped alone, whether this process's breaker
/// is open alone, and what holds the fleet open (one series per cause, 1
/// for the one in force).
fn breakers(
    fleets: &[(String, FleetSnapshot)],
    e: &mut DescriptorEncoder<'_>,
) -> Result<(), fmt::Error> {
    if fleets.iter().all(|(_, s)| s.quorum.is_empty()) {
        return Ok(());
    }
    let gauges: [(&str, &str, PerBreaker); 3] = [
        (
            "fusebox_fleet_members",
            "Members serving the breaker in the fleet, as the agent last read it.",
            |b| b.members,
        ),
        (
            "fusebox_fleet_tripped_members",
            "Members whose local trip of the breaker counts towards the fleet's quorum now.",
            |b| b.tripped,
        ),
        (
            "fusebox_fleet_alone",
            "1 while this process's breaker is open by a trip of its own that found no quorum.",
            |b| u64::from(b.alone),
        ),
    ];
    for (name, help, value) in gauges {
        let mut m = family(e, name, help, None, MetricType::Gauge)?;
        for (prefix, s) in fleets {
            for b in &s.quorum {
                m.encode_family(&[("prefix", prefix.as_str()), ("breaker", b.name.as_str())])?
                    .encode_gauge(&(value(b) as i64))?;
            }
        }
    }
    let mut m = family(
        e,
        "fusebox_fleet_opened_by",
        "1 for what holds the breaker open in every process (quorum, failure_window, operator), else 0.",
        None,
        MetricType::Gauge,
    )?;
    for (prefix, s) in fleets {
        for b in &s.quorum {
            for by in [
                OpenedBy::Quorum,
                OpenedBy::FailureWindow,
                OpenedBy::Operator,
            ] {
                m.encode_family(&[
                    ("prefix", prefix.as_str()),
                    ("breaker", b.name.as_str()),
                    ("by", by.as_str()),
                ])?
                .encode_gauge(&i64::from(b.opened_by == Some(by)))?;
            }
        }
    }
    Ok(())
}
