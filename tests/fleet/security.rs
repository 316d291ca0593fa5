//! Fleet mode's security against a real `redis-server`: `rediss://` with a
//! private CA and with client certificates, an ACL user with exactly the
//! permissions `docs/fleet.md` documents, a key prefix per environment, and
//! the password never showing: not in log lines, `Debug` output, snapshots
//! or errors.
//!
//! Certificates are made at test time with `openssl` (tests/support/certs.rs).
//! As in tests/fleet/fleet.rs, local time comes from mock clocks, the tests
//! wait by polling bounded by `PATIENCE`, and nothing asserts on how long
//! anything took.
#![cfg(feature = "redis")]

use fusebox::fleet::{Fleet, FleetBuilder};
use fusebox::{Breaker, ConfigError, Reason, State};

use crate::support::breaker::{fail, succeed, MS, SEC};
use crate::support::certs::Certs;
use crate::support::fleet_kit::{connected, vendor};
use crate::support::log_capture;
use crate::support::redis_server::{wait_for, Options, RedisServer, TlsFiles, PATIENCE};

/// The ACL user's password: no log line, `Debug` output or error may hold it.
const PASSWORD: &str = "Fl33t-pw-9f3a1c";

/// A password that is not the user's: it must not show either.
const WRONG_PASSWORD: &str = "Wr0ng-pw-77e0d2";

/// A fleet agent with short ticks; a generous `timeout`, so that a TLS
/// handshake on a busy machine is never mistaken for an outage.
fn fleet(url: String, prefix: &str) -> FleetBuilder {
    log_capture::install();
    Fleet::builder(url)
        .prefix(prefix)
        // One process's trip reaches the other (no quorum): these tests
        // are of the connection that carries it.
        .min_members(1)
        .member_ratio(0.0)
        .timeout(SEC)
        .tick(2 * MS)
        .refresh(20 * MS)
        .hold_margin(SEC)
        .reconnect_backoff(5 * MS, 50 * MS)
}

fn tls_server(certs: &Certs, auth_clients: &'static str, users: Vec<String>) -> RedisServer {
    RedisServer::start_with(Options {
        tls: Some(TlsFiles {
            cert: certs.path("server.crt"),
            key: certs.path("server.key"),
            ca: certs.path("ca.crt"),
            auth_clients,
            client: None,
        }),
        users,
        ..Options::default()
    })
}

/// The `ACL SETUSER` line of docs/fleet.md, for `prefix` and [`PASSWORD`],
/// as a `user` directive: the test runs the fleet with exactly the
/// permissions the guide tells operators to grant.
fn documented_acl_user(prefix: &str) -> String {
    let guide = include_str!("../../docs/fleet.md");
    let line = guide
        .lines()
        .find_map(|l| l.trim().strip_prefix("ACL SETUSER "))
        .expect("docs/fleet.md shows an ACL SETUSER line");
    assert!(
        line.contains("~{prod:*") && line.contains("&prod:fleet"),
        "{line}"
    );
    line.replace(">PASSWORD", &format!(">{PASSWORD}"))
        .replace("prod:", &format!("{prefix}:"))
}

/// The operators' `ACL SETUSER fusebox-ops` line of docs/fleet.md, as a
/// `user` directive for `prefix` and [`PASSWORD`].
fn documented_ops_user(prefix: &str) -> String {
    let guide = include_str!("../../docs/fleet.md");
    let line = guide
        .lines()
        .find_map(|l| l.trim().strip_prefix("ACL SETUSER fusebox-ops "))
        .expect("docs/fleet.md shows the operators' ACL SETUSER line");
    format!("fusebox-ops {line}")
        .replace(">PASSWORD", &format!(">{PASSWORD}"))
        .replace("prod:", &format!("{prefix}:"))
}

/// Shares a trip from `a` (in `fa`) to `b` (in `fb`), both connected.
fn a_trip_reaches_the_other(fa: &Fleet, a: &Breaker, fb: &Fleet, b: &Breaker) {
    wait_for("both agents to connect", || connected(fa) && connected(fb));
    assert!(fail(a).is_err());
    assert_eq!(a.state(), State::Open);
    wait_for("the other process to open", || b.state() == State::Open);
    assert_eq!(b.snapshot().last_transition.unwrap().reason, Reason::Fleet);
    wait_for("A's agent to count its write", || {
        fa.snapshot().published == 1
    });
}

