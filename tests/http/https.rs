//! HTTPS through the guarded client, as the default features build it
//! (ureq's rustls with ring), against a real TLS server on loopback whose
//! certificate the test makes with `openssl`; and an `https` call on an
//! agent without TLS, which names the fix and counts against the vendor.
#![cfg(feature = "rustls")]

use std::time::Duration;

use fusebox::http::ureq;
use fusebox::http::ureq::tls::{Certificate, RootCerts, TlsConfig};
use fusebox::http::{Error, GuardedClient, LastKnownGood};
use fusebox::{Breaker, CallError, CallPath, State};

use crate::support::certs::Certs;
use crate::support::http_server::{HttpServer, Reply};

fn breaker() -> Breaker {
    let (clock, _mock) = quanta::Clock::mock();
    Breaker::builder("vendor")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .consecutive_failure_threshold(2)
        .clock(clock)
        .build()
        .unwrap()
}

fn config(tls: TlsConfig) -> ureq::config::Config {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .proxy(None)
        .tls_config(tls)
        .build()
}

/// An agent that trusts the test CA, and nothing else.
fn trusting(certs: &Certs) -> ureq::Agent {
    let ca = Certificate::from_pem(&certs.read("ca.crt")).unwrap();
    config(
        TlsConfig::builder()
            .root_certs(RootCerts::new_with_certs(&[ca]))
            .build(),
    )
    .into()
}

fn tls_server(certs: &Certs) -> HttpServer {
    HttpServer::start_tls(&certs.read("server.crt"), &certs.read("server.key"))
}

#[test]
fn the_default_features_speak_https_to_a_vendor() {
    let certs = Certs::generate("https");
    let server = tls_server(&certs);
    server.reply(Reply::ok("ESZ6 tick=0.25"));
    let client = GuardedClient::new(trusting(&certs), breaker()).unwrap();
    let url = server.url("/instruments/ESZ6");
    assert!(url.starts_with("https://"), "{url}");

    let response = client.get(&url).call().expect("an answer over TLS");
    assert_eq!(response.status(), 200);
    assert_eq!(response.body(), b"ESZ6 tick=0.25");
    assert_eq!(
        server.request_lines(),
        ["GET /instruments/ESZ6 HTTP/1.1".to_string()]
    );

    // The last-known-good cache files an https answer like any other.
    let cache = LastKnownGood::new(Duration::from_secs(60));
    let answer = client.get(&url).call_or_stale(&cache).unwrap();
    assert!(answer.is_fresh());
    assert_eq!(client.breaker().snapshot().totals.successes, 2);
}

#[test]
fn a_certificate_the_agent_does_not_trust_fails_and_counts_against_the_vendor() {
    let certs = Certs::generate("untrusted");
    let server = tls_server(&certs);
    // Mozilla's roots, ureq's default: the test CA is not among them.
    let client = GuardedClient::new(config(TlsConfig::default()).into(), breaker()).unwrap();

    let err = client.get(&server.url("/x")).call().unwrap_err();
    match &err {
        CallError::Failed(Error::Transport(_)) => {}
        other => panic!("expected a TLS failure, got {other:?}"),
    }
    assert_eq!(server.requests(), 0, "no request passes a failed handshake");
    assert_eq!(client.breaker().snapshot().totals.failures, 1);
}

#[test]
fn an_https_call_without_tls_names_the_fix_and_opens_the_breaker() {
    let certs = Certs::generate("no-tls");
    let server = tls_server(&certs);
    // An agent whose connector chain has no TLS, as every agent has in a
    // build of fusebox without `rustls` or `native-tls`.
    let agent = ureq::Agent::with_parts(
        config(TlsConfig::default()),
        ureq::unversioned::transport::TcpConnector::default(),
        ureq::unversioned::resolver::DefaultResolver::default(),
    );
    let client = GuardedClient::new(agent, breaker()).unwrap();

    let err = client.get(&server.url("/x")).call().unwrap_err();
    let CallError::Failed(failed) = &err else {
        panic!("expected a failed call, got {err:?}");
    };
    assert!(matches!(failed, Error::NoTls), "{failed:?}");
    let text = failed.to_string();
    assert!(
        text.contains("`rustls` feature") && text.contains("default-features = false"),
        "the message names the fix: {text}"
    );

    // Counted, not ignored: the breaker opens, and its last failure says why.
    let _ = client.get(&server.url("/x")).call();
    assert_eq!(client.breaker().state(), State::Open);
    let last = client
        .breaker()
        .last_failure()
        .expect("a failure on record");
    assert_eq!(last.message(), text, "the whole message, fix included");
    assert_eq!(server.requests(), 0);
}
