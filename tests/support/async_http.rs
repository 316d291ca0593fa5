//! A small HTTP/1.1 client on tokio for the async tests: one `GET` on a
//! connection of its own to the loopback [`HttpServer`](super::http_server),
//! which answers with `Connection: close`; the answer as an
//! `http::Response<String>`, the type tower's HTTP services return.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `GET url` (`http://127.0.0.1:PORT/PATH`), the whole answer.
pub async fn get(url: &str) -> io::Result<http::Response<String>> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| io::Error::other("not an http:// URL"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = TcpStream::connect(host).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no end of head"))?;
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no status"))?;
    http::Response::builder()
        .status(status)
        .body(body.to_owned())
        .map_err(io::Error::other)
}