#[test]
fn two_fleets_over_rediss_with_a_private_ca_share_a_trip() {
    let certs = Certs::generate("private");
    let redis = tls_server(&certs, "optional", Vec::new());
    assert!(redis.url().starts_with("rediss://"));
    let build = || {
        fleet(redis.url(), "tls")
            .tls_ca(certs.read("ca.crt"))
            .build()
            .unwrap()
    };
    let (fa, fb) = (build(), build());
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    a_trip_reaches_the_other(&fa, &a, &fb, &b);
    assert_eq!((fa.snapshot().outages, fb.snapshot().outages), (0, 0));
}

#[test]
fn mutual_tls_connects_with_the_client_certificate_and_not_without() {
    let certs = Certs::generate("mutual");
    let redis = tls_server(&certs, "yes", Vec::new());
    let with_cert = |prefix| {
        fleet(redis.url(), prefix)
            .tls_ca(certs.read("ca.crt"))
            .tls_client_auth(certs.read("client.crt"), certs.read("client.key"))
            .build()
            .unwrap()
    };
    let (fa, fb) = (with_cert("mtls"), with_cert("mtls"));
    let without = fleet(redis.url(), "mtls-none")
        .tls_ca(certs.read("ca.crt"))
        .build()
        .unwrap();
    let (a, b, c) = (vendor(), vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    without.join(&c).unwrap();
    a_trip_reaches_the_other(&fa, &a, &fb, &b);

    wait_for("the agent without a certificate to fail twice", || {
        without.snapshot().errors >= 2
    });
    let s = without.snapshot();
    assert!(!s.connected && s.reads == 0, "{s:?}");
    assert_eq!(s.outages, 1);
    assert_eq!(
        c.state(),
        State::Closed,
        "the other fleet's trip never reached it"
    );
}

#[test]
fn a_server_certificate_of_another_ca_is_refused_and_breakers_run_locally() {
    let (server_certs, other_ca) = (Certs::generate("server-side"), Certs::generate("other"));
    let redis = tls_server(&server_certs, "optional", Vec::new());
    let f = fleet(redis.url(), "unknown-ca")
        .tls_ca(other_ca.read("ca.crt"))
        .build()
        .unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    wait_for("a few refused handshakes", || f.snapshot().errors >= 3);
    let s = f.snapshot();
    assert!(!s.connected && s.reads == 0 && s.outages == 1, "{s:?}");
    for _ in 0..100 {
        succeed(&b).unwrap();
    }
    assert!(fail(&b).is_err());
    assert_eq!(b.state(), State::Open);
    let lines = log_capture::lines("fleet `unknown-ca`");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("certificate"), "{}", lines[0]);
}

#[test]
fn an_acl_user_with_the_documented_permissions_runs_every_script() {
    let redis = RedisServer::start_with(Options {
        users: vec![documented_acl_user("acl")],
        ..Options::default()
    });
    // Each lease holder probes at once, except in the last period, where
    // the holder gives its unused lease back after `lease_idle`: long
    // enough that a loaded machine does not make a prober give it back.
    let build = || {
        fleet(redis.url_as("fusebox", PASSWORD), "acl")
            .lease_idle(2 * SEC)
            .build()
            .unwrap()
    };
    let (fa, fb) = (build(), build());
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    // TRIP and SYNC.
    a_trip_reaches_the_other(&fa, &a, &fb, &b);

    // SYNC takes the lease after the cool-down; the winner's probe fails
    // (REOPEN), then after the next cool-down succeeds (CLOSE).
    let won = || fa.snapshot().leases_won + fb.snapshot().leases_won;
    let prober = |n: u64| {
        wait_for("a lease to be won", || won() >= n);
        if fa.snapshot().leases_won >= fb.snapshot().leases_won {
            &a
        } else {
            &b
        }
    };
    let p = prober(1);
    wait_for("the lease holder to let a call probe", || {
        p.state() != State::Open
    });
    assert!(fail(p).is_err());
    let p = prober(2);
    wait_for("the next lease holder to let a call probe", || {
        p.state() != State::Open
    });
    succeed(p).unwrap();
    wait_for("both breakers to close", || {
        a.state() == State::Closed && b.state() == State::Closed
    });
    for f in [&fa, &fb] {
        let s = f.snapshot();
        assert_eq!((s.errors, s.outages, s.fenced), (0, 0, 0), "{s:?}");
    }
    // The prober's agent counts its close when the answer comes back,
    // which may be after both breakers read closed.
    wait_for("the trip, the re-open and the close to be counted", || {
        fa.snapshot().published + fb.snapshot().published == 3
    });

    // RETURN: another open period in which neither process calls; the
    // lease holder gives its unused lease back.
    assert!(fail(&a).is_err());
    wait_for("an unused lease to be given back", || {
        fa.snapshot().leases_returned + fb.snapshot().leases_returned >= 1
    });
    for f in [&fa, &fb] {
        let s = f.snapshot();
        assert_eq!((s.errors, s.outages), (0, 0), "{s:?}");
    }
}

