//! The HTTP integration against a real server on loopback: refused
//! connections, a server that never answers, slow answers, 5xx, 4xx, 429
//! with `Retry-After`, recovery, and the last-known-good fallback.
#![cfg(feature = "http")]

use std::io;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use fusebox::http::{
    AgentError, Error, GuardedClient, HttpClassifier, LastKnownGood, StaleReason, TooManyRequests,
};
use fusebox::{Breaker, BreakerBuilder, CallError, CallPath, Reason, State, Verdict};
use quanta::{Clock, Mock};
use std::sync::Arc;
use ureq::http::Method;

use crate::support::counting_alloc;
use crate::support::http_server::{Gate, HttpServer, Reply};

/// The agent's whole-call timeout: short, so that the tests against a
/// hanging vendor are fast, and long enough that a healthy answer on a
/// loaded machine is not taken for a timeout.
const TIMEOUT: Duration = Duration::from_secs(1);

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into()
}

/// Two consecutive failures open it for exactly 1 s; no rate condition.
fn breaker() -> BreakerBuilder {
    Breaker::builder("vendor")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .consecutive_failure_threshold(2)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_secs(1))
        .jitter(0.0)
}

/// A client whose breaker runs on a mock clock.
fn mocked_client(b: BreakerBuilder) -> (GuardedClient, Clock, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    let breaker = b.clock(clock.clone()).build().unwrap();
    (
        GuardedClient::new(agent(TIMEOUT), breaker).unwrap(),
        clock,
        mock,
    )
}

fn last_reason(client: &GuardedClient) -> Reason {
    client
        .breaker()
        .snapshot()
        .last_transition
        .expect("a state change")
        .reason
}

/// Runs `call` on a thread of its own and waits for its result; `None` if
/// it has not returned after 10 s (a guard against a test that would hang
/// forever, not a timing check: the agent's timeout is 1 s).
fn returns<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(call());
    });
    rx.recv_timeout(Duration::from_secs(10)).ok()
}

fn status_of(result: Result<fusebox::http::Response, CallError<Error>>) -> u16 {
    match result {
        Err(CallError::Failed(e)) => e.status().expect("an error status"),
        other => panic!("expected an error status, got {other:?}"),
    }
}

// --- the agent ---------------------------------------------------------

#[test]
fn refuses_an_agent_without_a_timeout_and_names_the_setting() {
    let breaker = breaker().build().unwrap();
    let no_timeout: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let err = GuardedClient::new(no_timeout, breaker.clone()).unwrap_err();
    assert_eq!(err, AgentError::NoTimeout);
    assert!(err.to_string().contains("timeout_global"), "{err}");

    // A connect timeout alone leaves the wait for the answer unbounded.
    let connect_only: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(1)))
        .http_status_as_error(false)
        .build()
        .into();
    assert_eq!(
        GuardedClient::new(connect_only, breaker.clone()).unwrap_err(),
        AgentError::NoTimeout
    );

    let per_call: ureq::Agent = ureq::Agent::config_builder()
        .timeout_per_call(Some(Duration::from_secs(1)))
        .http_status_as_error(false)
        .build()
        .into();
    assert!(GuardedClient::new(per_call, breaker).is_ok());
}

#[test]
fn refuses_an_agent_that_turns_statuses_into_errors() {
    let default_statuses: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .build()
        .into();
    let err = GuardedClient::new(default_statuses, breaker().build().unwrap()).unwrap_err();
    assert_eq!(err, AgentError::StatusAsError);
    assert!(err.to_string().contains("http_status_as_error(false)"));
}

#[test]
fn a_request_level_config_cannot_switch_the_timeout_off() {
    let server = HttpServer::start();
    server.reply(Reply::hang());
    let (client, _clock, _mock) = mocked_client(breaker());
    let url = server.url("/hangs");

    let result = returns(move || {
        client
            .get(url)
            .with(|r| r.config().timeout_global(None).build())
            .call()
    })
    .expect("the call was still blocked on a hanging vendor after 10 s");
    match result {
        Err(CallError::Failed(Error::Transport(ureq::Error::Timeout(t)))) => {
            assert_eq!(t, ureq::Timeout::Global)
        }
        other => panic!("expected the client's timeout, got {other:?}"),
    }
    assert_eq!(server.requests(), 1);
}

#[test]
fn a_per_request_timeout_is_cut_to_the_clients() {
    let server = HttpServer::start();
    server.reply(Reply::hang());
    let (client, _clock, _mock) = mocked_client(breaker());
    assert_eq!(client.timeout(), TIMEOUT);
    let url = server.url("/hangs");

    let result = returns(move || {
        client
            .get(url)
            .timeout(Duration::from_secs(3_600))
            .with(|r| r.config().timeout_per_call(None).build())
            .call()
    })
    .expect("an hour-long request timeout was not cut to the client's");
    assert!(
        matches!(
            result,
            Err(CallError::Failed(Error::Transport(ureq::Error::Timeout(_))))
        ),
        "{result:?}"
    );
}

