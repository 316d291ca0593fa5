//! Calls in flight as evidence, against real HTTP vendors on loopback: a
//! vendor that slows down, and one that hangs while its callers have no
//! timeout at all. The breaker opens while the slow calls are still out
//! (none of them has returned), and a healthy neighbour's calls keep
//! completing meanwhile. Waits are bounded and generous; no wall-clock
//! figure is asserted.
#![cfg(feature = "http")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fusebox::{Breaker, CallError, CallPath, Classifier, Reason, State};

use crate::support::http_server::{Gate, HttpServer, Reply};

const PATIENCE: Duration = Duration::from_secs(30);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(timeout)
        .build()
        .into()
}

/// Calls `url` through `breaker` on a thread of its own; `returned` counts
/// the calls the vendor answered (or failed), not those refused.
fn call_on_thread(
    breaker: &Breaker,
    agent: &ureq::Agent,
    url: &str,
    returned: &Arc<AtomicUsize>,
) -> thread::JoinHandle<Result<(), CallError<ureq::Error>>> {
    let (breaker, agent, url, returned) = (
        breaker.clone(),
        agent.clone(),
        url.to_owned(),
        Arc::clone(returned),
    );
    thread::spawn(move || {
        breaker.call(|| {
            let r = agent.get(&url).call().map(drop);
            returned.fetch_add(1, Ordering::SeqCst);
            r
        })
    })
}

/// Waits, boundedly, for `done`; whether it came.
fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + PATIENCE;
    while Instant::now() < until {
        if done() {
            return true;
        }
        thread::sleep(ms(5));
    }
    done()
}

#[test]
fn a_vendor_that_slows_down_opens_the_breaker_before_any_slow_call_returns() {
    let vendor = HttpServer::start();
    let url = vendor.url("/price");
    let breaker = Breaker::builder("pricing")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .slow_call_duration(ms(50))
        .stuck_call_threshold(4)
        .build()
        .unwrap();
    let agent = agent(Some(PATIENCE));
    let returned = Arc::new(AtomicUsize::new(0));

    // Healthy: calls come back.
    for _ in 0..5 {
        call_on_thread(&breaker, &agent, &url, &returned)
            .join()
            .unwrap()
            .expect("healthy");
    }
    let healthy = returned.load(Ordering::SeqCst);

    // The vendor stops answering until the gate opens: four calls go out
    // and stay out.
    let gate = Gate::new();
    vendor.reply(Reply::ok("late").held_by(&gate));
    let stuck: Vec<_> = (0..4)
        .map(|_| call_on_thread(&breaker, &agent, &url, &returned))
        .collect();
    assert!(
        wait_for(|| vendor.requests() >= healthy + 4),
        "the four reached the vendor"
    );

    // Callers keep arriving; one of them finds the four past 50 ms.
    let mut late = Vec::new();
    let opened = wait_for(|| {
        if breaker.state() == State::Open {
            return true;
        }
        late.push(call_on_thread(&breaker, &agent, &url, &returned));
        thread::sleep(ms(20));
        breaker.state() == State::Open
    });
    let returned_at_open = returned.load(Ordering::SeqCst) - healthy;
    assert!(opened, "the breaker opened on the calls in flight");
    assert_eq!(
        returned_at_open, 0,
        "no slow call had returned when it opened"
    );
    let s = breaker.snapshot();
    match s.last_transition.map(|c| c.reason) {
        Some(Reason::StuckCalls { count, over }) => {
            assert!(count >= 4, "{count}");
            assert_eq!(over, ms(50));
        }
        other => panic!("opened for {other:?}"),
    }

    gate.open();
    for call in stuck.into_iter().chain(late) {
        let _ = call.join().unwrap();
    }
    // The late answers reach their callers and count in the totals only.
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().trips, 1);
}

#[test]
fn a_vendor_that_hangs_opens_the_breaker_of_a_caller_without_a_timeout_and_spares_its_neighbour() {
    let sick = HttpServer::start();
    sick.reply(Reply::hang());
    let healthy = HttpServer::start();
    let builder = |name: &str| {
        Breaker::builder(name)
            .call_path(CallPath::ReferenceData)
            .classifier(Classifier::every_error_is_a_failure())
            .hung_call_duration(ms(200))
    };
    let breaker = builder("settlement").build().unwrap();
    let neighbour = builder("compliance").build().unwrap();
    let no_timeout = agent(None);
    let returned = Arc::new(AtomicUsize::new(0));

    // One caller, no timeout: it would wait forever.
    let hung = call_on_thread(&breaker, &no_timeout, &sick.url("/settle"), &returned);
    assert!(
        wait_for(|| sick.requests() >= 1),
        "the call reached the vendor"
    );

    // The neighbour's calls keep completing while the sick call hangs, and
    // the sick vendor's next caller finds the call past 200 ms.
    let answered = Arc::new(AtomicUsize::new(0));
    let mut late = Vec::new();
    let opened = wait_for(|| {
        call_on_thread(&neighbour, &no_timeout, &healthy.url("/check"), &answered)
            .join()
            .unwrap()
            .expect("the neighbour answers");
        late.push(call_on_thread(
            &breaker,
            &no_timeout,
            &sick.url("/settle"),
            &returned,
        ));
        thread::sleep(ms(20));
        breaker.state() == State::Open
    });
    assert!(opened, "the breaker opened on the hung call");
    assert_eq!(returned.load(Ordering::SeqCst), 0, "nothing had returned");
    assert!(answered.load(Ordering::SeqCst) >= 1);
    assert_eq!(neighbour.state(), State::Closed);
    assert!(matches!(
        breaker.snapshot().last_transition.map(|c| c.reason),
        Some(Reason::StuckCalls { over, .. }) if over == ms(200)
    ));
    // Refused now, without reaching the vendor.
    let before = sick.requests();
    let refused = call_on_thread(&breaker, &no_timeout, &sick.url("/settle"), &returned)
        .join()
        .unwrap();
    assert!(matches!(refused, Err(CallError::Rejected(_))));
    assert_eq!(sick.requests(), before);

    sick.stop();
    let _ = hung.join().unwrap();
    for call in late {
        let _ = call.join().unwrap();
    }
}