#[test]
fn a_prefix_per_environment_keeps_fleets_apart_and_the_acl_enforces_it() {
    let redis = RedisServer::start_with(Options {
        users: vec![
            documented_acl_user("prod"),
            documented_acl_user("uat").replacen("fusebox", "fusebox-uat", 1),
        ],
        ..Options::default()
    });
    let prod = || {
        fleet(redis.url_as("fusebox", PASSWORD), "prod")
            .build()
            .unwrap()
    };
    let (fa, fb) = (prod(), prod());
    let uat = fleet(redis.url_as("fusebox-uat", PASSWORD), "uat")
        .build()
        .unwrap();
    // prod's credentials for uat's keys: refused by the ACL.
    let trespasser = fleet(redis.url_as("fusebox", PASSWORD), "uat")
        .build()
        .unwrap();
    let (a, b, u, t) = (vendor(), vendor(), vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    uat.join(&u).unwrap();
    trespasser.join(&t).unwrap();
    wait_for("uat's agent to connect", || connected(&uat));
    a_trip_reaches_the_other(&fa, &a, &fb, &b);

    let rounds = uat.snapshot().round_trips;
    wait_for("uat's agent to make two more round trips", || {
        uat.snapshot().round_trips >= rounds + 2
    });
    assert_eq!(u.state(), State::Closed, "prod's trip stays in prod");

    wait_for("the trespasser to be refused twice", || {
        trespasser.snapshot().errors >= 2
    });
    let s = trespasser.snapshot();
    assert!(!s.connected && s.reads == 0 && s.outages == 1, "{s:?}");
    let lines = log_capture::lines("fleet `uat`");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].to_lowercase().contains("perm"), "{}", lines[0]);
    assert!(!lines[0].contains(PASSWORD), "{}", lines[0]);
}

#[test]
fn an_acl_user_without_the_channels_is_refused_rather_than_left_without_announcements() {
    // Without either channel, and without the agents' own (heartbeats).
    for (prefix, removed) in [
        (
            "nochannel",
            &[" &nochannel:fleet:*", " &nochannel:fleet"][..],
        ),
        ("nobeat", &[" &nobeat:fleet:*"][..]),
    ] {
        let user = removed
            .iter()
            .fold(documented_acl_user(prefix), |u, r| u.replace(r, ""));
        assert_eq!(user.matches('&').count(), 2 - removed.len(), "{user}");
        let redis = RedisServer::start_with(Options {
            users: vec![user],
            ..Options::default()
        });
        let f = fleet(redis.url_as("fusebox", PASSWORD), prefix)
            .build()
            .unwrap();
        let b = vendor();
        f.join(&b).unwrap();
        wait_for("a few refused sessions", || f.snapshot().errors >= 3);
        let s = f.snapshot();
        assert!(!s.connected && s.reads == 0 && s.outages == 1, "{s:?}");
        let lines = log_capture::lines(&format!("fleet `{prefix}`"));
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].to_lowercase().contains("noperm"), "{}", lines[0]);
    }
}

#[test]
fn a_script_refused_after_connecting_is_one_outage_with_one_log_line() {
    // Reads work, writes do not: the user may not HSET.
    let user = documented_acl_user("nowrite").replace(" +hset ", " ");
    let redis = RedisServer::start_with(Options {
        users: vec![user],
        ..Options::default()
    });
    let f = fleet(redis.url_as("fusebox", PASSWORD), "nowrite")
        .build()
        .unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    wait_for("the agent to connect", || connected(&f));
    assert!(fail(&b).is_err());
    // Every session now fails at its first tick, which writes the trip.
    wait_for("several failed sessions", || f.snapshot().errors >= 4);
    let s = f.snapshot();
    assert_eq!(s.outages, 1, "{s:?}");
    let lines = log_capture::lines("fleet `nowrite`");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(b.state(), State::Open, "the local trip stands");
}