#[test]
fn a_request_level_config_cannot_turn_statuses_into_errors() {
    let server = HttpServer::start();
    server.reply(Reply::status(503).header("Retry-After", "5"));
    let (client, _clock, _mock) = mocked_client(breaker().consecutive_failure_threshold(1));

    let result = client
        .get(server.url("/down"))
        .with(|r| r.config().http_status_as_error(true).build())
        .call();
    // The response, and its Retry-After, reached the classifier.
    assert_eq!(status_of(result), 503);
    assert_eq!(
        client.breaker().snapshot().retry_after,
        Some(Duration::from_secs(5))
    );
}

#[test]
fn refuses_a_breaker_whose_probe_expires_before_the_agents_timeout() {
    let slow_agent = || agent(Duration::from_secs(2));
    let short_probe = breaker()
        .max_probe_duration(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = GuardedClient::new(slow_agent(), short_probe).unwrap_err();
    assert_eq!(
        err,
        AgentError::ProbeOutlivedByCall {
            max_probe_duration: Duration::from_millis(300),
            timeout: Duration::from_secs(2),
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("max_probe_duration (300ms)") && message.contains("timeout (2s)"),
        "{message}"
    );

    // As long as the timeout, the probe is still out when its call returns.
    let long_enough = breaker()
        .max_probe_duration(Duration::from_secs(2))
        .build()
        .unwrap();
    assert!(GuardedClient::new(slow_agent(), long_enough).is_ok());
}

#[test]
fn refuses_a_slow_call_duration_longer_than_the_agents_timeout() {
    let never_slow = breaker()
        .slow_call_duration(Duration::from_secs(3))
        .slow_call_rate_threshold(0.5)
        .build()
        .unwrap();
    let err = GuardedClient::new(agent(Duration::from_secs(2)), never_slow).unwrap_err();
    assert_eq!(
        err,
        AgentError::SlowCallNeverFires {
            slow_call_duration: Duration::from_secs(3),
            timeout: Duration::from_secs(2),
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("slow_call_duration (3s)") && message.contains("timeout (2s)"),
        "{message}"
    );
}

#[test]
fn the_timeout_checked_against_the_breaker_counts_every_exchange() {
    // Without a global timeout, a per-call timeout restarts on each of up
    // to max_redirects + 1 exchanges.
    let per_call: ureq::Agent = ureq::Agent::config_builder()
        .timeout_per_call(Some(Duration::from_secs(1)))
        .max_redirects(2)
        .http_status_as_error(false)
        .build()
        .into();
    let short = breaker()
        .max_probe_duration(Duration::from_secs(2))
        .build()
        .unwrap();
    assert_eq!(
        GuardedClient::new(per_call.clone(), short).unwrap_err(),
        AgentError::ProbeOutlivedByCall {
            max_probe_duration: Duration::from_secs(2),
            timeout: Duration::from_secs(3),
        }
    );
    let enough = breaker()
        .max_probe_duration(Duration::from_secs(3))
        .build()
        .unwrap();
    assert_eq!(
        GuardedClient::new(per_call, enough).unwrap().timeout(),
        Duration::from_secs(3)
    );
}

// --- failures ----------------------------------------------------------

#[test]
fn refused_connections_count_as_failures_and_open_the_breaker() {
    let server = HttpServer::start();
    server.stop();
    let (client, _clock, _mock) = mocked_client(breaker());
    let url = server.url("/instruments/ES");

    for _ in 0..2 {
        match client.get(&url).call() {
            Err(CallError::Failed(Error::Transport(ureq::Error::Io(e)))) => {
                assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused)
            }
            other => panic!("expected a refused connection, got {other:?}"),
        }
    }
    assert_eq!(client.breaker().state(), State::Open);
    assert_eq!(
        last_reason(&client),
        Reason::ConsecutiveFailures { count: 2 }
    );
    // What opened it, with the transport error's chain: a refused caller
    // can say why.
    let cause = client
        .breaker()
        .last_failure()
        .expect("the failure that opened it");
    assert!(
        cause
            .message()
            .starts_with("transport failed: io: Connection refused"),
        "{cause}"
    );
}

#[test]
fn a_rejected_request_never_reaches_the_server() {
    let server = HttpServer::start();
    server.reply(Reply::status(500));
    let (client, _clock, _mock) = mocked_client(breaker());
    let url = server.url("/instruments/ES");
    let _ = client.get(&url).call();
    let _ = client.get(&url).call();
    assert_eq!(server.requests(), 2);
    assert_eq!(client.breaker().state(), State::Open);

    server.reply(Reply::ok("healthy"));
    for _ in 0..5 {
        let err = client.get(&url).call().unwrap_err();
        let rejected = err.rejected().expect("refused by the breaker");
        assert_eq!(rejected.state(), State::Open);
        assert_eq!(rejected.retry_after(), Some(Duration::from_secs(1)));
    }
    assert_eq!(server.requests(), 2, "a rejection sent a request");
    assert_eq!(client.breaker().snapshot().totals.short_circuits, 5);
}

#[test]
fn a_server_that_never_answers_times_out_and_counts_as_a_failure() {
    let server = HttpServer::start();
    server.reply(Reply::hang());
    let (client, _clock, _mock) = mocked_client(breaker());

    let err = client.get(server.url("/slow")).call().unwrap_err();
    match err {
        CallError::Failed(Error::Transport(ureq::Error::Timeout(t))) => {
            assert_eq!(t, ureq::Timeout::Global)
        }
        other => panic!("expected the agent's timeout, got {other:?}"),
    }
    let snap = client.breaker().snapshot();
    assert_eq!(snap.totals.failures, 1);
    assert_eq!(snap.consecutive_failures, 1);
    assert_eq!(snap.state, State::Closed);

    let _ = client.get(server.url("/slow")).call();
    assert_eq!(client.breaker().state(), State::Open);
}

#[test]
fn slow_answers_count_as_slow_calls_and_open_the_breaker() {
    let server = HttpServer::start();
    // Slower than the breaker's slow-call mark, well inside the agent's
    // timeout. The breaker reads the real clock here: slowness is what is
    // being measured.
    server.reply(Reply::ok("late").after(Duration::from_millis(60)));
    let breaker = breaker()
        .slow_call_duration(Duration::from_millis(20))
        .slow_call_rate_threshold(1.0)
        .minimum_calls(3)
        .build()
        .unwrap();
    let client = GuardedClient::new(agent(Duration::from_secs(5)), breaker).unwrap();

    for _ in 0..3 {
        let response = client.get(server.url("/slow")).call().unwrap();
        assert_eq!(response.body(), b"late");
    }
    let snap = client.breaker().snapshot();
    assert_eq!(snap.totals.successes, 3);
    assert_eq!(snap.totals.slow, 3);
    assert_eq!(snap.state, State::Open);
    assert!(
        matches!(last_reason(&client), Reason::SlowCallRate { calls: 3, .. }),
        "{:?}",
        last_reason(&client)
    );
}

#[test]
fn server_errors_count_as_failures_and_keep_their_body() {
    let server = HttpServer::start();
    server.reply(Reply::status(500).body("database on fire"));
    let (client, _clock, _mock) = mocked_client(breaker());

    match client.get(server.url("/x")).call() {
        Err(CallError::Failed(Error::Status(response))) => {
            assert_eq!(response.status().as_u16(), 500);
            assert_eq!(response.body(), b"database on fire");
        }
        other => panic!("expected a 500, got {other:?}"),
    }
    assert_eq!(status_of(client.get(server.url("/x")).call()), 500);
    assert_eq!(client.breaker().state(), State::Open);
}

#[test]
fn client_errors_pass_through_and_never_trip_the_breaker() {
    let server = HttpServer::start();
    let (client, _clock, _mock) = mocked_client(breaker());

    for status in [400, 404, 400, 404, 401, 403, 422] {
        server.reply(Reply::status(status));
        assert_eq!(status_of(client.get(server.url("/bad")).call()), status);
    }
    let snap = client.breaker().snapshot();
    assert_eq!(snap.state, State::Closed);
    assert_eq!(snap.totals.ignored, 7);
    assert_eq!(snap.totals.failures, 0);
    assert_eq!(snap.consecutive_failures, 0);
}

#[test]
fn too_many_requests_with_retry_after_keeps_the_breaker_open_that_long() {
    let server = HttpServer::start();
    server.reply(Reply::status(429).header("Retry-After", "5"));
    let (client, _clock, mock) = mocked_client(breaker().consecutive_failure_threshold(1));
    let url = server.url("/quota");

    assert_eq!(status_of(client.get(&url).call()), 429);
    let snap = client.breaker().snapshot();
    assert_eq!(snap.state, State::Open);
    // The open period is 1 s; the vendor asked for 5.
    assert_eq!(snap.retry_after, Some(Duration::from_secs(5)));

    server.reply(Reply::ok("quota restored"));
    mock.increment(Duration::from_secs(2));
    assert!(client.get(&url).call().unwrap_err().rejected().is_some());
    assert_eq!(server.requests(), 1);

    mock.increment(Duration::from_secs(3));
    assert_eq!(client.get(&url).call().unwrap().body(), b"quota restored");
    assert_eq!(client.breaker().state(), State::Closed);
}

#[test]
fn service_unavailable_with_retry_after_keeps_the_breaker_open_that_long() {
    let server = HttpServer::start();
    server.reply(Reply::status(503).header("Retry-After", "5"));
    let (client, _clock, mock) = mocked_client(breaker().consecutive_failure_threshold(1));
    let url = server.url("/maintenance");

    assert_eq!(status_of(client.get(&url).call()), 503);
    let snap = client.breaker().snapshot();
    assert_eq!(snap.state, State::Open);
    assert_eq!(snap.retry_after, Some(Duration::from_secs(5)));

    server.reply(Reply::ok("back"));
    mock.increment(Duration::from_secs(2));
    assert!(client.get(&url).call().unwrap_err().rejected().is_some());
    assert_eq!(server.requests(), 1);

    mock.increment(Duration::from_secs(3));
    assert_eq!(client.get(&url).call().unwrap().body(), b"back");
    assert_eq!(client.breaker().state(), State::Closed);
}

/// A breaker that opens on one failure for 1 s, honouring `Retry-After`
/// up to 60 s, on a mock clock.
fn throttled_client() -> (GuardedClient, Clock, Arc<Mock>) {
    let classifier = HttpClassifier::new().max_retry_after(Duration::from_secs(60));
    mocked_client(
        breaker()
            .consecutive_failure_threshold(1)
            .classifier(classifier),
    )
}

#[test]
fn retry_after_dates_in_every_form_rfc_9110_requires_are_honoured() {
    // Far enough ahead to be cut to the 60 s cap, whatever today's date.
    for date in [
        "Thu, 31 Dec 2099 23:59:59 GMT",   // IMF-fixdate
        "Tuesday, 31-Dec-69 23:59:59 GMT", // RFC 850: a two-digit year
        "Thu Dec 31 23:59:59 2099",        // asctime
    ] {
        let server = HttpServer::start();
        server.reply(Reply::status(503).header("Retry-After", date));
        let (client, _clock, _mock) = throttled_client();
        assert_eq!(status_of(client.get(server.url("/x")).call()), 503);
        let snap = client.breaker().snapshot();
        assert_eq!(snap.state, State::Open);
        assert_eq!(
            snap.retry_after,
            Some(Duration::from_secs(60)),
            "Retry-After: {date}"
        );
    }
}

#[test]
fn a_retry_after_date_that_does_not_exist_is_ignored() {
    for date in [
        "Sat, 31 Feb 2099 00:00:00 GMT", // no 31 February
        "Mon, 31 Dec 2099 23:59:59 GMT", // a Thursday
    ] {
        let server = HttpServer::start();
        server.reply(Reply::status(503).header("Retry-After", date));
        let (client, _clock, _mock) = throttled_client();
        assert_eq!(status_of(client.get(server.url("/x")).call()), 503);
        // A plain failure: the breaker's own 1 s open period.
        let snap = client.breaker().snapshot();
        assert_eq!(snap.state, State::Open);
        assert_eq!(
            snap.retry_after,
            Some(Duration::from_secs(1)),
            "Retry-After: {date}"
        );
    }
}

#[test]
fn too_many_requests_can_be_the_callers_problem() {
    let server = HttpServer::start();
    server.reply(Reply::status(429).header("Retry-After", "5"));
    let classifier = HttpClassifier::new().too_many_requests(TooManyRequests::Ignore);
    let (client, _clock, _mock) = mocked_client(
        breaker()
            .consecutive_failure_threshold(1)
            .classifier(classifier),
    );

    for _ in 0..3 {
        assert_eq!(status_of(client.get(server.url("/quota")).call()), 429);
    }
    assert_eq!(client.breaker().state(), State::Closed);
    assert_eq!(client.breaker().snapshot().totals.ignored, 3);
}

// --- recovery ----------------------------------------------------------

#[test]
fn recovers_with_a_single_probe_when_the_server_comes_back() {
    let server = HttpServer::start();
    let (client, _clock, mock) = mocked_client(breaker());
    let url = server.url("/instruments/ES");
    assert!(client.get(&url).call().is_ok());

    server.stop();
    let _ = client.get(&url).call();
    let _ = client.get(&url).call();
    assert_eq!(client.breaker().state(), State::Open);

    server.restart();
    assert!(client.get(&url).call().unwrap_err().rejected().is_some());
    assert_eq!(server.requests(), 1, "only the first, healthy call");

    mock.increment(Duration::from_secs(1));
    assert_eq!(client.get(&url).call().unwrap().body(), b"ok");
    assert_eq!(server.requests(), 2, "exactly one probe");
    assert_eq!(client.breaker().state(), State::Closed);
    assert_eq!(
        last_reason(&client),
        Reason::ProbeSucceeded { successes: 1 }
    );
}

#[test]
fn refuses_a_second_probe_while_the_first_is_out() {
    let server = HttpServer::start();
    server.reply(Reply::status(503));
    let (client, clock, mock) = mocked_client(breaker());
    let cache = LastKnownGood::new(Duration::from_secs(60)).clock(clock);
    let url = server.url("/instruments/ES");

    // One good answer on file, then the vendor fails and the breaker opens.
    server.reply(Reply::ok("ES last good"));
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());
    server.reply(Reply::status(503));
    let _ = client.get(&url).call();
    let _ = client.get(&url).call();
    assert_eq!(client.breaker().state(), State::Open);

    // The probe is held by the vendor until the gate opens.
    let gate = Gate::new();
    server.reply(Reply::ok("ES recovered").held_by(&gate));
    mock.increment(Duration::from_secs(1));
    thread::scope(|s| {
        let probe = s.spawn(|| client.get(&url).call());
        assert!(server.wait_for_requests(4), "the probe reached the vendor");
        assert_eq!(client.breaker().state(), State::HalfOpen);

        let second = client.get(&url).call_or_stale(&cache).unwrap();
        assert!(!second.is_fresh());
        assert_eq!(second.body(), b"ES last good");
        match second.stale_reason() {
            Some(StaleReason::BreakerOpen(r)) => assert_eq!(r.state(), State::HalfOpen),
            other => panic!("expected a refusal, got {other:?}"),
        }

        gate.open();
        assert_eq!(probe.join().unwrap().unwrap().body(), b"ES recovered");
    });
    assert_eq!(
        server.requests(),
        4,
        "the second call did not reach the vendor"
    );
    assert_eq!(client.breaker().state(), State::Closed);
}

#[test]
fn an_operator_override_on_the_clients_breaker_stops_requests() {
    let server = HttpServer::start();
    let (client, clock, _mock) = mocked_client(breaker());
    let cache = LastKnownGood::new(Duration::from_secs(60)).clock(clock);
    let url = server.url("/instruments/ESZ6");
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());

    client
        .breaker()
        .force_open("ops", "vendor maintenance window");
    let answer = client.get(&url).call_or_stale(&cache).unwrap();
    assert!(matches!(
        answer.stale_reason(),
        Some(StaleReason::BreakerOpen(r)) if r.state() == State::ForcedOpen
    ));
    assert_eq!(server.requests(), 1);

    client.breaker().reset("ops", "maintenance over");
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());
    assert_eq!(server.requests(), 2);
}

