//! The Lua scripts the agent runs in Redis, and the keys they touch.
//!
//! Every script reads the time from the server (`TIME`), never from a host,
//! changes a breaker's keys atomically, and answers with the breaker's
//! fleet view (see [`View`]). Each breaker's keys share the hash tag
//! `{prefix:name}`, so a script touches one slot of a Redis Cluster.

use redis::{FromRedisValue, Value};

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
    /// A stream of operator overrides, resets and noticed expiries (see
    /// `OVERRIDES`), capped at about [`AUDIT_LEN`] entries.
    pub(crate) audit: String,
    /// The recent-failures window (see [`WINDOW`]): a hash of failure
    /// counts by time bucket, and `epoch`, the open period it counts in.
    pub(crate) window: String,
    /// The members serving the breaker: a sorted set of agent names, each
    /// scored with the server millisecond its presence ends at (renewed by
    /// every read of the agent's, [`SYNC`]).
    pub(crate) members: String,
    /// The members whose local breaker tripped while the fleet was closed
    /// (see [`TRIP`]): a sorted set of agent names, each scored with the
    /// server millisecond its trip stops counting at (the trip's time plus
    /// the quorum window). Deleted by every new period of the fleet.
    pub(crate) tripped: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, name: &str) -> Keys {
        Keys {
            state: format!("{{{prefix}:{name}}}:state"),
            lease: format!("{{{prefix}:{name}}}:lease"),
            audit: format!("{{{prefix}:{name}}}:audit"),
            window: format!("{{{prefix}:{name}}}:window"),
            members: format!("{{{prefix}:{name}}}:members"),
            tripped: format!("{{{prefix}:{name}}}:tripped"),
        }
    }

    /// An `EVALSHA` (or `EVAL`) of a script over these keys: `script` is
    /// the digest or the source.
    pub(crate) fn eval(&self, command: &str, script: &str) -> redis::Cmd {
        let mut cmd = redis::cmd(command);
        cmd.arg(script)
            .arg(6)
            .arg(&self.state)
            .arg(&self.lease)
            .arg(&self.audit)
            .arg(&self.window)
            .arg(&self.members)
            .arg(&self.tripped);
        cmd
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
-- The live members whose local trip still counts: their trip is within
-- the quorum window, and their presence has not ended. Every member of the
-- tripped set is also in the members key (one dropped from it, by `prune`
-- or `LEAVE`, leaves the tripped set too), so this is the trips in the
-- window less those of members whose presence ended that no script has
-- dropped yet: a few at most, never a walk over every member tripped.
local function tripped_now()
  local n = redis.call('ZCOUNT', KEYS[6], now, '+inf')
  if n == 0 then
    return 0
  end
  if redis.call('EXISTS', KEYS[5]) == 0 then
    return 0
  end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. now)) do
    local until_ms = tonumber(redis.call('ZSCORE', KEYS[6], m))
    if until_ms and until_ms >= now then
      n = n - 1
    end
  end
  return n
end
-- Drops the members whose presence ended, and their trips with them.
local function prune()
  local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. now)
  if #gone > 0 then
    redis.call('ZREM', KEYS[5], unpack(gone))
    redis.call('ZREM', KEYS[6], unpack(gone))
  end
end
local function view(applied)
  local lease = redis.call('GET', KEYS[2]) or ''
  local pttl = redis.call('PTTL', KEYS[2])
  local o = redis.call('HMGET', KEYS[1], 'step', 'ovr', 'ovr_id', 'ovr_actor', 'ovr_reason', 'ovr_until', 'cause')
  local members = redis.call('ZCOUNT', KEYS[5], now, '+inf')
  local cause = ''
  if state == 'open' then
    cause = o[7] or ''
  end
  return {state, epoch, open_until, now, lease, pttl, applied,
    tonumber(o[1]) or 0, o[2] or '', tonumber(o[3]) or 0, o[4] or '', o[5] or '', tonumber(o[6]) or 0,
    members, tripped_now(), cause}
end
local function holds_lease(token)
  return state == 'open' and redis.call('GET', KEYS[2]) == token
    and tonumber(string.match(token, '^(%d+):')) == epoch
