//! Each error message is printed once: a wrapper either shows its inner
//! error or returns it as its `source()`, never both. Checked the way users
//! print chains, with anyhow's `{:#}`.

use std::error::Error as StdError;
use std::io;

use fusebox::{CallError, Rejected};

use crate::support::breaker::*;

/// Every message of `err`'s chain, and the chain as anyhow prints it.
fn chain_of(err: impl StdError + Send + Sync + 'static) -> (Vec<String>, String) {
    let err = anyhow::Error::new(err);
    let messages = err.chain().map(|e| e.to_string()).collect();
    (messages, format!("{err:#}"))
}

/// No message of the chain contains the next one: nothing is printed twice.
#[track_caller]
fn printed_once(messages: &[String]) {
    for pair in messages.windows(2) {
        assert!(
            !pair[0].contains(&pair[1]),
            "`{}` repeats its source `{}`",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn a_failed_call_prints_the_dependencys_error_once() {
    let (b, _mock) = consecutive(5);
    let err = b
        .call(|| Err::<(), _>(io::Error::new(io::ErrorKind::TimedOut, "timed out")))
        .unwrap_err();
    let (messages, text) = chain_of(err);
    printed_once(&messages);
    assert_eq!(text, "call failed: timed out");
}

#[test]
fn a_refused_call_prints_the_refusal_once() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(4 * SEC);
    let err = succeed(&b).unwrap_err();
    let (messages, text) = chain_of(err);
    printed_once(&messages);
    assert_eq!(
        text,
        "call not attempted: breaker `refdata` is open, retry after 6s"
    );
}

#[test]
fn the_refusal_is_still_the_source_so_wrappers_find_it() {
    let (b, _mock) = consecutive(1);
    trip(&b, 1);
    let err = succeed(&b).unwrap_err();
    assert!(err.source().unwrap().is::<Rejected>());
    assert!(Rejected::in_chain(&err));
    let failed = CallError::<io::Error>::Failed(io::Error::other("x"));
    assert!(failed.source().unwrap().is::<io::Error>());
}

#[cfg(feature = "http")]
mod http {
    use std::time::Duration;

    use crate::support::http_server::HttpServer;
    use fusebox::http::{GuardedClient, LastKnownGood};
    use fusebox::{Breaker, CallPath};

    use super::*;

    fn client() -> GuardedClient {
        let (clock, _mock) = quanta::Clock::mock();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(200)))
            .http_status_as_error(false)
            .proxy(None)
            .build()
            .into();
        let breaker = Breaker::builder("vendor")
            .call_path(CallPath::ReferenceData)
            .classifier(fusebox::http::HttpClassifier::new())
            .clock(clock)
            .build()
            .unwrap();
        GuardedClient::new(agent, breaker).unwrap()
    }

    #[test]
    fn a_transport_error_prints_once() {
        let server = HttpServer::start();
        server.stop();
        let err = client().get(&server.url("/x")).call().unwrap_err();
        let (messages, text) = chain_of(err);
        printed_once(&messages);
        assert!(
            text.starts_with("call failed: transport failed: "),
            "{text}"
        );
    }

    #[test]
    fn an_unavailable_fallback_prints_the_calls_error_once() {
        let server = HttpServer::start();
        server.stop();
        let cache = LastKnownGood::new(Duration::from_secs(10));
        let err = client()
            .get(&server.url("/x"))
            .call_or_stale(&cache)
            .unwrap_err();
        let (messages, text) = chain_of(err);
        printed_once(&messages);
        assert!(
            text.starts_with(
                "no last good answer to fall back on: call failed: transport failed: "
            ),
            "{text}"
        );
    }
}
