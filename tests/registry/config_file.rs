//! Configuration files: the documented example loads; every kind of bad
//! value is refused with the entry, the field and the rule, and adds
//! nothing.
#![cfg(feature = "serde")]

use std::time::Duration;

use fusebox::config_file::{FileError, Loader, RegistryFile};
use fusebox::registry::{Registry, RegistryError};
use fusebox::{CallPath, Classifier, State, Verdict};

fn loader() -> Loader {
    let (clock, _mock) = quanta::Clock::mock();
    Loader::new()
        .classifier("transport", Classifier::every_error_is_a_failure())
        .clock(clock)
}

const EXAMPLE: &str = include_str!("../../examples/ops.toml");

#[test]
fn the_documented_example_loads() {
    let registry = Registry::new();
    loader().load_toml(EXAMPLE, &registry).unwrap();
    let breakers = registry.breakers();
    let names: Vec<&str> = breakers.iter().map(|b| b.name()).collect();
    assert_eq!(names, ["instruments", "news", "sentiment"]);
    assert!(registry.is_critical("instruments"));
    assert!(!registry.is_critical("news"));
    assert_eq!(
        registry.get("instruments").unwrap().call_path(),
        CallPath::ReferenceData
    );
    // The template's settings hold: three failures open news, for at most
    // two seconds (less the jitter).
    let news = registry.get("news").unwrap();
    for _ in 0..3 {
        let _ = news.call(|| Err::<(), _>(std::io::Error::other("down")));
    }
    let snap = news.snapshot();
    assert_eq!(snap.state, State::Open);
    assert!(snap.open_duration <= Duration::from_secs(2));
    assert!(snap.open_duration >= Duration::from_millis(1800));
    // The breaker's own change holds: sentiment opens for about three.
    let sentiment = registry.get("sentiment").unwrap();
    for _ in 0..3 {
        let _ = sentiment.call(|| Err::<(), _>(std::io::Error::other("down")));
    }
    assert!(sentiment.snapshot().open_duration >= Duration::from_millis(2700));
    // A template-made name asked for from its template is the same breaker;
    // one with changed settings is not handed out as its template's.
    assert_eq!(
        registry.breaker("news", "vendor").unwrap().state(),
        State::Open
    );
    assert!(matches!(
        registry.breaker("sentiment", "vendor"),
        Err(RegistryError::Conflict { .. })
    ));
    // instruments times its calls into the file's buckets, and keeps 32
    // state changes.
    let instruments = registry.get("instruments").unwrap();
    for _ in 0..20 {
        instruments.force_open("ops", "drill");
        instruments.reset("ops", "drill");
    }
    assert_eq!(instruments.snapshot().recent_changes.len(), 32);
    let _ = instruments.call(|| Ok::<_, std::io::Error>(()));
    let durations = instruments.snapshot().call_durations.expect("timed");
    let bounds: Vec<Duration> = durations.buckets().map(|(b, _)| b).collect();
    assert_eq!(bounds.len(), 9);
    assert_eq!(
        (bounds[0], bounds[8]),
        (Duration::from_millis(1), Duration::from_secs(1))
    );
    assert_eq!(durations.count(), 1);
}

#[test]
fn any_serde_format_loads() {
    let file: RegistryFile = serde_json::from_str(
        r#"{"templates": {"t": {"call_path": "enrichment", "classifier": "transport",
             "open_duration": "250ms"}},
           "breakers": {"b": {"template": "t", "critical": true}}}"#,
    )
    .unwrap();
    let registry = Registry::new();
    loader().load(file, &registry).unwrap();
    assert!(registry.is_critical("b"));
    assert_eq!(registry.get("b").unwrap().call_path(), CallPath::Enrichment);
}

