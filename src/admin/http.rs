//! The endpoint's HTTP/1.1 connection handling: one request per
//! connection, read under a deadline, with bounded head and body.
//!
//! Requests are parsed by `httparse`. Each connection is handled by one of a
//! fixed set of worker threads; a connection that arrives when every worker
//! is busy and the queue is full is answered 503 at once and closed, so a
//! flood sheds load instead of queueing without bound, and a slow client
//! holds one worker for at most the request deadline.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The most bytes of request line and headers read.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
const MAX_HEADERS: usize = 32;

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) authorization: Option<Vec<u8>>,
    pub(crate) content_length: Option<u64>,
    pub(crate) chunked: bool,
}

/// What a handler answers.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn json(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body,
        }
    }

    pub(crate) fn error(status: u16, message: &str) -> Reply {
        let body = serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default();
        Reply::json(status, body)
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// How long a worker's close drains what a client still sends.
pub(crate) const LINGER: Duration = Duration::from_millis(100);
/// The most bytes a lingering close drains.
const LINGER_BYTES: usize = 64 * 1024;

/// Writes `reply` and closes the connection.
///
/// With a `linger`, the close lingers: the write side is shut first and
/// what the client still sends (an unread body, say) is drained for at most
/// that long and [`LINGER_BYTES`], so that the client reads the answer
/// instead of a reset. Without one, the connection is closed at once.
pub(crate) fn send(stream: &mut TcpStream, reply: &Reply, linger: Duration) {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len()
    );
    if reply.status == 401 {
        head.push_str("WWW-Authenticate: Bearer\r\n");
    }
    head.push_str("\r\n");
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&reply.body))
        .and_then(|()| stream.flush());
    if linger.is_zero() {
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + linger;
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
}

/// A connection being read, with what was read past the head.
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    deadline: Instant,
    leftover: Vec<u8>,
}

/// Why a request could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The client went away or stalled past the deadline: nothing to answer.
    Gone,
    /// Answer with this status and message.
    Refuse(u16, &'static str),
}

impl Conn {
    pub(crate) fn new(stream: TcpStream, timeout: Duration) -> Conn {
        let deadline = Instant::now() + timeout;
        let _ = stream.set_write_timeout(Some(timeout));
        Conn {
            stream,
            deadline,
            leftover: Vec::new(),
        }
    }

    /// One read, bounded by what is left of the deadline.
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Gone);
        }
        self.stream
            .set_read_timeout(Some(left))
            .map_err(|_| ReadError::Gone)?;
        match self.stream.read(buf) {
            Ok(0) => Err(ReadError::Gone),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(_) => Err(ReadError::Gone),
        }
    }

    /// Reads and parses the request line and headers.
    pub(crate) fn head(&mut self) -> Result<Head, ReadError> {
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = self.read_some(&mut chunk)?;
            buf.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => {
                    return Err(ReadError::Refuse(431, "the request head is too large"))
                }
                Ok(httparse::Status::Complete(len)) => {
                    let head = Self::read_head(&req)?;
                    self.leftover = buf[len..].to_vec();
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                    return Err(ReadError::Refuse(431, "the request head is too large"))
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(ReadError::Refuse(431, "too many headers"))
                }
                Err(_) => return Err(ReadError::Refuse(400, "malformed request")),
            }
        }
    }

    fn read_head(req: &httparse::Request<'_, '_>) -> Result<Head, ReadError> {
        let mut head = Head {
            method: req.method.unwrap_or_default().to_owned(),
            path: req.path.unwrap_or_default().to_owned(),
            authorization: None,
            content_length: None,
            chunked: false,
        };
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("authorization") {
                head.authorization = Some(h.value.to_vec());
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let n = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or(ReadError::Refuse(400, "malformed Content-Length"))?;
                if head.content_length.is_some_and(|m| m != n) {
                    return Err(ReadError::Refuse(400, "conflicting Content-Length"));
                }
                head.content_length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = true;
            }
        }
        Ok(head)
    }

    /// Reads a body of `len` bytes, already checked against the limit.
    pub(crate) fn body(&mut self, len: usize) -> Result<Vec<u8>, ReadError> {
        let mut body = std::mem::take(&mut self.leftover);
        body.truncate(len);
        let mut chunk = [0u8; 1024];
        while body.len() < len {
            let want = (len - body.len()).min(chunk.len());
            let n = self.read_some(&mut chunk[..want])?;
            body.extend_from_slice(&chunk[..n]);
        }
        Ok(body)
    }
}