// --- the last-known-good fallback --------------------------------------

#[test]
fn serves_the_last_good_answer_with_its_age_and_the_reason() {
    let server = HttpServer::start();
    server.reply(Reply::ok("ESZ6 tick=0.25"));
    let (client, clock, mock) = mocked_client(breaker());
    let cache = LastKnownGood::new(Duration::from_secs(10)).clock(clock);
    let url = server.url("/instruments/ESZ6");

    let fresh = client.get(&url).call_or_stale(&cache).unwrap();
    assert!(fresh.is_fresh());
    assert_eq!(fresh.age(), Duration::ZERO);
    assert!(fresh.stale_reason().is_none());
    assert_eq!(cache.len(), 1);

    mock.increment(Duration::from_secs(3));
    server.stop();

    // The vendor fails: the call was made, and the old answer stands in.
    let stale = client.get(&url).call_or_stale(&cache).unwrap();
    assert!(!stale.is_fresh());
    assert_eq!(stale.body(), b"ESZ6 tick=0.25");
    assert_eq!(stale.age(), Duration::from_secs(3));
    match stale.stale_reason() {
        Some(StaleReason::ProviderError(Error::Transport(ureq::Error::Io(e)))) => {
            assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused)
        }
        other => panic!("expected the vendor's failure, got {other:?}"),
    }

    // The second failure opens the breaker; the next call is not made.
    let _ = client.get(&url).call_or_stale(&cache).unwrap();
    assert_eq!(client.breaker().state(), State::Open);
    mock.increment(Duration::from_millis(500));
    let skipped = client.get(&url).call_or_stale(&cache).unwrap();
    assert_eq!(skipped.age(), Duration::from_millis(3_500));
    assert!(matches!(
        skipped.stale_reason(),
        Some(StaleReason::BreakerOpen(r)) if r.state() == State::Open
    ));

    // Past max_staleness, nothing is served: the caller gets the error,
    // and the age of the answer it could not have.
    mock.increment(Duration::from_secs(7));
    let unavailable = client.get(&url).call_or_stale(&cache).unwrap_err();
    assert_eq!(unavailable.stale_age(), Some(Duration::from_millis(10_500)));
    assert!(
        unavailable.error().rejected().is_none(),
        "the probe was made"
    );
}

