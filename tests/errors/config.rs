//! build() refuses every invalid configuration with a typed error naming the
//! field, and refuses the call paths a breaker must not stand on.

use std::time::Duration;

use fusebox::{
    Breaker, BreakerBuilder, BreakerConfig, CallPath, Classifier, ConfigError, LatencyTrip, State,
};

fn valid() -> BreakerBuilder {
    Breaker::builder("refdata")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
}

#[track_caller]
fn refused_for(builder: BreakerBuilder, field: &str) -> ConfigError {
    match builder.build() {
        Ok(b) => panic!("built {b:?}; expected `{field}` to be refused"),
        Err(e) => {
            assert_eq!(e.field(), field, "{e}");
            if !matches!(e, ConfigError::ForbiddenCallPath { .. }) {
                assert!(
                    e.to_string().contains(field),
                    "the message names the field: {e}"
                );
            }
            e
        }
    }
}

#[test]
fn the_defaults_build() {
    let b = valid().build().unwrap();
    assert_eq!(b.name(), "refdata");
    assert_eq!(b.call_path(), CallPath::ReferenceData);
    assert_eq!(b.state(), fusebox::State::Closed);
}

#[test]
fn refuses_order_cancel_kill_switch_and_risk_check_paths() {
    for path in [
        CallPath::OrderSubmission,
        CallPath::OrderCancel,
        CallPath::KillSwitch,
        CallPath::RiskCheck,
    ] {
        let e = refused_for(valid().call_path(path.clone()), "call_path");
        assert!(e.to_string().contains(&path.to_string()), "{e}");
        match e {
            ConfigError::ForbiddenCallPath { path: p, why } => {
                assert_eq!(p, path);
                assert!(!why.is_empty());
            }
            other => panic!("{path}: {other:?}"),
        }
        // However it is configured otherwise.
        refused_for(
            valid()
                .call_path(path)
                .consecutive_failure_threshold(1)
                .jitter(0.0),
            "call_path",
        );
    }
}

#[test]
fn refuses_a_custom_label_that_names_a_refused_path() {
    for (label, path) in [
        ("order_cancel", CallPath::OrderCancel),
        ("Order-Cancel", CallPath::OrderCancel),
        ("cancel order", CallPath::OrderCancel),
        ("  order.submission ", CallPath::OrderSubmission),
        ("KILL_SWITCH", CallPath::KillSwitch),
        ("pre-trade risk check", CallPath::RiskCheck),
    ] {
        let e = refused_for(valid().call_path(CallPath::custom(label)), "call_path");
        let why = |e: &ConfigError| match e {
            ConfigError::ForbiddenCallPath { why, .. } => *why,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            why(&e),
            why(&refused_for(valid().call_path(path.clone()), "call_path")),
            "{label} is refused for the reason {path} is"
        );
        assert!(e.to_string().contains(label.trim()), "{e}");
        let config = BreakerConfig::builder()
            .call_path(CallPath::custom(label))
            .classifier(Classifier::every_error_is_a_failure())
            .build()
            .unwrap_err();
        assert!(
            matches!(config, ConfigError::ForbiddenCallPath { .. }),
            "{label}"
        );
    }
    // Labels that only mention an order or a risk are other paths.
    for label in [
        "order_book",
        "orders_history",
        "risk_reports_eod",
        "cancelled_trades_feed",
    ] {
        valid().call_path(CallPath::custom(label)).build().unwrap();
    }
}

#[test]
fn accepts_the_optional_paths() {
    for path in [
        CallPath::ReferenceData,
        CallPath::HistoricalData,
        CallPath::AltData,
        CallPath::Enrichment,
        CallPath::custom("fx-fixings"),
    ] {
        let b = valid().call_path(path.clone()).build().unwrap();
        assert_eq!(b.call_path(), path);
    }
}

#[test]
fn requires_a_call_path_and_a_classifier() {
    let no_path = Breaker::builder("x").classifier(Classifier::every_error_is_a_failure());
    assert!(matches!(
        refused_for(no_path, "call_path"),
        ConfigError::Missing { .. }
    ));
    let no_classifier = Breaker::builder("x").call_path(CallPath::AltData);
    assert!(matches!(
        refused_for(no_classifier, "classifier"),
        ConfigError::Missing { .. }
    ));
}

