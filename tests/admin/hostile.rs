//! The admin endpoint against hostile clients, over real sockets on
//! loopback: slow clients by the hundred, malformed heads and bodies,
//! oversized and garbage requests, text that would forge a log line, and a
//! crowd of concurrent overrides. Each class is bounded in count and in
//! time: the tests take turns, the slowest runs for about eight seconds,
//! and the file for about fifteen.
//!
//! The figures the slow-client tests measure (time to serve a well-behaved
//! client, time to stop, a trading thread's worst call with and without the
//! attack) are printed: `cargo test --test admin hostile:: -- --nocapture`.
#![cfg(feature = "admin")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use fusebox::admin::{Admin, AdminConfig};
use fusebox::registry::Registry;
use fusebox::{BreakerConfig, CallPath, Classifier, State};

use crate::support::breaker::*;
use crate::support::log_capture;

const TOKEN: &str = "test-token-0123456789abcdef";
const AUTH: &str = "Authorization: Bearer test-token-0123456789abcdef\r\n";
const BODY: &str = r#"{"actor": "alice", "reason": "vendor maintenance"}"#;

/// What the slow-client tests allow a well-behaved client's request, a
/// refusal at the limit, or `stop`: far above what the endpoint takes (a
/// few milliseconds, printed; `docs/ops.md` has the figures) so that a busy
/// machine never fails them, and far below what a design that makes one
/// client wait on another takes here (a slow client's deadline, 30 s, or
/// a queue of them), which fails them.
const BOUND: Duration = Duration::from_secs(10);

/// Held by each test for its whole run: the tests of this file take turns,
/// so that what the slow-client tests time is the endpoint, not another
/// test's ten-megabyte upload.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn registry() -> Registry {
    let registry = Registry::new();
    let vendor = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::failures_of::<Outage>())
        .consecutive_failure_threshold(2)
        .build()
        .unwrap();
    registry.add_template("vendor", vendor).unwrap();
    registry.breaker("news", "vendor").unwrap();
    registry
}

