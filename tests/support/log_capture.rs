//! A `log::Log` that keeps every line, for tests that check what the
//! library logs. Installed once per test binary by the first [`lines`] or
//! [`install`] call; tests running in parallel share it, so each looks only
//! at the lines that name something of its own (a fleet prefix).
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use std::sync::{Mutex, Once};

use log::{Log, Metadata, Record};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl Log for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &Record<'_>) {
        let line = format!("{} {}: {}", record.level(), record.target(), record.args());
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

/// Installs the capturing logger, at every level, unless it is already.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&CAPTURE).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
}

/// Every line logged so far that contains `needle`.
pub fn lines(needle: &str) -> Vec<String> {
    install();
    LINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

/// Every line logged so far.
pub fn all() -> Vec<String> {
    lines("")
}
