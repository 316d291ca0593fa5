//! The admin endpoint, over real HTTP on loopback: every status it answers,
//! the access rules, and its behaviour under a slow client and a flood.
#![cfg(feature = "admin")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fusebox::admin::{Admin, AdminConfig, AdminError};
use fusebox::registry::Registry;
use fusebox::{BreakerConfig, CallPath, Classifier, State};
use serde_json::Value;

use crate::support::breaker::*;

const TOKEN: &str = "test-token-0123456789abcdef";

fn registry() -> Registry {
    let (clock, mock) = quanta::Clock::mock();
    mock.increment(1_000 * SEC);
    let registry = Registry::new();
    let vendor = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::failures_of::<Outage>())
        .consecutive_failure_threshold(2)
        .open_duration(10 * SEC)
        .jitter(0.0)
        .clock(clock)
        .build()
        .unwrap();
    registry.add_template("vendor", vendor).unwrap();
    registry.breaker("news", "vendor").unwrap();
    registry.breaker("fx", "vendor").unwrap();
    registry.set_critical("fx", true).unwrap();
    registry
}

fn config() -> AdminConfig {
    AdminConfig::new(TOKEN).bind("127.0.0.1:0".parse().unwrap())
}

fn start() -> (Registry, Admin) {
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    (registry, admin)
}

struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends `raw` as it is and reads the whole answer.
fn exchange(addr: SocketAddr, raw: &[u8]) -> Answer {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.write_all(raw).unwrap();
    let mut text = Vec::new();
    conn.read_to_end(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    Answer {
        status,
        headers: head.to_owned(),
        body: body.to_owned(),
    }
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
}

fn get_with(addr: SocketAddr, path: &str, token: &str) -> Answer {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
            .as_bytes(),
    )
}

