//! What each path does: reads of metrics, snapshots, health and audit, and
//! the overrides that need the token.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::http::{Conn, Head, ReadError, Reply};
use super::json::{AuditJson, BreakerJson, EventsJson};
use super::Shared;
use crate::duration::parse as parse_duration;
use crate::registry::{Action, Override, RegistryError};
use crate::text::shown;
use crate::trading::WindowEnd;
use std::time::SystemTime;

/// The most bytes allowed in an override's actor or reason.
const MAX_TEXT: usize = 512;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideBody {
    actor: String,
    reason: String,
    /// A duration such as "30m", after which a forced state ends by itself.
    #[serde(default)]
    expires_after: Option<String>,
}

/// A maintenance window declared by `POST /breakers/{name}/maintenance`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MaintenanceBody {
    actor: String,
    reason: String,
    /// RFC 3339; now if left out.
    #[serde(default)]
    start: Option<String>,
    /// A duration such as "2h"; this or `until`.
    #[serde(default)]
    duration: Option<String>,
    /// RFC 3339; this or `duration`.
    #[serde(default)]
    until: Option<String>,
}

/// Answers one request. The body, if any, is read only once the request is
/// known to be an authorized override of a breaker that exists.
pub(crate) fn route(shared: &Shared, head: &Head, conn: &mut Conn) -> Reply {
    let path = head.path.split('?').next().unwrap_or_default();
    let Some(segments) = path.strip_prefix('/') else {
        return Reply::error(404, "no such path");
    };
    let segments: Vec<String> = match segments.split('/').map(percent_decode).collect() {
        Ok(s) => s,
        Err(why) => return Reply::error(400, why),
    };
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let get = head.method == "GET";
    let post = head.method == "POST";
    match segments.as_slice() {
        ["metrics"]
        | ["breakers"]
        | ["health"]
        | ["audit"]
        | ["breakers", _]
        | ["breakers", _, "events"]
        | ["bulkheads"]
        | ["bulkheads", _]
        | ["health", "liveness" | "readiness"]
            if !get =>
        {
            Reply::wrong_method("GET")
        }
        ["breakers", _, action] if action_of(action).is_some() && !post => {
            Reply::wrong_method("POST")
        }
        _ if get && shared.guard_reads && !shared.token.admits(head.authorization.as_deref()) => {
            Reply::error(401, "a bearer token is required")
        }
        ["metrics"] => Reply {
            status: 200,
            content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8",
            allow: None,
            body: crate::prometheus::encode(&shared.registry).into_bytes(),
        },
        ["breakers"] => {
            let all: Vec<BreakerJson> = shared
                .registry
                .breakers()
                .iter()
                .map(|b| BreakerJson::new(b, &b.snapshot(), shared.registry.is_critical(b.name())))
                .collect();
            json(200, &all)
        }
        ["breakers", name] => match shared.registry.get(name) {
            Some(b) => json(
                200,
                &BreakerJson::new(&b, &b.snapshot(), shared.registry.is_critical(name)),
            ),
            None => Reply::error(404, "no such breaker"),
        },
        ["breakers", name, "events"] => match shared.registry.get(name) {
            Some(b) => json(200, &EventsJson::new(&b.snapshot(), b.event_log_capacity())),
            None => Reply::error(404, "no such breaker"),
        },
        #[cfg(feature = "isolation")]
        ["bulkheads"] => json(200, &shared.registry.bulkhead_snapshots()),
        #[cfg(feature = "isolation")]
        ["bulkheads", name] => match shared.registry.bulkhead(name) {
            Some(b) => json(200, &b.snapshot()),
            None => Reply::error(404, "no such bulkhead"),
        },
        ["health"] => {
            let (ready, readiness) = readiness(shared);
            let mut body = serde_json::json!({
                "status": if ready { "ready" } else { "unready" },
                "liveness": liveness(),
                "readiness": readiness,
            });
            if !ready {
                body["refusing"] = refusing(&body["readiness"]);
            }
            json(if ready { 200 } else { 503 }, &body)
        }
        ["health", "liveness"] => json(200, &liveness()),
        ["health", "readiness"] => {
            let (ready, readiness) = readiness(shared);
            json(if ready { 200 } else { 503 }, &readiness)
        }
        ["audit"] => {
            let trail: Vec<AuditJson> =
                shared.registry.audit().iter().map(AuditJson::new).collect();
            json(200, &trail)
        }
        ["breakers", name, action] => match action_of(action) {
            Some(action) => {
                let reply = mutate(shared, head, conn, name, action);
                if reply.status != 200 {
                    log::warn!(
                        "admin endpoint: refused {} {} from {}: {} {}",
                        shown(&head.method),
                        shown(path),
                        peer(conn),
                        reply.status,
                        shown(&String::from_utf8_lossy(&reply.body))
                    );
                }
                reply
            }
            None => Reply::error(404, "no such path"),
        },
        _ => Reply::error(404, "no such path"),
    }
}

