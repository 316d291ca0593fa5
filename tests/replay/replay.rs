//! The library: recordings, runs, sweeps and the picture.

use std::time::{Duration, SystemTime};

use fusebox::replay::{self, Outcome, RecordedCall, Recording};
use fusebox::{Breaker, BreakerBuilder, CallPath, Classifier, Reason, State};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// 2026-12-07T14:30:00Z.
fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_653_800)
}

fn call(at: Duration, duration: Duration, outcome: Outcome) -> RecordedCall {
    RecordedCall {
        start: t0() + at,
        duration,
        outcome,
    }
}

fn vendor() -> BreakerBuilder {
    Breaker::builder("vendor")
        .call_path(CallPath::AltData)
        .classifier(Classifier::every_error_is_a_failure())
}

/// A call every `every`, `n` of them, failing where `bad` says.
fn traffic(n: u32, every: Duration, took: Duration, bad: impl Fn(u32) -> bool) -> Recording {
    Recording::new(
        (0..n)
            .map(|i| {
                let outcome = if bad(i) {
                    Outcome::Failure
                } else {
                    Outcome::Success
                };
                call(every * i, took, outcome)
            })
            .collect(),
    )
}

#[test]
fn a_recording_reads_its_line_format_sorted_and_writes_it_back() {
    let text = "\
# from an access log
2026-12-07T14:30:01Z 1.5s failure

2026-12-07T15:30:00.000000001+01:00 80ms success
2026-12-07T14:30:02Z 0s refused
2026-12-07T14:30:03Z PT0.25S ignored
";
    let r = Recording::parse(text).unwrap();
    assert_eq!(
        r.calls(),
        [
            call(
                Duration::ZERO + Duration::from_nanos(1),
                80 * MS,
                Outcome::Success
            ),
            call(SEC, 1500 * MS, Outcome::Failure),
            call(2 * SEC, Duration::ZERO, Outcome::Refused),
            call(3 * SEC, 250 * MS, Outcome::Ignored),
        ]
    );
    assert_eq!(r.span(), 3 * SEC + 250 * MS - Duration::from_nanos(1));
    assert_eq!(r.outage_from(), Some(t0() + SEC), "the first failure");
    let marked = r.clone().with_outage_from(t0() + 2 * SEC);
    let again = Recording::parse(&marked.to_string()).unwrap();
    assert_eq!(again, marked);
    assert_eq!(again.outage_from(), Some(t0() + 2 * SEC));
}

#[test]
fn a_line_that_breaks_the_format_is_refused_naming_its_line_and_field() {
    let cases = [
        ("2026-12-07T14:30:00Z 80ms", 1, "line"),
        ("# ok\n2026-12-07 14:30 80ms success", 2, "line"),
        ("2026-12-07T14:30:00 80ms success", 1, "start"),
        ("2026-12-07T14:30:00Z -5ms success", 1, "duration"),
        ("2026-12-07T14:30:00Z 3d success", 1, "duration"),
        ("\n\n2026-12-07T14:30:00Z 80ms timeout", 3, "outcome"),
        ("# outage-from yesterday\n", 1, "start"),
    ];
    for (text, line, field) in cases {
        let err = Recording::parse(text).unwrap_err();
        assert_eq!((err.line, err.field), (line, field), "{text:?}: {err}");
        assert!(err.to_string().contains(&format!("line {line}")), "{err}");
    }
    let err = Recording::parse("2026-12-07T14:30:00Z 80ms \u{1b}[2Jboom").unwrap_err();
    assert!(!err.to_string().contains('\u{1b}'), "escaped: {err}");
}

#[test]
fn a_run_shows_every_change_with_its_reason_and_the_time_it_spent_open() {
    // Healthy for 10 s, then every call fails: three failures open it.
    let r = traffic(40, SEC, 100 * MS, |i| i >= 10);
    let run = replay::run(
        &r,
        vendor()
            .consecutive_failure_threshold(3)
            .open_duration(5 * SEC)
            .backoff_multiplier(1.0)
            .jitter(0.0),
        1,
    )
    .unwrap();
    let first = &run.changes[0];
    assert_eq!((first.from, first.to), (State::Closed, State::Open));
    assert_eq!(first.at, 12 * SEC + 100 * MS);
    assert_eq!(first.reason, Reason::ConsecutiveFailures { count: 3 });
    assert_eq!(run.time_to_trip(), Some(2 * SEC + 100 * MS));
    // 5 s on, the next call (at 18 s) is the probe, and fails.
    let second = &run.changes[1];
    assert_eq!((second.to, second.at), (State::HalfOpen, 18 * SEC));
    let third = &run.changes[2];
    assert_eq!((third.to, third.at), (State::Open, 18 * SEC + 100 * MS));
    assert_eq!(run.trips, 1);
    assert_eq!(run.calls, 40);
    // Calls 13 to 39 met an open or half-open breaker but the probes.
    let probes = run
        .changes
        .iter()
        .filter(|c| c.to == State::HalfOpen)
        .count() as u64;
    assert_eq!(run.refused, 27 - probes);
    assert_eq!(run.unknown, 0);
    assert_eq!(run.open + run.half_open, run.span - first.at);
    let text = run.to_string();
    assert!(text.starts_with("vendor: 1 trips"), "{text}");
    assert!(text.contains("3 consecutive failures"), "{text}");
}

