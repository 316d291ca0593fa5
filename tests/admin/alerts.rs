//! The alerting rules and the dashboard in `ops/`, tested with the real
//! tools: `promtool check rules` and `promtool test rules` on the shipped
//! files, every dashboard query parsed by promtool and naming only metrics
//! fusebox exports, and a real Prometheus that scrapes the admin endpoint on
//! loopback, sees a critical breaker trip, and fires the alert; and the same
//! against the ops example's own process (`examples/ops.rs`), whose critical
//! breaker an operator holds open through the admin endpoint.
#![cfg(all(feature = "admin", feature = "isolation"))]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fusebox::admin::{Admin, AdminConfig};
use fusebox::isolation::{AdaptiveLimit, Bulkhead, DeadLetters, DeadlinePool};
use fusebox::registry::{Override, Registry};
use fusebox::{BreakerConfig, CallPath, Classifier, LatencyTrip, State};

use crate::support::breaker::*;
use crate::support::example;
use crate::support::prometheus_server::{promtool, temp_dir, tools_or_skip, PrometheusServer};

fn ops(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ops").join(file)
}

fn rules_text() -> String {
    std::fs::read_to_string(ops("prometheus/fusebox-alerts.yml")).expect("the rules file")
}

/// Runs promtool and fails with its output unless it succeeds.
#[track_caller]
fn promtool_passes(dir: &Path, args: &[&str]) -> String {
    let out = promtool(dir, args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn the_shipped_rules_pass_promtool_check_and_their_unit_tests() {
    if !tools_or_skip("the_shipped_rules_pass_promtool_check_and_their_unit_tests") {
        return;
    }
    let dir = ops("prometheus");
    let checked = promtool_passes(&dir, &["check", "rules", "fusebox-alerts.yml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool_passes(&dir, &["test", "rules", "fusebox-alerts.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn every_alert_has_a_unit_test_that_sees_it_fire_and_not_fire() {
    let rules = rules_text();
    let tests = std::fs::read_to_string(ops("prometheus/fusebox-alerts.test.yml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert_eq!(alerts.len(), 8, "{alerts:?}");
    for alert in alerts {
        // Each test case of an alert has an empty expectation (not firing)
        // and one with labels (firing).
        let cases: Vec<&str> = tests
            .split("- eval_time:")
            .skip(1)
            .filter(|case| case.contains(&format!("alertname: {alert}\n")))
            .collect();
        assert!(
            cases.iter().any(|c| c.contains("exp_alerts: []")),
            "{alert} has no test where it does not fire"
        );
        assert!(
            cases.iter().any(|c| c.contains("exp_labels:")),
            "{alert} has no test where it fires"
        );
    }
}

/// Every metric name fusebox exports, as Prometheus stores it (`_total`
/// on counters; `_bucket`, `_sum` and `_count` on histograms), read from a
/// scrape of a registry holding one of everything; the fleet's, which need
/// Redis, from the rustdoc table of `src/prometheus/mod.rs`.
fn exported_names() -> BTreeSet<String> {
    let (clock, mock) = quanta::Clock::mock();
    let registry = Registry::new();
    let timed = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::failures_of::<Outage>())
        .slow_call_duration(SEC)
        .latency_trip(
            LatencyTrip::new()
                .window(SEC)
                .minimum_samples(1)
                .threshold(SEC),
        )
        // Its calls in flight tracked, for their gauges.
        .stuck_call_threshold(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    registry.add_template("timed", timed).unwrap();
    let b = registry.breaker("news", "timed").unwrap();
    succeed(&b).unwrap();
    mock.increment(2 * SEC);
    succeed(&b).unwrap();
    registry
        .force_open(
            "news",
            &Override::new("ops", "drill").expires_after(60 * SEC),
        )
        .unwrap();
    registry
        .register_bulkhead(Bulkhead::builder("pool").max_concurrent(1).build().unwrap())
        .unwrap();
    // An adaptive one with lanes, with a window judged.
    let adaptive = Bulkhead::builder("pricing")
        .max_concurrent(4)
        .adaptive(AdaptiveLimit::new().min_samples(1))
        .lane("intraday", 0.5)
        .lane("batch", 0.5)
        .shed_last("intraday")
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..2 {
        let slot = adaptive.try_enter().unwrap();
        mock.increment(SEC);
        drop(slot);
    }
    registry.register_bulkhead(adaptive).unwrap();
    let letters = DeadLetters::builder("fills")
        .capacity(4)
        .build::<u32>()
        .unwrap();
    registry.register_dead_letters(Arc::new(letters)).unwrap();
    let pool = DeadlinePool::builder("sdk")
        .threads(1)
        .deadline(SEC)
        .build()
        .unwrap();
    registry.register_deadline_pool(&pool).unwrap();

    let text = fusebox::prometheus::encode(&registry);
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        match kind {
            "counter" => names.insert(format!("{name}_total")),
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
                true
            }
            _ => names.insert(name.to_owned()),
        };
    }
    let rustdoc = include_str!("../../src/prometheus/mod.rs");
    for line in rustdoc.lines() {
        if let Some(rest) = line.strip_prefix("//! | `fusebox_fleet_") {
            let name = rest.split(['`', '{']).next().unwrap();
            names.insert(format!("fusebox_fleet_{name}"));
        }
    }
    assert!(names.contains("fusebox_breaker_call_duration_seconds_bucket"));
    assert!(names.contains("fusebox_deadline_pool_in_flight"));
    assert!(names.contains("fusebox_bulkhead_window_latency_seconds"));
    assert!(names.contains("fusebox_bulkhead_lane_refusals_total"));
    assert!(names.contains("fusebox_fleet_connected"));
    names
}

/// The metric names a PromQL expression reads (recording rules' names,
/// with a colon, are not fusebox's metrics and are left out).
fn names_in(expr: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("fusebox_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let preceded_by_colon = rest[..at].ends_with(':');
        if !preceded_by_colon {
            found.push(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    found
}

#[test]
fn the_rules_name_only_metrics_fusebox_exports() {
    let exported = exported_names();
    let rules = rules_text();
    let mut read = 0;
    for line in rules.lines() {
        let line = line.trim_start();
        if line.starts_with('#') || line.starts_with("description") || line.starts_with("summary") {
            continue;
        }
        for name in names_in(line) {
            read += 1;
            assert!(
                exported.contains(&name),
                "the rules read {name}, which fusebox does not export"
            );
        }
    }
    assert!(read >= 10, "the rules read {read} metrics");
}

#[test]
fn every_dashboard_query_parses_and_names_only_exported_metrics() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ops("grafana/fusebox-dashboard.json")).expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut exprs = Vec::new();
    for panel in panels {
        let title = panel["title"].as_str().expect("a title");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title} has no query");
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: no expr"));
            exprs.push((title.to_owned(), expr.to_owned()));
        }
    }
    // The panels the docs promise.
    for wanted in [
        "Breaker state",
        "Fallbacks per second",
        "Probe outcomes (last hour)",
        "Time in state (last 24 hours)",
        "Call duration, 50th and 99th percentiles",
    ] {
        assert!(
            panels.iter().any(|p| p["title"] == wanted),
            "no panel {wanted}"
        );
    }
    let exported = exported_names();
    for (title, expr) in &exprs {
        let names = names_in(expr);
        assert!(!names.is_empty(), "{title}: {expr} reads no fusebox metric");
        for name in names {
            assert!(exported.contains(&name), "{title}: {name} is not exported");
        }
    }
    if !tools_or_skip("every_dashboard_query_parses_and_names_only_exported_metrics") {
        return;
    }
    // Each query as a recording rule: `promtool check rules` parses it.
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in exprs.iter().enumerate() {
        let quoted = serde_json::to_string(expr).unwrap();
        file.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {quoted}\n"
        ));
    }
    let dir = temp_dir("dashboard");
    std::fs::write(dir.join("queries.yml"), &file).unwrap();
    let out = promtool(&dir, &["check", "rules", "queries.yml"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "a dashboard query does not parse:\n{}{}\n{file}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The shipped rules with every `for:` cut to zero, so that the test sees
/// an alert fire without waiting its minutes out; the unit tests hold the
/// durations.
fn rules_without_delays() -> String {
    rules_text()
        .lines()
        .map(|l| match l.trim_start().strip_prefix("for: ") {
            Some(_) => format!("{}for: 0s", &l[..l.len() - l.trim_start().len()]),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_real_prometheus_scrapes_the_admin_endpoint_and_fires_on_a_critical_breaker() {
    if !tools_or_skip(
        "a_real_prometheus_scrapes_the_admin_endpoint_and_fires_on_a_critical_breaker",
    ) {
        return;
    }
    // Real time: Prometheus scrapes on its own clock. The breaker stays
    // open for an hour, far past the test.
    let registry = Registry::new();
    let vendor = BreakerConfig::builder()
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::failures_of::<Outage>())
        .consecutive_failure_threshold(2)
        .open_duration(Duration::from_secs(3_600))
        .max_open_duration(Duration::from_secs(3_600))
        .build()
        .unwrap();
    registry.add_template("vendor", vendor).unwrap();
    let instruments = registry.breaker("instruments", "vendor").unwrap();
    let news = registry.breaker("news", "vendor").unwrap();
    registry.set_critical("instruments", true).unwrap();
    let admin = Admin::start(
        &registry,
        AdminConfig::new("prometheus-test-token-0123").bind("127.0.0.1:0".parse().unwrap()),
    )
    .unwrap();
    let prom = PrometheusServer::start(admin.addr(), &rules_without_delays());

    let state = r#"fusebox_breaker_state{breaker="instruments",job="fusebox"}"#;
    prom.wait_for("the first scrape", |p| p.value(state) == Some(0.0));
    assert_eq!(
        prom.value(r#"up{job="fusebox"}"#),
        Some(1.0),
        "the target is up"
    );
    // Not firing while closed (the rules have been evaluated on a scrape).
    prom.wait_for("a rule evaluation", |p| {
        p.value(r#"fusebox:breaker_fallbacks:rate1m{breaker="instruments"}"#)
            .is_some()
            || p.query(r#"fusebox:breaker_open_seconds:increase1h{breaker="instruments"}"#)
                .len()
                == 1
    });
    let not_closed = |p: &PrometheusServer, breaker: &str| {
        p.alerts().into_iter().any(|a| {
            a["labels"]["alertname"] == "FuseboxCriticalBreakerNotClosed"
                && a["labels"]["breaker"] == breaker
                && a["state"] == "firing"
        })
    };
    assert!(!not_closed(&prom, "instruments"));

    // Both breakers trip; only the critical one pages.
    trip(&instruments, 2);
    trip(&news, 2);
    refused(succeed(&instruments));
    prom.wait_for("the open state", |p| p.value(state) == Some(1.0));
    assert_eq!(
        prom.value(r#"fusebox_breaker_trips_total{breaker="instruments"}"#),
        Some(1.0)
    );
    prom.wait_for("the alert to fire", |p| not_closed(p, "instruments"));
    assert!(!not_closed(&prom, "news"), "news is not critical");
    let firing = prom
        .alerts()
        .into_iter()
        .find(|a| a["labels"]["alertname"] == "FuseboxCriticalBreakerNotClosed")
        .unwrap();
    assert_eq!(firing["labels"]["severity"], "page");
    assert_eq!(firing["labels"]["call_path"], "reference_data");

    // Reset: the alert resolves.
    registry
        .reset("instruments", &Override::new("alice", "vendor back"))
        .unwrap();
    assert_eq!(instruments.state(), State::Closed);
    prom.wait_for("the alert to resolve", |p| !not_closed(p, "instruments"));
    prom.wait_for("closed again", |p| p.value(state) == Some(0.0));
    drop(prom);
    admin.stop();
}

/// The ops example's own process (`examples/ops.rs`, killed when dropped),
/// built by the cargo that runs this test, with this test's features.
struct OpsExample(std::process::Child);

impl OpsExample {
    /// Starts it with the admin `token`; returns it and its admin address.
    fn start(token: &str) -> (OpsExample, std::net::SocketAddr) {
        use std::io::{BufRead, BufReader};
        let ops = example::build("ops", &["admin", "serde"]);
        let mut child = std::process::Command::new(&ops)
            .arg("forever")
            .env("FUSEBOX_ADMIN_TOKEN", token)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the ops example starts");
        let stdout = child.stdout.take().expect("its stdout");
        let example = OpsExample(child);
        // Its first line names the admin endpoint. The rest of its output is
        // read to its end, so that its prints never meet a closed pipe.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("admin endpoint on http://") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the ops example names its admin endpoint");
        (example, url.parse().expect("an address"))
    }
}

impl Drop for OpsExample {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `POST path` with a bearer token and a JSON body on the admin endpoint:
/// the status line's code.
fn admin_post(addr: std::net::SocketAddr, path: &str, token: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).expect("the admin endpoint");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        conn,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

#[test]
fn a_real_prometheus_scrapes_the_ops_example_and_fires_while_an_operator_holds_its_critical_breaker_open(
) {
    if !tools_or_skip("a_real_prometheus_scrapes_the_ops_example") {
        return;
    }
    let token = "ops-example-test-token-0123";
    let (_example, addr) = OpsExample::start(token);
    let prom = PrometheusServer::start(addr, &rules_without_delays());

    // The example's breakers, as examples/ops.toml configures them.
    let state = r#"fusebox_breaker_state{breaker="instruments",job="fusebox"}"#;
    prom.wait_for("the first scrape", |p| p.value(state) == Some(0.0));
    assert_eq!(prom.value(r#"up{job="fusebox"}"#), Some(1.0));
    // Its `sentiment` vendor times out ten calls in a row out of every
    // fifty, so that breaker trips on its own, again and again.
    prom.wait_for("sentiment's trips", |p| {
        p.value(r#"fusebox_breaker_trips_total{breaker="sentiment"}"#)
            .is_some_and(|n| n >= 1.0)
    });
    let not_closed = |p: &PrometheusServer| {
        p.alerts().into_iter().any(|a| {
            a["labels"]["alertname"] == "FuseboxCriticalBreakerNotClosed"
                && a["labels"]["breaker"] == "instruments"
                && a["state"] == "firing"
        })
    };
    assert!(!not_closed(&prom), "instruments is closed");

    // An operator holds the critical breaker open: the page fires.
    let body = r#"{"actor":"alice","reason":"vendor maintenance"}"#;
    assert_eq!(
        admin_post(addr, "/breakers/instruments/force-open", token, body),
        200
    );
    prom.wait_for("the forced-open state", |p| {
        p.value(state).is_some_and(|v| v != 0.0)
    });
    prom.wait_for("the alert to fire", not_closed);
    let firing = prom
        .alerts()
        .into_iter()
        .find(|a| {
            a["labels"]["alertname"] == "FuseboxCriticalBreakerNotClosed"
                && a["labels"]["breaker"] == "instruments"
        })
        .unwrap();
    assert_eq!(firing["labels"]["severity"], "page");
    assert_eq!(firing["labels"]["call_path"], "reference_data");

    // The reset closes it; the alert resolves.
    assert_eq!(
        admin_post(addr, "/breakers/instruments/reset", token, body),
        200
    );
    prom.wait_for("closed again", |p| p.value(state) == Some(0.0));
    prom.wait_for("the alert to resolve", |p| !not_closed(p));
}