end
-- The lease under `token` goes back, if it is still this period's: deleted
-- and announced on `channel` as `name`.
local function give_back(token, channel, name)
  if token ~= '' and holds_lease(token) then
    redis.call('DEL', KEYS[2])
    redis.call('PUBLISH', channel, name)
    return view(1)
  end
  return view(0)
end
-- A new period: open for `open_ms` from now (or closed when `open_ms` is
-- nil) at backoff `step`; the lease of the last period ends, the members'
-- local trips stop counting (a new outage needs a new quorum), and the
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
  if not open_ms then
    redis.call('HSET', KEYS[1], 'cause', '')
  end
  redis.call('DEL', KEYS[2], KEYS[6])
  redis.call('PUBLISH', channel, name)
  return view(1)
end
"#;

/// A local trip: ARGV = open_ms, step, channel, name, agent, min_members,
/// ratio_ppm, quorum_ms, presence_ms, judge, idle_ms.
///
/// While the fleet is closed, the trip is recorded among the breaker's
/// tripped members (`KEYS[6]`) for `quorum_ms`, and the agent's presence
/// renewed (it serves the breaker; the members key kept `idle_ms`, as a
/// read keeps it). The fleet opens for `open_ms` from the server's now, by
/// `quorum`, only when the live members tripped within the window are at
/// least `min_members` (or every live member, in a fleet smaller than that)
/// and at least `ratio_ppm` parts per million of the live members.
/// Otherwise the trip stays the member's own, unannounced: the other
/// members need not read it (they see the count of members tripped at
/// their next read), and announcing every trip of a fleet-wide outage would
/// make each member read each breaker once per member. With `judge`
/// 0 (the agent's session is younger than `presence`, so members may not
/// have renewed their presence yet), the trip is only recorded.
const TRIP: &str = r#"
if state == 'open' then
  return view(0)
end
local members, tripped = KEYS[5], KEYS[6]
redis.call('ZADD', members, now + tonumber(ARGV[9]), ARGV[5])
prune()
redis.call('PEXPIRE', members, ARGV[11])
redis.call('ZADD', tripped, now + tonumber(ARGV[8]), ARGV[5])
redis.call('ZREMRANGEBYSCORE', tripped, '-inf', '(' .. now)
redis.call('PEXPIRE', tripped, ARGV[8])
local live = redis.call('ZCOUNT', members, now, '+inf')
local n = tripped_now()
if ARGV[10] == '1' and n >= math.min(tonumber(ARGV[6]), live) and n * 1000000 >= tonumber(ARGV[7]) * live then
  redis.call('HSET', KEYS[1], 'cause', 'quorum')
  return new_period(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
end
return view(0)
"#;

/// A member's local breaker closed on its own (its own probe, while the
/// fleet was closed): ARGV = agent. Its trip no longer counts.
const RECOVER: &str = r#"
redis.call('ZREM', KEYS[6], ARGV[1])
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
/// no probe out): ARGV = agent, lease_ms, want, presence_ms, idle_ms.
///
/// It renews the agent's presence among the breaker's members (`KEYS[5]`)
/// for `presence_ms`, dropping members whose presence ended, and keeps the
/// breaker's state hash (created closed if missing) and its members key for
/// `idle_ms` more: once no agent reads it, its keys expire. Between reads,
/// the agent renews its presence alone with `ZADD members XX CH`, which
/// leaves the key's expiry as it is. It runs before the guard, so that an
/// agent under an operator's override still renews them.
const SYNC: &str = r#"
local members = KEYS[5]
redis.call('ZADD', members, now + tonumber(ARGV[4]), ARGV[1])
prune()
redis.call('PEXPIRE', members, ARGV[5])
redis.call('HSETNX', KEYS[1], 'state', state)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if overridden then
  return view(0)
end
if ARGV[3] == '1' and state == 'open' and now >= open_until and redis.call('EXISTS', KEYS[2]) == 0 then
  local n = redis.call('HINCRBY', KEYS[1], 'leases', 1)
  redis.call('SET', KEYS[2], epoch .. ':' .. n .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2])
end
return view(0)
"#;