#[test]
fn the_same_recording_and_seed_replay_the_same_and_another_seed_moves_the_jitter() {
    let r = traffic(600, 100 * MS, 20 * MS, |i| i % 7 < 4);
    let candidate = || {
        vendor()
            .consecutive_failure_threshold(2)
            .open_duration(SEC)
            .jitter(0.5)
    };
    let a = replay::run(&r, candidate(), 11).unwrap();
    let b = replay::run(&r, candidate(), 11).unwrap();
    let c = replay::run(&r, candidate(), 12).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.to_string(), b.to_string());
    assert_eq!(
        replay::svg(&r, std::slice::from_ref(&a)),
        replay::svg(&r, &[b])
    );
    assert!(a.trips > 1, "{a}");
    assert_ne!(a.changes, c.changes, "the jitter is seeded");
}

#[test]
fn calls_the_live_breaker_refused_decide_nothing_when_a_candidate_admits_them() {
    // The live breaker refused most of the outage; a candidate with a high
    // threshold admits those calls but cannot know how they would have
    // ended.
    let mut calls: Vec<_> = (0..5)
        .map(|i| call(SEC * i, 10 * MS, Outcome::Failure))
        .collect();
    calls.extend((5..20).map(|i| call(SEC * i, Duration::ZERO, Outcome::Refused)));
    let r = Recording::new(calls);
    let run = replay::run(&r, vendor().consecutive_failure_threshold(10), 1).unwrap();
    assert_eq!((run.trips, run.refused, run.unknown), (0, 0, 15));
    let tight = replay::run(&r, vendor().consecutive_failure_threshold(5), 1).unwrap();
    assert_eq!(tight.trips, 1);
    assert_eq!(tight.refused + tight.unknown, 15);
}

#[test]
fn calls_out_together_report_at_their_own_ends_and_a_stuck_call_trips_it() {
    // One call hangs for a minute; short successes keep arriving. A
    // breaker that counts calls in flight opens on it once it passes the
    // hung mark; one that does not never opens.
    let mut calls = vec![call(Duration::ZERO, 60 * SEC, Outcome::Failure)];
    calls.extend((1..40).map(|i| call(SEC * i, 5 * MS, Outcome::Success)));
    let r = Recording::new(calls);
    let plain = replay::run(&r, vendor().consecutive_failure_threshold(1), 1).unwrap();
    assert_eq!(
        plain.first_trip(),
        Some(60 * SEC),
        "the failure opens it when it reports, at 60 s: {plain}"
    );
    assert_eq!(plain.refused, 0);
    let watching = replay::run(
        &r,
        vendor()
            .consecutive_failure_threshold(1)
            .hung_call_duration(10 * SEC),
        1,
    )
    .unwrap();
    let trip = watching.first_trip().expect("the hung call opens it");
    assert!(
        (10 * SEC..=11 * SEC).contains(&trip),
        "at the first call after the mark: {trip:?}\n{watching}"
    );
}

#[test]
fn a_sweep_shows_a_threshold_below_the_noise_floor_tripping_on_healthy_traffic() {
    // Healthy traffic: 10 calls a second, one in ten fails, now and then two
    // in a row. The outage: from 30 s on, every call fails.
    let noise = |i: u32| i % 10 == 0 || i % 97 == 1;
    let healthy = traffic(1200, 100 * MS, 20 * MS, noise);
    let outage = traffic(1200, 100 * MS, 20 * MS, |i| i >= 300 || noise(i));
    let outage = outage.with_outage_from(t0() + 30 * SEC);
    let candidates = [2, 5].map(|n| {
        (
            format!("consecutive_failure_threshold={n}"),
            vendor().consecutive_failure_threshold(n),
        )
    });
    let sweep = replay::sweep(&healthy, &outage, candidates, 1).unwrap();
    let (low, high) = (&sweep.rows[0], &sweep.rows[1]);
    assert!(
        low.healthy.trips > 0,
        "2 trips on the noise: {}",
        low.healthy
    );
    assert_eq!(high.healthy.trips, 0, "{}", high.healthy);
    assert_eq!(low.outage.time_to_trip(), Some(100 * MS + 20 * MS));
    assert_eq!(high.outage.time_to_trip(), Some(400 * MS + 20 * MS));
    let table = sweep.to_string();
    assert!(table.lines().count() == 3, "{table}");
    assert!(table.contains("consecutive_failure_threshold=5"), "{table}");
}

#[test]
fn the_picture_has_a_lane_per_run_coloured_by_state() {
    let r = traffic(100, SEC, 10 * MS, |i| (40..60).contains(&i));
    let runs =
        [3, 30].map(|n| replay::run(&r, vendor().consecutive_failure_threshold(n), 1).unwrap());
    let svg = replay::svg(&r, &runs);
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches(">vendor</text>").count(), 2);
    assert!(svg.contains("#e53935"), "an open stretch is drawn");
    let rects = |s: &str| s.matches("<rect").count();
    assert!(rects(&svg) > runs[0].changes.len() + runs[1].changes.len());
}