/// Runs a fleet whose Redis refuses or never answers, and checks that its
/// breakers run locally, that it logs one line, and that `secret` shows
/// nowhere: not in log lines, `Debug` output, snapshots or errors.
fn runs_locally_and_never_shows(url: String, prefix: &str, secret: &str) {
    let builder = fleet(url.clone(), prefix).timeout(50 * MS);
    let builder_debug = format!("{builder:?}");
    let f = builder.build().unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    wait_for("several failed attempts", || f.snapshot().errors >= 3);
    let s = f.snapshot();
    assert!(!s.connected && s.reads == 0 && s.outages == 1, "{s:?}");

    // Calls keep flowing, on local state.
    for _ in 0..1_000 {
        succeed(&b).unwrap();
    }
    assert!(fail(&b).is_err());
    assert!(succeed(&b).unwrap_err().rejected().is_some());
    assert_eq!(b.snapshot().totals.successes, 1_000);

    let lines = log_capture::lines(&format!("fleet `{prefix}`"));
    assert_eq!(lines.len(), 1, "one line per outage: {lines:#?}");
    assert!(lines[0].starts_with("WARN"), "{}", lines[0]);
    assert!(lines[0].contains(":***@127.0.0.1:"), "{}", lines[0]);

    // Errors that hold the URL's builder: a TLS setting on a plain URL, a
    // bad prefix.
    let errors: Vec<ConfigError> = vec![
        fleet(url.clone(), prefix)
            .tls_ca("not a certificate")
            .build()
            .unwrap_err(),
        fleet(url.clone(), "a b").build().unwrap_err(),
        Fleet::builder(url.replace("redis://", "http://"))
            .build()
            .unwrap_err(),
    ];
    let mut shown = vec![
        builder_debug,
        format!("{f:?}"),
        format!("{:?}", f.snapshot()),
        format!("{:?}", b.snapshot()),
    ];
    shown.extend(errors.iter().map(|e| format!("{e} {e:?}")));
    shown.extend(log_capture::all());
    assert!(shown[1].contains(":***@127.0.0.1:"), "{}", shown[1]);
    for text in shown {
        assert!(!text.contains(secret), "the secret shows in: {text}");
    }
}

#[test]
fn a_wrong_password_runs_locally_logs_once_and_shows_the_password_nowhere() {
    let redis = RedisServer::start_with(Options {
        users: vec![documented_acl_user("wrongpw")],
        ..Options::default()
    });
    runs_locally_and_never_shows(
        redis.url_as("fusebox", WRONG_PASSWORD),
        "wrongpw",
        WRONG_PASSWORD,
    );
    let lines = log_capture::lines("fleet `wrongpw`");
    assert!(lines[0].contains("authentication"), "{}", lines[0]);
}

#[test]
fn an_unreachable_server_runs_locally_logs_once_and_shows_the_password_nowhere() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    runs_locally_and_never_shows(
        format!("redis://fusebox:{PASSWORD}@127.0.0.1:{port}/"),
        "unreachable",
        PASSWORD,
    );
}

#[test]
fn a_plain_url_to_a_tls_port_and_a_tls_url_to_a_plain_port_fall_back_to_local_state() {
    let certs = Certs::generate("mismatch");
    let tls = tls_server(&certs, "optional", Vec::new());
    let plain = RedisServer::start();
    let cases = [
        (format!("redis://127.0.0.1:{}/", tls.port()), "to-tls", None),
        (
            format!("rediss://127.0.0.1:{}/", plain.port()),
            "to-plain",
            Some(certs.read("ca.crt")),
        ),
    ];
    log_capture::install();
    for (url, prefix, ca) in cases {
        let mut builder = Fleet::builder(url)
            .prefix(prefix)
            .reconnect_backoff(5 * MS, 20 * MS);
        if let Some(ca) = ca {
            builder = builder.tls_ca(ca);
        }
        let f = builder.build().unwrap();
        let b = vendor();
        f.join(&b).unwrap();
        // Each attempt ends (in an error or at the default 50 ms timeout),
        // and the agent tries again.
        wait_for("several failed attempts", || f.snapshot().errors >= 3);
        let s = f.snapshot();
        assert!(
            !s.connected && s.reads == 0 && s.outages == 1,
            "{prefix}: {s:?}"
        );
        for _ in 0..1_000 {
            succeed(&b).unwrap();
        }
        assert!(fail(&b).is_err());
        assert!(succeed(&b).unwrap_err().rejected().is_some());
        assert_eq!(b.snapshot().totals.successes, 1_000);
        assert_eq!(log_capture::lines(&format!("fleet `{prefix}`")).len(), 1);
    }
}

