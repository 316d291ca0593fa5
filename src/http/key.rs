//! The key a last-known-good answer is filed under: the request line as
//! ureq puts it on the wire.

use ureq::http::{Method, Uri};

/// `GET http://host/path?a=1&b=2`: the method, then the URI with the query
/// ureq sends: the URI's own query first, then `extra`, the pairs given to
/// [`GuardedRequest::query`](super::GuardedRequest::query), already encoded
/// and joined by `&` (see [`push_query_pair`]).
///
/// So `get("/px?sym=A")` and `get("/px").query("sym", "A")`, which send the
/// same request, share a key.
pub(super) fn key(method: &Method, uri: &Uri, extra: &str) -> String {
    let own = uri.query().unwrap_or("");
    let mut key = String::with_capacity(
        method.as_str().len() + uri.path().len() + own.len() + extra.len() + 40,
    );
    key.push_str(method.as_str());
    key.push(' ');
    if let Some(scheme) = uri.scheme_str() {
        key.push_str(scheme);
        key.push_str("://");
    }
    if let Some(authority) = uri.authority() {
        key.push_str(authority.as_str());
    }
    key.push_str(uri.path());
    let mut separator = '?';
    for part in [own, extra] {
        if !part.is_empty() {
            key.push(separator);
            key.push_str(part);
            separator = '&';
        }
    }
    key
}

/// Appends `name=value` to `query` (after a `&` unless it is empty),
/// percent-encoded as ureq's `RequestBuilder::query` encodes them: control
/// characters, bytes outside ASCII, the space and
/// `"#$%&'+,/:;<=>?@[\]^`{|}` become `%XX`.
pub(super) fn push_query_pair(query: &mut String, name: &str, value: &str) {
    if !query.is_empty() {
        query.push('&');
    }
    encode(query, name);
    query.push('=');
    encode(query, value);
}

fn encode(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        let escape = !b.is_ascii_graphic() || b"\"#$%&'+,/:;<=>?@[\\]^`{|}".contains(&b);
        if escape {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        } else {
            out.push(char::from(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn a_query_in_the_uri_and_one_added_pair_by_pair_share_a_key() {
        let mut extra = String::new();
        push_query_pair(&mut extra, "sym", "A");
        assert_eq!(
            key(&Method::GET, &uri("http://h:1/px"), &extra),
            key(&Method::GET, &uri("http://h:1/px?sym=A"), "")
        );
        assert_eq!(
            key(&Method::GET, &uri("http://h:1/px?sym=A"), ""),
            "GET http://h:1/px?sym=A"
        );
        push_query_pair(&mut extra, "venue", "X");
        assert_eq!(
            key(&Method::GET, &uri("http://h:1/px?a=1"), &extra),
            "GET http://h:1/px?a=1&sym=A&venue=X"
        );
        assert_ne!(
            key(&Method::HEAD, &uri("http://h:1/px?sym=A"), ""),
            key(&Method::GET, &uri("http://h:1/px?sym=A"), "")
        );
    }

    #[test]
    fn encodes_pairs_as_ureq_does() {
        let mut q = String::new();
        push_query_pair(&mut q, "q", "a b+c/d?é~-._*!()");
        assert_eq!(q, "q=a%20b%2Bc%2Fd%3F%C3%A9~-._*!()");
    }
}
