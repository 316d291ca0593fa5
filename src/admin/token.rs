//! The bearer token, compared in constant time.

use std::fmt;

/// The secret that mutations (and, if configured, reads) must present.
#[derive(Clone)]
pub(crate) struct Token(Box<[u8]>);

impl Token {
    pub(crate) fn new(secret: &str) -> Self {
        Token(secret.as_bytes().into())
    }

    /// Whether an `Authorization` header value carries this token: the
    /// `Bearer` scheme, in any case (RFC 9110 §11.1), one or more spaces,
    /// and the token.
    ///
    /// The comparison visits every byte of the expected token whatever the
    /// offered one holds, so its time does not tell how much of a guess was
    /// right; only the expected token's length shows.
    pub(crate) fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization.map(<[u8]>::trim_ascii) else {
            return false;
        };
        let offered = match value.split_at_checked(6) {
            Some((scheme, rest))
                if scheme.eq_ignore_ascii_case(b"bearer") && rest.first() == Some(&b' ') =>
            {
                rest.trim_ascii_start()
            }
            _ => return false,
        };
        let expected = &self.0;
        let mut diff = offered.len() ^ expected.len();
        for (i, &want) in expected.iter().enumerate() {
            let got = offered.get(i).copied().unwrap_or(!want);
            diff |= usize::from(got ^ want);
        }
        std::hint::black_box(diff) == 0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_only_the_exact_bearer_token() {
        let t = Token::new("s3cret-token-0123456789");
        for right in [
            &b"Bearer s3cret-token-0123456789"[..],
            b"bearer s3cret-token-0123456789",
            b"BEARER  s3cret-token-0123456789 ",
        ] {
            assert!(t.admits(Some(right)), "{}", String::from_utf8_lossy(right));
        }
        for wrong in [
            &b"Bearer s3cret-token-012345678"[..],
            b"Bearer s3cret-token-01234567890",
            b"Bearer S3cret-token-0123456789",
            b"Bearer ",
            b"Bearers3cret-token-0123456789",
            b"Bearer\ts3cret-token-0123456789",
            b"Basic s3cret-token-0123456789",
            b"s3cret-token-0123456789",
        ] {
            assert!(!t.admits(Some(wrong)), "{}", String::from_utf8_lossy(wrong));
        }
        assert!(!t.admits(None));
    }

    #[test]
    fn never_prints_the_secret() {
        assert!(!format!("{:?}", Token::new("hunter2-hunter2")).contains("hunter2"));
    }
}
