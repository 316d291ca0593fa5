//! Redis Sentinel and Redis Cluster as production runs them: every server
//! (sentinels and cluster nodes included) speaks only TLS, with
//! certificates of a private CA and client certificates asked for
//! (`tls-auth-clients yes`), and asks for a password (`requirepass`), the
//! sentinels one of their own. Against real servers on loopback; the
//! certificates are made at test time (tests/support/certs.rs).
//!
//! Local time comes from mock clocks; the tests wait by polling, bounded
//! by `PATIENCE`, and never assert on how long anything took.
#![cfg(feature = "redis")]

use fusebox::fleet::{Fleet, FleetBuilder};
use fusebox::{Breaker, ConfigError, Reason, State};

use crate::support::breaker::{fail, MS, SEC};
use crate::support::certs::Certs;
use crate::support::fleet_kit::{connected, vendor};
use crate::support::log_capture;
use crate::support::redis_server::{
    wait_for, Options, RedisCluster, RedisSentinels, SentinelSetup, TlsFiles, SERVICE,
};

/// The master's (and a cluster's) password: no log line, `Debug` output or
/// error may hold it.
pub(crate) const MASTER_PASSWORD: &str = "M4ster-pw-5d19be";

/// The sentinels' own password.
pub(crate) const SENTINEL_PASSWORD: &str = "S3ntinel-pw-0c7a42";

/// A password that is none of them.
pub(crate) const WRONG_PASSWORD: &str = "Wr0ng-pw-a81f3e";

/// A master (no replica) and two sentinels, all over mutual TLS with
/// `certs`, each with its password.
pub(crate) fn secured_sentinels(certs: &Certs) -> RedisSentinels {
    RedisSentinels::start_with(SentinelSetup {
        tls: Some(TlsFiles::in_dir(certs.dir(), "yes")),
        master_password: Some(MASTER_PASSWORD.into()),
        sentinel_password: Some(SENTINEL_PASSWORD.into()),
        replica: false,
        sentinels: 2,
    })
}

/// The sentinels' URLs with their password.
pub(crate) fn sentinel_urls(group: &RedisSentinels, password: &str) -> Vec<String> {
    group
        .urls()
        .iter()
        .map(|u| u.replacen("://", &format!("://:{password}@"), 1))
        .collect()
}

/// Quick agents, over TLS with `certs`' CA and client certificate; any
/// member's trip opens the fleet (no quorum: these tests are of the
/// connections that carry it), and a generous `timeout`, so that TLS
/// handshakes on a busy machine are never mistaken for an outage.
fn secured(b: FleetBuilder, certs: &Certs, prefix: &str) -> FleetBuilder {
    log_capture::install();
    b.prefix(prefix)
        .tls_ca(certs.read("ca.crt"))
        .tls_client_auth(certs.read("client.crt"), certs.read("client.key"))
        .min_members(1)
        .member_ratio(0.0)
        .timeout(2 * SEC)
        .tick(2 * MS)
        .refresh(20 * MS)
        .hold_margin(SEC)
        .reconnect_backoff(5 * MS, 50 * MS)
}

/// A trip of `a` (in `fa`) opens `b` (in `fb`), both connected.
fn a_trip_opens_the_other(fa: &Fleet, a: &Breaker, fb: &Fleet, b: &Breaker) {
    wait_for("both agents to connect", || connected(fa) && connected(fb));
    assert!(fail(a).is_err());
    assert_eq!(a.state(), State::Open);
    wait_for("the other member to open", || b.state() == State::Open);
    assert_eq!(b.snapshot().last_transition.unwrap().reason, Reason::Fleet);
    for f in [fa, fb] {
        let s = f.snapshot();
        assert_eq!((s.errors, s.outages), (0, 0), "{s:?}");
    }
}