/// The error for `text`, after checking that it added nothing.
#[test]
fn durations_are_read_exactly_in_compound_and_iso_8601_forms() {
    let registry = Registry::new();
    loader()
        .load_toml(
            r#"
            [templates.t]
            call_path = "alt_data"
            classifier = "transport"
            consecutive_failure_threshold = 1
            jitter = 0.0
            open_duration = "4.1s"
            max_open_duration = "1h 30m"
            failure_window = "PT30S"

            [breakers.a]
            template = "t"

            [breakers.b]
            template = "t"
            open_duration = "1m30.000000001s"
            "#,
            &registry,
        )
        .unwrap();
    for (name, open) in [
        ("a", Duration::from_millis(4_100)),
        ("b", Duration::new(90, 1)),
    ] {
        let b = registry.get(name).unwrap();
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
        assert_eq!(b.snapshot().open_duration, open, "{name}");
    }
}

fn refused(text: &str) -> FileError {
    let registry = Registry::new();
    let err = loader().load_toml(text, &registry).unwrap_err();
    assert!(registry.is_empty(), "{text}");
    assert!(registry.template("t").is_none(), "{text}");
    err
}

const BASE: &str = r#"
[templates.t]
call_path = "alt_data"
classifier = "transport"
"#;

/// The error for the base template with `line` added to breaker `b`.
fn breaker_line(line: &str) -> FileError {
    refused(&format!("{BASE}\n[breakers.b]\ntemplate = \"t\"\n{line}\n"))
}

/// The error for the base template with `line` added to it.
fn template_line(line: &str) -> FileError {
    refused(&format!("{BASE}{line}\n[breakers.b]\ntemplate = \"t\"\n"))
}

fn says(err: &FileError, parts: &[&str]) {
    let text = err.to_string();
    for part in parts {
        assert!(text.contains(part), "{part:?} not in: {text}");
    }
}

#[test]
fn unknown_fields_are_refused_wherever_they_are() {
    says(
        &template_line("open_durration = \"1s\""),
        &["[templates.t]", "unknown field `open_durration`"],
    );
    says(
        &breaker_line("critcal = true"),
        &["[breakers.b]", "unknown field `critcal`"],
    );
    says(
        &refused(&format!("{BASE}\n[breaker.b]\ntemplate = \"t\"\n")),
        &["unknown field `breaker`"],
    );
    says(
        &template_line("[templates.t.latency_trip]\npercentil = 0.99"),
        &["[templates.t.latency_trip]", "unknown field `percentil`"],
    );
}

#[test]
fn values_of_the_wrong_kind_are_refused_with_the_table_and_the_expectation() {
    for (line, parts) in [
        (
            "open_duration = \"30x\"",
            &["[templates.t]", "open_duration", "`30x` is not a duration"][..],
        ),
        ("open_duration = \"30\"", &["open_duration", "has no unit"]),
        (
            "open_duration = \"-5s\"",
            &["open_duration", "durations cannot be negative"],
        ),
        (
            "max_open_duration = \"1d\"",
            &["max_open_duration", "write hours (24h)"],
        ),
        (
            "open_duration = 30",
            &["open_duration", "a duration such as"],
        ),
        (
            "consecutive_failure_threshold = -1",
            &["consecutive_failure_threshold", "-1 is negative"],
        ),
        (
            "consecutive_failure_threshold = \"of\"",
            &[
                "consecutive_failure_threshold",
                "`of` is not a whole number or \"off\"",
            ],
        ),
        (
            "consecutive_failure_threshold = 4294967296",
            &["consecutive_failure_threshold", "too large"],
        ),
        ("minimum_calls = \"20\"", &["minimum_calls", "u32"]),
        (
            "failure_rate_threshold = \"half\"",
            &["failure_rate_threshold", "is not a number or \"off\""],
        ),
        (
            "slow_call_duration = \"fast\"",
            &["slow_call_duration", "`fast` is not a duration"],
        ),
        ("jitter = \"0.1\"", &["jitter", "f64"]),
    ] {
        says(&template_line(line), parts);
    }
    says(
        &refused("[templates.t]\ncall_path = 3\n"),
        &["[templates.t]", "call_path", "string"],
    );
    says(
        &breaker_line("max_probe_duration = \"1.5ns\""),
        &[
            "[breakers.b]",
            "max_probe_duration",
            "`1.5ns` is not a duration",
        ],
    );
}