/// Liveness: the process answers. No breaker has a say in it: a process
/// whose dependencies are down is alive, and restarting it would not help.
fn liveness() -> serde_json::Value {
    serde_json::json!({ "status": "up" })
}

/// Readiness: every critical breaker admits calls (closed or forced
/// closed). Each critical breaker is listed with its state and whether it
/// is ready; other breakers have no say and are not listed.
fn readiness(shared: &Shared) -> (bool, serde_json::Value) {
    let mut breakers = serde_json::Map::new();
    let mut ready = true;
    for (b, critical) in shared.registry.breakers_marked() {
        if !critical {
            continue;
        }
        let state = b.state();
        let admits = !crate::registry::refuses_calls(state);
        ready &= admits;
        breakers.insert(
            b.name().to_owned(),
            serde_json::json!({ "state": state.as_str(), "ready": admits }),
        );
    }
    let status = if ready { "ready" } else { "unready" };
    (
        ready,
        serde_json::json!({ "status": status, "breakers": breakers }),
    )
}

/// The names of the critical breakers a readiness body lists as not ready.
fn refusing(readiness: &serde_json::Value) -> serde_json::Value {
    let names: Vec<&String> = readiness["breakers"]
        .as_object()
        .map(|all| {
            all.iter()
                .filter(|(_, b)| b["ready"] == false)
                .map(|(n, _)| n)
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!(names)
}

fn action_of(segment: &str) -> Option<Action> {
    match segment {
        "force-open" => Some(Action::ForceOpen),
        "force-closed" => Some(Action::ForceClosed),
        "reset" => Some(Action::Reset),
        "maintenance" => Some(Action::Maintenance),
        _ => None,
    }
}

fn mutate(shared: &Shared, head: &Head, conn: &mut Conn, name: &str, action: Action) -> Reply {
    if !shared.token.admits(head.authorization.as_deref()) {
        return Reply::error(401, "a bearer token is required");
    }
    if shared.registry.get(name).is_none() {
        return Reply::error(404, "no such breaker");
    }
    if head.chunked {
        return Reply::error(400, "send the body with a Content-Length");
    }
    let len = match head.content_length {
        None | Some(0) => {
            return Reply::error(400, "a JSON body with actor and reason is required")
        }
        Some(n) if n > shared.max_body as u64 => return Reply::error(413, "the body is too large"),
        Some(n) => n as usize,
    };
    let body = match conn.body(len) {
        Ok(body) => body,
        Err(ReadError::Refuse(status, why)) => return Reply::error(status, why),
        Err(ReadError::Gone) => return Reply::error(400, "the body did not arrive in time"),
    };
    if action == Action::Maintenance {
        return declare(shared, name, &body);
    }
    let request: OverrideBody = match object(&body) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    if let Some(refused) = check_text(&request.actor, &request.reason) {
        return refused;
    }
    let expiry = match (&request.expires_after, action) {
        (None, _) => None,
        (Some(_), Action::Reset) => {
            return Reply::error(400, "`expires_after` is for force-open and force-closed")
        }
        (Some(text), _) => match parse_duration(text) {
            Ok(d) if !d.is_zero() => Some(d),
            Ok(_) => return Reply::error(400, "`expires_after` must be greater than zero"),
            Err(why) => return Reply::error(400, &format!("`expires_after`: {why}")),
        },
    };
    let mut request = Override::new(request.actor, request.reason);
    if let Some(d) = expiry {
        request = request.expires_after(d);
    }
    let result = match action {
        Action::ForceOpen => shared.registry.force_open(name, &request),
        Action::ForceClosed => shared.registry.force_closed(name, &request),
        _ => shared.registry.reset(name, &request),
    };
    match result {
        Ok(record) => json(200, &AuditJson::new(&record)),
        // Unregistered in between: nothing was changed.
        Err(_) => Reply::error(404, "no such breaker"),
    }
}

/// A request body: a JSON object, read into `T`; a 400 for anything else.
fn object<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Reply> {
    serde_json::from_slice::<Object<T>>(body)
        .map(|o| o.0)
        .map_err(|e| Reply::error(400, &format!("malformed body: {e}")))
}

/// `T` read from a JSON object only. A derived `Deserialize` also takes a
/// sequence, by position (`["mallory", "reason"]`), which no client means.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }

        deserializer.deserialize_map(Only(PhantomData)).map(Object)
    }
}

