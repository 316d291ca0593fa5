//! Where the fleet's Redis is, and one connection to it, through the redis
//! crate's own support for each: a single server, the master that Redis
//! Sentinel names (looked up again at every connection, so that the agent
//! follows the master across a failover), or a Redis Cluster (each
//! breaker's keys live in one slot, and a cluster connection sends each
//! script to its slot's node).
//!
//! Every wait is bounded by the caller's timeout. The redis crate's
//! Sentinel lookup has no timeout of its own, so it runs on a thread of its
//! own ([`Sentinel`]) that the agent waits for at most its timeout. Its
//! cluster connection bounds each of its waits, but not a call as a whole
//! (it connects to nodes, retries, follows redirects), so it too runs on a
//! thread of its own ([`ClusterLink`]), and a caller with a deadline (an
//! operator's call) waits for a call until then only.

use std::collections::BTreeSet;
use std::io;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use redis::cluster::{ClusterClient, ClusterConfig, ClusterConnection};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::sentinel::SentinelClient;
use redis::{Cmd, Connection, FromRedisValue, RedisError, RedisResult, Value};

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
pub(crate) struct Link {
    to: To,
    /// Each send and answer waits at most this.
    timeout: Duration,
    /// When every call must be done by, if set.
    deadline: Option<Instant>,
}

/// What a [`Link`] is connected to.
// One per connection, never in a collection: boxing the larger variant
// would buy nothing.
#[allow(clippy::large_enum_variant)]
enum To {
    /// One server (or the master Sentinel named), and its client, to
    /// subscribe to the same node.
    Server(Connection, redis::Client),
    /// A cluster: a connection per node, made as the slots need them.
    Cluster(ClusterLink),
}

impl Topology {
    /// Connects for commands, waiting at most `timeout` to connect (the
    /// Sentinel lookup included), and no later than `deadline` if one is
    /// given (which the link keeps for its calls, see
    /// [`Link::set_deadline`]); each answer after waits at most `timeout`.
    pub(crate) fn connect(
        &self,
        timeout: Duration,
        deadline: Option<Instant>,
    ) -> RedisResult<Link> {
        let start = Instant::now();
        let budget = match deadline {
            Some(d) => timeout.min(d.saturating_duration_since(start)),
            None => timeout,
        };
        if budget.is_zero() {
            return Err(timed_out("no time left to connect"));
        }
        let to = match self {
            Topology::Server(client) => To::Server(node(client, budget)?, client.clone()),
            Topology::Sentinel(sentinel) => {
                let master = sentinel.master(budget)?;
                let left = budget.saturating_sub(start.elapsed());
                if left.is_zero() {
                    return Err(timed_out("connecting to the master"));
                }
                To::Server(node(&master, left)?, master)
            }
            Topology::Cluster { client, .. } => {
                let whole = deadline.map(|_| start + budget);
                To::Cluster(ClusterLink::connect(client, budget, whole)?)
            }
        };
        let mut link = Link {
            to,
            timeout,
            deadline,
        };
        link.set_timeout(timeout)?;
        Ok(link)
    }

