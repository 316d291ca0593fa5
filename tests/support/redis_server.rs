//! A real `redis-server` for tests, on a free loopback port, with no
//! persistence and a directory of its own in the system's temp directory
//! (a replica writes the snapshot its master sends it there, and a cluster
//! node its `nodes.conf`; nothing lands in the checkout); killed when
//! dropped, with its directory, and restartable on the same port.
//! [`RedisServer::start_with`] adds TLS (the only port then speaks TLS), a
//! password (`requirepass`), ACL users and other arguments. [`RedisCluster`]
//! starts a Redis Cluster of three masters with a replica each
//! (`redis-cli --cluster create`), and [`RedisSentinels`] a master, a
//! replica and three sentinels (`redis-server --sentinel`); each also with
//! TLS and passwords ([`RedisCluster::start_with`],
//! [`RedisSentinels::start_with`]).
//!
//! It needs nothing else of the support tree: the fleet bench and the
//! fleet-timeline example (`benches/`) include this file by its path.
//!
//! `redis-server` and `redis-cli` must be installed (`scripts/test`
//! installs them): if one is missing, starting a server panics with a
//! message that says so, so that no test is skipped silently.
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
    /// The default user's password (`--requirepass`), also the one a
    /// replica gives its master (`--masterauth`).
    pub password: Option<String>,
    /// ACL users, one `user` directive each, as `redis.conf` writes them
    /// (`"fleet on >password ~{prod:* &prod:fleet +evalsha"`).
    pub users: Vec<String>,
    /// More arguments (`--replicaof 127.0.0.1 PORT`).
    pub args: Vec<String>,
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
    /// The certificate and key the server shows when it connects as a
    /// client (a replica to its master, a sentinel, a cluster node to
    /// another: `--tls-client-cert-file`), and `redis-cli` shows.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    /// The files of a directory that holds `ca.crt`, `server.crt`,
    /// `server.key`, `client.crt` and `client.key` (as `Certs` makes them),
    /// clients asked for a certificate as `auth_clients` says.
    pub fn in_dir(dir: &std::path::Path, auth_clients: &'static str) -> TlsFiles {
        TlsFiles {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            ca: dir.join("ca.crt"),
            auth_clients,
            client: Some((dir.join("client.crt"), dir.join("client.key"))),
        }
    }
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
    /// The server's working directory (`--dir`), removed when it is
    /// dropped.
    dir: PathBuf,
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
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("fusebox-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a directory for the server");
            let mut server = RedisServer {
                port,
                options: options.clone(),
                child: None,
                dir,
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

    /// `redis-cli` with `args` against this server, over TLS and with its
    /// password if it has them; its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut all = self.cli_options();
        all.extend(args.iter().map(|a| a.to_string()));
        redis_cli(&all.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// `redis-cli`'s options to reach this server.
    fn cli_options(&self) -> Vec<String> {
        let mut all = vec![
            "-h".to_owned(),
            "127.0.0.1".to_owned(),
            "-p".to_owned(),
            self.port.to_string(),
        ];
        all.extend(cli_secrets(&self.options));
        all
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

    /// Starts the server again on the same port, empty (a cluster node
    /// keeps its `nodes.conf`).
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
        // A replica's copy of its master's data, which it would load.
        let _ = std::fs::remove_file(self.dir.join("dump.rdb"));
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
        if let Some((cert, key)) = self.options.tls.as_ref().and_then(|t| t.client.as_ref()) {
            command
                .arg("--tls-client-cert-file")
                .arg(cert)
                .arg("--tls-client-key-file")
                .arg(key);
        }
        if let Some(password) = &self.options.password {
            command
                .args(["--requirepass", password])
                .args(["--masterauth", password]);
        }
        for user in &self.options.users {
            command.arg("--user").args(user.split_whitespace());
        }
        command.args(&self.options.args);
        let child = command
            .arg("--dir")
            .arg(&self.dir)
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
        let (ask, answer) = match &self.options.password {
            None => ("PING\r\n".to_owned(), "+PONG\r\n"),
            Some(p) => (format!("AUTH {p}\r\nPING\r\n"), "+OK\r\n+PONG\r\n"),
        };
        let mut buf = vec![0u8; answer.len()];
        s.write_all(ask.as_bytes()).is_ok()
            && s.read_exact(&mut buf).is_ok()
            && buf == answer.as_bytes()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `redis-cli` with `args`; its output. Panics if it is missing or fails.
pub fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run redis-cli ({e}): the fleet tests need it on PATH; \
                 scripts/test installs it (apt-get install -y redis-tools)"
            )
        });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    text
}