/// A 400 for an actor or reason that is blank, too long, or holds a
/// control or invisible formatting character (they go into log lines,
/// which they must not forge).
fn check_text(actor: &str, reason: &str) -> Option<Reply> {
    for (field, text) in [("actor", actor), ("reason", reason)] {
        if text.trim().is_empty() || text.len() > MAX_TEXT {
            return Some(Reply::error(
                400,
                &format!("`{field}` must be 1 to {MAX_TEXT} bytes, not blank"),
            ));
        }
        if text.chars().any(crate::text::is_hostile) {
            return Some(Reply::error(
                400,
                &format!("`{field}` must hold no control character"),
            ));
        }
    }
    None
}

/// `POST /breakers/{name}/maintenance`: a one-off window from `start` (or
/// now) for `duration` or `until`.
fn declare(shared: &Shared, name: &str, body: &[u8]) -> Reply {
    let request: MaintenanceBody = match object(body) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    if let Some(refused) = check_text(&request.actor, &request.reason) {
        return refused;
    }
    let start = match request.start.as_deref().map(rfc3339) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(why)) => return Reply::error(400, &format!("`start`: {why}")),
    };
    let end = match (&request.duration, &request.until) {
        (Some(text), None) => match parse_duration(text) {
            Ok(d) => WindowEnd::After(d),
            Err(why) => return Reply::error(400, &format!("`duration`: {why}")),
        },
        (None, Some(text)) => match rfc3339(text) {
            Ok(t) => WindowEnd::At(t),
            Err(why) => return Reply::error(400, &format!("`until`: {why}")),
        },
        _ => return Reply::error(400, "give exactly one of `duration` and `until`"),
    };
    let request = Override::new(request.actor, request.reason);
    match shared
        .registry
        .declare_maintenance(name, &request, start, end)
    {
        Ok(record) => json(200, &AuditJson::new(&record)),
        Err(RegistryError::Config { source, .. }) => Reply::error(400, &source.to_string()),
        // Unregistered in between: nothing was changed.
        Err(_) => Reply::error(404, "no such breaker"),
    }
}

/// An RFC 3339 instant, such as `2026-12-06T07:00:00Z`.
fn rfc3339(text: &str) -> Result<SystemTime, String> {
    text.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .map_err(|e| format!("not an RFC 3339 instant such as 2026-12-06T07:00:00Z ({e})"))
}

fn json<T: serde::Serialize>(status: u16, value: &T) -> Reply {
    match serde_json::to_vec(value) {
        Ok(body) => Reply::json(status, body),
        Err(_) => Reply::error(500, "could not encode the answer"),
    }
}

fn peer(conn: &Conn) -> String {
    conn.stream
        .peer_addr()
        .map_or_else(|_| "an unknown peer".to_owned(), |a| a.to_string())
}

/// A path segment with its `%XX` escapes decoded by the `percent-encoding`
/// crate, once each is known to be well formed (the crate passes a `%` that
/// is not followed by two hex digits through as it is).
fn percent_decode(segment: &str) -> Result<String, &'static str> {
    let bytes = segment.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return Err("malformed percent-escape in the path");
    }
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| "the path is not UTF-8 once decoded")
}

#[cfg(test)]
mod tests {
    use super::{object, percent_decode, OverrideBody};

    #[test]
    fn decodes_escapes_and_refuses_bad_ones() {
        assert_eq!(percent_decode("eod%20prices").as_deref(), Ok("eod prices"));
        assert_eq!(percent_decode("news").as_deref(), Ok("news"));
        assert_eq!(percent_decode("a%2Fb%25").as_deref(), Ok("a/b%"));
        for bad in ["bad%2", "bad%zz", "%+1", "%-1", "%", "x%1"] {
            assert!(percent_decode(bad).is_err(), "{bad}");
        }
        assert!(percent_decode("%ff").is_err());
    }

    #[test]
    fn only_a_json_object_is_a_body() {
        let body: OverrideBody = object(br#"{"actor": "alice", "reason": "r"}"#).unwrap();
        assert_eq!(body.actor, "alice");
        for bad in [
            &br#"["mallory", "positional array"]"#[..],
            br#""alice""#,
            b"7",
            b"null",
            br#"{"actor": "a", "actor": "b", "reason": "r"}"#,
        ] {
            assert!(
                object::<OverrideBody>(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