#[test]
fn refuses_every_invalid_setting_naming_the_field() {
    let s = Duration::from_secs(1);
    let cases: Vec<(BreakerBuilder, &str)> = vec![
        (
            valid().consecutive_failure_threshold(0),
            "consecutive_failure_threshold",
        ),
        (
            Breaker::builder("")
                .call_path(CallPath::AltData)
                .classifier(Classifier::every_error_is_a_failure()),
            "name",
        ),
        (
            Breaker::builder("  ")
                .call_path(CallPath::AltData)
                .classifier(Classifier::every_error_is_a_failure()),
            "name",
        ),
        (valid().failure_window(Duration::ZERO), "failure_window"),
        (
            valid().failure_window(Duration::from_micros(999)),
            "failure_window",
        ),
        (
            valid().window_failure_threshold(0),
            "window_failure_threshold",
        ),
        (
            valid().failure_rate_threshold(0.0),
            "failure_rate_threshold",
        ),
        (
            valid().failure_rate_threshold(-0.5),
            "failure_rate_threshold",
        ),
        (
            valid().failure_rate_threshold(1.01),
            "failure_rate_threshold",
        ),
        (
            valid().failure_rate_threshold(f64::NAN),
            "failure_rate_threshold",
        ),
        (
            valid().failure_rate_threshold(f64::INFINITY),
            "failure_rate_threshold",
        ),
        (valid().minimum_calls(0), "minimum_calls"),
        (
            valid().slow_call_duration(Duration::ZERO),
            "slow_call_duration",
        ),
        (
            valid().slow_call_duration(s).slow_call_rate_threshold(0.0),
            "slow_call_rate_threshold",
        ),
        (
            valid().slow_call_duration(s).slow_call_rate_threshold(1.5),
            "slow_call_rate_threshold",
        ),
        (
            valid()
                .slow_call_duration(s)
                .slow_call_rate_threshold(f64::NAN),
            "slow_call_rate_threshold",
        ),
        (valid().slow_call_rate_threshold(0.5), "slow_call_duration"),
        (valid().open_duration(Duration::ZERO), "open_duration"),
        (valid().backoff_multiplier(0.99), "backoff_multiplier"),
        (valid().backoff_multiplier(-2.0), "backoff_multiplier"),
        (valid().backoff_multiplier(f64::NAN), "backoff_multiplier"),
        (
            valid().backoff_multiplier(f64::INFINITY),
            "backoff_multiplier",
        ),
        (
            valid().open_duration(10 * s).max_open_duration(9 * s),
            "max_open_duration",
        ),
        (valid().jitter(-0.01), "jitter"),
        (valid().jitter(1.01), "jitter"),
        (valid().jitter(f64::NAN), "jitter"),
        (
            valid().half_open_max_concurrent(0),
            "half_open_max_concurrent",
        ),
        (
            valid().half_open_max_concurrent(1025),
            "half_open_max_concurrent",
        ),
        (
            valid().half_open_success_threshold(0),
            "half_open_success_threshold",
        ),
        (
            valid().max_probe_duration(Duration::ZERO),
            "max_probe_duration",
        ),
        (
            valid().latency_trip(LatencyTrip::new().percentile(0.0)),
            "latency_trip.percentile",
        ),
        (
            valid().latency_trip(LatencyTrip::new().percentile(1.5)),
            "latency_trip.percentile",
        ),
        (
            valid().latency_trip(LatencyTrip::new().threshold(Duration::ZERO)),
            "latency_trip.threshold",
        ),
        (
            valid().latency_trip(LatencyTrip::new().consecutive_windows(0)),
            "latency_trip.consecutive_windows",
        ),
        (
            valid().latency_trip(LatencyTrip::new().error_rate(1.5)),
            "latency_trip.error_rate",
        ),
        (
            valid().latency_trip(LatencyTrip::new().minimum_samples(0)),
            "latency_trip.minimum_samples",
        ),
        (
            valid().latency_trip(LatencyTrip::new().capacity(0)),
            "latency_trip.capacity",
        ),
        // Every trip condition off: the breaker could never open.
        (
            valid()
                .consecutive_failure_threshold(None)
                .failure_rate_threshold(None)
                .window_failure_threshold(None)
                .slow_call_rate_threshold(None)
                .latency_trip(None),
            "consecutive_failure_threshold",
        ),
    ];
    for (builder, field) in cases {
        let e = refused_for(builder, field);
        assert!(
            matches!(e, ConfigError::Invalid { .. } | ConfigError::Missing { .. }),
            "{e:?}"
        );
    }
}