#[test]
fn a_client_error_is_not_replaced_by_an_older_success() {
    let server = HttpServer::start();
    let (client, clock, _mock) = mocked_client(breaker());
    let cache = LastKnownGood::new(Duration::from_secs(60)).clock(clock);
    let url = server.url("/instruments/ESZ6");
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());

    server.reply(Reply::status(404).body("delisted"));
    let unavailable = client.get(&url).call_or_stale(&cache).unwrap_err();
    match unavailable.error() {
        CallError::Failed(e) => assert_eq!(e.status(), Some(404)),
        other => panic!("expected the 404, got {other:?}"),
    }
    assert_eq!(unavailable.stale_age(), None);
    assert!(unavailable.to_string().contains("answer stands"));
}

#[test]
fn files_answers_by_method_uri_and_query() {
    let server = HttpServer::start();
    let (client, clock, _mock) = mocked_client(breaker());
    let cache = LastKnownGood::new(Duration::from_secs(60)).clock(clock);
    let url = server.url("/quote");

    for sym in ["ES", "NQ"] {
        server.reply(Reply::ok(&format!("{sym} quote")));
        let fresh = client
            .get(&url)
            .query("sym", sym)
            .call_or_stale(&cache)
            .unwrap();
        assert!(fresh.is_fresh());
    }
    assert_eq!(cache.len(), 2);
    assert_eq!(
        server.request_lines(),
        ["GET /quote?sym=ES HTTP/1.1", "GET /quote?sym=NQ HTTP/1.1"]
    );

    server.stop();
    for sym in ["ES", "NQ"] {
        let stale = client
            .get(&url)
            .query("sym", sym)
            .call_or_stale(&cache)
            .unwrap();
        assert!(!stale.is_fresh());
        assert_eq!(stale.body(), format!("{sym} quote").as_bytes());
    }
    let other = client.get(&url).query("sym", "CL").call_or_stale(&cache);
    assert_eq!(other.unwrap_err().stale_age(), None);
}

