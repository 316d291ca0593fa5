//! The fleet agents' figures in the Prometheus scrape, read from a real
//! agent talking to a real `redis-server` on a free loopback port.
#![cfg(all(feature = "redis", feature = "prometheus"))]

use fusebox::fleet::Fleet;
use fusebox::registry::{Registry, RegistryError};
use fusebox::State;

use crate::support::breaker::{fail, quiet, MS, SEC};
use crate::support::redis_server::{wait_for, RedisServer};

/// The value of the series `series` (name and labels) in a scrape.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_scrape_shows_each_registered_fleets_figures_by_prefix() {
    let redis = RedisServer::start();
    let fleet = Fleet::builder(redis.url())
        .prefix("metrics")
        .tick(2 * MS)
        .refresh(20 * MS)
        .failure_window(2, 60 * SEC)
        .build()
        .unwrap();
    let registry = Registry::new();
    registry.register_fleet(&fleet).unwrap();
    assert!(matches!(
        registry.register_fleet(&fleet),
        Err(RegistryError::Conflict { .. })
    ));
    let (b, _mock) = quiet("vendor");
    let b = b
        .consecutive_failure_threshold(5)
        .open_duration(30 * SEC)
        .build()
        .unwrap();
    fleet.join(&b).unwrap();
    wait_for("the agent to connect", || {
        let s = fleet.snapshot();
        s.connected && s.reads > 0
    });

    // Two failures, below the breaker's own threshold, open the fleet
    // through its window.
    assert!(fail(&b).unwrap_err().rejected().is_none());
    assert!(fail(&b).unwrap_err().rejected().is_none());
    wait_for("the window to open the breaker", || {
        let s = fleet.snapshot();
        b.state() == State::Open && s.applied == 1 && s.messages >= 1
    });
    let before = fleet.snapshot();
    let text = fusebox::prometheus::encode(&registry);
    let after = fleet.snapshot();
    let series = |name: &str| value(&text, &format!("{name}{{prefix=\"metrics\"}}"));
    for (name, want) in [
        ("fusebox_fleet_connected", 1),
        ("fusebox_fleet_breakers", 1),
        ("fusebox_fleet_outages_total", before.outages),
        ("fusebox_fleet_errors_total", before.errors),
        ("fusebox_fleet_published_total", 1),
        ("fusebox_fleet_applied_total", 1),
        ("fusebox_fleet_leases_won_total", 0),
        ("fusebox_fleet_leases_returned_total", 0),
        ("fusebox_fleet_fenced_total", 0),
        ("fusebox_fleet_failures_published_total", 2),
        ("fusebox_fleet_window_trips_total", 1),
    ] {
        assert_eq!(series(name), Some(want as f64), "{name} in\n{text}");
    }
    // The breaker's quorum, as the agent last read it: opened by the
    // window, one member (this one), none tripped alone.
    let of_breaker = |name: &str, more: &str| {
        let labels = format!("{{prefix=\"metrics\",breaker=\"{}\"{more}}}", b.name());
        value(&text, &format!("{name}{labels}"))
    };
    for (name, more, want) in [
        ("fusebox_fleet_members", "", 1.0),
        ("fusebox_fleet_tripped_members", "", 0.0),
        ("fusebox_fleet_alone", "", 0.0),
        ("fusebox_fleet_opened_by", ",by=\"failure_window\"", 1.0),
        ("fusebox_fleet_opened_by", ",by=\"quorum\"", 0.0),
        ("fusebox_fleet_opened_by", ",by=\"operator\"", 0.0),
    ] {
        assert_eq!(
            of_breaker(name, more),
            Some(want),
            "{name}{more} in\n{text}"
        );
    }
    // These move with every tick: the scrape lies between two snapshots.
    for (name, low, high) in [
        ("fusebox_fleet_reads_total", before.reads, after.reads),
        (
            "fusebox_fleet_messages_total",
            before.messages,
            after.messages,
        ),
        (
            "fusebox_fleet_round_trips_total",
            before.round_trips,
            after.round_trips,
        ),
    ] {
        let v = series(name).unwrap_or_else(|| panic!("{name} in\n{text}"));
        assert!(v >= low as f64 && v <= high as f64, "{name} {v}");
        assert!(v >= 1.0, "{name}: the agent read and heard the trip");
    }
    // Catch-ups happen only when announcements may have been lost; on a
    // quiet loopback there may be none, but the series is there.
    let v = series("fusebox_fleet_catch_ups_total")
        .unwrap_or_else(|| panic!("fusebox_fleet_catch_ups_total in\n{text}"));
    assert!(
        v >= before.catch_ups as f64 && v <= after.catch_ups as f64,
        "fusebox_fleet_catch_ups_total {v}"
    );
    assert!(
        text.contains("# TYPE fusebox_fleet_reads counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE fusebox_fleet_connected gauge"),
        "{text}"
    );

    // A dropped fleet is no longer reported.
    drop(fleet);
    let text = fusebox::prometheus::encode(&registry);
    assert!(!text.contains("fusebox_fleet_"), "{text}");
}
