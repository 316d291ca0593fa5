//! Trading-aware settings in configuration files: ramp-up, maintenance
//! windows, deadlines and the probe lead load and behave as from the
//! builder; every kind of bad value is refused naming the entry, the field
//! and the rule, and adds nothing.
#![cfg(feature = "serde")]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fusebox::config_file::{FileError, Loader};
use fusebox::registry::Registry;
use fusebox::trading::WallClock;
use fusebox::{Classifier, State};

/// An RFC 3339 instant, such as `2026-12-06T08:00:00Z`.
fn at(rfc3339: &str) -> SystemTime {
    SystemTime::from(rfc3339.parse::<jiff::Timestamp>().unwrap())
}

fn loader(wall: &str) -> (Loader, Arc<quanta::Mock>) {
    let (clock, mock) = quanta::Clock::mock();
    mock.increment(1_000_000_000_000);
    let loader = Loader::new()
        .classifier("transport", Classifier::every_error_is_a_failure())
        .clock(clock)
        .wall_clock(WallClock::fixed(at(wall)));
    (loader, mock)
}

fn fail(b: &fusebox::Breaker) {
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
}

const BASE: &str = r#"
[templates.t]
call_path = "reference_data"
classifier = "transport"
consecutive_failure_threshold = 2
jitter = 0.0
"#;

fn refused(text: &str) -> FileError {
    let (loader, _mock) = loader("2026-12-01T12:00:00Z");
    let registry = Registry::new();
    let err = loader.load_toml(text, &registry).unwrap_err();
    assert!(registry.is_empty(), "{text}");
    assert!(registry.template("t").is_none(), "{text}");
    err
}

/// The error for the base template with `lines` added to breaker `b`.
fn breaker_lines(lines: &str) -> FileError {
    refused(&format!(
        "{BASE}\n[breakers.b]\ntemplate = \"t\"\n{lines}\n"
    ))
}

fn says(err: &FileError, parts: &[&str]) {
    let text = err.to_string();
    for part in parts {
        assert!(text.contains(part), "{part:?} not in: {text}");
    }
}

#[test]
fn a_one_off_window_from_a_file_makes_failures_neutral_inside_it_only() {
    let (loader, mock) = loader("2026-12-12T22:00:00Z");
    let registry = Registry::new();
    loader
        .load_toml(
            &format!(
                "{BASE}\n[breakers.b]\ntemplate = \"t\"\n\
             [[breakers.b.maintenance_window]]\n\
             start = \"2026-12-12T23:00:00Z\"\nend = \"2026-12-13T03:00:00Z\"\n"
            ),
            &registry,
        )
        .unwrap();
    let b = registry.get("b").unwrap();
    assert_eq!(b.snapshot().maintenance, None);
    // One hour later (the wall clock read at build, carried forward by the
    // mock clock): inside the window.
    mock.increment(Duration::from_secs(3600).as_nanos() as u64 + 1);
    for _ in 0..5 {
        fail(&b);
    }
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Closed);
    assert_eq!(snap.status(), "maintenance");
    assert_eq!(snap.neutral_failures, 5);
    assert_eq!(snap.totals.failures, 0);
    assert!(snap.maintenance.unwrap() > Duration::from_secs(4 * 3600 - 2));
    // After it: failures count and trip.
    mock.increment(Duration::from_secs(4 * 3600).as_nanos() as u64);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn explicit_deadlines_and_probe_lead_from_a_file_cap_the_open_period() {
    let (loader, _mock) = loader("2026-12-14T21:00:00Z");
    let registry = Registry::new();
    loader
        .load_toml(
            &format!(
                "{BASE}open_duration = \"2h\"\nmax_open_duration = \"2h\"\nprobe_lead = \"10m\"\n\
             [[templates.t.deadlines]]\nat = [\"2026-12-14T22:00:00Z\"]\n\
             [breakers.b]\ntemplate = \"t\"\n"
            ),
            &registry,
        )
        .unwrap();
    let b = registry.get("b").unwrap();
    fail(&b);
    fail(&b);
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Open);
    // 22:00 less 10 minutes, from 21:00: 50 minutes, not two hours.
    assert_eq!(snap.retry_after, Some(Duration::from_secs(50 * 60)));
}

#[test]
fn ramp_up_from_a_file_is_the_builders() {
    let (loader, mock) = loader("2026-12-01T12:00:00Z");
    let registry = Registry::new();
    loader
        .load_toml(
            &format!(
                "{BASE}open_duration = \"1s\"\nramp_up = {{ duration = \"10s\", start = 0.5 }}\n\
             [breakers.b]\ntemplate = \"t\"\n"
            ),
            &registry,
        )
        .unwrap();
    let b = registry.get("b").unwrap();
    fail(&b);
    fail(&b);
    mock.increment(2_000_000_000);
    b.call(|| Ok::<(), std::io::Error>(())).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().ramp_fraction, Some(0.5));
}