/// An agent stops serving the breaker (it left, or was dropped): ARGV =
/// agent, token (or empty), channel, name. Its presence ends now, and the
/// probe lease it holds under `token`, if still this period's, is given
/// back and announced, so that a member that stays takes it at once.
const LEAVE: &str = r#"
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
return give_back(ARGV[2], ARGV[3], ARGV[4])
"#;

/// An operator deletes the breaker's keys but its audit stream: ARGV =
/// actor, reason, force, channel, name. Refused (`applied` 0, with the live
/// members in the view) while an agent serves it, unless `force` is 1.
/// The stream records it (`forget`) and keeps its own bounds; the change is
/// announced, so that serving agents (with `force`) read the breaker afresh,
/// as after a Redis restarted empty.
const FORGET: &str = r#"
if ARGV[3] ~= '1' and redis.call('ZCOUNT', KEYS[5], now, '+inf') > 0 then
  return view(0)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6])
audit('forget', ARGV[1], ARGV[2], 0)
redis.call('PUBLISH', ARGV[4], ARGV[5])
state, epoch, open_until, step = 'closed', 0, 0, 0
return view(1)
"#;

/// One agent's failures since its last tick, into the recent-failures
/// window `KEYS[4]`: ARGV = failures, bucket_ms, buckets, threshold,
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
local w = KEYS[4]
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
  redis.call('HSET', KEYS[1], 'cause', 'window')
  return new_period(ARGV[5], 0, ARGV[6], ARGV[7])
end
return view(0)
"#;

/// Operator overrides, after the prelude of every script: the hash's fields
/// `ovr` (the last operator action: `open` or `closed` while an override is
/// in force, `reset` or `expired` after), `ovr_id` (raised by every action
/// and every expiry), `ovr_actor`, `ovr_reason`, `ovr_until` (server
/// milliseconds, 0 for no expiry), and `ovr_announce`, `ovr_name` (where
/// the action was announced). An audit entry's `time_us` is the server's
/// clock in microseconds (entries of several breakers' streams are merged
/// by it), its `expires` in milliseconds (0 for none). An override past its expiry ends here,
/// whichever script notices it first: it is written to the audit stream
/// (KEYS[3]) and announced. `overridden` says whether one is in force.
const OVERRIDES: &str = r#"
local function audit(kind, actor, reason, until_ms)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', AUDIT_LEN, '*', 'kind', kind, 'actor', actor,
    'reason', reason, 'expires', until_ms, 'time_us', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('XTRIM', KEYS[3], 'MINID', (now - AUDIT_AGE_MS) .. '-0')
  redis.call('PEXPIRE', KEYS[3], AUDIT_AGE_MS)
end
local ov = redis.call('HMGET', KEYS[1], 'ovr', 'ovr_until', 'ovr_actor', 'ovr_reason', 'ovr_announce', 'ovr_name')
local overridden = ov[1] == 'open' or ov[1] == 'closed'
local ovr_until = tonumber(ov[2]) or 0
if overridden and ovr_until > 0 and now >= ovr_until then
  overridden = false
  redis.call('HINCRBY', KEYS[1], 'ovr_id', 1)
  redis.call('HSET', KEYS[1], 'ovr', 'expired')
  audit('expired', ov[3] or '', ov[4] or '', ovr_until)
  if ov[5] and ov[6] then
    redis.call('PUBLISH', ov[5], ov[6])
  end
end
"#;

/// Before the agent's scripts: while an operator's override is in force,
/// the fleet's state does not change (no trip, no probe result, no lease).
const GUARD: &str = r#"
if overridden then
  return view(0)
end
"#;

/// An operator's action: ARGV = kind (`open`, `closed` or `reset`), actor,
/// reason, for_ms (0: no expiry; ignored by a reset), channel, name,
/// create, idle_ms. Every action starts a new closed period (the lease of
/// the last one ends, and a probe result made under it is fenced off),
/// records the action in the hash and the audit stream, and announces it.
///
/// Refused (`applied` 0, nothing written) for a breaker no agent has
/// written (no state hash, no member) unless `create` is 1: a name nobody
/// serves is most likely a typo. A state hash without an expiry is given
/// `idle_ms`, as an agent's read would.
const OVERRIDE: &str = r#"
if ARGV[7] ~= '1' and redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[5]) == 0 then
  return view(0)
