//! The registry: named breakers from templates, lookup and iteration,
//! snapshots of all, and overrides recorded in a bounded audit trail.
#![cfg(feature = "registry")]

use crate::support::breaker::*;

/// Log lines, to check that overrides are logged at warn. The only logger
/// of this test binary.
struct Capture(std::sync::Mutex<Vec<(log::Level, String)>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((record.level(), record.args().to_string()));
    }
    fn flush(&self) {}
}

static LOGS: Capture = Capture(std::sync::Mutex::new(Vec::new()));

use std::sync::Arc;
use std::time::SystemTime;

use fusebox::registry::{Action, Override, Registry, RegistryError};
use fusebox::{Breaker, BreakerConfig, CallPath, Classifier, State};
use quanta::{Clock, Mock};

fn vendor_template(clock: Clock) -> BreakerConfig {
    BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(2)
        .open_duration(SEC)
        .clock(clock)
        .build()
        .unwrap()
}

fn registry() -> (Registry, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    let registry = Registry::new();
    registry
        .add_template("vendor", vendor_template(clock.clone()))
        .unwrap();
    registry
        .add_template(
            "refdata",
            BreakerConfig::builder()
                .call_path(CallPath::ReferenceData)
                .classifier(Classifier::every_error_is_a_failure())
                .clock(clock)
                .build()
                .unwrap(),
        )
        .unwrap();
    (registry, mock)
}

#[test]
fn the_same_name_and_template_give_the_same_breaker() {
    let (registry, _mock) = registry();
    let first = registry.breaker("news", "vendor").unwrap();
    let second = registry.breaker("news", "vendor").unwrap();
    trip(&first, 2);
    assert_eq!(second.state(), State::Open);
    assert_eq!(registry.len(), 1);
}