#[test]
fn build_refuses_bad_tls_settings_naming_the_field_and_never_showing_the_key() {
    let certs = Certs::generate("settings");
    let (ca, cert, key) = (
        certs.read("ca.crt"),
        certs.read("client.crt"),
        certs.read("client.key"),
    );
    let key_text = String::from_utf8(key.clone()).unwrap();
    let key_body: String = key_text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let tls = format!("rediss://fusebox:{PASSWORD}@127.0.0.1:1/");
    let plain = format!("redis://fusebox:{PASSWORD}@127.0.0.1:1/");
    let refused = |b: FleetBuilder, field: &str| {
        let debug = format!("{b:?}");
        let err = b.build().unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        for text in [err.to_string(), format!("{err:?}"), debug] {
            assert!(!text.contains(PASSWORD), "{text}");
            assert!(!text.contains(&key_body[..40]), "{text}");
        }
    };
    refused(Fleet::builder(&plain).tls_ca(ca.clone()), "tls_ca");
    refused(
        Fleet::builder(&plain).tls_client_auth(cert.clone(), key.clone()),
        "tls_client_auth",
    );
    refused(Fleet::builder(&tls).tls_ca("not a certificate"), "tls_ca");
    refused(Fleet::builder(&tls).tls_ca(key.clone()), "tls_ca");
    refused(
        Fleet::builder(&tls).tls_client_auth(cert.clone(), "not a key"),
        "tls_client_auth",
    );
    refused(
        Fleet::builder(&tls).tls_client_auth(key.clone(), key.clone()),
        "tls_client_auth",
    );
    // The server's key with the client's certificate.
    refused(
        Fleet::builder(&tls).tls_client_auth(cert.clone(), certs.read("server.key")),
        "tls_client_auth",
    );
    refused(
        Fleet::builder(format!("{tls}#insecure")).tls_ca(ca.clone()),
        "url",
    );

    let good = Fleet::builder(&tls)
        .tls_ca(ca)
        .tls_client_auth(cert, key)
        .build()
        .unwrap();
    let debug = format!("{good:?}");
    assert!(
        !debug.contains(PASSWORD) && !debug.contains(&key_body[..40]),
        "{debug}"
    );
    assert!(
        Fleet::builder(&tls).build().is_ok(),
        "system roots need no setting"
    );
}

#[test]
fn operators_with_the_documented_permissions_list_override_audit_and_watch() {
    let redis = RedisServer::start_with(Options {
        users: vec![documented_acl_user("ops"), documented_ops_user("ops")],
        ..Options::default()
    });
    let f = fleet(redis.url_as("fusebox", PASSWORD), "ops")
        .build()
        .unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    wait_for("the agent to connect", || connected(&f));
    let operator = || {
        fleet(redis.url_as("fusebox-ops", PASSWORD), "ops")
            .admin()
            .unwrap()
    };
    let mut admin = operator();
    let mut watch = admin.watch().unwrap();
    let forced = admin
        .force_open("vendor", "alice", "vendor migration", Some(60 * SEC))
        .unwrap();
    assert_eq!(forced.state, State::ForcedOpen);
    wait_for("the override to reach the process", || {
        b.state() == State::ForcedOpen
    });
    let seen = watch.next(Some(PATIENCE)).unwrap().expect("a change");
    assert_eq!(seen.status.name, "vendor");
    let names: Vec<String> = admin.list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["vendor"]);
    admin.reset("vendor", "alice", "vendor back").unwrap();
    wait_for("the reset to reach the process", || {
        b.state() == State::Closed
    });
    let audit = operator().audit(None, 10).unwrap();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(f.snapshot().errors, 0);

    // The agents' user cannot force a breaker.
    let mut agents = fleet(redis.url_as("fusebox", PASSWORD), "ops")
        .admin()
        .unwrap();
    assert!(agents.force_open("vendor", "mallory", "x", None).is_err());
    assert_eq!(b.state(), State::Closed);
}