fn config() -> AdminConfig {
    AdminConfig::new(TOKEN).bind("127.0.0.1:0".parse().unwrap())
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends `raw` as it is and reads the whole answer (status 0: none came).
fn exchange(addr: SocketAddr, raw: &[u8]) -> Answer {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The server may answer (and close) before taking the whole of a
    // request it refuses: what matters is the answer.
    let _ = conn.write_all(raw);
    let mut text = Vec::new();
    let _ = conn.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer {
        status: head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
}

/// A POST with `headers` (each ending in CRLF) and `body`, its length
/// declared.
fn post(addr: SocketAddr, path: &str, headers: &str, body: &str) -> Answer {
    exchange(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

/// Asserts that nothing changed: news still closed, no audit record.
#[track_caller]
fn unchanged(registry: &Registry) {
    assert_eq!(registry.get("news").unwrap().state(), State::Closed);
    assert!(registry.audit().is_empty(), "{:?}", registry.audit());
}

/// Clients that each send the start of a request and then one byte a
/// second, from one thread; one the server cuts off is replaced at once,
/// so that `n` stay connected.
struct Slowloris {
    stop: Arc<AtomicBool>,
    connected: Arc<AtomicUsize>,
    replaced: Arc<AtomicUsize>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Slowloris {
    fn start(addr: SocketAddr, n: usize, opening: &'static [u8]) -> Slowloris {
        let stop = Arc::new(AtomicBool::new(false));
        let connected = Arc::new(AtomicUsize::new(0));
        let replaced = Arc::new(AtomicUsize::new(0));
        let (s, c, r) = (
            Arc::clone(&stop),
            Arc::clone(&connected),
            Arc::clone(&replaced),
        );
        let open = move || {
            let mut conn = TcpStream::connect(addr).ok()?;
            conn.write_all(opening).ok()?;
            Some(conn)
        };
        let thread = thread::spawn(move || {
            let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
            c.store(conns.iter().flatten().count(), Ordering::Relaxed);
            while !s.load(Ordering::Relaxed) {
                for conn in conns.iter_mut() {
                    let alive = conn.as_mut().is_some_and(|c| c.write_all(b"a").is_ok());
                    if !alive {
                        *conn = open();
                        r.fetch_add(1, Ordering::Relaxed);
                    }
                }
                c.store(conns.iter().flatten().count(), Ordering::Relaxed);
                // A byte a second each, in slices so that stopping is quick.
                for _ in 0..10 {
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            }
        });
        Slowloris {
            stop,
            connected,
            replaced,
            thread: Some(thread),
        }
    }

    /// Waits (up to 60 s) until all of them are connected.
    fn wait_connected(&self, n: usize) {
        let until = Instant::now() + Duration::from_secs(60);
        while self.connected.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < until, "the slow clients did not connect");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Slowloris {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A trading thread: calls `news` in a loop, timing each call into
/// power-of-two buckets of nanoseconds.
struct Trader {
    stop: Arc<AtomicBool>,
    buckets: Arc<[AtomicU64; 64]>,
    thread: Option<thread::JoinHandle<()>>,
}

/// What a trading thread saw over a phase: its calls, the worst, and the
/// bucket bound under which 99.99 % of them fell.
struct Calls {
    n: u64,
    worst: Duration,
    p9999: Duration,
}

impl std::fmt::Display for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} calls, 99.99 % under {:?}, worst under {:?}",
            self.n, self.p9999, self.worst
        )
    }
}

impl Trader {
    fn start(registry: &Registry) -> Trader {
        let breaker = registry.get("news").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let buckets: Arc<[AtomicU64; 64]> = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
        let (s, b) = (Arc::clone(&stop), Arc::clone(&buckets));
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let started = Instant::now();
                succeed(&breaker).unwrap();
                let ns = started.elapsed().as_nanos() as u64;
                b[64 - ns.leading_zeros() as usize % 64].fetch_add(1, Ordering::Relaxed);
            }
        });
        Trader {
            stop,
            buckets,
            thread: Some(thread),
        }
    }

    /// What it saw since the last reading.
    fn reading(&self) -> Calls {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.swap(0, Ordering::Relaxed))
            .collect();
        let n: u64 = counts.iter().sum();
        let bound = |i: usize| Duration::from_nanos(1u64 << i.min(63));
        let worst = counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(Duration::ZERO, bound);
        let mut seen = 0;
        let mut p9999 = Duration::ZERO;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen * 10_000 >= n * 9_999 {
                p9999 = bound(i);
                break;
            }
        }
        Calls { n, worst, p9999 }
    }
}

impl Drop for Trader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A request head that never ends, as a slow client sends it.
const SLOW_HEAD: &[u8] = b"GET /breakers HTTP/1.1\r\nHost: x\r\nX-Slow: ";

#[test]
fn a_client_is_served_while_200_slow_clients_are_connected_never_after_them() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    let trader = Trader::start(&registry);
    thread::sleep(Duration::from_secs(2));
    let quiet = trader.reading();

    let attack = Slowloris::start(addr, 200, SLOW_HEAD);
    attack.wait_connected(200);
    // Through two of the slow clients' 2-second deadlines, so that some
    // requests land while the server cuts them off and they come back.
    let mut served = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let t = Instant::now();
        let answer = get(addr, "/breakers/news");
        let took = t.elapsed();
        assert_eq!(answer.status, 200, "{} {}", answer.head, answer.body);
        assert!(
            took < BOUND,
            "served in {took:?} with 200 slow clients connected"
        );
        served.push(took);
        thread::sleep(Duration::from_millis(250));
    }
    let attacked = trader.reading();
    assert!(
        attack.replaced.load(Ordering::Relaxed) >= 200,
        "the server cut the slow clients off at their deadline"
    );
    drop(attack);
    drop(trader);
    assert!(attacked.n > 0, "the trading thread made progress");
    served.sort();
    eprintln!(
        "200 slow clients: {} requests served, median {:?}, worst {:?}; \
         trading thread without the attack: {quiet}; during it: {attacked}",
        served.len(),
        served[served.len() / 2],
        served[served.len() - 1],
    );
}