#[test]
fn the_age_of_an_answer_too_old_to_serve_stays_known() {
    let server = HttpServer::start();
    server.reply(Reply::ok("A 101.5"));
    let (client, clock, mock) = mocked_client(breaker().consecutive_failure_threshold(100));
    let cache = LastKnownGood::new(Duration::from_secs(2)).clock(clock);
    let url = server.url("/px?sym=A");
    assert_eq!(cache.age(&Method::GET, &url), None, "never had data");
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());
    assert_eq!(cache.age(&Method::GET, &url), Some(Duration::ZERO));

    server.stop();
    mock.increment(Duration::from_secs(3));
    for age in [3, 4] {
        let unavailable = client.get(&url).call_or_stale(&cache).unwrap_err();
        assert_eq!(unavailable.stale_age(), Some(Duration::from_secs(age)));
        // Read again without a call.
        assert_eq!(
            cache.age(&Method::GET, &url),
            Some(Duration::from_secs(age))
        );
        mock.increment(Duration::from_secs(1));
    }
    assert_eq!(server.requests(), 1, "reading an age makes no call");
    assert_eq!(cache.age(&Method::HEAD, &url), None);
    assert_eq!(cache.age(&Method::GET, server.url("/px?sym=B")), None);

    // A fresh answer replaces it.
    server.restart();
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());
    assert_eq!(cache.age(&Method::GET, &url), Some(Duration::ZERO));
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_query_in_the_uri_and_one_added_pair_by_pair_are_one_entry() {
    let server = HttpServer::start();
    let (client, clock, _mock) = mocked_client(breaker().consecutive_failure_threshold(100));
    let cache = LastKnownGood::new(Duration::from_secs(60)).clock(clock);

    server.reply(Reply::ok("A quote"));
    assert!(client
        .get(server.url("/px?sym=A"))
        .call_or_stale(&cache)
        .unwrap()
        .is_fresh());
    server.reply(Reply::ok("A B quote"));
    assert!(client
        .get(server.url("/px"))
        .query("sym", "A B")
        .call_or_stale(&cache)
        .unwrap()
        .is_fresh());
    assert_eq!(
        server.request_lines(),
        ["GET /px?sym=A HTTP/1.1", "GET /px?sym=A%20B HTTP/1.1"]
    );
    assert_eq!(cache.len(), 2);

    server.stop();
    let a = client
        .get(server.url("/px"))
        .query("sym", "A")
        .call_or_stale(&cache)
        .unwrap();
    assert!(!a.is_fresh());
    assert_eq!(a.body(), b"A quote");
    let ab = client
        .get(server.url("/px?sym=A%20B"))
        .call_or_stale(&cache)
        .unwrap();
    assert!(!ab.is_fresh());
    assert_eq!(ab.body(), b"A B quote");
    assert_eq!(
        cache.age(&Method::GET, server.url("/px?sym=A%20B")),
        Some(Duration::ZERO)
    );

    // Filing the same request written the other way replaces the entry.
    server.restart();
    server.reply(Reply::ok("A again"));
    let _ = client
        .get(server.url("/px"))
        .query("sym", "A")
        .call_or_stale(&cache)
        .unwrap();
    assert_eq!(cache.len(), 2);
}

