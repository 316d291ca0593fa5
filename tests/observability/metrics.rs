//! The Prometheus exposition: parsed back with a strict OpenMetrics parser
//! and compared, series by series, with the breakers' snapshots.
#![cfg(feature = "prometheus")]

use std::sync::Arc;

use fusebox::registry::{Override, Registry};
use fusebox::trading::WindowEnd;
use fusebox::{BreakerConfig, CallPath, Classifier, LatencyTrip, Snapshot, State};
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use quanta::{Clock, Mock};

use crate::support::breaker::*;

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

fn registry() -> (Registry, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    mock.increment(1_000 * SEC);
    let registry = Registry::new();
    let vendor = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::failures_of::<Outage>())
        .consecutive_failure_threshold(2)
        .open_duration(10 * SEC)
        .jitter(0.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    registry.add_template("vendor", vendor).unwrap();
    let timed = BreakerConfig::builder()
        .call_path(CallPath::custom("ratings"))
        .classifier(Classifier::failures_of::<Outage>())
        .latency_trip(
            LatencyTrip::new()
                .window(SEC)
                .minimum_samples(1)
                .threshold(SEC),
        )
        .clock(clock)
        .build()
        .unwrap();
    registry.add_template("timed", timed).unwrap();
    (registry, mock)
}

/// The value of one series, found by family, sample name suffix and labels.
fn sample(expo: &Exposition, family: &str, labels: &[(&str, &str)]) -> f64 {
    let fam = expo
        .families
        .get(family)
        .unwrap_or_else(|| panic!("no family {family}"));
    let found: Vec<f64> = fam
        .iter_samples()
        .filter(|s| {
            let set = s.get_labelset().unwrap();
            set.iter().count() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| set.get_label_value(k) == Some(*v))
        })
        .map(|s| match &s.value {
            OpenMetricsValue::Gauge(n) => n.as_f64(),
            OpenMetricsValue::Counter(c) => c.value.as_f64(),
            other => panic!("unexpected value {other:?} in {family}"),
        })
        .collect();
    assert_eq!(found.len(), 1, "{family} {labels:?}: {found:?}");
    found[0]
}

fn scrape(registry: &Registry) -> Exposition {
    let text = fusebox::prometheus::encode(registry);
    openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("the scrape does not parse: {e:?}\n{text}"))
}

