//! Where the fleet's Redis is, and one connection to it, through the redis
//! crate's own support for each: a single server, the master that Redis
//! Sentinel names (looked up again at every connection, so that the agent
//! follows the master across a failover), or a Redis Cluster (each
//! breaker's keys live in one slot, and a cluster connection sends each
//! script to its slot's node).
//!
//! Every wait is bounded by the caller's timeout. The redis crate's
//! Sentinel lookup has no timeout of its own, so it runs on a thread of its
//! own ([`Sentinel`]) that the agent waits for at most its timeout.

use std::collections::BTreeSet;
use std::io;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::sentinel::SentinelClient;
use redis::{Cmd, Connection, FromRedisValue, RedisError, RedisResult};

use crate::fleet::scripts;

/// Where the fleet's Redis is.
pub(crate) enum Topology {
    /// One server.
    Server(redis::Client),
    /// The master a set of sentinels names.
    Sentinel(Sentinel),
    /// A Redis Cluster, and its seed nodes (to subscribe on one of them:
    /// a publication reaches every node of a cluster).
    Cluster {
        client: ClusterClient,
        nodes: Vec<redis::Client>,
    },
}

/// One connection for commands.
pub(crate) enum Link {
    /// To one server (or the master Sentinel named), and its client, to
    /// subscribe to the same node.
    Server(Connection, redis::Client),
    /// To a cluster: a connection per node, made as the slots need them.
    Cluster(ClusterConnection),
}

impl Topology {
    /// Connects for commands, waiting at most `timeout` to connect (the
    /// Sentinel lookup included) and for each answer after.
    pub(crate) fn connect(&self, timeout: Duration) -> RedisResult<Link> {
        let start = Instant::now();
        let link = match self {
            Topology::Server(client) => Link::Server(node(client, timeout)?, client.clone()),
            Topology::Sentinel(sentinel) => {
                let master = sentinel.master(timeout)?;
                let left = timeout.saturating_sub(start.elapsed());
                if left.is_zero() {
                    return Err(timed_out("connecting to the master"));
                }
                Link::Server(node(&master, left)?, master)
            }
            Topology::Cluster { client, .. } => Link::Cluster(client.get_connection()?),
        };
        link.set_timeout(timeout)?;
        Ok(link)
    }

    /// A connection to subscribe on, to the node of `link` (or, in a
    /// cluster, to the first seed node that answers).
    pub(crate) fn pubsub(&self, link: &Link, timeout: Duration) -> RedisResult<Connection> {
        let con = match (self, link) {
            (_, Link::Server(_, client)) => node(client, timeout)?,
            (Topology::Cluster { nodes, .. }, Link::Cluster(_)) => {
                let mut last = None;
                let mut found = None;
                for client in nodes {
                    match node(client, timeout) {
                        Ok(con) => {
                            found = Some(con);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                match found {
                    Some(con) => con,
                    None => return Err(last.unwrap_or_else(|| timed_out("no node"))),
                }
            }
            (_, Link::Cluster(_)) => return Err(timed_out("no node to subscribe on")),
        };
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }
}

impl Link {
    /// Each later send and answer waits at most `timeout`.
    pub(crate) fn set_timeout(&self, timeout: Duration) -> RedisResult<()> {
        match self {
            Link::Server(con, _) => {
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))
            }
            Link::Cluster(con) => {
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))
            }
        }
    }

    /// Whether this is a cluster connection (whose pipelines take only
    /// commands with keys).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Link::Cluster(_))
    }

    /// One command.
    pub(crate) fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            Link::Server(con, _) => cmd.query(con),
            Link::Cluster(con) => cmd.query(con),
        }
    }

    /// Commands in one pipeline (in a cluster, one per node), their
    /// answers in order.
    pub(crate) fn pipeline<T: FromRedisValue>(
        &mut self,
        cmds: impl IntoIterator<Item = Cmd>,
    ) -> RedisResult<T> {
        match self {
            Link::Server(con, _) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                pipe.query(con)
            }
            Link::Cluster(con) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                pipe.query(con)
            }
        }
    }

    /// Loads the scripts (on every node of a cluster), returning their
    /// SHA1 digests in the order of [`scripts::Script`].
    pub(crate) fn load_scripts(&mut self) -> RedisResult<Vec<String>> {
        let load = |s: &String| {
            let mut cmd = redis::cmd("SCRIPT");
            cmd.arg("LOAD").arg(s);
            cmd
        };
        match self {
            Link::Server(..) => self.pipeline(scripts::sources().iter().map(load)),
            // The cluster connection sends SCRIPT LOAD to every node.
            Link::Cluster(con) => scripts::sources()
                .iter()
                .map(|s| load(s).query(con))
                .collect(),
        }
    }

    /// The keys matching `pattern`, from `SCAN` (on every master of a
    /// cluster), never `KEYS`.
    pub(crate) fn scan(&mut self, pattern: &str) -> RedisResult<BTreeSet<String>> {
        let mut found = BTreeSet::new();
        match self {
            Link::Server(con, _) => scan_node(&mut found, pattern, |cmd| cmd.query(con))?,
            Link::Cluster(con) => {
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(con)?;
                for (host, port) in masters(&nodes) {
                    let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    });
                    scan_node(&mut found, pattern, |cmd| {
                        con.route_command(cmd, at.clone())
                            .and_then(|v| FromRedisValue::from_redis_value(v).map_err(Into::into))
                    })?;
                }
            }
        }
        Ok(found)
    }
}