#[test]
fn zero_staleness_serves_nothing_stale_even_an_answer_aged_zero() {
    let server = HttpServer::start();
    let (client, clock, _mock) = mocked_client(breaker());
    let cache = LastKnownGood::new(Duration::ZERO).clock(clock);
    let url = server.url("/px?sym=A");
    assert!(client.get(&url).call_or_stale(&cache).unwrap().is_fresh());

    // The mock clock has not moved: the answer is zero seconds old.
    server.stop();
    let unavailable = client.get(&url).call_or_stale(&cache).unwrap_err();
    assert_eq!(unavailable.stale_age(), Some(Duration::ZERO));
    let _ = client.get(&url).call_or_stale(&cache);
    assert_eq!(client.breaker().state(), State::Open);
    let refused = client.get(&url).call_or_stale(&cache).unwrap_err();
    assert!(refused.error().rejected().is_some());
    assert_eq!(refused.stale_age(), Some(Duration::ZERO));
}

#[test]
fn keeps_at_most_max_entries_and_max_bytes() {
    let server = HttpServer::start();
    server.reply(Reply::ok("0123456789"));
    let (client, clock, _mock) = mocked_client(breaker().consecutive_failure_threshold(100));
    let cache = LastKnownGood::new(Duration::from_secs(60))
        .max_entries(2)
        .clock(clock.clone());

    for path in ["/a", "/b", "/c"] {
        // The clock does not move: the order of filing decides.
        let _ = client.get(server.url(path)).call_or_stale(&cache).unwrap();
    }
    assert_eq!(cache.len(), 2);
    server.stop();
    assert!(client.get(server.url("/a")).call_or_stale(&cache).is_err());
    assert!(client.get(server.url("/b")).call_or_stale(&cache).is_ok());
    assert!(client.get(server.url("/c")).call_or_stale(&cache).is_ok());

    // The byte budget: room for two answers of this size, not three.
    server.restart();
    let one = {
        let probe = LastKnownGood::new(Duration::from_secs(60)).clock(clock.clone());
        let _ = client.get(server.url("/a")).call_or_stale(&probe).unwrap();
        probe.bytes()
    };
    let two = LastKnownGood::new(Duration::from_secs(60))
        .max_bytes(2 * one + one / 2)
        .clock(clock.clone());
    for path in ["/a", "/b", "/c"] {
        let _ = client.get(server.url(path)).call_or_stale(&two).unwrap();
    }
    assert_eq!((two.len(), two.bytes()), (2, 2 * one));
    server.stop();
    assert!(client.get(server.url("/a")).call_or_stale(&two).is_err());
    assert!(client.get(server.url("/c")).call_or_stale(&two).is_ok());

    // An answer bigger than the byte budget is not kept at all.
    server.restart();
    let small = LastKnownGood::new(Duration::from_secs(60))
        .max_bytes(16)
        .clock(clock);
    assert!(client
        .get(server.url("/a"))
        .call_or_stale(&small)
        .unwrap()
        .is_fresh());
    assert!(small.is_empty());
    assert_eq!(small.bytes(), 0);
}

