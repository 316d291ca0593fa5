//! The endpoint's threads: one that accepts, and one per connection for as
//! long as the connection lasts, at most `max_connections` at once.
//!
//! A thread per connection, rather than a fixed pool that connections
//! queue for, is what keeps a slow client from costing the others anything
//! beyond its place under the limit: no connection ever waits behind
//! another, so its deadline, stamped when it is accepted, is all the time
//! it gets and all it has to wait. A connection over the limit is answered
//! 503 at once by the accept thread, which never reads from or waits on a
//! client. Stopping shuts every live connection's socket, which wakes its
//! thread out of any read or write at once, so that `stop` never waits on
//! what a client does.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::http::{self, Conn, ReadError, Reply};
use super::{routes, Shared};

/// A connection thread's stack: the handlers format JSON and the metrics
/// text into heap buffers and recurse nowhere.
const STACK: usize = 512 * 1024;

/// The endpoint's threads and the connections they serve.
pub(crate) struct Server {
    addr: SocketAddr,
    live: Arc<Mutex<Live>>,
    accept: Option<JoinHandle<()>>,
}

/// The connections being served, under one lock that the accept thread, a
/// finishing connection and `stop` take briefly.
#[derive(Default)]
struct Live {
    stopping: bool,
    next: u64,
    conns: HashMap<u64, Serving>,
}

/// One connection being served: a handle on its socket, to shut it on
/// stop, and its thread.
struct Serving {
    socket: TcpStream,
    thread: JoinHandle<()>,
}

impl Server {
    /// Starts accepting on `listener`.
    pub(crate) fn start(
        listener: TcpListener,
        addr: SocketAddr,
        shared: Arc<Shared>,
    ) -> std::io::Result<Server> {
        let live = Arc::new(Mutex::new(Live::default()));
        let table = Arc::clone(&live);
        let accept = thread::Builder::new()
            .name("fusebox-admin".into())
            .spawn(move || accept_loop(&listener, &table, &shared))?;
        Ok(Server {
            addr,
            live,
            accept: Some(accept),
        })
    }

    /// Stops accepting, closes every connection and joins every thread. It
    /// waits on no client: each connection's socket is shut, which ends
    /// any read or write its thread is in.
    pub(crate) fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        let conns = {
            let mut live = self.live.lock();
            live.stopping = true;
            std::mem::take(&mut live.conns)
        };
        for c in conns.values() {
            let _ = c.socket.shutdown(Shutdown::Both);
        }
        // Wake the accept thread with a connection of our own: it sees
        // `stopping` and ends. It never blocks elsewhere, so it drains the
        // listen queue and this connection gets through.
        let wake = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                SocketAddr::from((Ipv4Addr::LOCALHOST, self.addr.port()))
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                SocketAddr::from((Ipv6Addr::LOCALHOST, self.addr.port()))
            }
            _ => self.addr,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(500));
        let _ = accept.join();
        for (_, c) in conns {
            let _ = c.thread.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, live: &Arc<Mutex<Live>>, shared: &Arc<Shared>) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) if live.lock().stopping => return,
            Err(_) => {
                // Out of descriptors, most likely: let connections finish
                // instead of spinning on the error.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let deadline = Instant::now() + shared.request_timeout;
        let mut table = live.lock();
        if table.stopping {
            return;
        }
        if table.conns.len() >= shared.max_connections {
            drop(table);
            busy(stream);
            continue;
        }
        let Ok(socket) = stream.try_clone() else {
            drop(table);
            busy(stream);
            continue;
        };
        let id = table.next;
        table.next += 1;
        let (shared, finished) = (Arc::clone(shared), Arc::clone(live));
        // Spawned under the lock, so that the thread's own removal, which
        // takes it, always finds its entry in place (or taken by `stop`).
        let spawned = thread::Builder::new()
            .name("fusebox-admin-conn".into())
            .stack_size(STACK)
            .spawn(move || {
                let _leave = Leave { live: finished, id };
                serve(&shared, stream, deadline);
            });
        match spawned {
            Ok(thread) => {
                table.conns.insert(id, Serving { socket, thread });
            }
            Err(_) => {
                drop(table);
                busy(socket);
            }
        }
    }
}

/// Takes a finished connection out of the table, however its thread ended.
struct Leave {
    live: Arc<Mutex<Live>>,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        // Dropping the entry drops this thread's own handle: it detaches.
        let _ = self.live.lock().conns.remove(&self.id);
    }
}

/// Answers 503 on the accept thread, without waiting on the client.
fn busy(mut stream: TcpStream) {
    http::send_at_once(
        &mut stream,
        &Reply::error(503, "the admin endpoint is busy"),
    );
}

/// One connection: one request, one answer.
fn serve(shared: &Shared, stream: TcpStream, deadline: Instant) {
    let mut conn = Conn::new(stream, deadline);
    let reply = match conn.head() {
        Ok(head) => routes::route(shared, &head, &mut conn),
        Err(ReadError::Refuse(status, why)) => Reply::error(status, why),
        Err(ReadError::Gone) => return,
    };
    http::send(&mut conn.stream, &reply, shared.request_timeout);
}