#[test]
fn behind_sentinels_over_mutual_tls_with_passwords_a_trip_opens_the_other_member() {
    let certs = Certs::generate("sentinel");
    let group = secured_sentinels(&certs);
    let urls = sentinel_urls(&group, SENTINEL_PASSWORD);
    let build = || {
        secured(Fleet::sentinel_builder(SERVICE, urls.clone()), &certs, "st")
            .master_auth(None, MASTER_PASSWORD)
    };
    let (fa, fb) = (build().build().unwrap(), build().build().unwrap());
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    a_trip_opens_the_other(&fa, &a, &fb, &b);

    // An operator's handle reaches the same master.
    let mut admin = build().admin().unwrap();
    let status = admin.status("vendor").unwrap();
    // Open, or past its 200 ms open period on the server's clock.
    assert!(
        matches!(status.state, State::Open | State::HalfOpen),
        "{status:?}"
    );
    assert_eq!(status.members, 2);
    let debug = format!("{:?} {fa:?} {admin:?}", build());
    for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD] {
        assert!(!debug.contains(secret), "{debug}");
    }
}

#[test]
fn behind_sentinels_a_wrong_password_or_an_untrusted_ca_is_one_clear_line_without_the_password() {
    let (certs, other) = (
        Certs::generate("sentinel-refusals"),
        Certs::generate("other"),
    );
    let group = secured_sentinels(&certs);
    let good = sentinel_urls(&group, SENTINEL_PASSWORD);
    let wrong = sentinel_urls(&group, WRONG_PASSWORD);
    let at = |urls: &[String], prefix| {
        secured(
            Fleet::sentinel_builder(SERVICE, urls.to_vec()),
            &certs,
            prefix,
        )
    };
    let cases = [
        (
            "wrong-master-pw",
            at(&good, "wrong-master-pw").master_auth(None, WRONG_PASSWORD),
            "the master refused the one given for it",
        ),
        (
            "wrong-sentinel-pw",
            at(&wrong, "wrong-sentinel-pw").master_auth(None, MASTER_PASSWORD),
            "the sentinels refused",
        ),
        (
            "untrusted-ca",
            at(&good, "untrusted-ca")
                .tls_ca(other.read("ca.crt"))
                .master_auth(None, MASTER_PASSWORD),
            "certificate: UnknownIssuer",
        ),
    ];
    for (prefix, builder, says) in cases {
        let f = builder.build().unwrap();
        let b = vendor();
        f.join(&b).unwrap();
        wait_for("a few refused connections", || f.snapshot().errors >= 2);
        let s = f.snapshot();
        assert!(!s.connected && s.reads == 0 && s.outages == 1, "{s:?}");
        // The breaker goes on alone.
        assert!(fail(&b).is_err());
        assert_eq!(b.state(), State::Open);
        let lines = log_capture::lines(&format!("fleet `{prefix}`"));
        assert_eq!(lines.len(), 1, "{lines:#?}");
        println!("{}", lines[0]);
        assert!(lines[0].contains(says), "{}", lines[0]);
        for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD, WRONG_PASSWORD] {
            assert!(!lines[0].contains(secret), "{}", lines[0]);
        }
    }
    // An operator's handle says as much, as an error.
    let err = at(&good, "ops")
        .master_auth(None, WRONG_PASSWORD)
        .admin()
        .unwrap_err()
        .to_string();
    println!("{err}");
    assert!(
        err.contains("the master refused the one given for it"),
        "{err}"
    );
    assert!(
        !err.contains(WRONG_PASSWORD) && !err.contains(SENTINEL_PASSWORD),
        "{err}"
    );
}