#[test]
fn at_the_connection_limit_a_client_is_refused_at_once_never_left_waiting() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(
        &registry,
        config()
            .max_connections(16)
            .request_timeout(Duration::from_secs(30)),
    )
    .unwrap();
    let addr = admin.addr();
    let attack = Slowloris::start(addr, 16, SLOW_HEAD);
    attack.wait_connected(16);
    // Until the accept thread has taken all sixteen, a request may still
    // find a place: wait for the first refusal.
    let until = Instant::now() + Duration::from_secs(60);
    while get(addr, "/health").status != 503 {
        assert!(Instant::now() < until, "never refused at the limit");
        thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        let t = Instant::now();
        let answer = get(addr, "/health");
        let took = t.elapsed();
        assert_eq!(answer.status, 503);
        assert!(answer.body.contains("the admin endpoint is busy"));
        assert!(took < BOUND, "refused in {took:?}");
    }
    // Once the slow clients leave, their places are free again.
    drop(attack);
    let until = Instant::now() + Duration::from_secs(60);
    while get(addr, "/health").status != 200 {
        assert!(Instant::now() < until, "places never freed");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stop_returns_without_waiting_on_any_client() {
    let _turn = one_at_a_time();
    for by_drop in [false, true] {
        let registry = registry();
        let admin =
            Admin::start(&registry, config().request_timeout(Duration::from_secs(30))).unwrap();
        let addr = admin.addr();
        // Slow heads, a body that stalls half-way, and connections that
        // send nothing at all.
        let heads = Slowloris::start(addr, 80, SLOW_HEAD);
        let bodies = Slowloris::start(
            addr,
            10,
            b"POST /breakers/news/force-open HTTP/1.1\r\nHost: x\r\n\
              Authorization: Bearer test-token-0123456789abcdef\r\n\
              Content-Length: 200\r\n\r\n{\"actor\": ",
        );
        let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        heads.wait_connected(80);
        bodies.wait_connected(10);
        // Let the server take them all and start reading.
        thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        if by_drop {
            drop(admin);
        } else {
            admin.stop();
        }
        let took = t.elapsed();
        eprintln!(
            "{} returned in {took:?} with 100 clients connected",
            if by_drop { "drop" } else { "stop()" }
        );
        assert!(took < BOUND, "stopped in {took:?}");
        assert!(TcpStream::connect(addr).is_err(), "the port is released");
        drop(silent);
        unchanged(&registry);
    }
}

#[test]
fn a_trickling_client_is_cut_off_when_its_deadline_from_accept_passes() {
    let _turn = one_at_a_time();
    let registry = registry();
    let timeout = Duration::from_millis(1500);
    let admin = Admin::start(&registry, config().request_timeout(timeout)).unwrap();
    let mut conn = TcpStream::connect(admin.addr()).unwrap();
    let connected = Instant::now();
    conn.write_all(SLOW_HEAD).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    // A byte every tenth of a second: each read the server makes gets
    // something, so only a deadline from accept ends the request.
    let mut buf = [0u8; 64];
    let cut = loop {
        if conn.write_all(b"a").is_err() {
            break connected.elapsed();
        }
        match conn.read(&mut buf) {
            Ok(0) => break connected.elapsed(),
            Ok(_) => panic!("a request that never ended was answered"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break connected.elapsed(),
            Err(_) => {}
        }
        assert!(
            connected.elapsed() < Duration::from_secs(30),
            "never cut off"
        );
    };
    eprintln!("a trickling client with a {timeout:?} deadline was cut off after {cut:?}");
    assert!(
        cut >= timeout - Duration::from_millis(100),
        "cut early, {cut:?}"
    );
    assert!(cut < timeout + Duration::from_secs(5), "cut late, {cut:?}");
}

#[test]
fn only_a_json_object_is_a_valid_body() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    for body in [
        r#"["mallory", "positional array"]"#,
        r#"["mallory", "positional array", "1h"]"#,
        r#""mallory""#,
        "null",
        "42",
        r#"{"actor": "alice", "actor": "mallory", "reason": "r"}"#,
    ] {
        let answer = post(admin.addr(), "/breakers/news/force-open", AUTH, body);
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
    }
    let answer = post(
        admin.addr(),
        "/breakers/news/maintenance",
        AUTH,
        r#"["mallory", "r", null, "2h"]"#,
    );
    assert_eq!(answer.status, 400, "{}", answer.body);
    unchanged(&registry);
}

#[test]
fn the_bearer_scheme_is_matched_in_any_case() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    for scheme in ["bearer", "BEARER", "BeArEr"] {
        let auth = format!("Authorization: {scheme} {TOKEN}\r\n");
        let answer = post(admin.addr(), "/breakers/news/force-open", &auth, BODY);
        assert_eq!(answer.status, 200, "{scheme}: {}", answer.body);
        let answer = post(admin.addr(), "/breakers/news/reset", &auth, BODY);
        assert_eq!(answer.status, 200, "{scheme}: {}", answer.body);
    }
    assert_eq!(registry.audit().len(), 6);
}

