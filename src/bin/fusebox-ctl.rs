//! `fusebox-ctl`: a fleet's breakers from a shell (feature `ctl`).
//!
//! It parses its arguments and prints; the work is done by
//! [`fusebox::fleet::FleetAdmin`]. Exit codes: 0 done, 2 a bad argument or
//! URL (nothing was sent), 1 Redis unreachable, slow or in error, 3 refused
//! by a safety check (an override of a breaker no process has written,
//! without `--create`; `forget` of a served breaker, without `--force`):
//! nothing was written.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, CommandFactory, Parser, Subcommand};
use fusebox::duration::display;
use fusebox::fleet::ctl::{check_actor, check_name, check_reason, printable, utc_date};
use fusebox::fleet::{
    AuditEntry, BreakerStatus, Fleet, FleetAdmin, FleetAdminError, FleetTransition,
};
use serde_json::{json, Value};

/// Status, overrides, live changes and the audit stream of a fleet's
/// breakers (fusebox fleet mode, shared through Redis).
///
/// An override reaches every process whose agent serves a breaker of that
/// name under the prefix, and is recorded in the breaker's audit stream.
#[derive(Parser, Debug)]
#[command(name = "fusebox-ctl", version, max_term_width = 100)]
struct Cli {
    /// The Redis URL, redis://user:password@host:port/db (user and password
    /// optional). Prefer the FUSEBOX_REDIS_URL environment variable: it keeps
    /// a password out of process listings (ps), where a command line shows.
    #[arg(long, global = true, env = "FUSEBOX_REDIS_URL", hide_env_values = true)]
    url: Option<String>,

