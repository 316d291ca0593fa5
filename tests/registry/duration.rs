//! One grammar of durations: what a person types (configuration files, the
//! admin endpoint's bodies, `fusebox-ctl`'s options) is read by
//! `fusebox::duration::parse`, exactly, and every duration the crate prints
//! for a person reads back to itself.
#![cfg(any(feature = "serde", feature = "admin", feature = "ctl"))]

use std::time::Duration;

use fusebox::duration::{display, parse};
use fusebox::{Breaker, CallPath, Classifier};
use proptest::prelude::*;

fn ok(text: &str) -> Duration {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(d) => panic!("{text} read as {d:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn reads_a_number_and_a_unit() {
    for (text, want) in [
        ("100ns", Duration::from_nanos(100)),
        ("7us", Duration::from_micros(7)),
        ("7µs", Duration::from_micros(7)),
        ("250ms", Duration::from_millis(250)),
        ("30s", Duration::from_secs(30)),
        ("5m", Duration::from_secs(300)),
        ("2h", Duration::from_secs(7_200)),
        ("0s", Duration::ZERO),
        ("30 secs", Duration::from_secs(30)),
        ("2 hours", Duration::from_secs(7_200)),
        (" 30s ", Duration::from_secs(30)),
    ] {
        assert_eq!(ok(text), want, "{text}");
    }
}

#[test]
fn reads_several_units_with_or_without_spaces() {
    for (text, want) in [
        ("1m30s", Duration::from_secs(90)),
        ("1h 30m", Duration::from_secs(5_400)),
        ("1h30m15.5s", Duration::from_millis(5_415_500)),
        ("1s 500ms", Duration::from_millis(1_500)),
        ("1 hour 30 minutes", Duration::from_secs(5_400)),
    ] {
        assert_eq!(ok(text), want, "{text}");
    }
}

#[test]
fn reads_iso_8601_as_spring_and_dotnet_write_it() {
    for (text, want) in [
        ("PT30S", Duration::from_secs(30)),
        ("PT1H30M", Duration::from_secs(5_400)),
        ("PT0.25S", Duration::from_millis(250)),
        ("pt1m", Duration::from_secs(60)),
        ("PT0.000000001S", Duration::from_nanos(1)),
    ] {
        assert_eq!(ok(text), want, "{text}");
    }
}

#[test]
fn decimals_are_exact_to_the_nanosecond() {
    for (text, nanos) in [
        ("4.1s", 4_100_000_000),
        ("8.2s", 8_200_000_000),
        ("16.1s", 16_100_000_000),
        ("4.1ms", 4_100_000),
        ("0.000000001s", 1),
        ("1.000000001s", 1_000_000_001),
        ("1.5m", 90_000_000_000),
        ("0.1h", 360_000_000_000),
        ("1.5us", 1_500),
        ("1.123456ms", 1_123_456),
    ] {
        assert_eq!(ok(text).as_nanos(), nanos, "{text}");
    }
}

#[test]
fn every_one_decimal_value_up_to_ninety_reads_exactly() {
    // The values a float parser got wrong ("4.1s" among 59 of these 900).
    for tenths in 0..900u64 {
        for (unit, nanos_per_tenth) in [("s", 100_000_000), ("ms", 100_000)] {
            let text = format!("{}.{}{unit}", tenths / 10, tenths % 10);
            assert_eq!(
                ok(&text).as_nanos(),
                u128::from(tenths * nanos_per_tenth),
                "{text}"
            );
        }
    }
}

#[test]
fn refuses_negative_durations_and_says_so() {
    for text in ["-5s", "-0.5s", "5s ago", "-PT5S", "-1m30s", "-0s"] {
        let err = refused(text);
        assert_eq!(
            err,
            format!("`{text}`: durations cannot be negative"),
            "{text}"
        );
    }
}

#[test]
fn refuses_what_is_not_a_duration_and_says_why() {
    for (text, says) in [
        ("30", "`30` has no unit"),
        ("1.5", "`1.5` has no unit"),
        ("", "an empty text is not a duration"),
        ("   ", "an empty text is not a duration"),
        ("30x", "`30x` is not a duration"),
        ("soon", "`soon` is not a duration"),
        ("1d", "days, weeks, months and years are not accepted"),
        ("2 weeks", "days, weeks, months and years are not accepted"),
        ("P1D", "days, weeks, months and years are not accepted"),
        ("1.5ns", "`1.5ns` is not a duration"),
        (
            "1.0000001ms",
            "`1.0000001ms` is not a whole number of nanoseconds (it would be rounded to 1ms)",
        ),
        (
            "0.0005us",
            "`0.0005us` is not a whole number of nanoseconds (it would be rounded to 0s)",
        ),
        ("1.0000000001s", "`1.0000000001s` is not a duration"),
        ("18446744073709551616s", "is not a duration"),
        ("5124095576030432h", "is not a duration"),
        (".5s", "is not a duration"),
        ("1h 1h", "is not a duration"),
    ] {
        let err = refused(text);
        assert!(err.contains(says), "{text:?}: {err}");
    }
    // Every refusal that is not about a sign or a unit says what is accepted.
    assert!(
        refused("30x").contains("1m30s, 1h 30m"),
        "{}",
        refused("30x")
    );
}

#[test]
fn prints_durations_in_the_largest_units_exactly() {
    for (d, text) in [
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(1), "1ns"),
        (Duration::from_nanos(1_500), "1.5µs"),
        (Duration::from_millis(250), "250ms"),
        (Duration::from_millis(4_100), "4.1s"),
        (Duration::from_secs(90), "1m30s"),
        (Duration::from_secs(5_400), "1h30m"),
        (Duration::from_millis(7_200_500), "2h0.5s"),
        (Duration::from_secs(86_400 + 61), "24h1m1s"),
        (Duration::MAX, "5124095576030431h15.999999999s"),
    ] {
        assert_eq!(display(d).to_string(), text, "{d:?}");
    }
    // Width and alignment apply, as to a string.
    assert_eq!(
        format!("[{:>6}]", display(Duration::from_secs(30))),
        "[   30s]"
    );
    assert_eq!(
        format!("[{:<6}]", display(Duration::from_secs(30))),
        "[30s   ]"
    );
}