#[test]
fn accepts_the_edges_of_every_range() {
    let s = Duration::from_secs(1);
    let edges = [
        valid().consecutive_failure_threshold(1),
        valid().failure_window(Duration::from_millis(1)),
        valid().window_failure_threshold(1),
        valid().failure_rate_threshold(1.0),
        valid().failure_rate_threshold(f64::MIN_POSITIVE),
        valid().minimum_calls(1),
        valid().slow_call_duration(Duration::from_nanos(1)),
        valid().slow_call_duration(s).slow_call_rate_threshold(1.0),
        valid().open_duration(Duration::from_nanos(1)),
        valid().backoff_multiplier(1.0),
        valid().open_duration(s).max_open_duration(s),
        valid().jitter(0.0),
        valid().jitter(1.0),
        valid().half_open_max_concurrent(1),
        valid().half_open_max_concurrent(1024),
        valid().half_open_success_threshold(1),
        valid().max_probe_duration(Duration::from_nanos(1)),
        valid()
            .open_duration(Duration::MAX)
            .max_open_duration(Duration::MAX),
        valid().failure_window(Duration::MAX),
        // One condition on is enough, whichever it is.
        valid()
            .consecutive_failure_threshold(None)
            .failure_rate_threshold(None)
            .window_failure_threshold(2),
        valid()
            .consecutive_failure_threshold(None)
            .failure_rate_threshold(None)
            .latency_trip(LatencyTrip::new()),
        valid()
            .consecutive_failure_threshold(None)
            .failure_rate_threshold(None)
            .slow_call_duration(s)
            .slow_call_rate_threshold(0.5),
    ];
    for (i, builder) in edges.into_iter().enumerate() {
        if let Err(e) = builder.build() {
            panic!("edge case {i} refused: {e}");
        }
    }
}

#[test]
fn extreme_but_valid_durations_do_not_overflow() {
    let (clock, mock) = quanta::Clock::mock();
    let b = valid()
        .clock(clock)
        .consecutive_failure_threshold(1)
        .failure_window(Duration::MAX)
        .window_failure_threshold(3)
        .open_duration(Duration::MAX)
        .max_open_duration(Duration::MAX)
        .backoff_multiplier(1e300)
        .max_probe_duration(Duration::MAX)
        .jitter(0.0)
        .build()
        .unwrap();
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
    assert_eq!(b.state(), fusebox::State::Open);
    mock.increment(Duration::from_secs(10 * 365 * 86_400));
    let rej = b.try_acquire().unwrap_err();
    assert_eq!(rej.state(), fusebox::State::Open);
    assert!(rej.retry_after().unwrap() > Duration::from_secs(100 * 365 * 86_400));
}

// --- a configuration as a value ------------------------------------------

fn vendor_config(clock: quanta::Clock) -> BreakerConfig {
    BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::every_error_is_a_failure())
        .clock(clock)
        .jitter(0.0)
        .consecutive_failure_threshold(2)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn fail(b: &Breaker) {
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
}

#[test]
fn one_config_stamps_independent_breakers_with_the_same_settings() {
    let (clock, _mock) = quanta::Clock::mock();
    let config = vendor_config(clock);
    let news = config.breaker("news").unwrap();
    let sentiment = config.clone().breaker("sentiment").unwrap();
    assert_eq!((news.name(), sentiment.name()), ("news", "sentiment"));
    assert_eq!(news.call_path(), CallPath::AltData);
    fail(&news);
    fail(&news);
    assert_eq!(news.state(), State::Open);
    assert_eq!(news.snapshot().retry_after, Some(Duration::from_secs(30)));
    assert_eq!(sentiment.state(), State::Closed, "its own counters");
    fail(&sentiment);
    assert_eq!(sentiment.state(), State::Closed);
    fail(&sentiment);
    assert_eq!(sentiment.state(), State::Open, "the same threshold");
}

#[test]
fn a_config_is_checked_once_at_build_naming_the_field() {
    let bad = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(0)
        .build()
        .unwrap_err();
    assert_eq!(bad.field(), "consecutive_failure_threshold");
    let no_classifier = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .build()
        .unwrap_err();
    assert_eq!(no_classifier.field(), "classifier");
    let forbidden = BreakerConfig::builder()
        .call_path(CallPath::OrderCancel)
        .classifier(Classifier::every_error_is_a_failure())
        .build()
        .unwrap_err();
    assert!(matches!(forbidden, ConfigError::ForbiddenCallPath { .. }));
}

#[test]
fn a_config_refuses_a_bad_name_for_the_breaker_it_stamps() {
    let (clock, _mock) = quanta::Clock::mock();
    let config = vendor_config(clock);
    assert_eq!(config.breaker(" ").unwrap_err().field(), "name");
    assert_eq!(config.to_builder("").build().unwrap_err().field(), "name");
}

