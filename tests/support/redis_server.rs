//! A real `redis-server` for tests, on a free loopback port, with no
//! persistence; killed when dropped, and restartable on the same port.
//! [`RedisServer::start_with`] adds TLS (the only port then speaks TLS) and
//! ACL users.
//!
//! Use it from a test file with
//! `#[path = "support/redis_server.rs"] mod redis_server;`.
//!
//! `redis-server` must be installed (`scripts/test` installs it): if it is
//! missing, starting one panics with a message that says so, so that no
//! test is skipped silently.
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a test server runs with beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Listen with TLS only (`--port 0 --tls-port PORT`).
    pub tls: Option<TlsFiles>,
    /// ACL users, one `user` directive each, as `redis.conf` writes them
    /// (`"fleet on >password ~{prod:* &prod:fleet +evalsha"`).
    pub users: Vec<String>,
}

/// The server's side of TLS: PEM files, and whether clients must show a
/// certificate.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA that client certificates must chain to.
    pub ca: PathBuf,
    /// `--tls-auth-clients`: `"no"`, `"optional"` or `"yes"`.
    pub auth_clients: &'static str,
}

/// How long a fleet test waits for the fleet to do what it must before
/// failing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `cond` every millisecond until it holds, and returns how long that
/// took; fails the test after [`PATIENCE`]. Only ever a bound: no test
/// asserts on the time returned.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
    start.elapsed()
}

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    options: Options,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free loopback port and waits until it answers PING.
    pub fn start() -> RedisServer {
        RedisServer::start_with(Options::default())
    }

    /// Starts one with `options` on a free loopback port, and waits until
    /// it answers PING (with TLS: until it accepts connections).
    pub fn start_with(options: Options) -> RedisServer {
        // Another process may take the free port before the server binds
        // it; then the server exits, and another port is tried.
        for _ in 0..5 {
            let mut server = RedisServer {
                port: free_port(),
                options: options.clone(),
                child: None,
            };
            if server.launch() {
                return server;
            }
        }
        panic!("redis-server exited at start on five free ports in a row");
    }

    /// `redis://127.0.0.1:PORT/`, or `rediss://` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.options.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// [`url`](Self::url) with an ACL user and password.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        self.url()
            .replacen("://", &format!("://{user}:{password}@"), 1)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (SIGKILL) and waits for it to exit: connections
    /// are then refused.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (SIGSTOP) without closing its connections: it
    /// accepts and answers nothing until [`resume`](Self::resume), as a
    /// hung or very slow Redis would.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = self.child.as_ref().expect("the server runs").id();
        // SAFETY: kill(2) takes no pointers; the pid is our own child.
        assert_eq!(
            unsafe { libc::kill(pid as libc::pid_t, sig) },
            0,
            "signal redis-server"
        );
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        assert!(
            self.launch(),
            "redis-server exited at restart on port {}",
            self.port
        );
    }

    /// Starts the server and waits until it answers; false if it exited
    /// (its port was taken).
    fn launch(&mut self) -> bool {
        self.kill();
        let mut command = Command::new("redis-server");
        match &self.options.tls {
            None => command.args(["--port", &self.port.to_string()]),
            Some(tls) => command
                .args(["--port", "0", "--tls-port", &self.port.to_string()])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca)
                .args(["--tls-auth-clients", tls.auth_clients]),
        };
        for user in &self.options.users {
            command.arg("--user").args(user.split_whitespace());
        }
        let child = command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(debug_command())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): the fleet tests need it on PATH; \
                     scripts/test installs it (apt-get install -y redis-server)"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return true;
            }
            if let Some(child) = self.child.as_mut() {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    self.child = None;
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        );
    }

    /// Whether the server answers PING now; with TLS, whether it accepts
    /// connections.
    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.options.tls.is_some() {
            return true;
        }
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Lets local connections run `DEBUG` (`DEBUG SLEEP` stands for a slow
/// Redis): off by default since Redis 7, which is also the first to know
/// the option, so older servers get nothing.
fn debug_command() -> &'static [&'static str] {
    let version = Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let major = version
        .split("v=")
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    if major.is_some_and(|m| m >= 7) {
        &["--enable-debug-command", "local"]
    } else {
        &[]
    }
}

/// A port nobody listens on now (the OS's choice).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}