#[test]
fn the_crates_messages_print_durations_that_read_back() {
    // A configuration error names the value at fault in the grammar.
    let err = Breaker::builder("fx")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(Duration::from_secs(120))
        .max_open_duration(Duration::from_millis(90_250))
        .build()
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("1m30.25s < 2m"), "{message}");
    assert_eq!(ok("1m30.25s"), Duration::from_millis(90_250));
    assert_eq!(ok("2m"), Duration::from_secs(120));

    // A refusal's retry-after too.
    let b = Breaker::builder("fx")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(1)
        .open_duration(Duration::from_secs(90))
        .jitter(0.0)
        .clock(quanta::Clock::mock().0)
        .build()
        .unwrap();
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
    let refusal = b.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
    assert!(
        refusal
            .rejected()
            .unwrap()
            .to_string()
            .ends_with("retry after 1m30s"),
        "{}",
        refusal.rejected().unwrap()
    );
}

/// Durations across the whole range, and many small ones.
fn any_duration() -> impl Strategy<Value = Duration> {
    let secs = prop_oneof![0u64..2, 0u64..100_000, any::<u64>()];
    let nanos = prop_oneof![
        Just(0u32),
        0u32..1_000_000_000,
        (0u32..1_000).prop_map(|n| n * 1_000_000)
    ];
    (secs, nanos).prop_map(|(s, n)| Duration::new(s, n))
}

/// A fraction of one to nine digits: its text, and its value in billionths.
fn fraction(max_digits: usize) -> impl Strategy<Value = (String, u128)> {
    (1..=max_digits).prop_flat_map(|digits| {
        (0..10u64.pow(digits as u32)).prop_map(move |f| {
            let text = format!("{f:0digits$}");
            (text, u128::from(f) * 10u128.pow(9 - digits as u32))
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_printed_duration_reads_back_to_itself(d in any_duration()) {
        let text = display(d).to_string();
        prop_assert_eq!(parse(&text).ok(), Some(d), "{}", text);
    }

    #[test]
    fn every_decimal_with_up_to_nine_fractional_digits_reads_exactly(
        whole in 0u64..10_000_000,
        (digits, billionths) in fraction(9),
        (unit, nanos_per_unit) in prop_oneof![
            Just(("s", 1_000_000_000u128)),
            Just(("m", 60_000_000_000)),
            Just(("h", 3_600_000_000_000)),
            Just(("S", 1_000_000_000)),
        ],
    ) {
        let text = if unit == "S" {
            format!("PT{whole}.{digits}S")
        } else {
            format!("{whole}.{digits}{unit}")
        };
        let want = u128::from(whole) * nanos_per_unit + billionths * nanos_per_unit / 1_000_000_000;
        prop_assert_eq!(parse(&text).map(|d| d.as_nanos()).ok(), Some(want), "{}", text);
    }

    #[test]
    fn a_decimal_of_a_smaller_unit_reads_exactly_or_is_refused_never_rounded(
        whole in 0u64..1_000_000,
        (digits, billionths) in fraction(9),
        (unit, nanos_per_unit) in prop_oneof![Just(("ms", 1_000_000u128)), Just(("us", 1_000))],
    ) {
        let text = format!("{whole}.{digits}{unit}");
        let exact = billionths * nanos_per_unit;
        match parse(&text) {
            Ok(d) => {
                prop_assert_eq!(exact % 1_000_000_000, 0, "{} read as {:?}", text, d);
                prop_assert_eq!(
                    d.as_nanos(),
                    u128::from(whole) * nanos_per_unit + exact / 1_000_000_000
                );
            }
            Err(e) => prop_assert!(exact % 1_000_000_000 != 0, "{}: {}", text, e),
        }
    }
}