#[test]
fn a_breaker_from_a_config_can_change_a_setting_before_it_is_built() {
    let (clock, _mock) = quanta::Clock::mock();
    let config = vendor_config(clock);
    let lenient = config
        .to_builder("satellite")
        .consecutive_failure_threshold(3)
        .build()
        .unwrap();
    fail(&lenient);
    fail(&lenient);
    assert_eq!(lenient.state(), State::Closed);
    fail(&lenient);
    assert_eq!(lenient.state(), State::Open);
    let invalid = config.to_builder("satellite").jitter(2.0).build();
    assert_eq!(invalid.unwrap_err().field(), "jitter");
}

#[test]
fn a_builder_is_clone_and_each_copy_builds_its_own_breaker() {
    let base = valid().consecutive_failure_threshold(1);
    let a = base.clone().build().unwrap();
    let b = base.build().unwrap();
    fail(&a);
    assert_eq!((a.state(), b.state()), (State::Open, State::Closed));
}

#[test]
fn a_config_shares_its_state_change_callback_which_is_told_the_breaker() {
    let (clock, _mock) = quanta::Clock::mock();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let config = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::every_error_is_a_failure())
        .clock(clock)
        .consecutive_failure_threshold(1)
        .on_state_change(move |c| log.lock().unwrap().push(c.breaker.to_string()))
        .build()
        .unwrap();
    fail(&config.breaker("news").unwrap());
    fail(&config.breaker("sentiment").unwrap());
    assert_eq!(*seen.lock().unwrap(), ["news", "sentiment"]);
}

#[test]
fn a_custom_call_path_owns_its_label() {
    let label = String::from("ratings-from-config-file");
    let b = valid()
        .call_path(CallPath::custom(label.clone()))
        .build()
        .unwrap();
    drop(label);
    assert_eq!(b.call_path().to_string(), "ratings-from-config-file");
    assert_eq!(b.call_path().to_string(), "ratings-from-config-file");
}

#[test]
fn the_peer_parity_settings_are_checked_and_name_their_field() {
    use fusebox::HalfOpenRate;
    refused_for(valid().count_window(0), "count_window");
    refused_for(valid().count_window(2_000_000), "count_window");
    refused_for(valid().count_window(10).minimum_calls(20), "minimum_calls");
    refused_for(
        valid()
            .failure_rate_threshold(None)
            .count_window(10)
            .minimum_calls(5),
        "count_window",
    );
    refused_for(valid().closed_interval(Duration::ZERO), "closed_interval");
    refused_for(
        valid()
            .half_open_success_threshold(3)
            .half_open_max_probes(2),
        "half_open_max_probes",
    );
    let round = |probes, failure_rate_threshold| HalfOpenRate {
        probes,
        failure_rate_threshold,
    };
    refused_for(valid().half_open_rate(round(0, 0.5)), "half_open_rate");
    refused_for(valid().half_open_rate(round(4, 0.0)), "half_open_rate");
    refused_for(valid().half_open_rate(round(4, f64::NAN)), "half_open_rate");
    refused_for(
        valid()
            .half_open_rate(round(4, 0.5))
            .half_open_max_probes(3),
        "half_open_max_probes",
    );
    valid()
        .count_window(20)
        .closed_interval(Duration::from_secs(60))
        .half_open_rate(round(4, 0.5))
        .half_open_max_probes(4)
        .build()
        .expect("valid");
}

#[test]
fn the_calls_in_flight_settings_are_checked_and_name_their_field() {
    let ms = Duration::from_millis;
    let slow = || valid().slow_call_duration(ms(50));
    refused_for(slow().stuck_call_threshold(0), "stuck_call_threshold");
    refused_for(slow().stuck_call_threshold(65), "stuck_call_threshold");
    let e = refused_for(valid().stuck_call_threshold(6), "stuck_call_threshold");
    assert!(e.to_string().contains("slow_call_duration"), "{e}");
    refused_for(valid().hung_call_duration(ms(0)), "hung_call_duration");
    refused_for(slow().hung_call_duration(ms(50)), "hung_call_duration");
    refused_for(
        slow().stuck_call_threshold(6).hung_call_duration(ms(40)),
        "hung_call_duration",
    );
    for ok in [
        slow().stuck_call_threshold(1),
        slow().stuck_call_threshold(64),
        slow().stuck_call_threshold(6).hung_call_duration(ms(51)),
        valid().hung_call_duration(ms(1)),
        // Alone, either is a trip condition.
        valid()
            .consecutive_failure_threshold(None)
            .failure_rate_threshold(None)
            .hung_call_duration(ms(1)),
        valid()
            .consecutive_failure_threshold(None)
            .failure_rate_threshold(None)
            .slow_call_duration(ms(50))
            .stuck_call_threshold(6),
    ] {
        ok.build().expect("valid");
    }
}
