//! Flapping: `flapping_trips` trips within `flapping_window` show in the
//! snapshot and as a warn log line, and stop showing once they age out.

use std::sync::Mutex;
use std::time::Duration;

use fusebox::Breaker;

use crate::support::breaker::*;

struct Capture(Mutex<Vec<(log::Level, String)>>);

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

static LOGS: Capture = Capture(Mutex::new(Vec::new()));

fn flapping_lines(name: &str) -> Vec<(log::Level, String)> {
    LOGS.0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, l)| l.contains(&format!("`{name}` is flapping")))
        .cloned()
        .collect()
}

fn breaker(name: &str, trips: Option<u32>) -> (Breaker, std::sync::Arc<quanta::Mock>) {
    let _ = log::set_logger(&LOGS);
    log::set_max_level(log::LevelFilter::Trace);
    let (builder, mock) = quiet(name);
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(SEC)
        .flapping_trips(trips)
        .flapping_window(60 * SEC)
        .build()
        .unwrap();
    (b, mock)
}

/// Trips the breaker, waits out the open period and closes it with a probe.
fn trip_and_recover(b: &Breaker, mock: &quanta::Mock) {
    trip(b, 1);
    mock.increment(SEC);
    succeed(b).unwrap();
}

#[test]
fn three_trips_within_the_window_mark_the_breaker_as_flapping() {
    let (b, mock) = breaker("flapping-three", Some(3));
    trip_and_recover(&b, &mock);
    mock.increment(10 * SEC);
    trip_and_recover(&b, &mock);
    assert!(!b.snapshot().flapping, "two trips are not flapping");
    assert!(flapping_lines("flapping-three").is_empty());
    mock.increment(10 * SEC);
    trip(&b, 1);
    assert!(b.snapshot().flapping);
    let lines = flapping_lines("flapping-three");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].0, log::Level::Warn);
    assert!(lines[0].1.contains("3 trips within 1m"), "{}", lines[0].1);
    // The first trip ages out of the window: no longer flapping.
    mock.increment(40 * SEC);
    assert!(!b.snapshot().flapping);
}

#[test]
fn trips_further_apart_than_the_window_never_flap() {
    let (b, mock) = breaker("flapping-apart", Some(3));
    for _ in 0..6 {
        trip_and_recover(&b, &mock);
        assert!(!b.snapshot().flapping);
        mock.increment(31 * SEC);
    }
    assert!(flapping_lines("flapping-apart").is_empty());
}

#[test]
fn failed_probes_are_not_trips() {
    let (b, mock) = breaker("flapping-probes", Some(3));
    trip(&b, 1);
    for _ in 0..5 {
        mock.increment(Duration::from_secs(300));
        fail(&b).unwrap_err();
    }
    let s = b.snapshot();
    assert!(!s.flapping, "one long outage is not flapping");
    assert_eq!(s.backoff_step, 5);
}

#[test]
fn flapping_can_be_switched_off() {
    let (b, mock) = breaker("flapping-off", None);
    for _ in 0..5 {
        trip_and_recover(&b, &mock);
    }
    assert!(!b.snapshot().flapping);
    assert!(flapping_lines("flapping-off").is_empty());
}

#[test]
fn flapping_settings_are_checked_at_build() {
    for (trips, window, field) in [
        (Some(1), 60 * SEC, "flapping_trips"),
        (Some(65), 60 * SEC, "flapping_trips"),
        (Some(3), Duration::ZERO, "flapping_window"),
    ] {
        let (builder, _mock) = quiet("flapping-config");
        let err = builder
            .consecutive_failure_threshold(1)
            .flapping_trips(trips)
            .flapping_window(window)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), field);
    }
}