fn check_breaker(expo: &Exposition, snap: &Snapshot, call_path: &str, critical: bool) {
    let l = [("breaker", &*snap.name), ("call_path", call_path)];
    let with = |k: &'static str, v: &'static str| [l[0], l[1], (k, v)];
    assert_eq!(
        sample(expo, "fusebox_breaker_state", &l),
        f64::from(snap.status_gauge())
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_critical", &l),
        f64::from(u8::from(critical))
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_in_maintenance", &l),
        if snap.maintenance.is_some() { 1.0 } else { 0.0 }
    );
    for state in [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::ForcedClosed,
    ] {
        let name = state.to_string();
        assert_eq!(
            sample(
                expo,
                "fusebox_breaker_in_state",
                &[l[0], l[1], ("state", &name)]
            ),
            if state == snap.state { 1.0 } else { 0.0 },
            "{} {state}",
            snap.name
        );
    }
    let t = &snap.totals;
    for (outcome, n) in [
        ("success", t.successes),
        ("failure", t.failures),
        ("ignored", t.ignored),
    ] {
        assert_eq!(
            sample(expo, "fusebox_breaker_calls", &with("outcome", outcome)),
            n as f64
        );
    }
    assert_eq!(
        sample(expo, "fusebox_breaker_slow_calls", &l),
        t.slow as f64
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_short_circuits", &l),
        t.short_circuits as f64
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_cancelled_calls", &l),
        t.cancelled as f64
    );
    assert_eq!(sample(expo, "fusebox_breaker_trips", &l), snap.trips as f64);
    assert_eq!(
        sample(expo, "fusebox_breaker_reopens", &l),
        snap.reopens as f64
    );
    let p = &snap.probes;
    for (outcome, n) in [
        ("success", p.successes),
        ("failure", p.failures),
        ("expired", p.expired),
        ("ignored", p.ignored),
    ] {
        assert_eq!(
            sample(expo, "fusebox_breaker_probes", &with("outcome", outcome)),
            n as f64
        );
    }
    // A stuck probe is counted only by a breaker that tracks its calls in
    // flight, which alone can judge one stuck.
    let stuck = with("outcome", "stuck");
    match snap.calls_stuck {
        Some(_) => assert_eq!(
            sample(expo, "fusebox_breaker_probes", &stuck),
            p.stuck as f64
        ),
        None => assert_eq!(p.stuck, 0),
    }
    for state in [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::ForcedClosed,
    ] {
        let name = state.to_string();
        assert_eq!(
            sample(
                expo,
                "fusebox_breaker_state_seconds",
                &[l[0], l[1], ("state", &name)]
            ),
            crate::time_in(&snap.state_times, state).as_secs_f64(),
            "{} {state}",
            snap.name
        );
    }
    assert_eq!(
        sample(expo, "fusebox_breaker_probes_in_flight", &l),
        f64::from(snap.probes_in_flight)
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_open_duration_seconds", &l),
        snap.open_duration.as_secs_f64()
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_retry_after_seconds", &l),
        snap.retry_after.unwrap_or_default().as_secs_f64()
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_time_in_state_seconds", &l),
        snap.time_in_state.as_secs_f64()
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_consecutive_failures", &l),
        f64::from(snap.consecutive_failures)
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_window_failure_ratio", &l),
        snap.failure_rate
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_backoff_step", &l),
        f64::from(snap.backoff_step)
    );
    assert_eq!(
        sample(expo, "fusebox_breaker_flapping", &l),
        if snap.flapping { 1.0 } else { 0.0 }
    );
    if let Some(d) = snap.override_remaining {
        assert_eq!(
            sample(expo, "fusebox_breaker_override_remaining_seconds", &l),
            d.as_secs_f64()
        );
    }
}