#[test]
fn over_a_cluster_with_mutual_tls_and_a_password_a_trip_opens_the_other_member() {
    let certs = Certs::generate("cluster");
    let cluster = RedisCluster::start_with(
        Options {
            tls: Some(TlsFiles::in_dir(certs.dir(), "yes")),
            password: Some(MASTER_PASSWORD.into()),
            ..Options::default()
        },
        0,
        5000,
    );
    let urls: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| u.replacen("://", &format!("://:{MASTER_PASSWORD}@"), 1))
        .collect();
    assert!(urls.iter().all(|u| u.starts_with("rediss://")));
    let build = || secured(Fleet::cluster_builder(urls.clone()), &certs, "ct");
    let (fa, fb) = (build().build().unwrap(), build().build().unwrap());
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    a_trip_opens_the_other(&fa, &a, &fb, &b);

    // An operator lists and overrides across every master, over TLS too.
    let mut admin = build().admin().unwrap();
    admin.create_unknown(true);
    let names: Vec<String> = (0..12).map(|i| format!("b{i}")).collect();
    for n in &names {
        admin.force_open(n, "alice", "spread", None).unwrap();
    }
    let masters: std::collections::BTreeSet<u16> = names
        .iter()
        .filter_map(|n| cluster.master_of(&format!("{{ct:{n}}}:state")))
        .collect();
    assert_eq!(masters.len(), 3, "the names spread over every master");
    let listed = admin.list().unwrap();
    assert_eq!(listed.len(), names.len() + 1, "{listed:?}");

    // Without the client certificate, every node refuses the handshake.
    let f = Fleet::cluster_builder(urls.clone())
        .prefix("ct-nocert")
        .tls_ca(certs.read("ca.crt"))
        .timeout(2 * SEC)
        .reconnect_backoff(5 * MS, 50 * MS)
        .build()
        .unwrap();
    let v = vendor();
    f.join(&v).unwrap();
    wait_for("a few refused connections", || f.snapshot().errors >= 2);
    assert!(!f.snapshot().connected);
}

#[test]
fn sentinel_and_cluster_builds_check_their_tls_settings_and_credentials_without_showing_them() {
    let certs = Certs::generate("settings");
    let ca = certs.read("ca.crt");
    let refused = |b: FleetBuilder, field: &str, says: &str| {
        let err = b.build().unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert!(err.to_string().contains(says), "{err}");
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(
                !text.contains(MASTER_PASSWORD) && !text.contains(SENTINEL_PASSWORD),
                "{text}"
            );
        }
    };
    let tls_a = format!("rediss://:{SENTINEL_PASSWORD}@127.0.0.1:1/");
    let tls_b = format!("rediss://:{MASTER_PASSWORD}@127.0.0.1:2/");
    let plain = format!("redis://:{SENTINEL_PASSWORD}@127.0.0.1:1/");
    // A CA with a plain URL.
    refused(
        Fleet::sentinel_builder(SERVICE, [plain.clone()]).tls_ca(ca.clone()),
        "tls_ca",
        "rediss://",
    );
    refused(
        Fleet::cluster_builder([plain]).tls_ca(ca.clone()),
        "tls_ca",
        "rediss://",
    );
    // Not a certificate.
    refused(
        Fleet::sentinel_builder(SERVICE, [tls_a.clone()]).tls_ca("not a certificate"),
        "tls_ca",
        "PEM",
    );
    // Seed nodes with different passwords; sentinels too, with certificates.
    refused(
        Fleet::cluster_builder([tls_a.clone(), tls_b.clone()]),
        "url",
        "same user and password",
    );
    refused(
        Fleet::sentinel_builder(SERVICE, [tls_a.clone(), tls_b.clone()]).tls_ca(ca.clone()),
        "url",
        "same user and password",
    );
    // Each with its own password, the sentinels trust the system's roots.
    assert!(Fleet::sentinel_builder(SERVICE, [tls_a.clone(), tls_b])
        .build()
        .is_ok());
    for good in [
        Fleet::sentinel_builder(SERVICE, [tls_a.clone()])
            .tls_ca(ca.clone())
            .master_auth(Some("fusebox"), MASTER_PASSWORD),
        Fleet::cluster_builder([tls_a])
            .tls_client_auth(certs.read("client.crt"), certs.read("client.key")),
    ] {
        let built: Result<Fleet, ConfigError> = good.build();
        let debug = format!("{:?}", built.unwrap());
        assert!(!debug.contains(MASTER_PASSWORD), "{debug}");
    }
}