// --- the classifier ----------------------------------------------------

#[test]
fn the_classifier_follows_the_documented_table() {
    let c = HttpClassifier::new();
    let io_err = |kind| ureq::Error::Io(io::Error::from(kind));
    let cases: Vec<(ureq::Error, Verdict)> = vec![
        (
            ureq::Error::Timeout(ureq::Timeout::Global),
            Verdict::Failure,
        ),
        (
            ureq::Error::Timeout(ureq::Timeout::Connect),
            Verdict::Failure,
        ),
        (io_err(io::ErrorKind::ConnectionRefused), Verdict::Failure),
        (io_err(io::ErrorKind::ConnectionReset), Verdict::Failure),
        (io_err(io::ErrorKind::UnexpectedEof), Verdict::Failure),
        (io_err(io::ErrorKind::WouldBlock), Verdict::Failure),
        (io_err(io::ErrorKind::AddrNotAvailable), Verdict::Failure),
        (ureq::Error::HostNotFound, Verdict::Failure),
        (ureq::Error::Tls("handshake failure"), Verdict::Failure),
        (ureq::Error::ConnectionFailed, Verdict::Failure),
        (ureq::Error::TooManyRedirects, Verdict::Failure),
        (ureq::Error::StatusCode(500), Verdict::Failure),
        (ureq::Error::StatusCode(503), Verdict::Failure),
        (ureq::Error::StatusCode(429), Verdict::Failure),
        (ureq::Error::StatusCode(400), Verdict::Ignore),
        (ureq::Error::StatusCode(404), Verdict::Ignore),
        (ureq::Error::BadUri("nope".into()), Verdict::Ignore),
        (ureq::Error::BodyExceedsLimit(10), Verdict::Ignore),
        (
            ureq::Error::RequireHttpsOnly("http://x".into()),
            Verdict::Ignore,
        ),
        (ureq::Error::InvalidProxyUrl, Verdict::Ignore),
        // No TLS for an https URL: no call on the agent can work.
        (ureq::Error::TlsRequired, Verdict::Failure),
    ];
    for (err, want) in cases {
        assert_eq!(c.verdict(&err), want, "{err:?}");
        // The same through the guarded client's wrapper and through io.
        let desc = format!("{err:?}");
        let wrapped = Error::Transport(err);
        assert_eq!(c.verdict(&wrapped), want, "wrapped {desc}");
    }
    assert_eq!(c.verdict(&Error::NoTls), Verdict::Failure);
    let through_io = io::Error::other(ureq::Error::Timeout(ureq::Timeout::RecvBody));
    assert_eq!(c.verdict(&through_io), Verdict::Failure);
    // A bare io::Error: the kinds the documentation lists, and no other.
    for kind in [
        io::ErrorKind::TimedOut,
        io::ErrorKind::ConnectionRefused,
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionAborted,
        io::ErrorKind::NotConnected,
        io::ErrorKind::BrokenPipe,
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::AddrNotAvailable,
        io::ErrorKind::WouldBlock,
    ] {
        assert_eq!(
            c.verdict(&io::Error::from(kind)),
            Verdict::Failure,
            "{kind:?}"
        );
    }
    for kind in [
        io::ErrorKind::PermissionDenied,
        io::ErrorKind::NotFound,
        io::ErrorKind::Interrupted,
    ] {
        assert_eq!(
            c.verdict(&io::Error::from(kind)),
            Verdict::Ignore,
            "{kind:?}"
        );
    }
    // Not an HTTP error at all: the caller's own.
    assert_eq!(
        c.verdict(&io::Error::new(io::ErrorKind::InvalidData, "bad json")),
        Verdict::Ignore
    );
    assert_eq!(c.verdict(&std::fmt::Error), Verdict::Ignore);
}