#[test]
fn unknown_fields_in_the_trading_settings_are_refused() {
    says(
        &breaker_lines("ramp_up = { duration = \"10s\", start = 0.5, shape = \"linear\" }"),
        &["[breakers.b]", "unknown field `shape`"],
    );
    says(
        &breaker_lines("[[breakers.b.maintenance_window]]\nstart = \"2026-12-12T23:00:00Z\"\nends = \"2026-12-13T03:00:00Z\""),
        &["maintenance_window", "unknown field `ends`"],
    );
    says(
        &breaker_lines("[[breakers.b.deadlines]]\ninstants = [\"2026-12-14T22:00:00Z\"]"),
        &["deadlines", "unknown field `instants`"],
    );
}

#[test]
fn bad_durations_in_the_trading_settings_are_refused() {
    says(
        &breaker_lines("probe_lead = \"-5m\""),
        &["[breakers.b]", "probe_lead", "durations cannot be negative"],
    );
    says(
        &breaker_lines("ramp_up = { duration = \"soon\", start = 0.5 }"),
        &["[breakers.b]", "soon"],
    );
    let err = breaker_lines("ramp_up = { duration = \"0s\", start = 0.5 }");
    says(&err, &["breaker `b`", "ramp_up"]);
    assert_eq!(err.field(), Some("ramp_up"));
    let err = breaker_lines("ramp_up = { duration = \"10s\", start = 1.5 }");
    says(&err, &["breaker `b`", "ramp_up"]);
    assert_eq!(err.field(), Some("ramp_up"));
}

#[test]
fn bad_windows_name_the_entry_the_field_and_the_rule() {
    for (lines, rule) in [
        (
            "start = \"2026-12-13T03:00:00Z\"\nend = \"2026-12-12T23:00:00Z\"",
            "must end after it starts",
        ),
        (
            "start = \"2026-12-12T23:00:00Z\"\nend = \"2026-12-12T23:00:00Z\"",
            "must end after it starts",
        ),
        (
            "start = \"12 December, 23:00\"\nend = \"2026-12-13T03:00:00Z\"",
            "RFC 3339",
        ),
        (
            "start = \"2026-12-12T23:00:00Z\"",
            "needs `start` and `end`",
        ),
    ] {
        let err = breaker_lines(&format!("[[breakers.b.maintenance_window]]\n{lines}"));
        says(&err, &["breaker `b`", "maintenance_window", rule]);
        assert_eq!(err.field(), Some("maintenance_window"), "{lines}");
    }
}

#[test]
fn bad_deadlines_name_the_entry_the_field_and_the_rule() {
    for (lines, rule) in [
        ("at = []", "at least one instant"),
        ("at = [\"tomorrow\"]", "RFC 3339"),
        ("", "needs `at`"),
    ] {
        let err = breaker_lines(&format!("[[breakers.b.deadlines]]\n{lines}"));
        says(&err, &["breaker `b`", "deadlines", rule]);
        assert_eq!(err.field(), Some("deadlines"), "{lines}");
    }
}

#[cfg(not(feature = "calendar"))]
#[test]
fn weekly_windows_and_daily_deadlines_need_the_calendar_feature() {
    let err = breaker_lines(
        "[[breakers.b.maintenance_window]]\nzone = \"America/New_York\"\nweekday = \"sun\"\nstart = \"02:00\"\nlength = \"4h\"",
    );
    says(
        &err,
        &["breaker `b`", "maintenance_window", "`calendar` feature"],
    );
    let err = breaker_lines(
        "[[breakers.b.deadlines]]\nzone = \"America/New_York\"\ntimes = [\"09:30\"]\nweekdays = [\"mon\"]",
    );
    says(&err, &["breaker `b`", "deadlines", "`calendar` feature"]);
}

#[cfg(feature = "calendar")]
mod calendar {
    use super::*;

    const EXAMPLE: &str = include_str!("../../examples/trading.toml");

    #[test]
    fn the_documented_example_keeps_sunday_maintenance_neutral() {
        // Sunday 6 December 2026, 03:00 New York time (EST).
        let (loader, _mock) = loader("2026-12-06T08:00:00Z");
        let registry = Registry::new();
        loader.load_toml(EXAMPLE, &registry).unwrap();
        let b = registry.get("dividends").unwrap();
        for _ in 0..10 {
            fail(&b);
        }
        let snap = b.snapshot();
        assert_eq!(snap.state, State::Closed);
        assert_eq!(snap.status(), "maintenance");
        assert_eq!(snap.neutral_failures, 10);
        // Until 06:00 New York time: three hours.
        assert_eq!(snap.maintenance, Some(Duration::from_secs(3 * 3600)));
    }

