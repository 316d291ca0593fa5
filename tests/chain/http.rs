//! A chain of two HTTP vendors on real loopback servers and a cache: the
//! primary fails and trips, the secondary answers, the cache answers when
//! both are down, a 404 stops the chain, and the primary recovers through
//! one probe. Breaker time is a mock clock; the servers are real.
#![cfg(all(feature = "chain", feature = "http"))]

use std::sync::Arc;
use std::time::Duration;

use fusebox::chain::{Chain, Origin, Skip, SkipReason};
use fusebox::http::{Error, GuardedClient};
use fusebox::last_good::LastGood;
use fusebox::{Breaker, CallError, CallPath, State};
use quanta::{Clock, Mock};

use crate::support::http_server::{HttpServer, Reply};

/// Long enough that a healthy answer on a loaded machine is never taken
/// for a timeout; the hanging-vendor test uses its own, shorter one.
const TIMEOUT: Duration = Duration::from_secs(5);

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into()
}

/// Two consecutive failures open it for 10 s.
fn client(name: &str, clock: &Clock, timeout: Duration) -> GuardedClient {
    let breaker = Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .clock(clock.clone())
        .consecutive_failure_threshold(2)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_secs(10))
        .max_probe_duration(Duration::from_secs(30))
        .jitter(0.0)
        .build()
        .unwrap();
    GuardedClient::new(agent(timeout), breaker).unwrap()
}

/// A guarded link's call: GETs `/px/{symbol}` and returns the body.
fn vendor(
    client: &GuardedClient,
    server: &HttpServer,
) -> impl Fn(&str) -> Result<String, CallError<Error>> + Send + Sync + 'static {
    let base = server.url("/px/");
    let c = client.clone();
    move |sym: &str| {
        c.get(format!("{base}{sym}"))
            .call()
            .map(|r| String::from_utf8_lossy(r.body()).into_owned())
    }
}

struct Vendors {
    chain: Chain<str, String, Error>,
    primary: GuardedClient,
    secondary: GuardedClient,
    p: HttpServer,
    s: HttpServer,
    mock: Arc<Mock>,
}

fn vendors(timeout: Duration) -> Vendors {
    let (clock, mock) = Clock::mock();
    let (p, s) = (HttpServer::start(), HttpServer::start());
    p.reply(Reply::ok("101.25 primary"));
    s.reply(Reply::ok("101.30 secondary"));
    let primary = client("primary", &clock, timeout);
    let secondary = client("secondary", &clock, TIMEOUT);
    let chain = Chain::builder("refdata")
        .guarded("primary", primary.breaker(), vendor(&primary, &p))
        .guarded("secondary", secondary.breaker(), vendor(&secondary, &s))
        .cache(
            "last-good",
            LastGood::new(Duration::from_secs(300)).clock(clock),
        )
        .build()
        .unwrap();
    Vendors {
        chain,
        primary,
        secondary,
        p,
        s,
        mock,
    }
}

#[test]
fn the_chain_falls_back_vendor_by_vendor_and_the_primary_recovers_through_one_probe() {
    let v = vendors(TIMEOUT);
    let answer = v.chain.lookup("AAPL").unwrap();
    assert_eq!(
        (answer.link(), answer.value().as_str()),
        ("primary", "101.25 primary")
    );

    // The primary returns 503 twice: failures, then open.
    v.p.reply(Reply::status(503));
    for _ in 0..2 {
        let answer = v.chain.lookup("AAPL").unwrap();
        assert_eq!(answer.link(), "secondary");
        let Skip::Failed(err) = answer.skipped()[0].skip() else {
            panic!("a provider error: {:?}", answer.skipped())
        };
        assert_eq!(err.status(), Some(503));
    }
    assert_eq!(v.primary.breaker().state(), State::Open);
    let before = v.p.requests();
    let answer = v.chain.lookup("AAPL").unwrap();
    assert_eq!(answer.link(), "secondary");
    let refused = answer.skipped()[0].skip().rejected().expect("refused");
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(10)));
    assert_eq!(v.p.requests(), before, "nothing sent to an open vendor");

    // The secondary's server goes away: refused connections, then open.
    v.mock.increment(Duration::from_secs(4));
    v.s.stop();
    for _ in 0..3 {
        let answer = v.chain.lookup("AAPL").unwrap();
        assert_eq!(answer.link(), "last-good");
        assert_eq!(answer.value(), "101.30 secondary");
        assert_eq!(
            answer.origin(),
            Origin::Cache {
                age: Duration::from_secs(4)
            }
        );
    }
    assert_eq!(v.secondary.breaker().state(), State::Open);
    let answer = v.chain.lookup("AAPL").unwrap();
    let reasons: Vec<_> = answer.skipped().iter().map(|s| s.skip().reason()).collect();
    assert_eq!(reasons, [SkipReason::Refused, SkipReason::Refused]);

    // The primary's open period ends; it answers again; one probe closes it.
    v.p.reply(Reply::ok("101.40 primary"));
    v.mock.increment(Duration::from_secs(6));
    let before = v.p.requests();
    let answer = v.chain.lookup("AAPL").unwrap();
    assert_eq!(
        (answer.link(), answer.value().as_str()),
        ("primary", "101.40 primary")
    );
    assert_eq!(v.p.requests(), before + 1, "one probe");
    assert_eq!(v.primary.breaker().state(), State::Closed);
    let snap = v.chain.snapshot();
    assert_eq!(snap.links[0].answers, 2);
    assert_eq!(snap.links[2].answers, 4);
}

#[test]
fn a_404_is_an_answer_that_stops_the_chain() {
    let v = vendors(TIMEOUT);
    v.chain.lookup("DLST").unwrap(); // the cache has an older "yes"
    v.p.reply(Reply::status(404));
    let before = v.s.requests();
    let err = v.chain.lookup("DLST").unwrap_err();
    let (link, error) = err.declined().expect("a no");
    assert_eq!((link, error.status()), ("primary", Some(404)));
    assert_eq!(v.s.requests(), before, "the secondary was not asked");
    assert_eq!(v.primary.breaker().state(), State::Closed);
    assert_eq!(v.chain.snapshot().links[0].declined, 1);
}

#[test]
fn a_hanging_vendor_times_out_and_the_secondary_answers() {
    let v = vendors(Duration::from_millis(300));
    v.p.reply(Reply::hang());
    let answer = v.chain.lookup("AAPL").unwrap();
    assert_eq!(answer.link(), "secondary");
    let Skip::Failed(err) = answer.skipped()[0].skip() else {
        panic!("a provider error: {:?}", answer.skipped())
    };
    assert!(err.status().is_none(), "a timeout, not a status: {err}");
    v.p.stop();
}