    /// A connection to subscribe on, to the node of `link` (or, in a
    /// cluster, to the first seed node that answers).
    pub(crate) fn pubsub(&self, link: &Link, timeout: Duration) -> RedisResult<Connection> {
        let con = match (self, &link.to) {
            (_, To::Server(_, client)) => node(client, timeout)?,
            (Topology::Cluster { nodes, .. }, To::Cluster(_)) => {
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
            (_, To::Cluster(_)) => return Err(timed_out("no node to subscribe on")),
        };
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }
}

impl Link {
    /// Each later send and answer waits at most `timeout`.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        self.timeout = timeout;
        let deadline = self.deadline;
        match &mut self.to {
            To::Server(con, _) => {
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))
            }
            To::Cluster(con) => con.call(deadline, move |con| {
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))
            }),
        }
    }

    /// Every later call must be done by `deadline` (`None`: each send and
    /// answer waits at most the timeout, however many a call makes). One
    /// still waiting then fails as timed out; with a cluster, the link is
    /// then lost, and every later call fails at once.
    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Whether this is a cluster connection (whose pipelines take only
    /// commands with keys).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.to, To::Cluster(_))
    }

    /// One command.
    pub(crate) fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        let deadline = self.deadline;
        match &mut self.to {
            To::Server(con, _) => {
                bound(con, self.timeout, deadline)?;
                cmd.query(con)
            }
            To::Cluster(con) => {
                let cmd = cmd.clone();
                let value: Value = con.call(deadline, move |con| cmd.query(con))?;
                Ok(T::from_redis_value(value)?)
            }
        }
    }

    /// Commands in one pipeline (in a cluster, one per node), their
    /// answers in order.
    pub(crate) fn pipeline<T: FromRedisValue>(
        &mut self,
        cmds: impl IntoIterator<Item = Cmd>,
    ) -> RedisResult<T> {
        let deadline = self.deadline;
        match &mut self.to {
            To::Server(con, _) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                bound(con, self.timeout, deadline)?;
                pipe.query(con)
            }
            To::Cluster(con) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                let value: Value = con.call(deadline, move |con| pipe.query(con))?;
                Ok(T::from_redis_value(value)?)
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
        let deadline = self.deadline;
        match &mut self.to {
            To::Server(..) => self.pipeline(scripts::sources().iter().map(load)),
            // The cluster connection sends SCRIPT LOAD to every node.
            To::Cluster(con) => {
                let cmds: Vec<Cmd> = scripts::sources().iter().map(load).collect();
                con.call(deadline, move |con| {
                    cmds.iter().map(|cmd| cmd.query(con)).collect()
                })
            }
        }
    }

    /// The keys matching `pattern`, from `SCAN` (on every master of a
    /// cluster), never `KEYS`.
    pub(crate) fn scan(&mut self, pattern: &str) -> RedisResult<BTreeSet<String>> {
        let mut found = BTreeSet::new();
        let (timeout, deadline) = (self.timeout, self.deadline);
        match &mut self.to {
            To::Server(con, _) => scan_node(&mut found, pattern, |cmd| {
                bound(con, timeout, deadline)?;
                cmd.query(con)
            })?,
            To::Cluster(con) => {
                let pattern = pattern.to_owned();
                found = con.call(deadline, move |con| {
                    let mut found = BTreeSet::new();
                    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(con)?;
                    for (host, port) in masters(&nodes) {
                        let at = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.clone(),
                            port,
                        });
                        scan_node(&mut found, &pattern, |cmd| {
                            con.route_command(cmd, at.clone()).and_then(|v| {
                                FromRedisValue::from_redis_value(v).map_err(Into::into)
                            })
                        })?;
                    }
                    Ok(found)
                })?;
            }
        }
        Ok(found)
    }
}

/// Before a round trip on `con`: with a deadline, its sends and answers
/// wait at most the time left (and the timeout); an error once it has
/// passed.
fn bound(con: &Connection, timeout: Duration, deadline: Option<Instant>) -> RedisResult<()> {
    let Some(deadline) = deadline else {
        return Ok(());
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out("the deadline passed"));
    }
    let wait = left.min(timeout);
    con.set_read_timeout(Some(wait))?;
    con.set_write_timeout(Some(wait))
}

/// A call the cluster connection's thread runs.
type Job = Box<dyn FnOnce(&mut ClusterConnection) + Send>;

/// The redis crate's cluster connection, on a thread of its own
/// (`fusebox-cluster`), which runs one call at a time, and ends once this
/// is dropped and the call it runs (if any) returns.
///
/// Each of the connection's waits (to connect to a node, for an answer)
/// is bounded by the timeout, but a call as a whole is not: a call may
/// connect to every node in turn (after `MOVED`, or to learn the slots
/// again), and retries. A caller with a deadline waits until then only; a
/// call still running then is left to end on its thread (within the
/// crate's own timeouts), and the link is lost: every later call fails at
/// once, and the caller connects afresh.
pub(crate) struct ClusterLink {
    jobs: Sender<Job>,
    lost: bool,
}