#[test]
fn two_authorization_headers_are_refused_whatever_they_hold() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let wrong = "Authorization: Bearer wrong-token-0123456789abcd\r\n";
    for headers in [
        format!("{wrong}{AUTH}"),
        format!("{AUTH}{wrong}"),
        format!("{AUTH}{AUTH}"),
        format!("{AUTH}authorization: Basic x\r\n"),
    ] {
        let answer = post(admin.addr(), "/breakers/news/force-open", &headers, BODY);
        assert_eq!(answer.status, 400, "{headers:?}: {}", answer.body);
        assert!(answer.body.contains("more than one Authorization header"));
    }
    unchanged(&registry);
}

#[test]
fn a_method_a_path_does_not_take_gets_405_with_allow() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    for (method, path, allow) in [
        ("HEAD", "/health", "GET"),
        ("HEAD", "/metrics", "GET"),
        ("DELETE", "/breakers/news", "GET"),
        ("PUT", "/breakers/news/force-open", "POST"),
        ("GET", "/breakers/news/reset", "POST"),
        ("HEAD", "/breakers/news/maintenance", "POST"),
    ] {
        let answer = exchange(
            admin.addr(),
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n").as_bytes(),
        );
        assert_eq!(answer.status, 405, "{method} {path}");
        assert!(
            answer.head.lines().any(|l| l == format!("Allow: {allow}")),
            "{method} {path}: {}",
            answer.head
        );
    }
    unchanged(&registry);
}

#[test]
fn a_content_length_that_is_not_plain_digits_gets_400() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    // Each stands for the body's true length, which a lenient parser
    // would take: the override would then be applied.
    let n = BODY.len();
    for length in [
        format!("+{n}"),
        format!("{n} {n}"),
        format!("{n}, {n}"),
        format!("{n}.0"),
        format!("0x{n:x}"),
        format!("-{n}"),
        String::new(),
    ] {
        let raw = format!(
            "POST /breakers/news/force-open HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: {length}\r\n\r\n{BODY}"
        );
        let answer = exchange(admin.addr(), raw.as_bytes());
        assert_eq!(answer.status, 400, "Content-Length: {length}");
    }
    // A length and a chunked encoding both: refused, not guessed between.
    let raw = format!(
        "POST /breakers/news/force-open HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{BODY}",
        BODY.len()
    );
    assert_eq!(exchange(admin.addr(), raw.as_bytes()).status, 400);
    unchanged(&registry);
}

#[test]
fn percent_escapes_are_decoded_strictly() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    assert_eq!(get(addr, "/breakers/ne%77s").status, 200);
    assert_eq!(get(addr, "/breakers/%6E%65%77%73").status, 200);
    for bad in [
        "/breakers/%+1",
        "/breakers/%-1news",
        "/breakers/news%",
        "/breakers/news%2",
        "/breakers/%zznews",
        "/breakers/%ff",
    ] {
        assert_eq!(get(addr, bad).status, 400, "{bad}");
        assert_eq!(
            post(addr, &format!("{bad}/force-open"), AUTH, BODY).status,
            400
        );
    }
    // Decoded, a line break is no breaker's name.
    assert_eq!(get(addr, "/breakers/news%0A").status, 404);
    unchanged(&registry);
}