#[test]
fn the_scrape_parses_and_matches_every_snapshot() {
    let (registry, mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    let sentiment = registry.breaker("sentiment", "vendor").unwrap();
    let ratings = registry.breaker("ratings", "timed").unwrap();
    registry.breaker("idle", "vendor").unwrap();
    let held = registry.breaker("held", "vendor").unwrap();
    registry.set_critical("news", true).unwrap();

    // news: two failures open it, a refusal is counted, 3 s pass.
    trip(&news, 2);
    refused(succeed(&news));
    mock.increment(3 * SEC);
    // sentiment: successes, an ignored error, then forced open.
    for _ in 0..3 {
        succeed(&sentiment).unwrap();
    }
    let _ = business(&sentiment);
    registry
        .force_open("sentiment", &Override::new("alice", "vendor maintenance"))
        .unwrap();
    // held: forced closed for a minute; its failure counts in the totals
    // only.
    registry
        .force_closed(
            "held",
            &Override::new("bob", "known transient").expires_after(60 * SEC),
        )
        .unwrap();
    fail(&held).unwrap_err();
    // ratings: a full latency window gives it a percentile.
    succeed_after(&ratings, &mock, 300 * MS).unwrap();
    mock.increment(SEC);
    succeed_after(&ratings, &mock, 200 * MS).unwrap();

    let expo = scrape(&registry);
    let snaps = registry.snapshots();
    assert_eq!(snaps.len(), 5);
    for snap in &snaps {
        let path = registry.get(&snap.name).unwrap().call_path();
        check_breaker(
            &expo,
            snap,
            &path.to_string(),
            registry.is_critical(&snap.name),
        );
    }
    // Spot checks that the comparison above is about something: news has
    // been open for 3 s, then 1.5 s of ratings' calls.
    let news_labels = [("breaker", "news"), ("call_path", "alt_data")];
    assert_eq!(sample(&expo, "fusebox_breaker_state", &news_labels), 1.0);
    assert_eq!(
        sample(&expo, "fusebox_breaker_retry_after_seconds", &news_labels),
        5.5
    );
    assert_eq!(
        sample(&expo, "fusebox_breaker_short_circuits", &news_labels),
        1.0
    );
    assert_eq!(
        sample(
            &expo,
            "fusebox_breaker_state",
            &[("breaker", "sentiment"), ("call_path", "alt_data")]
        ),
        3.0
    );
    // Only the breaker with a latency policy has a percentile series.
    let latency = &expo.families["fusebox_breaker_latency_percentile_seconds"];
    assert_eq!(latency.iter_samples().count(), 1);
    assert_eq!(
        sample(
            &expo,
            "fusebox_breaker_latency_percentile_seconds",
            &[("breaker", "ratings"), ("call_path", "ratings")]
        ),
        snaps[3].latency_percentile.unwrap().as_secs_f64()
    );
    assert_eq!(&*snaps[3].name, "ratings");
    // news tripped at once and has been open for 4.5 s since, one outage.
    assert_eq!(
        sample(
            &expo,
            "fusebox_breaker_state_seconds",
            &[news_labels[0], news_labels[1], ("state", "open")]
        ),
        4.5
    );
    assert_eq!(sample(&expo, "fusebox_breaker_trips", &news_labels), 1.0);
    assert_eq!(sample(&expo, "fusebox_breaker_reopens", &news_labels), 0.0);
    // ratings times its calls: 300 ms and 200 ms, in the histogram.
    let durations = &expo.families["fusebox_breaker_call_duration_seconds"];
    assert_eq!(durations.iter_samples().count(), 1, "only ratings");
    let h = durations
        .iter_samples()
        .find_map(|s| match &s.value {
            OpenMetricsValue::Histogram(h) => Some(h.clone()),
            _ => None,
        })
        .expect("a histogram");
    assert_eq!(h.count, Some(2));
    assert_eq!(h.sum.map(|n| n.as_f64()), Some(0.5));
    let le = |bound: f64| {
        h.buckets
            .iter()
            .find(|b| b.upper_bound == bound)
            .map(|b| b.count.as_f64())
    };
    assert_eq!(
        (le(0.1), le(0.25), le(0.5), le(f64::INFINITY)),
        (Some(0.0), Some(1.0), Some(2.0), Some(2.0))
    );
    let held_labels = [("breaker", "held"), ("call_path", "alt_data")];
    assert_eq!(sample(&expo, "fusebox_breaker_state", &held_labels), 4.0);
    assert_eq!(
        sample(
            &expo,
            "fusebox_breaker_override_remaining_seconds",
            &held_labels
        ),
        58.5
    );
    assert_eq!(
        expo.families["fusebox_breaker_override_remaining_seconds"]
            .iter_samples()
            .count(),
        1,
        "only the breaker with an expiring override"
    );
}

#[test]
fn the_families_follow_prometheus_naming() {
    let (registry, _mock) = registry();
    registry.breaker("news", "vendor").unwrap();
    registry.breaker("ratings", "timed").unwrap();
    let expo = scrape(&registry);
    for (name, family) in &expo.families {
        assert!(name.starts_with("fusebox_breaker_"), "{name}");
        match family.family_type {
            OpenMetricsType::Counter => {
                let text = fusebox::prometheus::encode(&registry);
                assert!(text.contains(&format!("{name}_total{{")), "{name}");
            }
            OpenMetricsType::Gauge => {}
            OpenMetricsType::Histogram => assert!(name.ends_with("_seconds"), "{name}"),
            ref other => panic!("{name} is a {other:?}"),
        }
        if !family.unit.is_empty() {
            assert!(name.ends_with(&format!("_{}", family.unit)), "{name}");
        }
    }
    assert_eq!(
        expo.families["fusebox_breaker_open_duration_seconds"].unit,
        "seconds"
    );
}

/// How many series `breaker` writes: a histogram writes one per bucket
/// (`+Inf` included), `_sum` and `_count`.
fn series_of(expo: &Exposition, breaker: &str) -> usize {
    expo.families
        .values()
        .flat_map(|f| f.iter_samples())
        .filter(|s| {
            s.get_labelset()
                .is_ok_and(|set| set.get_label_value("breaker") == Some(breaker))
        })
        .map(|s| match &s.value {
            OpenMetricsValue::Histogram(h) => h.buckets.len() + 2,
            _ => 1,
        })
        .sum()
}

#[test]
fn each_breaker_writes_the_series_the_docs_count_and_name() {
    let (registry, mock) = registry();
    registry.breaker("news", "vendor").unwrap();
    registry.breaker("fx", "vendor").unwrap();
    let ratings = registry.breaker("ratings", "timed").unwrap();
    registry
        .force_open("fx", &Override::new("ops", "drill").expires_after(60 * SEC))
        .unwrap();
    // A latency policy's series once its first window is full.
    succeed(&ratings).unwrap();
    mock.increment(2 * SEC);
    succeed(&ratings).unwrap();
    assert!(ratings.snapshot().latency_percentile.is_some());
    // A breaker that tracks its calls in flight, without timing them.
    let (builder, _mock) = quiet("settlement");
    registry
        .register(builder.hung_call_duration(5 * SEC).build().unwrap())
        .unwrap();
    let expo = scrape(&registry);
    // docs/ops.md: 33 series per breaker, one more each with a latency
    // policy or an expiring override, 20 more for one that times its
    // calls (the default 16 buckets, +Inf, _sum, _count, the slow-call
    // ratio), and 3 more for one that tracks its calls in flight (those in
    // flight, those stuck, and the stuck probes).
    assert_eq!(series_of(&expo, "news"), 33);
    assert_eq!(series_of(&expo, "fx"), 34);
    assert_eq!(series_of(&expo, "ratings"), 34 + 20);
    assert_eq!(series_of(&expo, "settlement"), 33 + 3);
    // Every family is in both tables: the rustdoc's and docs/ops.md's.
    let rustdoc = include_str!("../../src/prometheus/mod.rs");
    let ops = include_str!("../../docs/ops.md");
    for name in expo.families.keys() {
        for (doc, text) in [("src/prometheus/mod.rs", rustdoc), ("docs/ops.md", ops)] {
            assert!(
                text.contains(&format!("| `{name}")),
                "{name} is not in the table of {doc}"
            );
        }
    }
    assert!(ops.contains("writes 33 series per breaker"));
}

#[test]
fn an_empty_registry_scrapes_to_an_empty_exposition() {
    let registry = Registry::new();
    // (The parser wants at least one family, so the text is compared.)
    assert_eq!(fusebox::prometheus::encode(&registry), "# EOF\n");
}

#[test]
fn breakers_added_after_registration_are_scraped() {
    let (registry, _mock) = registry();
    let mut metrics = prometheus_client::registry::Registry::default();
    metrics.register_collector(Box::new(fusebox::prometheus::RegistryCollector::new(
        registry.clone(),
    )));
    registry.breaker("late", "vendor").unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics).unwrap();
    assert!(text.contains(r#"fusebox_breaker_state{breaker="late",call_path="alt_data"} 0"#));
}

#[cfg(feature = "isolation")]
#[test]
fn an_adaptive_bulkhead_shows_its_limit_floor_latencies_and_each_lane() {
    use fusebox::isolation::{AdaptiveLimit, Bulkhead};

    let (registry, _) = registry();
    let (clock, mock) = Clock::mock();
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(8)
        .adaptive(AdaptiveLimit::new().floor(2).min_samples(4))
        .lane("intraday", 0.75)
        .lane("batch", 0.25)
        .shed_last("intraday")
        .clock(clock)
        .build()
        .unwrap();
    registry.register_bulkhead(bulkhead.clone()).unwrap();
    let b = [("bulkhead", "pricing")];
    let expo = scrape(&registry);
    assert_eq!(sample(&expo, "fusebox_bulkhead_limit", &b), 8.0);
    assert_eq!(sample(&expo, "fusebox_bulkhead_limit_floor", &b), 2.0);
    assert!(
        !expo
            .families
            .contains_key("fusebox_bulkhead_window_latency_seconds"),
        "no window judged yet"
    );
    // Healthy calls of 8 ms, then eight that hang while intraday's
    // refusals judge them.
    for _ in 0..8 {
        let slot = bulkhead.try_enter().unwrap();
        mock.increment(8 * MS);
        drop(slot);
    }
    let stuck: Vec<_> = (0..8).map(|_| bulkhead.try_enter().unwrap()).collect();
    let batch = bulkhead.lane("batch").unwrap();
    let _batch = batch.try_enter().expect("batch's guaranteed slot");
    for _ in 0..10 {
        mock.increment(20 * MS);
        assert!(bulkhead.try_enter().is_err());
    }
    let expo = scrape(&registry);
    let snap = bulkhead.snapshot();
    assert_eq!(snap.limit, 2);
    assert_eq!(sample(&expo, "fusebox_bulkhead_limit", &b), 2.0);
    assert_eq!(sample(&expo, "fusebox_bulkhead_max_concurrent", &b), 8.0);
    assert_eq!(sample(&expo, "fusebox_bulkhead_in_use", &b), 9.0);
    let adaptive = snap.adaptive.unwrap();
    assert_eq!(
        sample(&expo, "fusebox_bulkhead_window_latency_seconds", &b),
        adaptive.latency.unwrap().as_secs_f64()
    );
    assert_eq!(
        sample(&expo, "fusebox_bulkhead_baseline_latency_seconds", &b),
        adaptive.baseline.unwrap().as_secs_f64()
    );
    for (lane, in_use, guaranteed, refusals) in [("intraday", 8, 2, 10), ("batch", 1, 0, 0)] {
        let l = [b[0], ("lane", lane)];
        assert_eq!(
            sample(&expo, "fusebox_bulkhead_lane_in_use", &l),
            in_use as f64
        );
        assert_eq!(
            sample(&expo, "fusebox_bulkhead_lane_guaranteed", &l),
            guaranteed as f64
        );
        assert_eq!(
            sample(&expo, "fusebox_bulkhead_lane_refusals", &l),
            refusals as f64
        );
    }
    drop(stuck);
}

#[cfg(feature = "isolation")]
#[test]
fn bulkheads_and_dead_letter_buffers_in_the_registry_are_scraped() {
    use fusebox::isolation::{Bulkhead, DeadLetters};

    let (registry, _mock) = registry();
    let bulkhead = Bulkhead::builder("vendor-pool")
        .max_concurrent(2)
        .build()
        .unwrap();
    registry.register_bulkhead(bulkhead.clone()).unwrap();
    assert!(registry.register_bulkhead(bulkhead.clone()).is_err());
    let held = bulkhead.try_enter().unwrap();
    let _second = bulkhead.try_enter().unwrap();
    assert!(bulkhead.try_enter().is_err());
    drop(held);

    let letters = Arc::new(
        DeadLetters::builder("fills")
            .capacity(2)
            .priorities(2)
            .build::<u32>()
            .unwrap(),
    );
    registry
        .register_dead_letters(Arc::clone(&letters))
        .unwrap();
    letters.push(0, 1).unwrap();
    letters.push(1, 2).unwrap();
    letters.push(1, 3).unwrap(); // sheds the priority-0 emit

    let expo = scrape(&registry);
    let b = [("bulkhead", "vendor-pool")];
    let snap = &registry.bulkhead_snapshots()[0];
    assert_eq!(
        sample(&expo, "fusebox_bulkhead_in_use", &b),
        snap.in_use as f64
    );
    assert_eq!(sample(&expo, "fusebox_bulkhead_in_use", &b), 1.0);
    assert_eq!(sample(&expo, "fusebox_bulkhead_peak", &b), 2.0);
    assert_eq!(sample(&expo, "fusebox_bulkhead_max_concurrent", &b), 2.0);
    assert_eq!(sample(&expo, "fusebox_bulkhead_refusals", &b), 1.0);

    let d = registry.dead_letter_snapshots();
    assert_eq!(d.len(), 1);
    assert_eq!(
        sample(
            &expo,
            "fusebox_dead_letter_capacity",
            &[("buffer", "fills")]
        ),
        2.0
    );
    for p in &d[0].priorities {
        let priority = p.priority.to_string();
        let l = [("buffer", "fills"), ("priority", priority.as_str())];
        assert_eq!(
            sample(&expo, "fusebox_dead_letter_depth", &l),
            p.depth as f64
        );
        for (fate, n) in [
            ("stored", p.stored),
            ("shed", p.shed),
            ("refused", p.refused),
            ("replayed", p.replayed),
        ] {
            let with = [l[0], l[1], ("fate", fate)];
            assert_eq!(
                sample(&expo, "fusebox_dead_letter_emits", &with),
                n as f64,
                "{with:?}"
            );
        }
    }
    let shed = [("buffer", "fills"), ("priority", "0"), ("fate", "shed")];
    assert_eq!(sample(&expo, "fusebox_dead_letter_emits", &shed), 1.0);
}

#[test]
fn the_state_gauge_is_the_snapshots_status_gauge_inside_a_maintenance_window_too() {
    let (registry, _mock) = registry();
    let news = registry.breaker("news", "vendor").unwrap();
    let labels = [("breaker", "news"), ("call_path", "alt_data")];
    for _ in 0..2 {
        let _ = news.call(|| Err::<(), _>(Outage));
    }
    assert_eq!(news.state(), State::Open);
    assert_eq!(
        sample(&scrape(&registry), "fusebox_breaker_state", &labels),
        1.0
    );
    news.declare_maintenance(None, WindowEnd::After(3_600 * SEC), "carol", "migration")
        .unwrap();
    let snap = news.snapshot();
    assert_eq!((snap.state, snap.status_gauge()), (State::Open, 5));
    let expo = scrape(&registry);
    assert_eq!(sample(&expo, "fusebox_breaker_state", &labels), 5.0);
    assert_eq!(
        sample(&expo, "fusebox_breaker_in_maintenance", &labels),
        1.0
    );
    // The state set still tells the state under the window.
    let open = [labels[0], labels[1], ("state", "open")];
    assert_eq!(sample(&expo, "fusebox_breaker_in_state", &open), 1.0);
    check_breaker(&expo, &snap, "alt_data", false);
}

#[cfg(feature = "isolation")]
#[test]
fn a_registered_deadline_pool_shows_its_calls_in_flight_and_abandoned() {
    use fusebox::isolation::{DeadlinePool, Isolated, IsolationError};
    use std::time::{Duration, Instant};

    let (registry, _mock) = registry();
    let breaker = registry.breaker("sdk", "vendor").unwrap();
    // A real pool on real time: the deadline only bounds a hang.
    let pool = DeadlinePool::builder("vendor-sdk")
        .threads(2)
        .deadline(Duration::from_millis(200))
        .build()
        .unwrap();
    registry.register_deadline_pool(&pool).unwrap();
    assert!(registry.register_deadline_pool(&pool).is_err());
    let (release, hold) = crossbeam_channel::bounded::<()>(0);
    let hung = Isolated::new(breaker)
        .with_deadline_pool(pool.clone())
        .call(move || {
            let _ = hold.recv();
            Ok::<(), DepError>(())
        });
    assert!(matches!(hung, Err(IsolationError::TimedOut(_))));

    let p = [("pool", "vendor-sdk")];
    let expo = scrape(&registry);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_threads", &p), 2.0);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_in_flight", &p), 1.0);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_abandoned", &p), 1.0);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_timed_out", &p), 1.0);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_refusals", &p), 0.0);

    // The abandoned call returns: it no longer holds a thread.
    drop(release);
    let start = Instant::now();
    while registry.deadline_pool_snapshots()[0].abandoned != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the abandoned call returned"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let expo = scrape(&registry);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_abandoned", &p), 0.0);
    assert_eq!(sample(&expo, "fusebox_deadline_pool_timed_out", &p), 1.0);
    // Dropping the pool is not kept from ending its threads by the registry.
    drop(pool);
    assert_eq!(registry.deadline_pool_snapshots().len(), 1);
}

