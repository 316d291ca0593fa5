//! Snapshots serialize (feature `serde`): a breaker's, with its totals, the
//! failure that opened it and its last state change, in the shape the admin
//! endpoint serves, and the other snapshots as their fields.
#![cfg(feature = "serde")]

use serde_json::{json, Value};

use crate::support::breaker::*;

#[test]
fn a_snapshot_serializes_every_field_durations_in_seconds() {
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(2)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    succeed(&b).unwrap();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    let value = serde_json::to_value(b.snapshot()).unwrap();

    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec![
        "name",
        "state",
        "status",
        "consecutive_failures",
        "window_calls",
        "window_failures",
        "window_slow_calls",
        "failure_rate",
        "slow_call_rate",
        "retry_after_seconds",
        "open_duration_seconds",
        "trips",
        "reopens",
        "probes",
        "state_seconds",
        "call_durations",
        "recent_changes",
        "totals",
        "time_in_state_seconds",
        "probes_in_flight",
        "consecutive_successes",
        "calls_in_flight",
        "calls_stuck",
        "opened_by",
        "latency_percentile_seconds",
        "latency_breaches",
        "last_transition",
        "dropped_changes",
        "backoff_step",
        "override_remaining_seconds",
        "flapping",
        "ramp_fraction",
        "maintenance_seconds_left",
        "neutral_failures",
    ];
    want.sort_unstable();
    assert_eq!(keys, want, "serde_json sorts the keys");

    assert_eq!(value["name"], "refdata");
    assert_eq!(value["state"], "open");
    assert_eq!(value["status"], "open");
    assert_eq!(value["retry_after_seconds"], 10.0);
    assert_eq!(value["open_duration_seconds"], 10.0);
    assert_eq!(value["time_in_state_seconds"], 0.0);
    assert_eq!(value["maintenance_seconds_left"], Value::Null);
    assert_eq!(value["trips"], 1);
    assert_eq!(value["reopens"], 0);
    assert_eq!(
        value["probes"],
        json!({"successes": 0, "failures": 0, "expired": 0, "ignored": 0, "stuck": 0})
    );
    assert_eq!(
        value["state_seconds"],
        json!({"closed": 0.0, "open": 0.0, "half_open": 0.0, "forced_open": 0.0,
               "forced_closed": 0.0})
    );
    assert_eq!(
        value["call_durations"],
        Value::Null,
        "it does not time calls"
    );
    assert_eq!(value["recent_changes"].as_array().map(Vec::len), Some(1));
    assert_eq!(value["recent_changes"][0], value["last_transition"]);
    assert_eq!(
        value["totals"],
        json!({"calls": 3, "successes": 1, "failures": 2, "ignored": 0, "slow": 0,
               "short_circuits": 0, "cancelled": 0})
    );
    assert_eq!(
        value["opened_by"],
        json!({"type_name": std::any::type_name::<DepError>(), "message": "dependency unavailable"})
    );
    assert_eq!(
        value["last_transition"],
        json!({"breaker": "refdata", "from": "closed", "to": "open",
               "reason": "2 consecutive failures", "actor": null,
               "cause": {"type_name": std::any::type_name::<DepError>(),
                         "message": "dependency unavailable"},
               "seq": 1})
    );
}

#[test]
fn time_per_state_and_call_durations_serialize_in_seconds() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .slow_call_duration(SEC)
        .call_duration_buckets(vec![100 * MS, SEC])
        .build()
        .unwrap();
    mock.increment(3 * SEC);
    succeed_after(&b, &mock, 250 * MS).unwrap();
    fail(&b).unwrap_err();
    mock.increment(2 * SEC);
    let value = serde_json::to_value(b.snapshot()).unwrap();
    assert_eq!(value["state_seconds"]["closed"], 3.25);
    assert_eq!(value["state_seconds"]["open"], 2.0);
    assert_eq!(
        value["call_durations"],
        json!({"count": 2, "sum_seconds": 0.25, "buckets": [[0.1, 1], [1.0, 2]]})
    );
}

#[test]
fn an_override_serializes_with_its_actor_and_time_left() {
    let (builder, _mock) = quiet("news");
    let b = builder.consecutive_failure_threshold(2).build().unwrap();
    b.force_open_for("alice", "vendor maintenance", 90 * SEC);
    let value = serde_json::to_value(b.snapshot()).unwrap();
    assert_eq!(value["state"], "forced_open");
    assert_eq!(value["override_remaining_seconds"], 90.0);
    assert_eq!(value["last_transition"]["actor"], "alice");
    assert_eq!(
        value["last_transition"]["reason"],
        "forced open by alice: vendor maintenance"
    );
}

#[cfg(feature = "isolation")]
#[test]
fn the_isolation_snapshots_serialize_as_their_fields() {
    use fusebox::isolation::Bulkhead;

    let bulkhead = Bulkhead::builder("vendor")
        .max_concurrent(4)
        .build()
        .unwrap();
    assert_eq!(
        serde_json::to_value(bulkhead.snapshot()).unwrap(),
        json!({"name": "vendor", "max_concurrent": 4, "limit": 4, "in_use": 0, "peak": 0,
               "refusals": 0, "adaptive": null, "lanes": []})
    );
}

#[cfg(feature = "isolation")]
#[test]
fn an_adaptive_bulkhead_with_lanes_serializes_its_latencies_in_seconds_and_each_lane() {
    use fusebox::isolation::{AdaptiveLimit, Bulkhead};

    let (clock, mock) = quanta::Clock::mock();
    let bulkhead = Bulkhead::builder("vendor")
        .max_concurrent(4)
        .adaptive(AdaptiveLimit::new().floor(2).min_samples(1))
        .lane("intraday", 0.5)
        .lane("batch", 0.5)
        .shed_last("intraday")
        .clock(clock)
        .build()
        .unwrap();
    let slot = bulkhead.try_enter().unwrap();
    mock.increment(std::time::Duration::from_millis(250));
    drop(slot);
    let value = serde_json::to_value(bulkhead.snapshot()).unwrap();
    assert_eq!(
        value["adaptive"],
        json!({"floor": 2, "latency_seconds": 0.25, "baseline_seconds": 0.25})
    );
    assert_eq!(
        value["lanes"][1],
        json!({"name": "batch", "share": 0.5, "shed_last": false, "guaranteed": 2,
               "in_use": 0, "refusals": 0})
    );
}

#[cfg(feature = "redis")]
#[test]
fn the_fleet_snapshot_serializes_as_its_fields() {
    let value = serde_json::to_value(fusebox::fleet::FleetSnapshot::default()).unwrap();
    assert_eq!(value["connected"], false);
    assert_eq!(value["leases_won"], 0);
    assert_eq!(value["lone_trips"], 0);
    assert_eq!(value["quorum"], json!([]), "one entry per breaker served");
    assert_eq!(value.as_object().unwrap().len(), 17);
}
