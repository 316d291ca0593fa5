//! A small real HTTP/1.1 server on 127.0.0.1 for tests: it answers every
//! request with the current [`Reply`], counts what it received, and can be
//! stopped (connections are then refused) and restarted on the same port.
//! [`HttpServer::start_tls`] starts the same server behind TLS (rustls,
//! ring), with a certificate the test made.
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// What the server does with each request.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    delay: Duration,
    hang: bool,
    gate: Option<Gate>,
}

impl Reply {
    /// `200 OK` with `body`.
    pub fn ok(body: &str) -> Reply {
        Reply::status(200).body(body)
    }

    /// An empty answer with `status`.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
            hang: false,
            gate: None,
        }
    }

    /// Reads the request and never answers; the connection stays open
    /// until the client gives up or the server stops.
    pub fn hang() -> Reply {
        Reply {
            hang: true,
            ..Reply::status(200)
        }
    }

    /// With this body.
    pub fn body(mut self, body: &str) -> Reply {
        self.body = body.as_bytes().to_vec();
        self
    }

    /// With this header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Answers only after `delay`.
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Answers only once `gate` is opened.
    pub fn held_by(mut self, gate: &Gate) -> Reply {
        self.gate = Some(gate.clone());
        self
    }
}

/// Holds answers back until opened.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Lets every held answer (and every later one) go.
    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    fn wait(&self, stopped: &AtomicBool) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open && !stopped.load(Ordering::Acquire) {
            open = self
                .0
                 .1
                .wait_timeout(open, Duration::from_millis(20))
                .unwrap()
                .0;
        }
    }
}

struct Shared {
    reply: Mutex<Reply>,
    /// Request lines received (`GET /path?query HTTP/1.1`), in order.
    seen: Mutex<Vec<String>>,
    arrived: Condvar,
    stopped: AtomicBool,
    /// Set for a server behind TLS.
    tls: Option<Arc<ServerConfig>>,
}

/// The server. Stops when dropped.
pub struct HttpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

impl HttpServer {
    /// Starts on a free loopback port, answering `200 OK` with `ok`.
    pub fn start() -> HttpServer {
        HttpServer::start_with(None)
    }

    /// Starts behind TLS with this certificate chain and key (PEM), as
    /// [`start`](Self::start) otherwise. Its [`url`](Self::url)s are
    /// `https://`.
    pub fn start_tls(cert_chain_pem: &[u8], key_pem: &[u8]) -> HttpServer {
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .expect("a PEM certificate chain");
        let key = PrivateKeyDer::from_pem_slice(key_pem).expect("a PEM private key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("the certificate and its key");
        HttpServer::start_with(Some(Arc::new(config)))
    }

    fn start_with(tls: Option<Arc<ServerConfig>>) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let server = HttpServer {
            addr: listener.local_addr().unwrap(),
            shared: Arc::new(Shared {
                reply: Mutex::new(Reply::ok("ok")),
                seen: Mutex::new(Vec::new()),
                arrived: Condvar::new(),
                stopped: AtomicBool::new(false),
                tls,
            }),
            accept: Mutex::new(None),
        };
        server.serve(listener);
        server
    }

    /// `http://127.0.0.1:PORT{path}`, `https://` behind TLS.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.shared.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Answers later requests with `reply`.
    pub fn reply(&self, reply: Reply) {
        *self.shared.reply.lock().unwrap() = reply;
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.shared.seen.lock().unwrap().len()
    }

    /// The request lines received so far.
    pub fn request_lines(&self) -> Vec<String> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived in all; false if that takes
    /// more than 10 s (a guard against a hung test, not a timing check).
    pub fn wait_for_requests(&self, n: usize) -> bool {
        let seen = self.shared.seen.lock().unwrap();
        let (seen, _) = self
            .shared
            .arrived
            .wait_timeout_while(seen, Duration::from_secs(10), |s| s.len() < n)
            .unwrap();
        seen.len() >= n
    }

    /// Closes the listening socket and every open connection: new
    /// connections are refused until [`restart`](Self::restart).
    pub fn stop(&self) {
        let handle = self.accept.lock().unwrap().take();
        if let Some(handle) = handle {
            self.shared.stopped.store(true, Ordering::Release);
            // Wake the blocking accept so that it sees the flag.
            let _ = TcpStream::connect(self.addr);
            handle.join().unwrap();
        }
    }

    /// Listens again on the same port.
    pub fn restart(&self) {
        self.stop();
        let listener = TcpListener::bind(self.addr).expect("rebind the same port");
        self.shared.stopped.store(false, Ordering::Release);
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        let shared = Arc::clone(&self.shared);
        let handle = thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stopped.load(Ordering::Acquire) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    let _ = handle(stream, &shared);
                });
            }
        });
        *self.accept.lock().unwrap() = Some(handle);
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A connection, plain or behind TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Conn {
    /// Ends the answer: TLS's close_notify, then the end of the stream.
    fn close(&mut self) {
        let tcp = match self {
            Conn::Plain(tcp) => tcp,
            Conn::Tls(tls) => {
                tls.conn.send_close_notify();
                let _ = tls.flush();
                &mut tls.sock
            }
        };
        let _ = tcp.shutdown(Shutdown::Write);
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

fn handle(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    // Reads time out so that a stopped server is noticed; the TLS
    // handshake happens on the first read and resumes after a timeout.
    stream.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut stream = match &shared.tls {
        None => Conn::Plain(stream),
        Some(config) => {
            let conn = ServerConnection::new(Arc::clone(config)).map_err(io::Error::other)?;
            Conn::Tls(Box::new(StreamOwned::new(conn, stream)))
        }
    };
    let Some(line) = read_request(&mut stream, &shared.stopped)? else {
        return Ok(());
    };
    let reply = shared.reply.lock().unwrap().clone();
    shared.seen.lock().unwrap().push(line);
    shared.arrived.notify_all();

    if reply.hang {
        // Hold the connection open, unanswered, until the client leaves.
        let mut buf = [0u8; 256];
        while !shared.stopped.load(Ordering::Acquire) {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(_) => break,
            }
        }
        return Ok(());
    }
    if let Some(gate) = &reply.gate {
        gate.wait(&shared.stopped);
    }
    if !reply.delay.is_zero() {
        thread::sleep(reply.delay);
    }
    if shared.stopped.load(Ordering::Acquire) {
        return Ok(());
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(&reply.body)?;
    stream.flush()?;
    stream.close();
    Ok(())
}

/// Reads one request (head and any `Content-Length` body) and returns its
/// request line; `None` if the client left first or the server stopped.
fn read_request(stream: &mut Conn, stopped: &AtomicBool) -> io::Result<Option<String>> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if stopped.load(Ordering::Acquire) {
            return Ok(None);
        }
        match stream.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while data.len() < head_end + length && !stopped.load(Ordering::Acquire) {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(head.lines().next().map(str::to_owned))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
