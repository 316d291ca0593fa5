//! What the fleet tests share beyond the server: a breaker that trips at
//! once, whether an agent is up, and a plain connection to look at Redis's
//! keys.
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use fusebox::fleet::{Fleet, FleetBuilder};
use fusebox::Breaker;

use crate::support::breaker::{quiet, MS, SEC};
use crate::support::redis_server::RedisServer;

/// A fleet agent for the test server under `prefix`, with short ticks and
/// reads (2 ms, 20 ms) and a quick reconnection, so that tests wait little,
/// and the default quorum (two members, and half of the live ones, must
/// trip for the fleet to open). A member's presence lasts a second (fifty
/// refreshes, for a loaded machine), so a trip in an agent's first second
/// of a session is recorded, and judged after it.
pub fn quorum_fleet(redis: &RedisServer, prefix: &str) -> FleetBuilder {
    base(redis, prefix).presence(SEC)
}

/// As [`quorum_fleet`] with the default presence, and any member's trip
/// opening the fleet (`min_members(1)`, `member_ratio(0.0)`): the rule the
/// tests of the lease, the overrides, the window's backoff and the fleet's
/// life were written for, where one process trips and every other follows.
pub fn fleet(redis: &RedisServer, prefix: &str) -> FleetBuilder {
    base(redis, prefix).min_members(1).member_ratio(0.0)
}

fn base(redis: &RedisServer, prefix: &str) -> FleetBuilder {
    Fleet::builder(redis.url())
        .prefix(prefix)
        .tick(2 * MS)
        .refresh(20 * MS)
        .hold_margin(SEC)
        .reconnect_backoff(5 * MS, 50 * MS)
}

/// A breaker `vendor` that opens on its first failure, for 200 ms of a mock
/// clock that never moves: only the fleet ends its open period.
pub fn vendor() -> Breaker {
    let (b, _mock) = quiet("vendor");
    b.consecutive_failure_threshold(1)
        .open_duration(200 * MS)
        .max_probe_duration(60 * SEC)
        .build()
        .expect("valid configuration")
}

/// Whether the agent holds a connection and has read the fleet once.
pub fn connected(f: &Fleet) -> bool {
    let s = f.snapshot();
    s.connected && s.reads > 0
}

/// A plain connection to the test server, to read and write keys directly.
pub fn redis_conn(redis: &RedisServer) -> redis::Connection {
    redis::Client::open(redis.url())
        .and_then(|c| c.get_connection())
        .expect("connect to the test redis")
}

/// A loopback TCP proxy in front of a server, whose connections can each
/// be silenced: what the server sends one of them is dropped, while the
/// connection stays open, as a firewall that forgot a quiet connection
/// does. Runs until the test process ends.
pub struct Proxy {
    port: u16,
    conns: Connections,
}

/// Each connection a [`Proxy`] made, by the local port it reaches the
/// server from, and whether it is silenced.
type Connections = std::sync::Arc<std::sync::Mutex<Vec<(u16, Silenced)>>>;

/// Whether a [`Proxy`]'s connection drops what the server sends it.
type Silenced = std::sync::Arc<std::sync::atomic::AtomicBool>;

impl Proxy {
    /// A proxy to the server on loopback port `target`.
    pub fn start(target: u16) -> Proxy {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::clone(&conns);
        // Copies `from` into `to`, dropping the bytes while `silent` is set.
        fn pipe(mut from: TcpStream, mut to: TcpStream, silent: Arc<AtomicBool>) {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if !silent.load(Ordering::Relaxed) && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Both);
        }
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let local = server.local_addr().expect("its address").port();
                let silent = Arc::new(AtomicBool::new(false));
                accepted.lock().unwrap().push((local, Arc::clone(&silent)));
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let never = Arc::new(AtomicBool::new(false));
                std::thread::spawn(move || pipe(client, server, never));
                std::thread::spawn(move || pipe(s2, c2, silent));
            }
        });
        Proxy { port, conns }
    }

    /// `redis://127.0.0.1:PORT/` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Silences the subscribed connections the proxy carries, as the
    /// server's `CLIENT LIST` shows them (`flags=P`); how many it silenced.
    pub fn silence_subscribers(&self, redis: &RedisServer) -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut redis_conn(redis))
            .expect("CLIENT LIST");
        let subscribed: Vec<u16> = list
            .lines()
            .filter(|l| l.split(' ').any(|f| f == "flags=P"))
            .filter_map(|l| {
                let addr = l.split(' ').find_map(|f| f.strip_prefix("addr="))?;
                addr.rsplit_once(':')?.1.parse().ok()
            })
            .collect();
        let conns = self.conns.lock().unwrap();
        let mut silenced = 0;
        for (local, silent) in conns.iter() {
            if subscribed.contains(local) {
                silent.store(true, std::sync::atomic::Ordering::Relaxed);
                silenced += 1;
            }
        }
        silenced
    }
}
