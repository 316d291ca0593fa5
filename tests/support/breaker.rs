//! Helpers shared by the behaviour tests: a breaker on a mock clock, error
//! types the classifier tells apart, and one-line calls with each outcome.
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fusebox::{Breaker, BreakerBuilder, CallError, CallPath, Classifier, Snapshot};
use quanta::{Clock, Mock};

/// The dependency's own failure: the test classifier counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage;

impl fmt::Display for Outage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("dependency unavailable")
    }
}

impl std::error::Error for Outage {}

/// A business error (unknown symbol, say): the test classifier ignores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Business;

impl fmt::Display for Business {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown symbol")
    }
}

impl std::error::Error for Business {}

/// The error type the wrapped closures return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepError {
    Outage(Outage),
    Business(Business),
}

impl fmt::Display for DepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DepError::Outage(e) => e.fmt(f),
            DepError::Business(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DepError::Outage(e) => Some(e),
            DepError::Business(e) => Some(e),
        }
    }
}

pub const SEC: Duration = Duration::from_secs(1);
pub const MS: Duration = Duration::from_millis(1);
pub const NS: Duration = Duration::from_nanos(1);

/// A builder on a fresh mock clock with every trip condition off and no
/// jitter; each test switches on what it is about.
pub fn quiet(name: &str) -> (BreakerBuilder, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    // Start well away from zero so that "long ago" is representable.
    mock.increment(Duration::from_secs(1_000));
    let builder = Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::failures_of::<Outage>())
        .clock(clock)
        .jitter(0.0)
        .consecutive_failure_threshold(None)
        .failure_rate_threshold(None);
    (builder, mock)
}

/// A breaker that opens after `n` consecutive failures, with a 10 s first
/// open period and no jitter.
pub fn consecutive(n: u32) -> (Breaker, Arc<Mock>) {
    let (b, mock) = quiet("refdata");
    let breaker = b
        .consecutive_failure_threshold(n)
        .open_duration(10 * SEC)
        .build()
        .expect("valid configuration");
    (breaker, mock)
}

pub fn succeed(b: &Breaker) -> Result<u32, CallError<DepError>> {
    b.call(|| Ok(7))
}

pub fn fail(b: &Breaker) -> Result<u32, CallError<DepError>> {
    b.call(|| Err(DepError::Outage(Outage)))
}

pub fn business(b: &Breaker) -> Result<u32, CallError<DepError>> {
    b.call(|| Err(DepError::Business(Business)))
}

/// A successful call that takes `took` on the mock clock.
pub fn succeed_after(b: &Breaker, mock: &Mock, took: Duration) -> Result<u32, CallError<DepError>> {
    b.call(|| {
        mock.increment(took);
        Ok(7)
    })
}

/// A failing call that takes `took` on the mock clock.
pub fn fail_after(b: &Breaker, mock: &Mock, took: Duration) -> Result<u32, CallError<DepError>> {
    b.call(|| {
        mock.increment(took);
        Err(DepError::Outage(Outage))
    })
}

/// Asserts the call was refused without being attempted, and returns the refusal.
#[track_caller]
pub fn refused<T: fmt::Debug>(r: Result<T, CallError<DepError>>) -> fusebox::Rejected {
    match r {
        Err(CallError::Rejected(rej)) => rej,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Trips a breaker built with [`consecutive`]`(n)` open.
pub fn trip(b: &Breaker, n: u32) {
    for _ in 0..n {
        let _ = fail(b);
    }
    assert_eq!(
        b.state(),
        fusebox::State::Open,
        "{n} failures should open it"
    );
}

/// A snapshot's counters, without the fields that say how long things
/// have lasted, for before/after comparisons.
pub fn counters(s: &Snapshot) -> String {
    let mut s = s.clone();
    s.time_in_state = Duration::ZERO;
    s.state_times = Default::default();
    let text = format!("{s:?}");
    // When it was taken is a time too.
    let start = text.find("taken_at: ").expect("the snapshot's instant");
    let end = start + text[start..].find(", ").expect("a field after it") + 2;
    format!("{}{}", &text[..start], &text[end..])
}