end
local kind = ARGV[1]
local until_ms = 0
if kind ~= 'reset' and (tonumber(ARGV[4]) or 0) > 0 then
  until_ms = now + tonumber(ARGV[4])
end
redis.call('HINCRBY', KEYS[1], 'ovr_id', 1)
redis.call('HSET', KEYS[1], 'ovr', kind, 'ovr_actor', ARGV[2], 'ovr_reason', ARGV[3],
  'ovr_until', until_ms, 'ovr_announce', ARGV[5], 'ovr_name', ARGV[6])
audit(kind, ARGV[2], ARGV[3], until_ms)
local answer = new_period(nil, 0, ARGV[5], ARGV[6])
if redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
end
return answer
"#;

/// A read for operators' tools: the view, changing nothing but an expired
/// override. No ARGV.
const PEEK: &str = r#"
return view(0)
"#;

/// The lease holder gives back a lease its process has not used: ARGV =
/// token, channel, name. Deletes the lease and announces it, only if
/// `token` still holds this period's lease (a give-back of an older period's
/// token, or of a lease that expired, changes nothing).
const RETURN: &str = r#"
return give_back(ARGV[1], ARGV[2], ARGV[3])
"#;

/// How many entries a breaker's audit stream keeps, about (`XADD MAXLEN ~`:
/// Redis trims whole nodes, so a few more may stay).
pub(crate) const AUDIT_LEN: u32 = 1000;

/// How long an audit entry is kept: each write drops the entries older than
/// this (`XTRIM MINID`), and a stream with no entry this recent expires.
pub(crate) const AUDIT_AGE: std::time::Duration = std::time::Duration::from_secs(90 * 24 * 60 * 60);

/// How many scripts there are.
const SCRIPTS: usize = 11;

/// The scripts, in the order of [`Script`], assembled once per process.
pub(crate) fn sources() -> &'static [String; SCRIPTS] {
    static SOURCES: std::sync::OnceLock<[String; SCRIPTS]> = std::sync::OnceLock::new();
    SOURCES.get_or_init(assemble)
}

fn assemble() -> [String; SCRIPTS] {
    let overrides = OVERRIDES
        .replace("AUDIT_LEN", &AUDIT_LEN.to_string())
        .replace("AUDIT_AGE_MS", &AUDIT_AGE.as_millis().to_string());
    let agent = |body: &str| format!("{PRELUDE}{overrides}{GUARD}{body}");
    // The operators' scripts, and the agent's that must run under an
    // override (their own guard, if any, is in their body).
    let unguarded = |body: &str| format!("{PRELUDE}{overrides}{body}");
    [
        agent(TRIP),
        agent(REOPEN),
        agent(CLOSE),
        unguarded(SYNC),
        unguarded(OVERRIDE),
        unguarded(PEEK),
        agent(WINDOW),
        agent(RETURN),
        unguarded(LEAVE),
        unguarded(FORGET),
        agent(RECOVER),
    ]
}

/// Which script. Each takes KEYS = the breaker's state, lease, audit,
/// window, members and tripped members ([`Keys::eval`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Script {
    Trip = 0,
    Reopen = 1,
    Close = 2,
    Sync = 3,
    Override = 4,
    Peek = 5,
    Window = 6,
    Return = 7,
    Leave = 8,
    Forget = 9,
    Recover = 10,
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
    /// The last operator action on the breaker (`ovr_*` in the hash).
    pub(crate) action: Action,
    /// The agents serving the breaker now: their presence has not ended.
    pub(crate) members: u64,
    /// The live members whose local trip counts towards the quorum now.
    pub(crate) tripped: u64,
    /// What opened the fleet, while it is open.
    pub(crate) cause: Cause,
}

/// What opened the fleet's breaker (the hash's `cause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Cause {
    /// Not open, or opened by a version that did not record it.
    #[default]
    None,
    /// A quorum of members' local trips.
    Quorum,
    /// The recent-failures window's threshold.
    Window,
}