#[test]
fn a_breaker_that_tracks_its_calls_in_flight_shows_them_and_those_stuck() {
    let (builder, mock) = quiet("pricing");
    let breaker = builder
        .slow_call_duration(50 * MS)
        .stuck_call_threshold(6)
        .build()
        .unwrap();
    let (plain, _) = quiet("plain");
    let registry = Registry::new();
    registry.register(breaker.clone()).unwrap();
    registry
        .register(plain.consecutive_failure_threshold(3).build().unwrap())
        .unwrap();

    let early = [
        breaker.try_acquire_owned().unwrap(),
        breaker.try_acquire_owned().unwrap(),
    ];
    mock.increment(40 * MS);
    let late = breaker.try_acquire_owned().unwrap();
    mock.increment(20 * MS);
    let s = breaker.snapshot();
    assert_eq!((s.calls_in_flight, s.calls_stuck), (Some(3), Some(2)));
    let expo = scrape(&registry);
    let l = [("breaker", "pricing"), ("call_path", "reference_data")];
    assert_eq!(sample(&expo, "fusebox_breaker_calls_in_flight", &l), 3.0);
    assert_eq!(sample(&expo, "fusebox_breaker_calls_stuck", &l), 2.0);
    // A breaker that does not track them writes neither series.
    for family in [
        "fusebox_breaker_calls_in_flight",
        "fusebox_breaker_calls_stuck",
    ] {
        let samples = expo.families[family].iter_samples().count();
        assert_eq!(samples, 1, "{family}: only the tracking breaker");
    }
    let plain = registry.get("plain").unwrap().snapshot();
    assert_eq!((plain.calls_in_flight, plain.calls_stuck), (None, None));

    drop(early);
    late.finish(&Ok::<u32, DepError>(1));
    let s = breaker.snapshot();
    assert_eq!((s.calls_in_flight, s.calls_stuck), (Some(0), Some(0)));
}

