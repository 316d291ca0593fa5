//! The Lua scripts the agent runs in Redis, and the keys they touch.
//!
//! Every script reads the time from the server (`TIME`), never from a host,
//! changes a breaker's keys atomically, and answers with the breaker's
//! fleet view (see [`View`]). Each breaker's keys share the hash tag
//! `{prefix:name}`, so a script touches one slot of a Redis Cluster.

use redis::{FromRedisValue, RedisResult, Value};

/// The keys of one breaker, and the channel its changes are announced on.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// A hash: `state` (`open` or `closed`), `epoch` (the open period's
    /// number, raised by every change of state), `open_until` (server
    /// milliseconds), `step` (the backoff step: re-opens in a row, reset by
    /// a close), `period` (the open period's length in milliseconds, 0 when
    /// closed), `leases` (leases issued).
    pub(crate) state: String,
    /// The probe lease: a token `epoch:n:agent`, set with `SET NX PX`.
    pub(crate) lease: String,
    /// The recent-failures window (see [`WINDOW`]): a hash of failure
    /// counts by time bucket, and `epoch`, the open period it counts in.
    pub(crate) window: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, name: &str) -> Keys {
        Keys {
            state: format!("{{{prefix}:{name}}}:state"),
            lease: format!("{{{prefix}:{name}}}:lease"),
            window: format!("{{{prefix}:{name}}}:window"),
        }
    }
}

/// The channel on which every change of a prefix's breakers is announced
/// (the message is the breaker's name).
pub(crate) fn channel(prefix: &str) -> String {
    format!("{prefix}:fleet")
}

/// Read the server's time and the breaker's state; `view(applied)` answers.
const PRELUDE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'state', 'epoch', 'open_until', 'step')
local state = h[1] or 'closed'
local epoch = tonumber(h[2]) or 0
local open_until = tonumber(h[3]) or 0
local step = tonumber(h[4]) or 0
local function view(applied)
  local lease = redis.call('GET', KEYS[2]) or ''
  local pttl = redis.call('PTTL', KEYS[2])
  return {state, epoch, open_until, now, lease, pttl, applied, step}
end
local function holds_lease(token)
  return state == 'open' and redis.call('GET', KEYS[2]) == token
    and tonumber(string.match(token, '^(%d+):')) == epoch
end
-- A new period: open for `open_ms` from now (or closed when `open_ms` is
-- nil) at backoff `step`; the lease of the last period ends, and the
-- change is announced on `channel` as `name`.
local function new_period(open_ms, new_step, channel, name)
  epoch = epoch + 1
  step = tonumber(new_step)
  if open_ms then
    state = 'open'
    open_until = now + tonumber(open_ms)
  else
    state = 'closed'
    open_until = 0
  end
  redis.call('HSET', KEYS[1], 'state', state, 'epoch', epoch, 'open_until', open_until, 'step', step, 'period', open_ms or 0)
  redis.call('DEL', KEYS[2])
  redis.call('PUBLISH', channel, name)
  return view(1)
end
"#;

/// A local trip: ARGV = open_ms, step, channel, name. Opens the fleet's
/// breaker for `open_ms` from the server's now, unless it is open already.
const TRIP: &str = r#"
if state ~= 'open' then
  return new_period(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
end
return view(0)
"#;

/// The lease holder's probe failed: ARGV = token, open_ms, step, channel,
/// name. A new open period, only if `token` still holds this period's lease.
/// The fleet's step is authoritative: the new one is the fleet's plus one,
/// or the prober's if that is higher.
const REOPEN: &str = r#"
if holds_lease(ARGV[1]) then
  return new_period(ARGV[2], math.max(step + 1, tonumber(ARGV[3])), ARGV[4], ARGV[5])
end
return view(0)
"#;

/// The lease holder's probe succeeded: ARGV = token, channel, name. Closes
/// the fleet's breaker, only if `token` still holds this period's lease.
const CLOSE: &str = r#"
if holds_lease(ARGV[1]) then
  return new_period(nil, 0, ARGV[2], ARGV[3])
end
return view(0)
"#;

/// A refresh, which also takes the probe lease for `agent` when the open
/// period is over, nobody holds it and `want` is 1 (the local breaker has
/// no probe out): ARGV = agent, lease_ms, want.
const SYNC: &str = r#"
if ARGV[3] == '1' and state == 'open' and now >= open_until and redis.call('EXISTS', KEYS[2]) == 0 then
  local n = redis.call('HINCRBY', KEYS[1], 'leases', 1)
  redis.call('SET', KEYS[2], epoch .. ':' .. n .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2])
end
return view(0)
"#;