#[test]
fn values_that_break_a_rule_name_the_entry_the_field_and_the_rule() {
    for (line, field, rule) in [
        ("jitter = 1.5", "jitter", "must be within [0, 1]"),
        (
            "open_duration = \"0s\"",
            "open_duration",
            "must be greater than zero",
        ),
        (
            "failure_rate_threshold = 0.0",
            "failure_rate_threshold",
            "must be within (0, 1]",
        ),
        (
            "backoff_multiplier = 0.5",
            "backoff_multiplier",
            "at least 1.0",
        ),
        (
            "half_open_max_concurrent = 0",
            "half_open_max_concurrent",
            "between 1 and 1024",
        ),
        (
            "slow_call_rate_threshold = 0.5",
            "slow_call_duration",
            "needs a duration",
        ),
        (
            "[templates.t.latency_trip]\npercentile = 1.5",
            "latency_trip.percentile",
            "",
        ),
        (
            "count_window = 0",
            "count_window",
            "must be between 1 and 1000000",
        ),
        (
            "closed_interval = \"0s\"",
            "closed_interval",
            "must be at least 1 ms",
        ),
        (
            "half_open_rate = { probes = 0, failure_rate_threshold = 0.5 }",
            "half_open_rate",
            "must judge at least 1 probe",
        ),
        (
            "half_open_rate = { probes = 4, failure_rate_threshold = 0.5 }\n\
             half_open_max_probes = 3",
            "half_open_max_probes",
            "or the breaker could never close",
        ),
        (
            "call_duration_buckets = [\"10ms\", \"5ms\"]",
            "call_duration_buckets",
            "must increase strictly",
        ),
        (
            "event_log_capacity = 2000",
            "event_log_capacity",
            "must be between 0 and 1024",
        ),
    ] {
        let err = template_line(line);
        says(&err, &["template `t`", field, rule]);
        let at_fault = err.field().unwrap();
        assert!(field.starts_with(at_fault), "{line}: {at_fault}");
    }
    let err = breaker_line("max_open_duration = \"1s\"\nopen_duration = \"2s\"");
    says(
        &err,
        &[
            "breaker `b`",
            "max_open_duration",
            "must not be shorter than open_duration",
        ],
    );
    assert_eq!(err.field(), Some("max_open_duration"));
}

#[test]
fn every_setting_that_is_a_value_can_be_given_by_its_name() {
    let registry = Registry::new();
    loader()
        .load_toml(
            r#"
            [templates.t]
            call_path = "alt_data"
            classifier = "transport"
            consecutive_failure_threshold = "off"
            failure_rate_threshold = "off"
            window_failure_threshold = 2
            minimum_calls = 1
            count_window = 3
            closed_interval = "1h"
            half_open_max_probes = 4
            half_open_rate = { probes = 2, failure_rate_threshold = 0.5 }
            count_calls_in_flight = true
            delivery = "notifier"

            [breakers.b]
            template = "t"
            "#,
            &registry,
        )
        .unwrap();
    let b = registry.get("b").unwrap();
    // count_calls_in_flight: the snapshot counts a call admitted and not
    // yet reported.
    let permit = b.try_acquire().unwrap();
    assert_eq!(b.snapshot().calls_in_flight, Some(1));
    permit.record(Verdict::Success);
    // count_window: two failures among the last three calls open it, old
    // as they are.
    let down = || Err::<(), _>(std::io::Error::other("down"));
    let _ = b.call(down);
    let _ = b.call(|| Ok::<_, std::io::Error>(()));
    let _ = b.call(down);
    assert_eq!(b.state(), State::Open);

    // delivery: the process's notifier thread runs the callback.
    let (tx, rx) = std::sync::mpsc::channel();
    let watched = registry
        .template("t")
        .unwrap()
        .to_builder("watched")
        .on_state_change(move |_| {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        })
        .build()
        .unwrap();
    watched.force_open("ops", "a test");
    let thread = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(thread.as_deref(), Some("fusebox-notifier"));
}