impl ClusterLink {
    /// Connects on a new thread, each of the connection's waits bounded by
    /// `timeout`, and waits for it until `deadline` if one is given.
    fn connect(
        client: &ClusterClient,
        timeout: Duration,
        deadline: Option<Instant>,
    ) -> RedisResult<ClusterLink> {
        let client = client.clone();
        let (jobs, queue): (Sender<Job>, Receiver<Job>) = crossbeam_channel::unbounded();
        let (ready, connected) = crossbeam_channel::bounded(1);
        std::thread::Builder::new()
            .name("fusebox-cluster".into())
            .spawn(move || {
                let config = ClusterConfig::new()
                    .set_connection_timeout(timeout)
                    .set_response_timeout(timeout);
                let mut con = match client.get_connection_with_config(config) {
                    Ok(con) => con,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                // The caller may have given up waiting.
                if ready.send(Ok(())).is_err() {
                    return;
                }
                for job in queue {
                    job(&mut con);
                }
            })?;
        let mut link = ClusterLink { jobs, lost: false };
        link.answer(&connected, deadline)?;
        Ok(link)
    }

    /// Runs `call` on the connection's thread, and waits for its answer
    /// until `deadline` if one is given.
    fn call<R: Send + 'static>(
        &mut self,
        deadline: Option<Instant>,
        call: impl FnOnce(&mut ClusterConnection) -> RedisResult<R> + Send + 'static,
    ) -> RedisResult<R> {
        if self.lost {
            return Err(timed_out(
                "an earlier call to the cluster did not answer in time",
            ));
        }
        let (reply, answer) = crossbeam_channel::bounded(1);
        let job: Job = Box::new(move |con| {
            let _ = reply.send(call(con));
        });
        if self.jobs.send(job).is_err() {
            self.lost = true;
            return Err(ended());
        }
        self.answer(&answer, deadline)
    }

    /// The answer on `answer`, waiting until `deadline` if one is given.
    fn answer<R>(
        &mut self,
        answer: &Receiver<RedisResult<R>>,
        deadline: Option<Instant>,
    ) -> RedisResult<R> {
        let got = match deadline {
            Some(deadline) => answer.recv_deadline(deadline).map_err(|e| e.is_timeout()),
            None => answer.recv().map_err(|_| false),
        };
        got.unwrap_or_else(|late| {
            self.lost = true;
            Err(if late {
                timed_out("the cluster did not answer within the timeout")
            } else {
                ended()
            })
        })
    }
}

/// The cluster connection's thread ended without answering.
fn ended() -> RedisError {
    RedisError::from(io::Error::other("the cluster connection's thread ended"))
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

/// `client` without `CLIENT SETINFO` at connection, whose two answers the
/// redis crate would each wait the whole timeout for on a hung server (the
/// master's client the Sentinel client makes sends it).
fn without_lib_name(client: redis::Client) -> RedisResult<redis::Client> {
    let info = client.get_connection_info().clone();
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    redis::Client::open(info.set_redis_settings(settings))
}

/// A refused password, told apart: the redis crate says only that one was
/// refused, the sentinels' (every one of them, or the lookup would have
/// gone on to another) or the master's. A sentinel that takes its URL's
/// now says it was the master's.
fn whose_password(err: RedisError, sentinels: &[redis::Client], timeout: Duration) -> RedisError {
    if err.kind() != redis::ErrorKind::AuthenticationFailed {
        return err;
    }
    let whose = if sentinels.iter().any(|s| node(s, timeout).is_ok()) {
        "the sentinels took their passwords, the master refused the one given for it"
    } else {
        "the sentinels refused the password of their URLs"
    };
    RedisError::from((redis::ErrorKind::AuthenticationFailed, whose))
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
    /// Starts the lookups' thread of `client`, whose sentinels are
    /// `sentinels` (to tell whose password was refused, each connection
    /// waiting at most `timeout`).
    pub(crate) fn start(
        mut client: SentinelClient,
        sentinels: Vec<redis::Client>,
        timeout: Duration,
    ) -> io::Result<Sentinel> {
        let (lookups, asked): (Sender<Lookup>, Receiver<Lookup>) = crossbeam_channel::bounded(1);
        std::thread::Builder::new()
            .name("fusebox-sentinel".into())
            .spawn(move || {
                for reply in asked {
                    let found = client
                        .get_client()
                        .and_then(without_lib_name)
                        .map_err(|e| whose_password(e, &sentinels, timeout));
                    // The asker may have given up waiting.
                    let _ = reply.send(found);
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