#[test]
fn refusals_held_under_attack() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    // 40 bad tokens.
    for i in 0..40 {
        let auth = format!("Authorization: Bearer guess-{i:020}\r\n");
        assert_eq!(
            post(addr, "/breakers/news/force-open", &auth, BODY).status,
            401
        );
    }
    // A 100 KB request line, 40 headers.
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000));
    assert_eq!(exchange(addr, long.as_bytes()).status, 431);
    let many: String = (0..40).map(|i| format!("X-H{i}: v\r\n")).collect();
    let many = format!("GET /health HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    assert_eq!(exchange(addr, many.as_bytes()).status, 431);
    // A 10 MB body, sent whole.
    let huge = format!(r#"{{"actor": "a", "reason": "{}"}}"#, "x".repeat(10 << 20));
    assert_eq!(
        post(addr, "/breakers/news/force-open", AUTH, &huge).status,
        413
    );
    // Traversal.
    for path in [
        "/../breakers/news",
        "/breakers/../../etc/passwd",
        "/breakers/%2e%2e/news",
        "/breakers/news/../../metrics",
        "//breakers/news",
    ] {
        assert_eq!(get(addr, path).status, 404, "{path}");
    }
    // Garbage, and a head that is not HTTP.
    for garbage in [
        &b"\x16\x03\x01\x02\x00\x01\x00\r\n\r\n"[..],
        b"\0\0\0\0\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost x\r\n\r\n",
    ] {
        assert_eq!(exchange(addr, garbage).status, 400, "{garbage:?}");
    }
    unchanged(&registry);
    // And it still serves.
    assert_eq!(get(addr, "/health").status, 200);
}

#[test]
fn concurrent_overrides_are_each_applied_and_audited_once() {
    let _turn = one_at_a_time();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    const THREADS: usize = 8;
    const EACH: usize = 25;
    let start = Arc::new(Barrier::new(THREADS));
    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for i in 0..EACH {
                    let action = if i % 2 == 0 { "force-open" } else { "reset" };
                    let body = format!(r#"{{"actor": "ops-{t}", "reason": "r{i}"}}"#);
                    let path = format!("/breakers/news/{action}");
                    let answer = post(addr, &path, AUTH, &body);
                    assert_eq!(answer.status, 200, "{}", answer.body);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let audit = registry.audit();
    assert_eq!(audit.len(), THREADS * EACH);
    let mut seqs: Vec<u64> = audit.iter().map(|r| r.seq).collect();
    seqs.sort();
    seqs.dedup();
    assert_eq!(seqs.len(), THREADS * EACH, "every override audited once");
    for t in 0..THREADS {
        for i in 0..EACH {
            let (actor, reason) = (format!("ops-{t}"), format!("r{i}"));
            assert_eq!(
                audit
                    .iter()
                    .filter(|r| *r.actor == *actor && *r.reason == *reason)
                    .count(),
                1
            );
        }
    }
}

#[test]
fn text_a_client_sends_reaches_the_log_escaped_and_bounded() {
    let _turn = one_at_a_time();
    log_capture::install();
    let registry = registry();
    let admin = Admin::start(&registry, config()).unwrap();
    let addr = admin.addr();
    // A refused mutation is logged with its path and the answer.
    let marker = "zq7-marker";
    let long = format!(
        "/breakers/{marker}{}%0Aforged/force-open",
        "n".repeat(6_000)
    );
    assert_eq!(post(addr, &long, AUTH, BODY).status, 404);
    let field = format!("{marker}\\u001b[2K\\n{}", "f".repeat(3_000));
    let body = format!(r#"{{"actor": "a", "reason": "r", "{field}": 1}}"#);
    assert_eq!(
        post(addr, "/breakers/news/force-open", AUTH, &body).status,
        400
    );
    let lines = log_capture::lines(marker);
    assert!(!lines.is_empty(), "the refusals were logged");
    for line in &lines {
        assert!(line.len() < 1_024, "a {}-byte log line", line.len());
        assert!(
            !line.chars().any(char::is_control),
            "a raw control character in {line:?}"
        );
    }
    // Into the answer too, escaped and bounded.
    let answer = post(admin.addr(), "/breakers/news/force-open", AUTH, &body);
    assert!(answer.body.len() < 1_024, "{}", answer.body.len());
    assert!(!answer.body.contains('\u{1b}'));
    unchanged(&registry);
}
