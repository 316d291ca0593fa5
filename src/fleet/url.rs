//! The Redis URL, which may hold a password: kept whole only to build the
//! client, and shown everywhere else with the password hidden.
//!
//! [`RedisUrl`]'s `Debug` and `Display` print the redacted form
//! (`rediss://fusebox:***@redis.internal:6380/0`), built from the parsed
//! parts, never from the text: a URL that does not parse is not shown at
//! all. [`RedisUrl::scrub`] removes the password from any text before it is
//! logged, in case an error of the redis crate ever echoes it.

use std::fmt;

use redis::{ConnectionInfo, IntoConnectionInfo, RedisResult};

/// What is printed in place of a password.
const HIDDEN: &str = "***";

/// A Redis URL whose password never shows.
#[derive(Clone)]
pub(crate) struct RedisUrl {
    text: String,
    /// The URL without its password, query or fragment.
    shown: String,
    /// The password as written (percent-encoded) and as sent, for
    /// [`scrub`](Self::scrub).
    secrets: Vec<String>,
}

impl RedisUrl {
    pub(crate) fn new(text: String) -> RedisUrl {
        let mut secrets = Vec::new();
        let shown = match redis::parse_redis_url(&text) {
            Some(url) => {
                let scheme = url.scheme();
                let mut shown = format!("{scheme}://");
                if scheme.ends_with("unix") {
                    // The password of a socket URL is in its query, not shown.
                    shown.push_str(url.path());
                } else {
                    if !url.username().is_empty() {
                        shown.push_str(url.username());
                    }
                    if let Some(password) = url.password() {
                        shown.push(':');
                        shown.push_str(HIDDEN);
                        secrets.push(password.to_owned());
                    }
                    if !url.username().is_empty() || url.password().is_some() {
                        shown.push('@');
                    }
                    shown.push_str(url.host_str().unwrap_or(""));
                    if let Some(port) = url.port() {
                        shown.push_str(&format!(":{port}"));
                    }
                    shown.push_str(url.path());
                }
                shown
            }
            None => "(a URL that does not parse, not shown)".to_owned(),
        };
        let mut url = RedisUrl {
            text,
            shown,
            secrets,
        };
        if let Ok(info) = url.connection_info() {
            if let Some(password) = info.redis_settings().password() {
                url.secrets.push(password.to_owned());
            }
        }
        url.secrets.retain(|s| !s.is_empty());
        // Longest first, so that a password containing another is removed
        // whole.
        url.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        url.secrets.dedup();
        url
    }

    /// What the redis crate makes of the URL. Its errors never hold the
    /// URL or the password (they name what is wrong: "Invalid database
    /// number", a scheme it does not know).
    ///
    /// The connection skips `CLIENT SETINFO`, whose two answers the redis
    /// crate would each wait the whole timeout for on a hung server.
    pub(crate) fn connection_info(&self) -> RedisResult<ConnectionInfo> {
        let info = self.text.as_str().into_connection_info()?;
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        Ok(info.set_redis_settings(settings))
    }

    /// Several URLs shown as one, after `label` (`sentinel master `m` at
    /// redis://a:26379/, redis://b:26379/`): every password is hidden and
    /// scrubbed. Not a URL to connect to.
    pub(crate) fn listed(label: &str, urls: &[RedisUrl]) -> RedisUrl {
        let shown: Vec<&str> = urls.iter().map(|u| u.shown.as_str()).collect();
        let mut secrets: Vec<String> = urls.iter().flat_map(|u| u.secrets.clone()).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        RedisUrl {
            text: String::new(),
            shown: format!("{label} {}", shown.join(", ")),
            secrets,
        }
    }

    /// The same, with `secret` scrubbed too.
    pub(crate) fn with_secret(mut self, secret: String) -> RedisUrl {
        if !secret.is_empty() {
            self.secrets.push(secret);
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
            self.secrets.dedup();
        }
        self
    }

    /// `text` with every occurrence of the URL's password replaced by
    /// `***`.
    pub(crate) fn scrub(&self, mut text: String) -> String {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), HIDDEN);
            }
        }
        text
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.shown, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_user_host_port_and_db_but_never_the_password() {
        let url = RedisUrl::new("rediss://fusebox:pa%40ss@redis.internal:6380/2?protocol=3".into());
        assert_eq!(
            url.to_string(),
            "rediss://fusebox:***@redis.internal:6380/2"
        );
        assert_eq!(
            format!("{url:?}"),
            "\"rediss://fusebox:***@redis.internal:6380/2\""
        );
        let url = RedisUrl::new("redis://:only-a-password@127.0.0.1/".into());
        assert_eq!(url.to_string(), "redis://:***@127.0.0.1/");
        let url = RedisUrl::new("redis://127.0.0.1:6379/".into());
        assert_eq!(url.to_string(), "redis://127.0.0.1:6379/");
    }

    #[test]
    fn a_socket_url_shows_its_path_and_not_its_query() {
        let url = RedisUrl::new("redis+unix:///run/redis.sock?user=u&pass=s3cret".into());
        assert_eq!(url.to_string(), "redis+unix:///run/redis.sock");
        assert_eq!(url.scrub("no s3cret here".into()), "no *** here");
    }

    #[test]
    fn a_url_that_does_not_parse_is_not_shown() {
        let url = RedisUrl::new("redis://user:s3cret@host:notaport/".into());
        assert!(!url.to_string().contains("s3cret"), "{url}");
        assert!(!format!("{url:?}").contains("s3cret"), "{url:?}");
    }

    #[test]
    fn scrub_removes_the_password_as_written_and_as_sent() {
        let url = RedisUrl::new("redis://u:pa%40ss@127.0.0.1/".into());
        assert_eq!(
            url.scrub("AUTH u pa@ss failed; url had pa%40ss".into()),
            "AUTH u *** failed; url had ***"
        );
        let plain = RedisUrl::new("redis://127.0.0.1/".into());
        assert_eq!(plain.scrub("untouched".into()), "untouched");
    }
}