fn post(addr: SocketAddr, path: &str, auth: Option<&str>, body: &str) -> Answer {
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    exchange(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

fn bearer() -> Option<&'static str> {
    Some("Bearer test-token-0123456789abcdef")
}

const BODY: &str = r#"{"actor": "alice", "reason": "vendor maintenance"}"#;

#[cfg(feature = "isolation")]
#[test]
fn bulkheads_are_served_with_their_limit_and_lanes() {
    use fusebox::isolation::{AdaptiveLimit, Bulkhead};

    let (registry, admin) = start();
    let addr = admin.addr();
    let pricing = Bulkhead::builder("pricing")
        .max_concurrent(16)
        .adaptive(AdaptiveLimit::new().floor(2))
        .lane("intraday", 0.8)
        .lane("batch", 0.2)
        .shed_last("intraday")
        .build()
        .unwrap();
    registry.register_bulkhead(pricing.clone()).unwrap();
    let batch = pricing.lane("batch").unwrap();
    let _slot = batch.try_enter().unwrap();

    let all = get(addr, "/bulkheads");
    assert_eq!(all.status, 200);
    assert_eq!(all.json().as_array().unwrap().len(), 1);
    let one = get(addr, "/bulkheads/pricing");
    assert_eq!(one.status, 200);
    let one = one.json();
    assert_eq!(one, all.json()[0]);
    assert_eq!(
        (one["limit"].as_u64(), one["in_use"].as_u64()),
        (Some(16), Some(1))
    );
    assert_eq!(one["adaptive"]["floor"], 2);
    assert_eq!(one["adaptive"]["latency_seconds"], Value::Null);
    assert_eq!(
        one["lanes"],
        serde_json::json!([
            {"name": "intraday", "share": 0.8, "shed_last": true, "guaranteed": 13,
             "in_use": 0, "refusals": 0},
            {"name": "batch", "share": 0.2, "shed_last": false, "guaranteed": 3,
             "in_use": 1, "refusals": 0},
        ])
    );
    assert_eq!(get(addr, "/bulkheads/nope").status, 404);
    assert_eq!(post(addr, "/bulkheads", bearer(), BODY).status, 405);
}

#[test]
fn reads_answer_with_metrics_snapshots_health_and_audit() {
    let (registry, admin) = start();
    let addr = admin.addr();
    trip(&registry.get("news").unwrap(), 2);

    let metrics = get(addr, "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(metrics.headers.contains("application/openmetrics-text"));
    assert!(metrics
        .body
        .contains(r#"fusebox_breaker_state{breaker="news",call_path="alt_data"} 1"#));
    assert!(metrics.body.ends_with("# EOF\n"));

    let all = get(addr, "/breakers");
    assert_eq!(all.status, 200);
    let names: Vec<String> = all
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["fx", "news"]);

    let news = get(addr, "/breakers/news");
    assert_eq!(news.status, 200);
    let news = news.json();
    assert_eq!(news["state"], "open");
    assert_eq!(news["totals"]["failures"], 2);
    assert_eq!(news["retry_after_seconds"], 10.0);
    assert_eq!(news["critical"], false);

    assert_eq!(get(addr, "/breakers/nope").status, 404);
    assert_eq!(get(addr, "/nope").status, 404);

    let health = get(addr, "/health");
    assert_eq!(health.status, 200, "news is open but not critical");
    assert_eq!(health.json()["status"], "ready");

    let audit = get(addr, "/audit");
    assert_eq!(audit.status, 200);
    assert_eq!(audit.json(), serde_json::json!([]));
}

#[test]
fn a_critical_breaker_whose_call_is_hung_is_served_open_and_unready_with_no_call_made() {
    let (clock, mock) = quanta::Clock::mock();
    mock.increment(1_000 * SEC);
    let registry = Registry::new();
    let settlement = BreakerConfig::builder()
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::failures_of::<Outage>())
        .hung_call_duration(5 * SEC)
        .open_duration(10 * SEC)
        .jitter(0.0)
        .clock(clock)
        .build()
        .unwrap();
    registry.add_template("settlement", settlement).unwrap();
    let breaker = registry.breaker("settlement", "settlement").unwrap();
    registry.set_critical("settlement", true).unwrap();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    let hung = breaker.try_acquire_owned().unwrap();
    mock.increment(6 * SEC);
    // Nobody calls the vendor: each read sees what the next call would.
    let shown = get(addr, "/breakers/settlement").json();
    assert_eq!(shown["state"], "open");
    assert_eq!(shown["trips"], 1);
    assert_eq!(shown["calls_stuck"], 1);
    assert_eq!(shown["retry_after_seconds"], 10.0);
    assert_eq!(
        shown["last_transition"]["reason"],
        "1 call in flight for over 5s"
    );
    let health = get(addr, "/health");
    assert_eq!(health.status, 503);
    assert!(
        get(addr, "/metrics").body.contains(
            r#"fusebox_breaker_state{breaker="settlement",call_path="reference_data"} 1"#
        ),
        "the gauge reads open"
    );
    drop(hung);
}

#[test]
fn health_is_503_while_a_critical_breaker_refuses_calls() {
    let (registry, admin) = start();
    trip(&registry.get("fx").unwrap(), 2);
    let health = get(admin.addr(), "/health");
    assert_eq!(health.status, 503);
    let fx = serde_json::json!({"state": "open", "ready": false});
    assert_eq!(
        health.json(),
        serde_json::json!({
            "status": "unready",
            "refusing": ["fx"],
            "liveness": {"status": "up"},
            "readiness": {"status": "unready", "breakers": {"fx": fx}},
        })
    );
    // Spring's split: the process is alive, and not ready.
    let live = get(admin.addr(), "/health/liveness");
    assert_eq!(
        (live.status, live.json()),
        (200, serde_json::json!({"status": "up"}))
    );
    let ready = get(admin.addr(), "/health/readiness");
    assert_eq!(
        (ready.status, ready.json()),
        (
            503,
            serde_json::json!({"status": "unready", "breakers": {"fx": fx}})
        )
    );
    // Forced closed admits every call: ready again. news, open, has no say.
    trip(&registry.get("news").unwrap(), 2);
    registry
        .force_closed("fx", &fusebox::registry::Override::new("ops", "known good"))
        .unwrap();
    let ready = get(admin.addr(), "/health/readiness");
    assert_eq!(
        (ready.status, ready.json()),
        (
            200,
            serde_json::json!({"status": "ready", "breakers": {
                "fx": {"state": "forced_closed", "ready": true}
            }})
        )
    );
    assert_eq!(get(admin.addr(), "/health").json()["status"], "ready");
    assert!(get(admin.addr(), "/health")
        .json()
        .get("refusing")
        .is_none());
    assert_eq!(
        post(admin.addr(), "/health/liveness", bearer(), BODY).status,
        405
    );
}

#[test]
fn an_authorized_override_is_applied_audited_and_shown() {
    let (registry, admin) = start();
    let addr = admin.addr();
    let answer = post(addr, "/breakers/news/force-open", bearer(), BODY);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let record = answer.json();
    assert_eq!(record["action"], "force-open");
    assert_eq!(record["actor"], "alice");
    assert_eq!(record["seq"], 1);
    assert!(record["wall_time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(registry.get("news").unwrap().state(), State::ForcedOpen);

    let shown = get(addr, "/breakers/news").json();
    assert_eq!(shown["state"], "forced_open");
    assert_eq!(shown["override"]["actor"], "alice");
    assert_eq!(shown["override"]["reason"], "vendor maintenance");
    assert_eq!(shown["override"]["since_seconds_ago"], 0.0);

    let answer = post(
        addr,
        "/breakers/news/reset",
        bearer(),
        r#"{"actor": "bob", "reason": "vendor back"}"#,
    );
    assert_eq!(answer.status, 200);
    assert_eq!(registry.get("news").unwrap().state(), State::Closed);
    let shown = get(addr, "/breakers/news").json();
    assert_eq!(shown["override"], Value::Null);
    let audit = get(addr, "/audit").json();
    let actions: Vec<(&str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["action"].as_str().unwrap(), r["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(actions, [("force-open", "alice"), ("reset", "bob")]);
}

#[test]
fn force_closed_with_an_expiry_is_applied_and_shows_until_when() {
    let (registry, admin) = start();
    let addr = admin.addr();
    let answer = post(
        addr,
        "/breakers/news/force-closed",
        bearer(),
        r#"{"actor": "alice", "reason": "status page green", "expires_after": "30m"}"#,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["action"], "force-closed");
    assert_eq!(answer.json()["expires_after_seconds"], 1800.0);
    assert_eq!(registry.get("news").unwrap().state(), State::ForcedClosed);
    let shown = get(addr, "/breakers/news").json();
    assert_eq!(shown["state"], "forced_closed");
    assert_eq!(shown["override"]["actor"], "alice");
    assert_eq!(shown["override"]["expires_in_seconds"], 1800.0);
    // A critical breaker forced closed admits every call: ready.
    registry.get("fx").unwrap().force_closed("bob", "x");
    assert_eq!(get(addr, "/health").status, 200);
}

#[test]
fn a_bad_expiry_gets_400_and_changes_nothing() {
    let (registry, admin) = start();
    for body in [
        r#"{"actor": "a", "reason": "r", "expires_after": "30"}"#,
        r#"{"actor": "a", "reason": "r", "expires_after": "soon"}"#,
        r#"{"actor": "a", "reason": "r", "expires_after": "0s"}"#,
        r#"{"actor": "a", "reason": "r", "expires_after": 30}"#,
    ] {
        let answer = post(admin.addr(), "/breakers/news/force-open", bearer(), body);
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
    }
    let answer = post(
        admin.addr(),
        "/breakers/news/reset",
        bearer(),
        r#"{"actor": "a", "reason": "r", "expires_after": "1m"}"#,
    );
    assert_eq!(answer.status, 400);
    unchanged(&registry);
}

#[test]
fn an_expiry_is_read_in_the_crates_one_duration_grammar() {
    for (text, seconds) in [
        ("1h 30m", 5_400.0),
        ("1m30s", 90.0),
        ("PT30M", 1_800.0),
        ("4.1s", 4.1),
    ] {
        let (_registry, admin) = start();
        let body = format!(r#"{{"actor": "a", "reason": "r", "expires_after": "{text}"}}"#);
        let answer = post(admin.addr(), "/breakers/news/force-open", bearer(), &body);
        assert_eq!(answer.status, 200, "{text}: {}", answer.body);
        assert_eq!(answer.json()["expires_after_seconds"], seconds, "{text}");
    }
    let (registry, admin) = start();
    let answer = post(
        admin.addr(),
        "/breakers/news/force-open",
        bearer(),
        r#"{"actor": "a", "reason": "r", "expires_after": "-5s"}"#,
    );
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"],
        "`expires_after`: `-5s`: durations cannot be negative"
    );
    unchanged(&registry);
}

/// Asserts that nothing changed: news still closed, no audit record.
fn unchanged(registry: &Registry) {
    assert_eq!(registry.get("news").unwrap().state(), State::Closed);
    assert!(registry.audit().is_empty());
}

#[test]
fn a_missing_or_wrong_token_gets_401_and_changes_nothing() {
    let (registry, admin) = start();
    let addr = admin.addr();
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789abcd"),
        Some("Bearer test-token-0123456789abcde"),
        Some("Bearer test-token-0123456789abcdef0"),
        Some("Basic test-token-0123456789abcdef"),
        Some("test-token-0123456789abcdef"),
    ] {
        let answer = post(addr, "/breakers/news/force-open", auth, BODY);
        assert_eq!(answer.status, 401, "{auth:?}");
        assert!(answer.headers.contains("WWW-Authenticate: Bearer"));
        // Unknown breakers too: a client without the token learns nothing.
        assert_eq!(post(addr, "/breakers/nope/reset", auth, BODY).status, 401);
    }
    unchanged(&registry);
}

#[test]
fn an_unknown_breaker_gets_404_and_changes_nothing() {
    let (registry, admin) = start();
    let answer = post(admin.addr(), "/breakers/newz/force-open", bearer(), BODY);
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json()["error"], "no such breaker");
    assert_eq!(
        post(admin.addr(), "/breakers/news/force-shut", bearer(), BODY).status,
        404
    );
    unchanged(&registry);
}

#[test]
fn a_malformed_body_gets_400_and_changes_nothing() {
    let (registry, admin) = start();
    let addr = admin.addr();
    for body in [
        "",
        "not json",
        r#"{"actor": "alice"}"#,
        r#"{"reason": "x"}"#,
        r#"{"actor": "  ", "reason": "x"}"#,
        r#"{"actor": "alice", "reason": ""}"#,
        r#"{"actor": "alice", "reason": "x", "extra": 1}"#,
        r#"{"actor": 7, "reason": "x"}"#,
    ] {
        let answer = post(addr, "/breakers/news/force-open", bearer(), body);
        assert_eq!(answer.status, 400, "{body:?}: {}", answer.body);
    }
    let long = format!(r#"{{"actor": "{}", "reason": "x"}}"#, "a".repeat(600));
    assert_eq!(
        post(addr, "/breakers/news/force-open", bearer(), &long).status,
        400
    );
    // A chunked body is refused rather than read without a length.
    let chunked = exchange(
        addr,
        b"POST /breakers/news/force-open HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token-0123456789abcdef\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    assert_eq!(chunked.status, 400);
    // Not HTTP at all.
    assert_eq!(
        exchange(addr, b"\x16\x03\x01\x02\x00\x01\x00\r\n\r\n").status,
        400
    );
    unchanged(&registry);
}

#[test]
fn an_oversized_body_gets_413_unread_and_changes_nothing() {
    let registry = registry();
    let admin = Admin::start(&registry, config().max_body(256)).unwrap();
    let addr = admin.addr();
    let big = format!(r#"{{"actor": "alice", "reason": "{}"}}"#, "x".repeat(300));
    assert_eq!(
        post(addr, "/breakers/news/force-open", bearer(), &big).status,
        413
    );
    // A length no server could hold, with no body behind it: refused from
    // the header alone.
    let huge = exchange(
        addr,
        b"POST /breakers/news/force-open HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token-0123456789abcdef\r\nContent-Length: 1000000000000000\r\n\r\n{\"actor\"",
    );
    assert_eq!(huge.status, 413);
    unchanged(&registry);
    // And the endpoint is still there.
    assert_eq!(get(addr, "/health").status, 200);
}

#[test]
fn an_oversized_head_gets_431() {
    let (registry, admin) = start();
    let long = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(9_000)
    );
    assert_eq!(exchange(admin.addr(), long.as_bytes()).status, 431);
    let many: String = (0..40).map(|i| format!("X-H{i}: v\r\n")).collect();
    let many = format!("GET /health HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    assert_eq!(exchange(admin.addr(), many.as_bytes()).status, 431);
    unchanged(&registry);
}

#[test]
fn a_wrong_method_gets_405() {
    let (registry, admin) = start();
    let addr = admin.addr();
    assert_eq!(get(addr, "/breakers/news/force-open").status, 405);
    assert_eq!(post(addr, "/metrics", bearer(), BODY).status, 405);
    assert_eq!(post(addr, "/breakers/news", bearer(), BODY).status, 405);
    unchanged(&registry);
}

#[test]
fn guarded_reads_need_the_token() {
    let registry = registry();
    let admin = Admin::start(&registry, config().guard_reads(true)).unwrap();
    let addr = admin.addr();
    for path in [
        "/metrics",
        "/breakers",
        "/breakers/news",
        "/health",
        "/audit",
    ] {
        assert_eq!(get(addr, path).status, 401, "{path}");
        assert_eq!(
            get_with(addr, path, "wrong-token-0123456789abcd").status,
            401,
            "{path}"
        );
        assert_eq!(get_with(addr, path, TOKEN).status, 200, "{path}");
    }
}

#[test]
fn it_never_starts_without_a_token_or_on_a_public_address_by_accident() {
    let registry = registry();
    for weak in ["", "   ", "short"] {
        assert!(matches!(
            Admin::start(
                &registry,
                AdminConfig::new(weak).bind("127.0.0.1:0".parse().unwrap())
            ),
            Err(AdminError::WeakToken { .. })
        ));
    }
    let public: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let err = Admin::start(&registry, config().bind(public)).unwrap_err();
    assert!(matches!(err, AdminError::NonLoopback { addr } if addr == public));
    assert!(err.to_string().contains("allow_non_loopback"));
    // Told explicitly, it binds.
    let admin = Admin::start(&registry, config().bind(public).allow_non_loopback()).unwrap();
    let port = admin.addr().port();
    assert_eq!(
        get(SocketAddr::from(([127, 0, 0, 1], port)), "/health").status,
        200
    );
    admin.stop();
    assert!(matches!(
        Admin::start(&registry, config().max_connections(0)),
        Err(AdminError::Invalid {
            field: "max_connections",
            ..
        })
    ));
    for timeout in [Duration::ZERO, Duration::MAX] {
        assert!(matches!(
            Admin::start(&registry, config().request_timeout(timeout)),
            Err(AdminError::Invalid {
                field: "request_timeout",
                ..
            })
        ));
    }
}

#[test]
fn stopping_releases_the_port() {
    let (_registry, admin) = start();
    let addr = admin.addr();
    assert_eq!(get(addr, "/health").status, 200);
    admin.stop();
    assert!(TcpStream::connect(addr).is_err());
}

/// A thread that calls `breaker` in a loop until told to stop, counting
/// calls: the trading thread of the slow-client and flood tests.
fn trading(
    registry: &Registry,
    stop: &Arc<AtomicBool>,
) -> (thread::JoinHandle<()>, Arc<AtomicU64>) {
    let breaker = registry.get("news").unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let (stop, count) = (Arc::clone(stop), Arc::clone(&calls));
    let handle = thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            succeed(&breaker).unwrap();
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    (handle, calls)
}

#[test]
fn slow_clients_are_cut_off_and_the_endpoint_keeps_answering() {
    let registry = registry();
    let admin = Admin::start(
        &registry,
        config().request_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let addr = admin.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (trader, calls) = trading(&registry, &stop);

    // Six slowloris clients: half a request head each, then silence.
    let slow: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /breakers HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    let before = calls.load(Ordering::Relaxed);
    // A real request still gets its answer.
    assert_eq!(get(addr, "/health").status, 200);
    // Every slow client was cut off without an answer.
    for mut s in slow {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty() || String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 503"));
    }
    stop.store(true, Ordering::Relaxed);
    trader.join().unwrap();
    assert!(
        calls.load(Ordering::Relaxed) > before,
        "the trading thread made progress"
    );
}

#[test]
fn a_connection_beyond_the_limit_is_answered_503_at_once() {
    let registry = registry();
    let admin = Admin::start(
        &registry,
        config()
            .max_connections(2)
            .request_timeout(Duration::from_secs(60)),
    )
    .unwrap();
    let addr = admin.addr();
    // Two stalled clients hold both places.
    let mut held = TcpStream::connect(addr).unwrap();
    held.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
    let mut queued = TcpStream::connect(addr).unwrap();
    queued.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
    // Until the accept thread has taken both (it is the server under test,
    // not a breaker), a request may still find a place: wait for the first
    // refusal.
    let until = Instant::now() + Duration::from_secs(60);
    while get(addr, "/health").status != 503 {
        assert!(Instant::now() < until, "never refused at the limit");
        thread::sleep(Duration::from_millis(20));
    }
    // The next ones are shed at once, long before the stalled ones time out,
    // and a shed client that never reads does not hold up the next.
    let _silent = TcpStream::connect(addr).unwrap();
    thread::sleep(Duration::from_millis(50));
    for _ in 0..3 {
        let answer = get(addr, "/health");
        assert_eq!(answer.status, 503);
        assert_eq!(answer.json()["error"], "the admin endpoint is busy");
    }
    drop((held, queued));
}

#[test]
fn a_flood_is_answered_or_shed_and_never_stops_the_trading_thread() {
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (trader, calls) = trading(&registry, &stop);
    let before = calls.load(Ordering::Relaxed);

    const CLIENTS: usize = 4;
    const EACH: usize = 500;
    let answered = Arc::new(AtomicU64::new(0));
    let shed = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (answered, shed) = (Arc::clone(&answered), Arc::clone(&shed));
            thread::spawn(move || {
                for j in 0..EACH {
                    let path = ["/metrics", "/breakers", "/health", "/breakers/news"][(i + j) % 4];
                    match get(addr, path).status {
                        200 => answered.fetch_add(1, Ordering::Relaxed),
                        503 => shed.fetch_add(1, Ordering::Relaxed),
                        other => panic!("{path}: {other}"),
                    };
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let during = calls.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    trader.join().unwrap();

    let (answered, shed) = (
        answered.load(Ordering::Relaxed),
        shed.load(Ordering::Relaxed),
    );
    assert_eq!(answered + shed, (CLIENTS * EACH) as u64);
    assert!(answered > 0);
    assert!(
        during > 0,
        "the trading thread made progress during the flood"
    );
    assert_eq!(registry.get("news").unwrap().snapshot().totals.failures, 0);
    assert_eq!(get(addr, "/health").status, 200);
}

/// `POST /breakers/{name}/maintenance`, on a breaker whose wall clock reads
/// 2026-12-12T22:00:00Z at build and whose monotonic clock is a mock.
mod maintenance {
    use super::*;
    use fusebox::trading::WallClock;
    use std::time::SystemTime;

    const PATH: &str = "/breakers/news/maintenance";
    const TWO_HOURS: &str = r#"{"actor": "carol", "reason": "vendor migration", "duration": "2h"}"#;

    fn start() -> (Registry, Admin, Arc<quanta::Mock>) {
        let (clock, mock) = quanta::Clock::mock();
        mock.increment(1_000 * SEC);
        let wall = "2026-12-12T22:00:00Z".parse::<jiff::Timestamp>().unwrap();
        let registry = Registry::new();
        let vendor = BreakerConfig::builder()
            .call_path(CallPath::AltData)
            .classifier(Classifier::failures_of::<Outage>())
            .consecutive_failure_threshold(2)
            .open_duration(10 * SEC)
            .jitter(0.0)
            .clock(clock)
            .wall_clock(WallClock::fixed(SystemTime::from(wall)))
            .build()
            .unwrap();
        registry.add_template("vendor", vendor).unwrap();
        registry.breaker("news", "vendor").unwrap();
        let admin = Admin::start(&registry, config()).unwrap();
        (registry, admin, mock)
    }

    fn unchanged(registry: &Registry) {
        let snap = registry.get("news").unwrap().snapshot();
        assert_eq!(snap.maintenance, None);
        assert!(registry.audit().is_empty());
    }

    #[test]
    fn a_declared_window_is_applied_audited_and_shown() {
        let (registry, admin, mock) = start();
        let addr = admin.addr();
        let answer = post(addr, PATH, bearer(), TWO_HOURS);
        assert_eq!(answer.status, 200, "{}", answer.body);
        let record = answer.json();
        assert_eq!(record["action"], "maintenance");
        assert_eq!(record["actor"], "carol");
        assert_eq!(record["reason"], "vendor migration");
        assert_eq!(record["maintenance_start"], "2026-12-12T22:00:00.000Z");
        assert_eq!(record["maintenance_end"], "2026-12-13T00:00:00.000Z");
        assert!(record["wall_time"].as_str().unwrap().ends_with('Z'));
        let audit = registry.audit();
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].actor.as_ref(), "carol");

        let shown = get(addr, "/breakers/news").json();
        assert_eq!(shown["state"], "closed");
        assert_eq!(shown["status"], "maintenance");
        assert_eq!(shown["maintenance_seconds_left"], 7200.0);
        let trail = get(addr, "/audit").json();
        assert_eq!(trail[0]["action"], "maintenance");

        // An hour in, the window still holds.
        mock.increment(3600 * SEC);
        let shown = get(addr, "/breakers/news").json();
        assert_eq!(shown["maintenance_seconds_left"], 3600.0);
        // After it: closed, no maintenance.
        mock.increment(3600 * SEC);
        let shown = get(addr, "/breakers/news").json();
        assert_eq!(shown["status"], "closed");
        assert_eq!(shown["maintenance_seconds_left"], Value::Null);
    }

    #[test]
    fn a_failure_inside_a_declared_window_leaves_the_counters_unchanged() {
        let (registry, admin, mock) = start();
        let news = registry.get("news").unwrap();
        let before = news.snapshot();
        assert_eq!(post(admin.addr(), PATH, bearer(), TWO_HOURS).status, 200);
        mock.increment(60 * SEC);
        for _ in 0..5 {
            let _ = fail(&news);
        }
        let snap = news.snapshot();
        assert_eq!(snap.state, State::Closed);
        assert_eq!(snap.consecutive_failures, before.consecutive_failures);
        assert_eq!(snap.totals.failures, before.totals.failures);
        assert_eq!(snap.window_failures, before.window_failures);
        assert_eq!(snap.trips, before.trips);
        assert_eq!(snap.neutral_failures, 5);
        // Once it has ended, two failures open the breaker again.
        mock.increment(2 * 3600 * SEC);
        trip(&news, 2);
    }

    #[test]
    fn a_window_with_a_start_and_an_until_begins_at_its_start() {
        let (registry, admin, mock) = start();
        let body = r#"{"actor": "carol", "reason": "migration",
            "start": "2026-12-12T23:00:00Z", "until": "2026-12-13T01:00:00+00:00"}"#;
        let answer = post(admin.addr(), PATH, bearer(), body);
        assert_eq!(answer.status, 200, "{}", answer.body);
        let news = registry.get("news").unwrap();
        assert_eq!(news.snapshot().maintenance, None);
        mock.increment(3600 * SEC);
        assert_eq!(news.snapshot().maintenance, Some(2 * 3600 * SEC));
    }

    #[test]
    fn a_bad_window_gets_400_and_changes_nothing() {
        let (registry, admin, _mock) = start();
        for (body, says) in [
            (r#"{"actor": "c", "reason": "r"}"#, "exactly one of"),
            (
                r#"{"actor": "c", "reason": "r", "duration": "2h", "until": "2026-12-13T00:00:00Z"}"#,
                "exactly one of",
            ),
            (
                r#"{"actor": "c", "reason": "r", "duration": "soon"}"#,
                "`duration`",
            ),
            (
                r#"{"actor": "c", "reason": "r", "duration": "0s"}"#,
                "longer than zero",
            ),
            (
                r#"{"actor": "c", "reason": "r", "until": "tomorrow"}"#,
                "RFC 3339",
            ),
            (
                r#"{"actor": "c", "reason": "r", "until": "2026-12-12T21:00:00Z"}"#,
                "must end after it starts",
            ),
            (
                r#"{"actor": "c", "reason": "r", "start": "2026-12-12T20:00:00Z", "until": "2026-12-12T21:00:00Z"}"#,
                "must end after now",
            ),
            (
                r#"{"actor": "c", "reason": "r", "start": "now", "duration": "1h"}"#,
                "`start`",
            ),
            (
                r#"{"actor": " ", "reason": "r", "duration": "1h"}"#,
                "`actor`",
            ),
            (
                r#"{"actor": "c", "reason": "r", "duration": "1h", "expires_after": "1h"}"#,
                "unknown field",
            ),
            (
                r#"{"actor": "c", "duration": "1h"}"#,
                "missing field `reason`",
            ),
        ] {
            let answer = post(admin.addr(), PATH, bearer(), body);
            assert_eq!(answer.status, 400, "{body}: {}", answer.body);
            assert!(
                answer.body.contains(says),
                "{says:?} not in {}",
                answer.body
            );
        }
        unchanged(&registry);
    }

    #[test]
    fn a_missing_token_gets_401_an_unknown_breaker_404_and_nothing_changes() {
        let (registry, admin, _mock) = start();
        let addr = admin.addr();
        for auth in [None, Some("Bearer wrong-token-0123456789abcd")] {
            assert_eq!(post(addr, PATH, auth, TWO_HOURS).status, 401);
            assert_eq!(
                post(addr, "/breakers/nope/maintenance", auth, TWO_HOURS).status,
                401
            );
        }
        let answer = post(addr, "/breakers/nope/maintenance", bearer(), TWO_HOURS);
        assert_eq!(answer.status, 404);
        assert_eq!(get(addr, PATH).status, 405);
        unchanged(&registry);
    }
}

#[test]
fn an_actor_or_reason_with_a_control_character_gets_400_and_changes_nothing() {
    let (registry, admin) = start();
    for body in [
        r#"{"actor": "alice", "reason": "x\nbreaker `news`: Open -> Closed (reset by ops: ok)"}"#,
        r#"{"actor": "alice\r\nmallory", "reason": "x"}"#,
        r#"{"actor": "alice", "reason": "x\u001b[2K"}"#,
    ] {
        let answer = post(admin.addr(), "/breakers/news/force-open", bearer(), body);
        assert_eq!(answer.status, 400, "{body:?}: {}", answer.body);
    }
    unchanged(&registry);
}

#[test]
fn events_lists_a_breakers_last_state_changes_oldest_first() {
    let (registry, admin) = start();
    let addr = admin.addr();
    let news = registry.get("news").unwrap();
    trip(&news, 2);
    let answer = post(addr, "/breakers/news/force-open", bearer(), BODY);
    assert_eq!(answer.status, 200, "{}", answer.body);

    let answer = get(addr, "/breakers/news/events");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let v = answer.json();
    assert_eq!(v["breaker"], "news");
    assert_eq!(v["capacity"], 16);
    let events = v["events"].as_array().expect("a list");
    let seen: Vec<(&str, &str, Option<&str>)> = events
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap(),
                e["actor"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("closed", "open", None),
            ("open", "forced_open", Some("alice")),
        ]
    );
    assert_eq!(
        events[1]["reason"]
            .as_str()
            .map(|r| r.contains("vendor maintenance")),
        Some(true)
    );
    assert_eq!(events[0]["seq"], 1);
    assert!(events[0]["seconds_ago"].as_f64().is_some());
    assert!(events[0]["wall_time"].as_str().unwrap().ends_with('Z'));
    // The same list is in the snapshot, as `recent_changes`.
    let snap = get(addr, "/breakers/news").json();
    assert_eq!(snap["recent_changes"].as_array().map(Vec::len), Some(2));

    assert_eq!(get(addr, "/breakers/nope/events").status, 404);
    assert_eq!(
        post(addr, "/breakers/news/events", bearer(), BODY).status,
        405
    );
    let fx = get(addr, "/breakers/fx/events").json();
    assert_eq!(fx["events"].as_array().map(Vec::len), Some(0));
}