    /// Redis Sentinel: the name of the master the sentinels monitor; the
    /// URL is then the sentinels', comma-separated, each with the
    /// sentinels' user and password. The master's password, if it asks for
    /// one, is read from the FUSEBOX_MASTER_PASSWORD environment variable
    /// (never from the command line, which process listings show); its
    /// user, if not the default, is --master-user.
    #[arg(
        long,
        global = true,
        value_name = "SERVICE",
        conflicts_with = "cluster"
    )]
    sentinel: Option<String>,

    /// With --sentinel: the master's ACL user (the password is
    /// FUSEBOX_MASTER_PASSWORD's).
    #[arg(long, global = true, value_name = "USER", requires = "sentinel")]
    master_user: Option<String>,

    /// Redis Cluster: the URL is the seed nodes', comma-separated, each
    /// with the same user and password; status and audit cover every
    /// master.
    #[arg(long, global = true)]
    cluster: bool,

    /// The key prefix of the fleet (one per environment).
    #[arg(long, global = true, default_value = "fusebox")]
    prefix: String,

    /// How long the whole command may wait for Redis, connection included
    /// (the Sentinel lookup, and with a Cluster every node it reaches):
    /// e.g. 500ms, 2s, 1.5s; for watch, its set-up. A command not done by
    /// then fails (exit 1).
    #[arg(long, global = true, default_value = "2s", value_parser = duration)]
    timeout: Duration,

    /// A PEM file of the private CA that signed the Redis server's
    /// certificate, and with --sentinel or --cluster every sentinel's,
    /// master's or node's (rediss:// only; the system's roots otherwise).
    #[arg(long, global = true, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,

    /// A PEM file of this tool's client certificate, for a Redis that asks
    /// for one (rediss:// only; with --tls-key).
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,

    /// The PEM file of the client certificate's private key (with
    /// --tls-cert).
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The fleet's state of one breaker, or of every breaker under the prefix.
    Status {
        /// A breaker's name (all breakers when left out).
        #[arg(value_parser = name)]
        name: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Force a breaker open in every process: every call is refused.
    ForceOpen(Action),
    /// Force a breaker closed in every process: every call is let through.
    ForceClosed(Action),
    /// Lift the fleet's override and close the breaker in every process.
    Reset(Reset),
    /// Delete a breaker's keys in Redis (all but its audit stream, which
    /// records it). Refused while a process serves the breaker.
    Forget {
        #[command(flatten)]
        who: Who,
        /// Delete them even while processes serve the breaker: they read it
        /// afresh, closed and without an override.
        #[arg(long)]
        force: bool,
    },
    /// Print each change of the fleet's breakers as it happens (Ctrl-C ends).
    Watch {
        /// One JSON object a line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The audit stream: overrides, resets and expiries, oldest first.
    Audit {
        /// A breaker's name (all breakers' entries, merged, when left out).
        #[arg(value_parser = name)]
        name: Option<String>,
        /// How many of the latest entries.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        count: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct Who {
    /// The breaker's name.
    #[arg(value_parser = name)]
    name: String,
    /// Who asks (recorded in the audit stream and every process's breaker).
    #[arg(long, value_parser = actor)]
    actor: String,
    /// Why (recorded with it).
    #[arg(long, value_parser = reason)]
    reason: String,
}

#[derive(Args, Debug)]
struct Action {
    #[command(flatten)]
    who: Who,
    /// Write it even if no process has written this breaker under the
    /// prefix (without it, such a name is refused as a likely typo).
    #[arg(long)]
    create: bool,
    /// How long the override lasts on the Redis server's clock (e.g. 30s,
    /// 15m, 1h30m, PT2H); until a reset when left out.
    #[arg(long = "for", value_parser = duration)]
    lasting: Option<Duration>,
}

#[derive(Args, Debug)]
struct Reset {
    #[command(flatten)]
    who: Who,
    /// Write it even if no process has written this breaker under the
    /// prefix.
    #[arg(long)]
    create: bool,
}

fn main() -> ExitCode {
    let start = Instant::now();
    let cli = Cli::parse();
    let Some(url) = cli.url.as_deref() else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "the Redis URL is missing: set FUSEBOX_REDIS_URL (or pass --url)",
            )
            .exit();
    };
    let urls = url.split(',').map(str::trim);
    let fleet = match (&cli.sentinel, cli.cluster) {
        (Some(service), _) => Fleet::sentinel_builder(service.as_str(), urls),
        (None, true) => Fleet::cluster_builder(urls),
        (None, false) => Fleet::builder(url),
    };
    let mut fleet = fleet.prefix(cli.prefix.as_str()).timeout(cli.timeout);
    if let Some(password) = master_password(&cli) {
        fleet = fleet.master_auth(cli.master_user.as_deref(), password);
    }
    let read = |path: &std::path::Path| {
        std::fs::read(path).unwrap_or_else(|e| {
            Cli::command()
                .error(
                    clap::error::ErrorKind::ValueValidation,
                    format!("cannot read {}: {e}", path.display()),
                )
                .exit()
        })
    };
    if let Some(ca) = &cli.tls_ca {
        fleet = fleet.tls_ca(read(ca));
    }
    if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
        fleet = fleet.tls_client_auth(read(cert), read(key));
    }
    let connected = fleet.admin().and_then(|mut admin| {
        admin.set_deadline(Some(start + cli.timeout));
        run(admin, &cli)
    });
    match connected {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fusebox-ctl: {e}");
            ExitCode::from(match e {
                FleetAdminError::Invalid(_) | FleetAdminError::Url => 2,
                FleetAdminError::Unknown(_) => {
                    eprintln!("fusebox-ctl: pass --create to write it anyway");
                    3
                }
                FleetAdminError::Served { .. } => {
                    eprintln!("fusebox-ctl: pass --force to delete them anyway");
                    3
                }
                _ => 1,
            })
        }
    }
}

/// The environment variable that holds the password of Sentinel's master.
const MASTER_PASSWORD: &str = "FUSEBOX_MASTER_PASSWORD";