    #[test]
    fn the_documented_example_probes_before_the_new_york_open() {
        // Monday 7 December 2026, 09:00 New York time (EST): an hour-long
        // open period is capped to probe by 09:25.
        let (loader, _mock) = loader("2026-12-07T14:00:00Z");
        let registry = Registry::new();
        loader.load_toml(EXAMPLE, &registry).unwrap();
        let b = registry.get("dividends").unwrap();
        for _ in 0..3 {
            fail(&b);
        }
        let snap = b.snapshot();
        assert_eq!(snap.state, State::Open);
        assert_eq!(snap.retry_after, Some(Duration::from_secs(25 * 60)));
    }

    #[test]
    fn the_documented_example_adds_a_one_off_window_to_a_breaker() {
        // 12 December 2026, 23:30 UTC: inside the splits migration.
        let (loader, _mock) = loader("2026-12-12T23:30:00Z");
        let registry = Registry::new();
        loader.load_toml(EXAMPLE, &registry).unwrap();
        let splits = registry.get("splits").unwrap();
        let refused = splits.call(|| Ok::<(), std::io::Error>(())).unwrap_err();
        assert!(refused.rejected().is_some(), "{refused:?}");
        assert_eq!(splits.snapshot().status(), "maintenance");
        // The template's weekly window alone does not cover dividends now.
        assert_eq!(
            registry.get("dividends").unwrap().snapshot().maintenance,
            None
        );
    }

    #[test]
    fn bad_calendar_values_name_the_entry_the_field_and_the_rule() {
        let weekly =
            |lines: &str| breaker_lines(&format!("[[breakers.b.maintenance_window]]\n{lines}"));
        for (lines, rule) in [
            (
                "zone = \"America/Gotham\"\nweekday = \"sun\"\nstart = \"02:00\"\nlength = \"4h\"",
                "IANA time zone",
            ),
            (
                "zone = \"America/New_York\"\nweekday = \"sonntag\"\nstart = \"02:00\"\nlength = \"4h\"",
                "weekdays such as",
            ),
            (
                "zone = \"America/New_York\"\nweekday = \"sun\"\nstart = \"2am\"\nlength = \"4h\"",
                "times of day",
            ),
            (
                "zone = \"America/New_York\"\nweekday = \"sun\"\nstart = \"02:00\"\nlength = \"200h\"",
                "less than a week",
            ),
            (
                "zone = \"America/New_York\"\nweekday = \"sun\"\nstart = \"02:00\"",
                "needs `zone`, `weekday`",
            ),
            (
                "zone = \"America/New_York\"\nweekday = \"sun\"\nstart = \"02:00\"\nlength = \"4h\"\nend = \"06:00\"",
                "no `end`",
            ),
        ] {
            let err = weekly(lines);
            says(&err, &["breaker `b`", "maintenance_window", rule]);
            assert_eq!(err.field(), Some("maintenance_window"), "{lines}");
        }
        let daily = |lines: &str| breaker_lines(&format!("[[breakers.b.deadlines]]\n{lines}"));
        for (lines, rule) in [
            (
                "zone = \"Europe/Atlantis\"\ntimes = [\"09:30\"]\nweekdays = [\"mon\"]",
                "IANA time zone",
            ),
            (
                "zone = \"America/New_York\"\ntimes = []\nweekdays = [\"mon\"]",
                "at least one time of day",
            ),
            (
                "zone = \"America/New_York\"\ntimes = [\"25:00\"]\nweekdays = [\"mon\"]",
                "times of day",
            ),
            (
                "zone = \"America/New_York\"\ntimes = [\"09:30\"]\nweekdays = [\"mon\"]\nholidays = [\"25 December\"]",
                "dates such as",
            ),
            (
                "zone = \"America/New_York\"\ntimes = [\"09:30\"]\nweekdays = [\"mon\"]\nat = [\"2026-12-14T22:00:00Z\"]",
                "not both",
            ),
            ("zone = \"America/New_York\"\ntimes = [\"09:30\"]", "needs `zone`, `times` and `weekdays`"),
        ] {
            let err = daily(lines);
            says(&err, &["breaker `b`", "deadlines", rule]);
            assert_eq!(err.field(), Some("deadlines"), "{lines}");
        }
    }
}