/// `redis-cli`'s options for a server with `options`: TLS with its CA (and
/// the client certificate, if the server has one), and its password.
fn cli_secrets(options: &Options) -> Vec<String> {
    let mut all = Vec::new();
    if let Some(tls) = &options.tls {
        all.push("--tls".to_owned());
        all.push("--cacert".to_owned());
        all.push(tls.ca.display().to_string());
        if let Some((cert, key)) = &tls.client {
            all.push("--cert".to_owned());
            all.push(cert.display().to_string());
            all.push("--key".to_owned());
            all.push(key.display().to_string());
        }
    }
    if let Some(password) = &options.password {
        all.extend([
            "-a".to_owned(),
            password.clone(),
            "--no-auth-warning".to_owned(),
        ]);
    }
    all
}

/// One command to the server at `port`, as `redis-cli` prints its answer.
pub fn cli_at(port: u16, args: &[&str]) -> String {
    let port = port.to_string();
    let mut all = vec!["-h", "127.0.0.1", "-p", port.as_str()];
    all.extend_from_slice(args);
    redis_cli(&all)
}

/// A Redis Cluster on loopback: three masters with a replica each, every
/// node on a free port (`--cluster-node-timeout 1000`, so that a replica
/// takes over a second or two after its master dies).
#[derive(Debug)]
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        RedisCluster::start_with(Options::default(), 1, 1000)
    }

    /// Three masters with `replicas` replicas each, every node with
    /// `options` (with TLS, the cluster bus and replication speak TLS too)
    /// and `--cluster-node-timeout node_timeout_ms`.
    pub fn start_with(options: Options, replicas: usize, node_timeout_ms: u32) -> RedisCluster {
        let mut options = options;
        options.args.extend(
            [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                &node_timeout_ms.to_string(),
                "--cluster-replica-validity-factor",
                "0",
            ]
            .map(String::from),
        );
        if options.tls.is_some() {
            options
                .args
                .extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
        }
        let nodes: Vec<RedisServer> = (0..3 * (1 + replicas))
            .map(|_| RedisServer::start_with(options.clone()))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let replicas_arg = replicas.to_string();
        let mut args: Vec<String> = cli_secrets(&options);
        args.extend(["--cluster".to_owned(), "create".to_owned()]);
        args.extend(addrs);
        args.extend(["--cluster-replicas", &replicas_arg, "--cluster-yes"].map(String::from));
        redis_cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let cluster = RedisCluster { nodes };
        wait_for(
            "every node to see the cluster ok, with its replicas",
            || {
                cluster
                    .live()
                    .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
                    && cluster.replicas_of_masters() == 3 * replicas
            },
        );
        cluster
    }

    /// The seed URLs: every node's.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.child.is_some())
    }

    /// `CLUSTER NODES` as a live node sees it.
    fn table(&self) -> String {
        let node = self.live().next().expect("a live node");
        node.cli(&["CLUSTER", "NODES"])
    }

    /// How many replicas are attached to live masters.
    fn replicas_of_masters(&self) -> usize {
        self.table()
            .lines()
            .filter(|l| l.contains("slave") && !l.contains("fail") && !l.contains(" - "))
            .count()
    }

    /// The port of the master that serves `key`'s slot now, as a live
    /// node sees it (none while its master has failed and no replica has
    /// taken over yet).
    pub fn master_of(&self, key: &str) -> Option<u16> {
        let node = self.live().next().expect("a live node");
        let slot: u16 = node
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("a slot");
        for line in self.table().lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
            });
            if serves {
                let addr = fields[1].split('@').next().unwrap();
                return addr.rsplit(':').next().unwrap().parse().ok();
            }
        }
        None
    }

    /// The node at `port`.
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("a node of the cluster")
    }

    /// Kills the node at `port` (SIGKILL).
    pub fn kill(&mut self, port: u16) {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .expect("a node of the cluster")
            .kill();
    }
}

/// The master name the sentinels of [`RedisSentinels`] monitor.
pub const SERVICE: &str = "fusebox-master";

/// What a [`RedisSentinels`] group runs with.
#[derive(Debug, Clone)]
pub struct SentinelSetup {
    /// TLS for every server, sentinels included (their connections to the
    /// master, the replica and each other too).
    pub tls: Option<TlsFiles>,
    /// The master's and the replica's password (`requirepass`; the
    /// sentinels are given it as `sentinel auth-pass`).
    pub master_password: Option<String>,
    /// The sentinels' own password (`requirepass` and, to reach each
    /// other, `sentinel sentinel-pass`).
    pub sentinel_password: Option<String>,
    /// Whether the master has a replica.
    pub replica: bool,
    /// How many sentinels (the quorum is two, or one for a lone sentinel).
    pub sentinels: usize,
}

impl Default for SentinelSetup {
    fn default() -> SentinelSetup {
        SentinelSetup {
            tls: None,
            master_password: None,
            sentinel_password: None,
            replica: true,
            sentinels: 3,
        }
    }
}

