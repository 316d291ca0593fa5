//! The endpoint's HTTP/1.1 on one connection: one request, read under a
//! deadline that counts from the connection's accept, with a bounded head
//! and body; one answer, written under a deadline of its own.
//!
//! Requests are parsed by `httparse`; this file adds the rules it leaves to
//! its caller: one `Authorization` header at most, a `Content-Length` of
//! digits only, no body without a length.

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
    /// For a 405: the methods the path takes.
    pub(crate) allow: Option<&'static str>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn json(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            allow: None,
            body,
        }
    }

    /// `{"error": message}`; the message is shown through
    /// [`crate::text::shown`], as it may quote the client.
    pub(crate) fn error(status: u16, message: &str) -> Reply {
        let message = crate::text::shown(message).to_string();
        let body = serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default();
        Reply::json(status, body)
    }

    /// A 405 naming the method the path takes.
    pub(crate) fn wrong_method(allow: &'static str) -> Reply {
        Reply {
            allow: Some(allow),
            ..Reply::error(405, &format!("use {allow}"))
        }
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

/// How long a connection's close drains what a client still sends.
const LINGER: Duration = Duration::from_millis(100);
/// The most bytes a close drains.
const LINGER_BYTES: usize = 64 * 1024;

/// The status line and headers of `reply`.
fn head(reply: &Reply) -> String {
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
    if let Some(allow) = reply.allow {
        head.push_str("Allow: ");
        head.push_str(allow);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head
}

/// Writes `reply` within `timeout` and closes the connection, lingering:
/// the write side is shut first and what the client still sends (an
/// unread body, say) is drained for at most [`LINGER`] and
/// [`LINGER_BYTES`], so that the client reads the answer instead of a
/// reset.
pub(crate) fn send(stream: &mut TcpStream, reply: &Reply, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    if write_by(stream, head(reply).as_bytes(), deadline).is_err()
        || write_by(stream, &reply.body, deadline).is_err()
    {
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
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

/// Writes a short `reply` in one non-blocking attempt and closes the
/// connection, draining only what has already arrived: an answer given
/// without ever waiting on the client. A fresh connection's send buffer
/// holds such an answer whole.
pub(crate) fn send_at_once(stream: &mut TcpStream, reply: &Reply) {
    let mut bytes = head(reply).into_bytes();
    bytes.extend_from_slice(&reply.body);
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let _ = stream.write(&bytes);
    let _ = stream.shutdown(Shutdown::Write);
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
}

/// Writes all of `bytes` by `deadline`: a client that reads slowly has
/// until then to take the whole answer, however it paces its reads.
fn write_by(stream: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
    /// A connection whose request must have arrived by `deadline`.
    pub(crate) fn new(stream: TcpStream, deadline: Instant) -> Conn {
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
                    let head = read_head(&req)?;
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

/// The head's fields the endpoint uses, with the rules `httparse` leaves
/// to its caller.
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
            // With two, which one the token is checked against would be a
            // choice an attacker makes: neither is.
            if head.authorization.is_some() {
                return Err(ReadError::Refuse(400, "more than one Authorization header"));
            }
            head.authorization = Some(h.value.to_vec());
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = content_length(h.value)
                .ok_or(ReadError::Refuse(400, "malformed Content-Length"))?;
            if head.content_length.is_some_and(|m| m != n) {
                return Err(ReadError::Refuse(400, "conflicting Content-Length"));
            }
            head.content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = true;
        }
    }
    if head.chunked && head.content_length.is_some() {
        return Err(ReadError::Refuse(
            400,
            "both Transfer-Encoding and Content-Length",
        ));
    }
    Ok(head)
}

/// A `Content-Length` value: one or more ASCII digits (RFC 9110 §8.6), with
/// no sign and no space inside; `None` otherwise or past `u64`.
fn content_length(value: &[u8]) -> Option<u64> {
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::content_length;

    #[test]
    fn a_content_length_is_digits_only() {
        assert_eq!(content_length(b"5"), Some(5));
        assert_eq!(content_length(b" 42 "), Some(42));
        assert_eq!(content_length(b"0"), Some(0));
        for bad in [
            &b"+5"[..],
            b"-5",
            b"5 5",
            b"0x10",
            b"",
            b" ",
            b"5.0",
            b"99999999999999999999999",
        ] {
            assert_eq!(
                content_length(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