/// The password of Sentinel's master, from [`MASTER_PASSWORD`] (an empty
/// one is none); a usage error (exit 2) if it is set without `--sentinel`,
/// missing with `--master-user`, or not UTF-8. Its value is never shown.
fn master_password(cli: &Cli) -> Option<String> {
    let usage = |kind, message: String| -> ! { Cli::command().error(kind, message).exit() };
    let password = match std::env::var(MASTER_PASSWORD) {
        Ok(p) if p.is_empty() => None,
        Ok(p) => Some(p),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => usage(
            clap::error::ErrorKind::InvalidUtf8,
            format!("{MASTER_PASSWORD} is not UTF-8 (its value is not shown)"),
        ),
    };
    if password.is_some() && cli.sentinel.is_none() {
        usage(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{MASTER_PASSWORD} is set, but it is only for --sentinel's master"),
        );
    }
    if password.is_none() && cli.master_user.is_some() {
        usage(
            clap::error::ErrorKind::MissingRequiredArgument,
            format!("--master-user needs the master's password in {MASTER_PASSWORD}"),
        );
    }
    password
}

fn run(mut admin: FleetAdmin, cli: &Cli) -> Result<(), FleetAdminError> {
    match &cli.command {
        Command::Status { name, json } => {
            let all = match name {
                Some(name) => vec![admin.status(name)?],
                None => admin.list()?,
            };
            if *json {
                let value = match name {
                    Some(_) => status_json(&all[0]),
                    None => Value::Array(all.iter().map(status_json).collect()),
                };
                println!("{value}");
            } else {
                print!("{}", status_table(&all));
            }
        }
        Command::ForceOpen(a) => {
            admin.create_unknown(a.create);
            let s = admin.force_open(&a.who.name, &a.who.actor, &a.who.reason, a.lasting)?;
            println!("{}", status_line(&s));
        }
        Command::ForceClosed(a) => {
            admin.create_unknown(a.create);
            let s = admin.force_closed(&a.who.name, &a.who.actor, &a.who.reason, a.lasting)?;
            println!("{}", status_line(&s));
        }
        Command::Reset(r) => {
            admin.create_unknown(r.create);
            let s = admin.reset(&r.who.name, &r.who.actor, &r.who.reason)?;
            println!("{}", status_line(&s));
        }
        Command::Forget { who, force } => {
            admin.forget(&who.name, &who.actor, &who.reason, *force)?;
            println!("{}: forgotten", who.name);
        }
        Command::Watch { json } => {
            let mut watch = admin.watch()?;
            let mut missed = 0;
            loop {
                if watch.missed() > missed {
                    missed = watch.missed();
                    eprintln!(
                        "fusebox-ctl: {missed} announcements missed so far (output too slow)"
                    );
                }
                if let Some(t) = watch.next(None)? {
                    if *json {
                        println!("{}", transition_json(&t));
                    } else {
                        println!("{}", transition_line(&t));
                    }
                }
            }
        }
        Command::Audit { name, count, json } => {
            let entries = admin.audit(name.as_deref(), *count as usize)?;
            if *json {
                println!("{}", Value::Array(entries.iter().map(audit_json).collect()));
            } else {
                print!("{}", audit_table(&entries));
            }
        }
    }
    Ok(())
}

// Argument checks, so that a bad argument is a usage error (exit 2) before
// anything connects.

fn name(s: &str) -> Result<String, String> {
    check_name(s)
        .map(|()| s.to_owned())
        .map_err(|e| e.to_string())
}

fn actor(s: &str) -> Result<String, String> {
    check_actor(s)
        .map(|()| s.to_owned())
        .map_err(|e| e.to_string())
}

fn reason(s: &str) -> Result<String, String> {
    check_reason(s)
        .map(|()| s.to_owned())
        .map_err(|e| e.to_string())
}

/// `250ms`, `1.5s`, `1m30s`, `1h 30m`, `PT30S`: the crate's one grammar
/// ([`fusebox::duration`]).
fn duration(s: &str) -> Result<Duration, String> {
    fusebox::duration::parse(s).map_err(|e| e.to_string())
}

// Printing.

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

fn state(s: fusebox::State) -> String {
    s.to_string()
}

fn status_json(s: &BreakerStatus) -> Value {
    json!({
        "name": s.name,
        "state": state(s.state),
        "open_for_ms": s.open_for.map(ms),
        "epoch": s.epoch,
        "step": s.step,
        "members": s.members,
        "tripped": s.tripped,
        "opened_by": s.opened_by.map(|o| o.to_string()),
        "lease": s.lease.as_ref().map(|l| json!({
            "holder": l.holder,
            "expires_in_ms": ms(l.expires_in),
        })),
        "override": s.forced.as_ref().map(|o| json!({
            "state": state(o.state),
            "actor": o.actor,
            "reason": o.reason,
            "expires_in_ms": o.expires_in.map(ms),
        })),
    })
}