/// A master, a replica of it, and three sentinels monitoring it as
/// [`SERVICE`] (quorum 2, `down-after-milliseconds 500`), each on a free
/// loopback port.
#[derive(Debug)]
pub struct RedisSentinels {
    pub master: RedisServer,
    pub replica: Option<RedisServer>,
    pub sentinels: Vec<RedisServer>,
}

impl RedisSentinels {
    pub fn start() -> RedisSentinels {
        RedisSentinels::start_with(SentinelSetup::default())
    }

    /// A group as `setup` says, once every sentinel sees the master up,
    /// its replica and the other sentinels.
    pub fn start_with(setup: SentinelSetup) -> RedisSentinels {
        let mut options = Options {
            tls: setup.tls.clone(),
            password: setup.master_password.clone(),
            ..Options::default()
        };
        if options.tls.is_some() {
            options.args = ["--tls-replication", "yes"].map(String::from).to_vec();
        }
        let master = RedisServer::start_with(options.clone());
        let replica = setup.replica.then(|| {
            let mut options = options.clone();
            options.args.extend([
                "--replicaof".into(),
                "127.0.0.1".into(),
                master.port().to_string(),
            ]);
            RedisServer::start_with(options)
        });
        let sentinels: Vec<RedisServer> = (0..setup.sentinels)
            .map(|_| RedisServer::start_sentinel(master.port(), &setup))
            .collect();
        let group = RedisSentinels {
            master,
            replica,
            sentinels,
        };
        wait_for(
            "the sentinels to see the master up, the replica and each other",
            || {
                group.sentinels.iter().all(|s| {
                    let master = s.cli(&["SENTINEL", "MASTER", SERVICE]);
                    let replicas = s.cli(&["SENTINEL", "REPLICAS", SERVICE]);
                    let others = s.cli(&["SENTINEL", "SENTINELS", SERVICE]);
                    !master.contains("s_down")
                        && !master.contains("disconnected")
                        && (!setup.replica || replicas.contains("slave"))
                        && others.matches("name").count() == setup.sentinels - 1
                })
            },
        );
        group
    }

    /// The sentinels' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The master's port as the sentinels name it now.
    pub fn master_port(&self) -> Option<u16> {
        let answer = self.sentinels[0].cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE]);
        answer.lines().nth(1)?.trim().parse().ok()
    }
}

impl RedisServer {
    /// A sentinel (`redis-server sentinel.conf --sentinel`) monitoring the
    /// master at `master` as [`SERVICE`], with `setup`'s TLS and passwords.
    fn start_sentinel(master: u16, setup: &SentinelSetup) -> RedisServer {
        let options = Options {
            tls: setup.tls.clone(),
            password: setup.sentinel_password.clone(),
            ..Options::default()
        };
        let quorum = setup.sentinels.min(2);
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("fusebox-sentinel-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a directory for the sentinel");
            let conf = dir.join("sentinel.conf");
            let mut text = format!("bind 127.0.0.1\ndir {}\n", dir.display());
            match &setup.tls {
                None => text.push_str(&format!("port {port}\n")),
                Some(tls) => {
                    text.push_str(&format!(
                        "port 0\ntls-port {port}\ntls-replication yes\n\
                         tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\n\
                         tls-auth-clients {}\n",
                        tls.cert.display(),
                        tls.key.display(),
                        tls.ca.display(),
                        tls.auth_clients
                    ));
                    if let Some((cert, key)) = &tls.client {
                        text.push_str(&format!(
                            "tls-client-cert-file {}\ntls-client-key-file {}\n",
                            cert.display(),
                            key.display()
                        ));
                    }
                }
            }
            if let Some(password) = &setup.sentinel_password {
                text.push_str(&format!(
                    "requirepass {password}\nsentinel sentinel-pass {password}\n"
                ));
            }
            text.push_str(&format!(
                "sentinel monitor {SERVICE} 127.0.0.1 {master} {quorum}\n\
                 sentinel down-after-milliseconds {SERVICE} 500\n\
                 sentinel failover-timeout {SERVICE} 2000\n\
                 sentinel parallel-syncs {SERVICE} 1\n"
            ));
            if let Some(password) = &setup.master_password {
                text.push_str(&format!("sentinel auth-pass {SERVICE} {password}\n"));
            }
            std::fs::write(&conf, text).expect("write sentinel.conf");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start redis-server --sentinel ({e})"));
            let mut server = RedisServer {
                port,
                options: options.clone(),
                child: Some(child),
                dir,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if server.ping() {
                    return server;
                }
                if let Some(child) = server.child.as_mut() {
                    if matches!(child.try_wait(), Ok(Some(_))) {
                        server.child = None;
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        panic!("redis-server --sentinel exited at start on five free ports in a row");
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