#[test]
fn a_name_taken_by_another_template_is_refused_and_nothing_changes() {
    let (registry, _mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    let err = registry.breaker("news", "refdata").unwrap_err();
    assert_eq!(
        err,
        RegistryError::Conflict {
            name: "news".into(),
            existing: "template `vendor`".into(),
            requested: "template `refdata`".into(),
        }
    );
    assert_eq!(registry.get("news").unwrap().call_path(), CallPath::AltData);
    assert_eq!(news.call_path(), CallPath::AltData);
}

#[test]
fn an_unknown_template_is_refused() {
    let (registry, _mock) = registry();
    assert_eq!(
        registry.breaker("news", "vendorr").unwrap_err(),
        RegistryError::UnknownTemplate {
            template: "vendorr".into()
        }
    );
    assert!(registry.is_empty());
}

#[test]
fn a_template_name_is_not_replaced() {
    let (registry, _mock) = registry();
    let (clock, _m) = Clock::mock();
    assert_eq!(
        registry
            .add_template("vendor", vendor_template(clock))
            .unwrap_err(),
        RegistryError::DuplicateTemplate {
            template: "vendor".into()
        }
    );
}

#[test]
fn an_invalid_name_is_a_config_error_naming_the_breaker() {
    let (registry, _mock) = registry();
    let err = registry.breaker("  ", "vendor").unwrap_err();
    match err {
        RegistryError::Config { name, source } => {
            assert_eq!(name, "  ");
            assert_eq!(source.field(), "name");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn breakers_built_outside_are_registered_once() {
    let (registry, _mock) = registry();
    let (builder, _m) = quiet("outside-registry-test");
    let outside = builder.consecutive_failure_threshold(1).build().unwrap();
    registry.register(outside.clone()).unwrap();
    assert_eq!(
        registry.get("outside-registry-test").unwrap().name(),
        "outside-registry-test"
    );
    let (builder, _m) = quiet("outside-registry-test");
    assert!(matches!(
        registry.register(builder.consecutive_failure_threshold(1).build().unwrap()),
        Err(RegistryError::Conflict { .. })
    ));
    // A template request for the same name is refused too.
    assert!(matches!(
        registry.breaker("outside-registry-test", "vendor"),
        Err(RegistryError::Conflict { .. })
    ));
    // The registered one is the one the application holds.
    outside.force_open("ops", "test");
    assert_eq!(
        registry.get("outside-registry-test").unwrap().state(),
        State::ForcedOpen
    );
}

#[test]
fn iteration_and_snapshots_cover_every_breaker_in_name_order() {
    let (registry, _mock) = registry();
    for name in ["sentiment", "news", "satellite"] {
        registry.breaker(name, "vendor").unwrap();
    }
    let news = registry.get("news").unwrap();
    trip(&news, 2);
    let breakers = registry.breakers();
    let names: Vec<&str> = breakers.iter().map(Breaker::name).collect();
    assert_eq!(names, ["news", "satellite", "sentiment"]);
    let snaps = registry.snapshots();
    let states: Vec<(&str, State)> = snaps.iter().map(|s| (&*s.name, s.state)).collect();
    assert_eq!(
        states,
        [
            ("news", State::Open),
            ("satellite", State::Closed),
            ("sentiment", State::Closed)
        ]
    );
    assert_eq!(snaps[0].totals.failures, 2);
    assert!(registry.get("missing").is_none());
}

#[test]
fn overrides_are_applied_and_audited_with_both_clocks() {
    let _ = log::set_logger(&LOGS);
    log::set_max_level(log::LevelFilter::Trace);
    let (registry, mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    mock.increment(5 * SEC);
    let before = SystemTime::now();
    let record = registry
        .force_open("news", &Override::new("alice", "vendor maintenance"))
        .unwrap();
    let after = SystemTime::now();
    assert_eq!(news.state(), State::ForcedOpen);
    assert_eq!(record.seq, 1);
    assert_eq!(record.action, Action::ForceOpen);
    assert_eq!(&*record.actor, "alice");
    assert_eq!(&*record.reason, "vendor maintenance");
    assert!(before <= record.wall_time && record.wall_time <= after);
    let change = news.snapshot().last_transition.unwrap();
    assert_eq!(record.at, change.at);
    assert_eq!(change.reason.actor(), Some("alice"));

    mock.increment(SEC);
    let reset = registry
        .reset("news", &Override::new("bob", "vendor back"))
        .unwrap();
    assert_eq!(news.state(), State::Closed);
    assert_eq!(reset.at.duration_since(record.at), SEC);
    let logged: Vec<(log::Level, String)> = LOGS
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, l)| l.starts_with("override #"))
        .cloned()
        .collect();
    assert!(
        logged.contains(&(
            log::Level::Warn,
            "override #1: alice forced open breaker `news`: vendor maintenance".to_owned()
        )),
        "{logged:?}"
    );
    let trail = registry.audit();
    assert_eq!(
        trail
            .iter()
            .map(|r| (r.seq, r.action, &*r.actor))
            .collect::<Vec<_>>(),
        [(1, Action::ForceOpen, "alice"), (2, Action::Reset, "bob")]
    );
}

#[test]
fn overrides_with_an_expiry_end_by_themselves_and_are_audited_with_it() {
    let (registry, mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    let record = registry
        .force_closed(
            "news",
            &Override::new("alice", "status page green").expires_after(10 * SEC),
        )
        .unwrap();
    assert_eq!(record.action, Action::ForceClosed);
    assert_eq!(record.expires_after, Some(10 * SEC));
    assert_eq!(news.state(), State::ForcedClosed);
    fail(&news).unwrap_err();
    fail(&news).unwrap_err();
    assert_eq!(news.state(), State::ForcedClosed, "failures do not count");
    mock.increment(10 * SEC);
    assert_eq!(registry.snapshots()[0].state, State::Closed);

    let record = registry
        .force_open(
            "news",
            &Override::new("bob", "maintenance").expires_after(SEC),
        )
        .unwrap();
    assert_eq!(record.expires_after, Some(SEC));
    assert_eq!(news.snapshot().override_remaining, Some(SEC));
    // A reset has no expiry, whatever the request says.
    let record = registry
        .reset("news", &Override::new("carol", "done").expires_after(SEC))
        .unwrap();
    assert_eq!(record.expires_after, None);
    assert_eq!(news.state(), State::Closed);
}

#[test]
fn an_override_of_an_unknown_breaker_changes_nothing() {
    let (registry, _mock) = registry();
    registry.breaker("news", "vendor").unwrap();
    assert_eq!(
        registry
            .force_open("newz", &Override::new("alice", "typo"))
            .unwrap_err(),
        RegistryError::UnknownBreaker {
            name: "newz".into()
        }
    );
    assert!(registry.audit().is_empty());
    assert_eq!(registry.get("news").unwrap().state(), State::Closed);
}

#[test]
fn the_audit_trail_keeps_the_last_overrides_only() {
    let (clock, _mock) = Clock::mock();
    let registry = Registry::with_audit_capacity(3);
    registry
        .add_template("vendor", vendor_template(clock))
        .unwrap();
    registry.breaker("news", "vendor").unwrap();
    for i in 0..5 {
        registry
            .force_open("news", &Override::new(format!("op{i}"), "drill"))
            .unwrap();
    }
    let trail = registry.audit();
    assert_eq!(trail.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4, 5]);
    assert_eq!(&*trail[0].actor, "op2");
}

#[test]
fn a_critical_breaker_that_refuses_calls_makes_the_process_unready() {
    let (registry, _mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    let fx = registry.breaker("fx", "refdata").unwrap();
    registry.set_critical("fx", true).unwrap();
    trip(&news, 2);
    assert!(registry.unready().is_empty(), "news is not critical");
    fx.force_closed("ops", "drill");
    assert!(
        registry.unready().is_empty(),
        "forced closed admits every call"
    );
    fx.force_open("ops", "drill");
    assert_eq!(registry.unready(), ["fx"]);
    assert!(registry.is_critical("fx"));
    assert!(!registry.is_critical("news"));
    assert_eq!(
        registry.set_critical("nope", true).unwrap_err(),
        RegistryError::UnknownBreaker {
            name: "nope".into()
        }
    );
}

#[test]
fn a_refused_name_makes_a_short_error_on_one_line() {
    let (registry, _mock) = registry();
    let huge = "n".repeat(100_000);
    let forged = "news`: Open -> Closed\nbreaker `fx";
    for name in [huge.as_str(), forged, "\u{1b}[2Kfx\u{202e}"] {
        for err in [
            registry.breaker(name, "vendor").unwrap_err(),
            registry.breaker("news", name).unwrap_err(),
            registry
                .force_open(name, &Override::new("a", "r"))
                .unwrap_err(),
            registry.set_critical(name, true).unwrap_err(),
        ] {
            let text = err.to_string();
            assert!(text.len() < 1_024, "a {}-byte message", text.len());
            assert!(
                !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "{text:?}"
            );
        }
    }
    let text = registry.breaker(&huge, "vendor").unwrap_err().to_string();
    assert!(text.contains("... (100000 bytes)"), "{text}");
    let text = registry.breaker(forged, "vendor").unwrap_err().to_string();
    assert!(text.contains(r"Closed\nbreaker"), "{text}");
}

#[test]
fn a_removed_breaker_leaves_the_registry_and_goes_on_where_it_is_held() {
    let (registry, mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    registry.set_critical("news", true).unwrap();
    trip(&news, 2);
    mock.increment(300 * MS);
    let record = registry
        .remove("news", &Override::new("alice", "vendor retired"))
        .unwrap();
    assert_eq!(record.action, Action::Remove);
    assert_eq!((&*record.breaker, &*record.actor), ("news", "alice"));
    assert_eq!(
        record
            .at
            .duration_since(news.snapshot().last_transition.unwrap().at),
        300 * MS,
        "stamped on the breaker's clock"
    );
    assert_eq!(registry.audit(), [record]);
    // Gone from the registry: lookups, lists, readiness, overrides by name.
    assert!(registry.get("news").is_none());
    assert!(registry.breakers().is_empty());
    assert!(registry.unready().is_empty());
    assert!(matches!(
        registry.force_closed("news", &Override::new("bob", "x")),
        Err(RegistryError::UnknownBreaker { .. })
    ));
    assert!(matches!(
        registry.remove("news", &Override::new("bob", "again")),
        Err(RegistryError::UnknownBreaker { .. })
    ));
    assert_eq!(
        registry.audit().len(),
        1,
        "a refused removal is not audited"
    );
    // Still working where it is held, with its own state.
    assert_eq!(news.state(), State::Open);
    mock.increment(SEC);
    succeed(&news).unwrap();
    assert_eq!(news.state(), State::Closed);
    // The name makes a new, separate breaker.
    let again = registry.breaker("news", "vendor").unwrap();
    assert!(!registry.is_critical("news"));
    again.force_open("ops", "x");
    assert_eq!(news.state(), State::Closed);
}

#[test]
fn a_replaced_breaker_gives_way_to_the_new_one_under_its_name() {
    let (registry, mock) = registry();
    let old = registry.breaker("news", "vendor").unwrap();
    registry.set_critical("news", true).unwrap();
    let (clock, _) = Clock::mock();
    let new = vendor_template(clock).breaker("news").unwrap();
    mock.increment(2 * SEC);
    let record = registry
        .replace(new.clone(), &Override::new("alice", "config reload"))
        .unwrap();
    assert_eq!(record.action, Action::Replace);
    assert_eq!(
        record.to_string(),
        "override #1: alice replaced breaker `news`: config reload"
    );
    // The registry and its overrides see the new one; the mark stays.
    registry
        .force_open("news", &Override::new("bob", "drill"))
        .unwrap();
    assert_eq!(new.state(), State::ForcedOpen);
    assert_eq!(old.state(), State::Closed);
    assert!(registry.is_critical("news"));
    assert_eq!(registry.unready(), ["news"]);
    // It now counts as registered from outside.
    assert!(matches!(
        registry.breaker("news", "vendor"),
        Err(RegistryError::Conflict { .. })
    ));
    let (clock, _) = Clock::mock();
    let stray = vendor_template(clock).breaker("fx").unwrap();
    assert!(matches!(
        registry.replace(stray, &Override::new("a", "r")),
        Err(RegistryError::UnknownBreaker { .. })
    ));
    assert_eq!(registry.audit().len(), 2);
}

#[test]
fn every_audit_record_is_stamped_on_the_breakers_clock() {
    let (registry, mock) = registry();
    registry.breaker("news", "vendor").unwrap();
    mock.increment(10 * SEC);
    let first = registry
        .force_open("news", &Override::new("a", "r"))
        .unwrap();
    mock.increment(10 * SEC);
    let declared = registry
        .declare_maintenance(
            "news",
            &Override::new("a", "r"),
            None,
            fusebox::trading::WindowEnd::After(60 * SEC),
        )
        .unwrap();
    mock.increment(10 * SEC);
    let removed = registry.remove("news", &Override::new("a", "r")).unwrap();
    // On the mock clock: ten seconds apart, in order, whatever the
    // process's own clock did meanwhile.
    assert_eq!(declared.at.duration_since(first.at), 10 * SEC);
    assert_eq!(removed.at.duration_since(declared.at), 10 * SEC);
}