/// Every `_total` series of one scrape, by its name and labels.
fn totals(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let name = series.split('{').next()?;
            name.ends_with("_total")
                .then(|| (series.to_owned(), value.parse().expect("a number")))
        })
        .collect()
}

#[test]
fn every_total_stays_monotonic_for_scrapers_racing_a_live_breaker() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;

    // The real clock: the race is between clock reads on different threads.
    // Each call's outcome trips the breaker or closes it, and a 20 µs open
    // period lapses between calls, so that state changes keep coming.
    let registry = Registry::new();
    let config = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::failures_of::<Outage>())
        .consecutive_failure_threshold(1)
        .open_duration(std::time::Duration::from_micros(20))
        .backoff_multiplier(1.0)
        .jitter(0.0)
        .build()
        .unwrap();
    registry.add_template("vendor", config).unwrap();
    let breaker = registry.breaker("live", "vendor").unwrap();
    let stop = AtomicBool::new(false);
    let decreases = thread::scope(|s| {
        let callers: Vec<_> = (0..3)
            .map(|_| {
                let (breaker, stop) = (&breaker, &stop);
                s.spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let _ = if i % 2 == 0 {
                            fail(breaker)
                        } else {
                            succeed(breaker)
                        };
                        i += 1;
                    }
                })
            })
            .collect();
        let scrapers: Vec<_> = (0..2)
            .map(|_| {
                let registry = &registry;
                s.spawn(move || {
                    let mut last = std::collections::HashMap::<String, f64>::new();
                    let mut decreases = Vec::new();
                    for _ in 0..5_000 {
                        for (series, value) in totals(&fusebox::prometheus::encode(registry)) {
                            match last.insert(series.clone(), value) {
                                Some(before) if value < before => {
                                    decreases.push(format!("{series}: {before} -> {value}"));
                                }
                                _ => {}
                            }
                        }
                    }
                    assert!(last.len() > 10, "the _total series: {last:?}");
                    decreases
                })
            })
            .collect();
        let scraped: Vec<_> = scrapers.into_iter().map(|s| s.join()).collect();
        // The callers stop before a scraper's panic is passed on.
        stop.store(true, Ordering::Relaxed);
        callers.into_iter().for_each(|c| c.join().unwrap());
        scraped
            .into_iter()
            .flat_map(|s| s.unwrap())
            .collect::<Vec<String>>()
    });
    let snap = breaker.snapshot();
    assert!(
        snap.trips > 100,
        "the breaker kept changing state: {snap:?}"
    );
    assert!(
        decreases.is_empty(),
        "{} decreases: {:?}",
        decreases.len(),
        &decreases[..decreases.len().min(10)]
    );
}