fn transition_json(t: &FleetTransition) -> Value {
    json!({
        "time_ms": ms(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()),
        "from": t.from.map(state),
        "status": status_json(&t.status),
    })
}

fn audit_json(e: &AuditEntry) -> Value {
    let unix_ms = |t: SystemTime| ms(t.duration_since(UNIX_EPOCH).unwrap_or_default());
    json!({
        "name": e.name,
        "id": e.id,
        "time_ms": unix_ms(e.time),
        "kind": e.kind.to_string(),
        "actor": e.actor,
        "reason": e.reason,
        "expires_ms": e.expires.map(unix_ms),
    })
}

/// `by alice for 30s: vendor down`, under an override.
fn forced_text(s: &BreakerStatus) -> Option<String> {
    s.forced.as_ref().map(|o| {
        let until = o
            .expires_in
            .map_or_else(|| "until reset".into(), |d| format!("for {}", display(d)));
        format!(
            "by {} {until}: {}",
            printable(&o.actor),
            printable(&o.reason)
        )
    })
}

fn status_table(all: &[BreakerStatus]) -> String {
    let mut out = format!(
        "{:<32}  {:<13}  {:>8}  {:>5}  {:>4}  {:>7}  {:>7}  {:<14}  {:<24}  OVERRIDE\n",
        "NAME", "STATE", "OPEN FOR", "EPOCH", "STEP", "MEMBERS", "TRIPPED", "OPENED BY", "LEASE"
    );
    for s in all {
        let lease = s.lease.as_ref().map_or_else(
            || "-".into(),
            |l| format!("{} ({})", printable(&l.holder), display(l.expires_in)),
        );
        let _ = writeln!(
            out,
            "{:<32}  {:<13}  {:>8}  {:>5}  {:>4}  {:>7}  {:>7}  {:<14}  {:<24}  {}",
            s.name,
            state(s.state),
            s.open_for
                .map_or_else(|| "-".into(), |d| display(d).to_string()),
            s.epoch,
            s.step,
            s.members,
            s.tripped,
            s.opened_by.map_or_else(|| "-".into(), |o| o.to_string()),
            lease,
            forced_text(s).unwrap_or_else(|| "-".into())
        );
    }
    out
}

fn status_line(s: &BreakerStatus) -> String {
    let forced = forced_text(s).map_or_else(String::new, |f| format!(", {f}"));
    format!("{}: {} (epoch {}){forced}", s.name, state(s.state), s.epoch)
}

fn transition_line(t: &FleetTransition) -> String {
    let forced = forced_text(&t.status).map_or_else(String::new, |f| format!(", {f}"));
    format!(
        "{}  {}: {} -> {}{forced}",
        utc_date(SystemTime::now()),
        t.status.name,
        t.from.map_or_else(|| "?".into(), state),
        state(t.status.state),
    )
}

fn audit_table(entries: &[AuditEntry]) -> String {
    let mut out = format!(
        "{:<24}  {:<32}  {:<12}  {:<16}  {:<24}  REASON\n",
        "TIME (UTC)", "NAME", "KIND", "ACTOR", "EXPIRES (UTC)"
    );
    for e in entries {
        let _ = writeln!(
            out,
            "{:<24}  {:<32}  {:<12}  {:<16}  {:<24}  {}",
            utc_date(e.time),
            e.name,
            e.kind,
            printable(&e.actor),
            e.expires.map_or_else(|| "-".into(), utc_date),
            printable(&e.reason)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_from_redis_are_escaped() {
        assert_eq!(printable("a\nb\u{1b}[2K"), "a\\nb\\u{1b}[2K");
        assert_eq!(printable("vendor «down»"), "vendor «down»");
        assert_eq!(printable("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn the_arguments_are_consistent() {
        Cli::command().debug_assert();
    }
}
