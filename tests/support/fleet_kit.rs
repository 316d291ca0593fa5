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