#[test]
fn a_stuck_probe_is_scraped_under_an_outcome_of_its_own() {
    let (builder, mock) = quiet("pricing");
    let breaker = builder
        .slow_call_duration(50 * MS)
        .stuck_call_threshold(1)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    let registry = Registry::new();
    registry.register(breaker.clone()).unwrap();
    let stuck = breaker.try_acquire_owned().unwrap();
    mock.increment(51 * MS);
    refused(succeed(&breaker));
    drop(stuck);
    // The probe goes out at the end of the open period and hangs past its
    // slow mark, 50 ms, far short of max_probe_duration: the next call
    // re-opens the breaker.
    mock.increment(10 * SEC);
    let probe = breaker.try_acquire_owned().unwrap();
    mock.increment(51 * MS);
    refused(succeed(&breaker));
    drop(probe);
    let snap = breaker.snapshot();
    assert_eq!((snap.probes.stuck, snap.probes.expired), (1, 0));
    let expo = scrape(&registry);
    let l = [("breaker", "pricing"), ("call_path", "reference_data")];
    let outcome = |o: &'static str| [l[0], l[1], ("outcome", o)];
    assert_eq!(
        sample(&expo, "fusebox_breaker_probes", &outcome("stuck")),
        1.0
    );
    assert_eq!(
        sample(&expo, "fusebox_breaker_probes", &outcome("expired")),
        0.0
    );
    check_breaker(&expo, &snap, "reference_data", false);
}

#[test]
fn the_state_gauge_reads_open_for_a_breaker_whose_calls_are_stuck_with_no_call_made() {
    let (builder, mock) = quiet("pricing");
    let breaker = builder
        .slow_call_duration(50 * MS)
        .stuck_call_threshold(2)
        .build()
        .unwrap();
    let registry = Registry::new();
    registry.register(breaker.clone()).unwrap();
    let held = [
        breaker.try_acquire_owned().unwrap(),
        breaker.try_acquire_owned().unwrap(),
    ];
    mock.increment(60 * MS);
    // Nobody calls: the scrape alone reads what the next call would meet.
    let expo = scrape(&registry);
    let l = [("breaker", "pricing"), ("call_path", "reference_data")];
    assert_eq!(sample(&expo, "fusebox_breaker_state", &l), 1.0, "open");
    assert_eq!(sample(&expo, "fusebox_breaker_trips", &l), 1.0);
    let open = [l[0], l[1], ("state", "open")];
    assert_eq!(sample(&expo, "fusebox_breaker_in_state", &open), 1.0);
    assert_eq!(breaker.state(), State::Open);
    drop(held);
}