#[test]
fn delivery_is_caller_or_notifier() {
    says(
        &template_line("delivery = \"later\""),
        &[
            "delivery",
            "unknown variant `later`",
            "`caller`",
            "`notifier`",
        ],
    );
}

#[test]
fn a_forbidden_call_path_is_refused() {
    let err = refused(
        "[templates.orders]\ncall_path = \"order_submission\"\nclassifier = \"transport\"\n",
    );
    says(&err, &["template `orders`", "order_submission"]);
    assert_eq!(err.field(), Some("call_path"));
}

#[test]
fn missing_and_unknown_names_are_refused() {
    let err = refused("[templates.t]\ncall_path = \"alt_data\"\n");
    says(&err, &["template `t`", "`classifier` is required"]);
    let err = refused("[templates.t]\ncall_path = \"alt_data\"\nclassifier = \"http\"\n");
    says(&err, &["template `t`", "\"http\"", "known: transport"]);
    assert_eq!(err.field(), Some("classifier"));
    let err = refused(&format!("{BASE}\n[breakers.b]\ncritical = true\n"));
    says(&err, &["breaker `b`", "`template` is required"]);
    let err = refused(&format!("{BASE}\n[breakers.b]\ntemplate = \"u\"\n"));
    assert_eq!(
        err,
        FileError::Registry(RegistryError::UnknownTemplate {
            template: "u".into()
        })
    );
    let err = template_line("critical = true");
    says(&err, &["template `t`", "critical", "not of templates"]);
}

#[test]
fn a_file_never_replaces_what_a_registry_holds() {
    let registry = Registry::new();
    loader().load_toml(EXAMPLE, &registry).unwrap();
    // The same file again: its templates exist already.
    let err = loader().load_toml(EXAMPLE, &registry).unwrap_err();
    assert!(matches!(
        err,
        FileError::Registry(RegistryError::DuplicateTemplate { .. })
    ));
    // A breaker whose name is taken, from a template already there.
    let err = loader()
        .load_toml("[breakers.news]\ntemplate = \"vendor\"\n", &registry)
        .unwrap_err();
    assert!(matches!(
        err,
        FileError::Registry(RegistryError::Conflict { .. })
    ));
    // A new breaker from a template the registry holds is fine.
    loader()
        .load_toml("[breakers.ratings]\ntemplate = \"vendor\"\n", &registry)
        .unwrap();
    assert_eq!(registry.len(), 4);
}

#[cfg(feature = "isolation")]
#[test]
fn bulkheads_load_with_an_adaptive_limit_and_lanes() {
    let registry = Registry::new();
    loader()
        .load_toml(
            r#"
            [bulkheads.pricing]
            max_concurrent = 32
            adaptive = { floor = 2, tolerance = 2.0, min_samples = 8, baseline_window = "5m" }
            lanes = [{ name = "intraday", share = 0.8 }, { name = "batch", share = 0.2 }]
            shed_last = "intraday"

            [bulkheads.refdata]
            max_concurrent = 4
            max_wait = "5ms"
            "#,
            &registry,
        )
        .unwrap();
    assert!(registry.is_empty(), "no breaker");
    let pricing = registry.bulkhead("pricing").expect("registered");
    let snap = pricing.snapshot();
    assert_eq!((snap.max_concurrent, snap.limit), (32, 32));
    assert_eq!(snap.adaptive.unwrap().floor, 2);
    let lanes: Vec<_> = snap
        .lanes
        .iter()
        .map(|l| (&*l.name, l.guaranteed))
        .collect();
    assert_eq!(lanes, [("intraday", 26), ("batch", 6)]);
    assert!(pricing.lane("batch").is_some());
    let refdata = registry.bulkhead("refdata").unwrap().snapshot();
    assert_eq!(
        (refdata.limit, refdata.adaptive, refdata.lanes.len()),
        (4, None, 0)
    );
}

