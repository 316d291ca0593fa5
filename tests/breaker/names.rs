//! Breaker names: the rules `build()` checks, and the name carried by
//! refusals, state changes and snapshots.

use fusebox::{Breaker, CallPath, Classifier, ConfigError};
use quanta::Clock;

use crate::support::breaker::*;

fn build(name: &str) -> Result<Breaker, ConfigError> {
    let (clock, _mock) = Clock::mock();
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::failures_of::<Outage>())
        .clock(clock)
        .consecutive_failure_threshold(1)
        .build()
}

fn broken_rule(name: &str) -> &'static str {
    match build(name) {
        Err(ConfigError::Invalid { field, rule, .. }) => {
            assert_eq!(field, "name");
            rule
        }
        other => panic!("{name:?} gave {other:?}"),
    }
}

const PRINTABLE: &str = "must be printable ASCII (space to `~`) without a backtick";

#[test]
fn a_name_that_could_forge_a_log_line_is_refused_naming_the_rule() {
    let forged = "fx`: Open -> Closed\nbreaker `fx";
    assert_eq!(broken_rule(forged), PRINTABLE);
    assert_eq!(broken_rule("refdata\r\n"), PRINTABLE);
    assert_eq!(broken_rule("ref`data"), PRINTABLE);
    assert_eq!(broken_rule("ref\u{1b}[31mdata"), PRINTABLE);
    assert_eq!(broken_rule("r\u{e9}f\u{e9}rence"), PRINTABLE);
}

#[test]
fn a_name_longer_than_32_bytes_is_refused_and_shown_cut_short() {
    let huge = "n".repeat(16 << 20);
    match build(&huge) {
        Err(e @ ConfigError::Invalid { .. }) => {
            assert_eq!(e.field(), "name");
            let message = e.to_string();
            assert!(message.contains("must be at most 32 bytes"), "{message}");
            assert!(message.len() < 200, "the error repeats the whole name");
        }
        other => panic!("a 16 MiB name gave {:?}", other.map(|b| b.name().len())),
    }
    assert_eq!(broken_rule(&"n".repeat(33)), "must be at most 32 bytes");
    assert!(build(&"n".repeat(32)).is_ok());
}

#[test]
fn an_empty_name_is_still_refused() {
    assert_eq!(broken_rule(""), "must not be empty");
    assert_eq!(broken_rule("   "), "must not be empty");
}

#[test]
fn the_longest_name_reaches_refusals_state_changes_and_snapshots() {
    let name = format!("fx rates: EUR/USD ~{}", "9".repeat(13));
    assert_eq!(name.len(), 32);
    let b = build(&name).unwrap();
    let events = b.subscribe(4).unwrap();
    fail(&b).unwrap_err();
    let rejected = refused(succeed(&b));
    let snap = b.snapshot();
    let change = events.try_recv().unwrap();
    assert_eq!(b.name(), name);
    assert_eq!(&*snap.name, name);
    assert_eq!(&*change.breaker, name);
    drop(b);
    // A refusal holds its own copy of the name: it outlives the breaker.
    let copy = rejected;
    assert_eq!(copy.breaker(), name);
    assert!(rejected.to_string().contains(&format!("`{name}`")));
}