/// One agent's failures since its last tick, into the recent-failures
/// window `KEYS[3]`: ARGV = failures, bucket_ms, buckets, threshold,
/// open_ms, channel, name.
///
/// The window is a hash of counts by bucket (server milliseconds divided by
/// `bucket_ms`); the last `buckets` buckets count, older ones are deleted,
/// and the key expires when no failure has come for a whole window. It
/// counts within one closed period (`epoch`): any change of the fleet's
/// state starts it afresh, and failures while the fleet is open count
/// nothing. When the window reaches `threshold`, the fleet opens for
/// `open_ms` at step 0.
const WINDOW: &str = r#"
if state == 'open' then
  return view(0)
end
local w = KEYS[3]
if redis.call('HGET', w, 'epoch') ~= tostring(epoch) then
  redis.call('DEL', w)
  redis.call('HSET', w, 'epoch', epoch)
end
local width = tonumber(ARGV[2])
local buckets = tonumber(ARGV[3])
local bucket = math.floor(now / width)
redis.call('HINCRBY', w, bucket, ARGV[1])
local sum = 0
local all = redis.call('HGETALL', w)
for i = 1, #all, 2 do
  local b = tonumber(all[i])
  if all[i] ~= 'epoch' and b then
    if b <= bucket - buckets then
      redis.call('HDEL', w, all[i])
    else
      sum = sum + tonumber(all[i + 1])
    end
  end
end
redis.call('PEXPIRE', w, width * (buckets + 1))
if sum >= tonumber(ARGV[4]) then
  redis.call('DEL', w)
  return new_period(ARGV[5], 0, ARGV[6], ARGV[7])
end
return view(0)
"#;

/// The scripts, in the order of [`Script`].
pub(crate) fn sources() -> [String; 5] {
    [TRIP, REOPEN, CLOSE, SYNC, WINDOW].map(|body| format!("{PRELUDE}{body}"))
}

/// Which script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Script {
    Trip = 0,
    Reopen = 1,
    Close = 2,
    Sync = 3,
    Window = 4,
}

/// A breaker's state in the fleet, as a script answers it. Times are the
/// server's milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) open: bool,
    pub(crate) epoch: i64,
    pub(crate) open_until: i64,
    pub(crate) now: i64,
    /// The probe lease's token, or empty.
    pub(crate) lease: String,
    /// The lease's time to live in milliseconds (negative when none).
    pub(crate) lease_ttl: i64,
    /// Whether the script changed the fleet's state.
    pub(crate) applied: bool,
    /// The fleet's backoff step: re-opens in a row of this outage.
    pub(crate) step: u32,
}

impl FromRedisValue for View {
    fn from_redis_value(v: Value) -> Result<View, redis::ParsingError> {
        let (state, epoch, open_until, now, lease, lease_ttl, applied, step): (
            String,
            i64,
            i64,
            i64,
            String,
            i64,
            i64,
            u32,
        ) = FromRedisValue::from_redis_value(v)?;
        Ok(View {
            open: state == "open",
            epoch,
            open_until,
            now,
            lease,
            lease_ttl,
            applied: applied != 0,
            step,
        })
    }
}

/// The epoch a lease token was issued for, and whether `agent` holds it.
pub(crate) fn lease_of(token: &str, agent: &str) -> Option<i64> {
    let mut parts = token.splitn(3, ':');
    let epoch = parts.next()?.parse().ok()?;
    parts.next()?;
    (parts.next()? == agent).then_some(epoch)
}

/// Loads the scripts on a connection, returning their SHA1 digests.
pub(crate) fn load(con: &mut redis::Connection) -> RedisResult<[String; 5]> {
    let [a, b, c, d, e] = sources();
    let load = |con: &mut redis::Connection, s: &str| -> RedisResult<String> {
        redis::cmd("SCRIPT").arg("LOAD").arg(s).query(con)
    };
    Ok([
        load(con, &a)?,
        load(con, &b)?,
        load(con, &c)?,
        load(con, &d)?,
        load(con, &e)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_breaker_carries_its_hash_tag() {
        let k = Keys::new("prod", "corporate-actions");
        assert_eq!(k.state, "{prod:corporate-actions}:state");
        assert_eq!(k.lease, "{prod:corporate-actions}:lease");
        assert_eq!(k.window, "{prod:corporate-actions}:window");
    }

    #[test]
    fn a_lease_token_names_its_period_and_holder() {
        assert_eq!(lease_of("7:3:123-0-ab", "123-0-ab"), Some(7));
        assert_eq!(lease_of("7:3:123-0-ab", "123-1-ab"), None);
        assert_eq!(lease_of("x:3:123-0-ab", "123-0-ab"), None);
        assert_eq!(lease_of("", "123-0-ab"), None);
    }
}
