//! A `rediss://` URL with no TLS setting trusts the system's roots, as
//! `rustls-native-certs` finds them: here `SSL_CERT_FILE` names a test CA,
//! so that the system's store is one the test controls.
//!
//! It sets an environment variable of the process, so it runs alone
//! (`support::process::alone`): no other test's thread reads the
//! environment then.
#![cfg(feature = "redis")]

use fusebox::fleet::Fleet;
use fusebox::{Reason, State};

use crate::support::breaker::{fail, MS, SEC};
use crate::support::certs::Certs;
use crate::support::fleet_kit::vendor;
use crate::support::process::alone;
use crate::support::redis_server::{wait_for, Options, RedisServer, TlsFiles};

#[test]
fn a_rediss_url_without_settings_trusts_the_system_roots() {
    let _alone = alone();
    let certs = Certs::generate("system");
    std::env::set_var("SSL_CERT_FILE", certs.path("ca.crt"));
    let redis = RedisServer::start_with(Options {
        tls: Some(TlsFiles {
            cert: certs.path("server.crt"),
            key: certs.path("server.key"),
            ca: certs.path("ca.crt"),
            auth_clients: "no",
            client: None,
        }),
        ..Options::default()
    });
    let build = || {
        Fleet::builder(redis.url())
            .prefix("roots")
            // One process's trip reaches the other (no quorum).
            .min_members(1)
            .member_ratio(0.0)
            .timeout(SEC)
            .tick(2 * MS)
            .refresh(20 * MS)
            .build()
            .unwrap()
    };
    let (fa, fb) = (build(), build());
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    let connected = |f: &Fleet| f.snapshot().connected && f.snapshot().reads > 0;
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });
    assert!(fail(&a).is_err());
    wait_for("the other process to open", || b.state() == State::Open);
    assert_eq!(b.snapshot().last_transition.unwrap().reason, Reason::Fleet);
    assert_eq!(fa.snapshot().outages + fb.snapshot().outages, 0);
}