/// Every page of one node's `SCAN`.
fn scan_node(
    found: &mut BTreeSet<String>,
    pattern: &str,
    mut query: impl FnMut(&Cmd) -> RedisResult<(u64, Vec<String>)>,
) -> RedisResult<()> {
    let mut cursor = 0u64;
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(500);
        let (next, keys) = query(&cmd)?;
        found.extend(keys);
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// The masters of `CLUSTER NODES`' answer that are not failed: host and
/// port.
fn masters(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let (_id, addr, flags) = (fields.next()?, fields.next()?, fields.next()?);
            let flags: Vec<&str> = flags.split(',').collect();
            if !flags.contains(&"master") || flags.iter().any(|f| f.starts_with("fail")) {
                return None;
            }
            // `host:port@cport[,hostname]`
            let addr = addr.split(['@', ',']).next()?;
            let (host, port) = addr.rsplit_once(':')?;
            Some((host.to_owned(), port.parse().ok()?))
        })
        .collect()
}

/// A connection to one node within `budget`: the redis crate's set-up
/// gives each answer it reads (to `AUTH`, to `SELECT`) the whole timeout
/// it is given, so the budget is split between the connection and them.
pub(crate) fn node(client: &redis::Client, budget: Duration) -> RedisResult<Connection> {
    let settings = client.get_connection_info().redis_settings();
    let steps = 1 + u32::from(settings.password().is_some()) + u32::from(settings.db() != 0);
    let con = client.get_connection_with_timeout((budget / steps).max(Duration::from_millis(1)))?;
    con.set_read_timeout(Some(budget))?;
    con.set_write_timeout(Some(budget))?;
    Ok(con)
}

/// A timeout, as the redis crate reports one.
pub(crate) fn timed_out(what: &'static str) -> RedisError {
    RedisError::from(io::Error::new(io::ErrorKind::TimedOut, what))
}

/// A reply to one Sentinel lookup.
type Lookup = Sender<RedisResult<redis::Client>>;

/// The redis crate's Sentinel client, on a thread of its own: its lookups
/// (`SENTINEL MASTERS` on each sentinel in turn, then `ROLE` on the master
/// found) have no timeout, and the agent waits for one at most its own.
/// One lookup at a time; the thread ends after its lookup once this is
/// dropped.
pub(crate) struct Sentinel {
    lookups: Sender<Lookup>,
}

impl Sentinel {
    pub(crate) fn start(mut client: SentinelClient) -> io::Result<Sentinel> {
        let (lookups, asked): (Sender<Lookup>, Receiver<Lookup>) = crossbeam_channel::bounded(1);
        std::thread::Builder::new()
            .name("fusebox-sentinel".into())
            .spawn(move || {
                for reply in asked {
                    // The asker may have given up waiting.
                    let _ = reply.send(client.get_client());
                }
            })?;
        Ok(Sentinel { lookups })
    }

    /// The master's client, as the sentinels name it now.
    fn master(&self, timeout: Duration) -> RedisResult<redis::Client> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.lookups
            .try_send(reply)
            .map_err(|_| timed_out("an earlier Sentinel lookup is still under way"))?;
        answer
            .recv_timeout(timeout)
            .map_err(|_| timed_out("no sentinel answered"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lists_the_masters_that_have_not_failed() {
        let nodes = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
292f 127.0.0.1:30003@40003,redis-3 master - 0 1426238318243 3 connected 10923-16383
6ec2 127.0.0.1:30005@40005 master,fail - 1426238316232 1426238315232 5 disconnected
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
";
        assert_eq!(
            masters(nodes),
            [
                ("127.0.0.1".to_owned(), 30002),
                ("127.0.0.1".to_owned(), 30003),
                ("127.0.0.1".to_owned(), 30001),
            ]
        );
    }
}
