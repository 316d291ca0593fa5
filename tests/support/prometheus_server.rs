//! A real Prometheus server for tests, on a free loopback port, scraping one
//! target every second with the given rule files, its data in a temporary
//! directory; killed when dropped. And `promtool`, from the same package.
//!
//! `prometheus` and `promtool` come with Debian's `prometheus` package,
//! which `scripts/test` installs when missing. If they are missing, a test
//! fails with a message that says so, unless `FUSEBOX_PROMETHEUS_UNAVAILABLE`
//! is set (by `scripts/test`, when the package cannot be installed), which
//! makes [`tools_or_skip`] say why and the test skip.
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for Prometheus to do what it must before failing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Whether `prometheus` and `promtool` can run. False (after printing why)
/// only when they are missing and `FUSEBOX_PROMETHEUS_UNAVAILABLE` says
/// the package could not be installed; missing otherwise, it panics.
pub fn tools_or_skip(test: &str) -> bool {
    let runs = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if runs("prometheus") && runs("promtool") {
        return true;
    }
    match std::env::var("FUSEBOX_PROMETHEUS_UNAVAILABLE") {
        Ok(why) => {
            eprintln!("SKIPPED {test}: prometheus and promtool are not installed ({why})");
            false
        }
        Err(_) => panic!(
            "{test} needs `prometheus` and `promtool` (Debian's `prometheus` package, which \
             scripts/test installs): apt-get install --no-install-recommends prometheus"
        ),
    }
}

/// Runs `promtool` with `args` in `dir`.
pub fn promtool(dir: &Path, args: &[&str]) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs")
}

/// A fresh temporary directory, removed by the caller (or the server).
pub fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fusebox-{what}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// A running Prometheus.
#[derive(Debug)]
pub struct PrometheusServer {
    port: u16,
    child: Child,
    dir: PathBuf,
}

impl PrometheusServer {
    /// Starts one that scrapes `http://{target}/metrics` every second and
    /// evaluates `rules` (the text of a rule file) every second, and waits
    /// until it is ready.
    pub fn start(target: SocketAddr, rules: &str) -> PrometheusServer {
        // Another process may take the free port before Prometheus binds
        // it; then it exits, and another port is tried.
        for _ in 0..5 {
            let dir = temp_dir("prometheus");
            std::fs::write(dir.join("rules.yml"), rules).expect("write the rules");
            let config = format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - rules.yml\n\
                 scrape_configs:\n  - job_name: fusebox\n    scrape_interval: 1s\n    \
                 scrape_timeout: 1s\n    static_configs:\n      - targets: ['{target}']\n"
            );
            std::fs::write(dir.join("prometheus.yml"), config).expect("write the config");
            let port = free_port();
            let child = Command::new("prometheus")
                .arg(format!(
                    "--config.file={}",
                    dir.join("prometheus.yml").display()
                ))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=warn")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("log")).expect("a log file"))
                .spawn()
                .expect("prometheus starts");
            let mut server = PrometheusServer { port, child, dir };
            if server.wait_ready() {
                return server;
            }
        }
        panic!("prometheus exited at start on five free ports in a row");
    }

    /// Waits until `/-/ready` answers 200; false if the process exited.
    fn wait_ready(&mut self) -> bool {
        let start = Instant::now();
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if self
                .get("/-/ready")
                .is_some_and(|(status, _)| status == 200)
            {
                return true;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "prometheus was not ready within {PATIENCE:?}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What Prometheus logged (warnings and errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// `GET path` on the server: the status and the body, or `None` if it
    /// did not answer.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
            .ok()?;
        let mut text = Vec::new();
        conn.read_to_end(&mut text).ok()?;
        let text = String::from_utf8_lossy(&text);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some((status, body.to_owned()))
    }

    /// The API's answer to an instant query: `data.result` (an empty list
    /// while nothing matches).
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let (status, body) = self
            .get(&format!("/api/v1/query?query={}", encode(promql)))
            .expect("prometheus answers");
        assert_eq!(status, 200, "{promql}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of the one series `promql` selects, if there is one.
    pub fn value(&self, promql: &str) -> Option<f64> {
        let result = self.query(promql);
        let [one] = result.as_slice() else {
            return None;
        };
        one["value"][1].as_str()?.parse().ok()
    }

    /// The alerts now pending or firing: `data.alerts`.
    pub fn alerts(&self) -> Vec<serde_json::Value> {
        let (status, body) = self.get("/api/v1/alerts").expect("prometheus answers");
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        v["data"]["alerts"].as_array().cloned().unwrap_or_default()
    }

    /// Polls `cond` every 100 ms until it holds; fails the test after
    /// [`PATIENCE`], with Prometheus's log. Only ever a bound.
    pub fn wait_for(&self, what: &str, mut cond: impl FnMut(&Self) -> bool) {
        let start = Instant::now();
        while !cond(self) {
            assert!(
                start.elapsed() < PATIENCE,
                "waited {PATIENCE:?} for {what}; prometheus logged:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encodes everything but letters and digits, for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}