#[test]
fn retry_after_is_honoured_up_to_the_cap() {
    let c = HttpClassifier::new().max_retry_after(Duration::from_secs(60));
    let secs = Duration::from_secs;
    assert_eq!(
        c.verdict_for_status(429, Some(secs(5))),
        Verdict::Throttled(secs(5))
    );
    assert_eq!(
        c.verdict_for_status(429, Some(secs(86_400))),
        Verdict::Throttled(secs(60))
    );
    assert_eq!(c.verdict_for_status(429, None), Verdict::Failure);
    assert_eq!(
        c.verdict_for_status(503, Some(secs(5))),
        Verdict::Throttled(secs(5))
    );
    assert_eq!(c.verdict_for_status(502, Some(secs(5))), Verdict::Failure);
    assert_eq!(c.verdict_for_status(404, Some(secs(5))), Verdict::Ignore);
    assert_eq!(c.verdict_for_status(200, None), Verdict::Ignore);
}

// --- the hot path ------------------------------------------------------

#[test]
fn a_guarded_call_allocates_no_more_than_the_bare_request() {
    let server = HttpServer::start();
    server.reply(Reply::ok("ESZ6 tick=0.25"));
    let url = server.url("/instruments/ESZ6");
    let (client, _clock, _mock) = mocked_client(breaker());
    let bare = agent(TIMEOUT);

    // The same work without the breaker: send, read the body, keep it.
    let bare_call = || {
        let response = bare.get(&url).call().unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body
            .into_with_config()
            .limit(10 * 1024 * 1024)
            .read_to_vec()
            .unwrap();
        std::hint::black_box(ureq::http::Response::from_parts(parts, bytes));
    };
    let guarded_call = || {
        std::hint::black_box(client.get(&url).call().unwrap());
    };
    for _ in 0..3 {
        bare_call();
        guarded_call();
    }
    // The median of 21 calls: how the body's bytes happen to arrive can
    // change a call's count by a reallocation either way.
    let median = |call: &dyn Fn()| {
        let mut counts: Vec<u64> = (0..21)
            .map(|_| counting_alloc::allocations_in(call))
            .collect();
        counts.sort_unstable();
        counts[10]
    };
    let (bare, guarded) = (median(&bare_call), median(&guarded_call));
    println!("allocations per call (median): bare request {bare}, guarded {guarded}");
    assert!(guarded <= bare, "guarded {guarded} > bare {bare}");
}

#[test]
fn a_rejected_call_allocates_only_the_request_builder() {
    let server = HttpServer::start();
    server.reply(Reply::status(500));
    let url = server.url("/instruments/ESZ6");
    let (client, _clock, _mock) = mocked_client(breaker());
    let _ = client.get(&url).call();
    let _ = client.get(&url).call();
    assert_eq!(client.breaker().state(), State::Open);

    let bare = agent(TIMEOUT);
    let build_only = || {
        std::hint::black_box(bare.get(&url));
    };
    let rejected = || {
        assert!(client.get(&url).call().unwrap_err().rejected().is_some());
    };
    build_only();
    rejected();
    let builder = counting_alloc::allocations_in(build_only);
    let rejection = counting_alloc::allocations_in(rejected);
    println!("allocations per rejection: {rejection}, building the request alone: {builder}");
    assert!(
        rejection <= builder,
        "rejection {rejection} > builder {builder}"
    );
    assert_eq!(server.requests(), 2);
}