#[cfg(feature = "isolation")]
#[test]
fn a_bad_bulkhead_names_its_entry_and_field_and_adds_nothing() {
    for (table, entry, field) in [
        ("max_concurrent = 0", "bulkhead `pricing`", "max_concurrent"),
        (
            "max_concurrent = 8\nadaptive = { floor = 9 }",
            "bulkhead `pricing`",
            "floor",
        ),
        (
            "max_concurrent = 8\nadaptive = {}\nmax_wait = \"1ms\"",
            "bulkhead `pricing`",
            "max_wait",
        ),
        (
            "max_concurrent = 8\nlanes = [{ name = \"a\", share = 0.5 }]",
            "bulkhead `pricing`",
            "shed_last",
        ),
        (
            "max_concurrent = 8\nlanes = [{ name = \"a\", share = 0.7 }, { name = \"b\", share = 0.7 }]\nshed_last = \"a\"",
            "bulkhead `pricing`",
            "lane",
        ),
    ] {
        let err = refused(&format!("{BASE}\n[bulkheads.pricing]\n{table}\n"));
        assert_eq!(err.field(), Some(field), "{err}");
        says(&err, &[entry]);
    }
    says(
        &refused(&format!(
            "{BASE}\n[bulkheads.pricing]\nmax_concurrent = 8\nadaptive = {{ flor = 2 }}\n"
        )),
        &["unknown field `flor`"],
    );
    // A name the registry already holds is refused, and nothing is added.
    let registry = Registry::new();
    registry
        .register_bulkhead(
            fusebox::isolation::Bulkhead::builder("pricing")
                .max_concurrent(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    let err = loader()
        .load_toml(
            &format!("{BASE}\n[bulkheads.pricing]\nmax_concurrent = 8\n"),
            &registry,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        FileError::Registry(RegistryError::Conflict { .. })
    ));
    assert!(registry.template("t").is_none());
}

#[test]
fn the_calls_in_flight_settings_are_read_by_name_and_checked() {
    let registry = Registry::new();
    loader()
        .load_toml(
            r#"
            [templates.t]
            call_path = "alt_data"
            classifier = "transport"
            slow_call_duration = "50ms"
            stuck_call_threshold = 6
            hung_call_duration = "2s"

            [breakers.b]
            template = "t"

            [breakers.off]
            template = "t"
            stuck_call_threshold = "off"
            hung_call_duration = "off"
            "#,
            &registry,
        )
        .unwrap();
    // The tracking breaker shows its calls in flight, the other does not.
    let b = registry.get("b").unwrap();
    let permit = b.try_acquire().unwrap();
    assert_eq!(
        (b.snapshot().calls_in_flight, b.snapshot().calls_stuck),
        (Some(1), Some(0))
    );
    permit.finish(&Ok::<(), std::io::Error>(()));
    let off = registry.get("off").unwrap().snapshot();
    assert_eq!((off.calls_in_flight, off.calls_stuck), (None, None));

    says(
        &template_line("stuck_call_threshold = 6"),
        &["template `t`", "stuck_call_threshold", "slow_call_duration"],
    );
    says(
        &template_line("slow_call_duration = \"50ms\"\nstuck_call_threshold = 65"),
        &["stuck_call_threshold", "between 1 and 64"],
    );
    says(
        &breaker_line("slow_call_duration = \"1s\"\nhung_call_duration = \"1s\""),
        &[
            "breaker `b`",
            "hung_call_duration",
            "longer than slow_call_duration",
        ],
    );
}