/// An operator's last action on a breaker of the fleet, as the hash holds it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Action {
    pub(crate) kind: ActionKind,
    /// Raised by every action and every expiry: a new number is a new event.
    pub(crate) id: i64,
    pub(crate) actor: String,
    pub(crate) reason: String,
    /// Server milliseconds, 0 for no expiry.
    pub(crate) until: i64,
}

/// What an operator's last action was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ActionKind {
    /// None ever (or the hash is gone).
    #[default]
    None,
    /// Forced open, in force.
    Open,
    /// Forced closed, in force.
    Closed,
    /// Reset: no override in force.
    Reset,
    /// The override reached its expiry: none in force.
    Expired,
}

impl ActionKind {
    pub(crate) fn parse(s: &str) -> ActionKind {
        match s {
            "open" => ActionKind::Open,
            "closed" => ActionKind::Closed,
            "reset" => ActionKind::Reset,
            "expired" => ActionKind::Expired,
            _ => ActionKind::None,
        }
    }

    /// Whether an override is in force.
    pub(crate) fn in_force(self) -> bool {
        matches!(self, ActionKind::Open | ActionKind::Closed)
    }
}

impl Action {
    /// Milliseconds left before the override's expiry at the server's
    /// `now`, or `None` for an override without one.
    pub(crate) fn left(&self, now: i64) -> Option<i64> {
        (self.until > 0).then(|| (self.until - now).max(0))
    }
}

impl FromRedisValue for View {
    fn from_redis_value(v: Value) -> Result<View, redis::ParsingError> {
        type Fleet = (String, i64, i64, i64, String, i64, i64, i64);
        type Operator = (String, i64, String, String, i64);
        let mut items: Vec<Value> = FromRedisValue::from_redis_value(v)?;
        if items.len() != 16 {
            return Err("a fleet view has 16 fields".into());
        }
        let cause: String = FromRedisValue::from_redis_value(items.pop().unwrap_or(Value::Nil))?;
        let tripped: i64 = FromRedisValue::from_redis_value(items.pop().unwrap_or(Value::Nil))?;
        let members: i64 = FromRedisValue::from_redis_value(items.pop().unwrap_or(Value::Nil))?;
        let operator = items.split_off(items.len() - 5);
        let (state, epoch, open_until, now, lease, lease_ttl, applied, step): Fleet =
            FromRedisValue::from_redis_value(Value::Array(items))?;
        let (kind, id, actor, reason, until): Operator =
            FromRedisValue::from_redis_value(Value::Array(operator))?;
        Ok(View {
            open: state == "open",
            epoch,
            open_until,
            now,
            lease,
            lease_ttl,
            applied: applied != 0,
            // A step outside u32 (a key written by another program) is
            // clamped rather than failing the agent's whole round trip.
            step: u32::try_from(step.max(0)).unwrap_or(u32::MAX),
            action: Action {
                kind: ActionKind::parse(&kind),
                id,
                actor,
                reason,
                until,
            },
            members: members.max(0) as u64,
            tripped: tripped.max(0) as u64,
            cause: match cause.as_str() {
                "quorum" => Cause::Quorum,
                "window" => Cause::Window,
                _ => Cause::None,
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_breaker_carries_its_hash_tag() {
        let k = Keys::new("prod", "corporate-actions");
        assert_eq!(k.state, "{prod:corporate-actions}:state");
        assert_eq!(k.lease, "{prod:corporate-actions}:lease");
        assert_eq!(k.audit, "{prod:corporate-actions}:audit");
        assert_eq!(k.window, "{prod:corporate-actions}:window");
        assert_eq!(k.members, "{prod:corporate-actions}:members");
        assert_eq!(k.tripped, "{prod:corporate-actions}:tripped");
    }

    #[test]
    fn a_lease_token_names_its_period_and_holder() {
        assert_eq!(lease_of("7:3:123-0-ab", "123-0-ab"), Some(7));
        assert_eq!(lease_of("7:3:123-0-ab", "123-1-ab"), None);
        assert_eq!(lease_of("x:3:123-0-ab", "123-0-ab"), None);
        assert_eq!(lease_of("", "123-0-ab"), None);
    }
}
