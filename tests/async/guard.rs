//! `Breaker::call_async`: admission at the first poll, a refusal that never
//! polls the vendor, an outcome classified on completion, a cancelled call
//! that is neither success nor failure, one probe at a time under many
//! tasks, a timeout inside the guard counted, and one breaker shared by a
//! thread and a task.

use std::future::{self, Future};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::{Breaker, CallError, CallPath, Classifier, Guarded, State};
use tokio::sync::Notify;

use crate::support::async_http;
use crate::support::breaker::{consecutive, trip, DepError, Outage, SEC};
use crate::support::counting_alloc::allocations_per_1000;
use crate::support::http_server::{HttpServer, Reply};

/// One poll, with a waker that does nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

fn outage() -> Result<u32, DepError> {
    Err(DepError::Outage(Outage))
}

/// A breaker with the defaults a new user gets: five consecutive failures
/// open it.
fn default_breaker(name: &str) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .build()
        .expect("valid configuration")
}

#[test]
fn an_open_breaker_refuses_without_polling_the_vendors_future() {
    let (breaker, _mock) = consecutive(1);
    trip(&breaker, 1);
    let polled = AtomicBool::new(false);
    let vendor = async {
        polled.store(true, Ordering::SeqCst);
        Ok::<u32, DepError>(1)
    };
    let call = pin!(breaker.call_async(vendor));
    match poll_once(call) {
        Poll::Ready(Err(CallError::Rejected(r))) => assert_eq!(r.state(), State::Open),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!polled.load(Ordering::SeqCst), "the vendor was polled");
    assert_eq!(breaker.snapshot().totals.short_circuits, 1);
}

#[test]
fn a_guarded_future_asks_the_breaker_at_its_first_poll_not_when_made() {
    let (breaker, mock) = consecutive(1);
    trip(&breaker, 1);
    // Made while open, polled once the period is over: it is the probe.
    let made_early = breaker.call_async(future::ready(Ok::<u32, DepError>(7)));
    mock.increment(10 * SEC);
    let mut made_early = pin!(made_early);
    assert!(matches!(poll_once(made_early.as_mut()), Poll::Ready(Ok(7))));
    assert_eq!(breaker.state(), State::Closed);
    let s = breaker.snapshot();
    assert_eq!((s.totals.short_circuits, s.probes.successes), (0, 1));
}

#[test]
fn a_probe_counts_the_moment_its_future_completes_not_when_it_is_dropped() {
    let (breaker, mock) = consecutive(1);
    trip(&breaker, 1);
    mock.increment(10 * SEC);
    let mut probe = Box::pin(breaker.call_async(future::ready(Ok::<u32, DepError>(1))));
    assert!(poll_once(probe.as_mut()).is_ready());
    assert_eq!(breaker.state(), State::Closed, "closed before the drop");
    drop(probe);
    assert_eq!(
        breaker.snapshot().totals.cancelled,
        0,
        "a completed call is not cancelled"
    );
}

#[test]
fn an_error_is_classified_on_completion_as_call_classifies_it() {
    let (breaker, _mock) = consecutive(2);
    let mut failed = pin!(breaker.call_async(async { outage() }));
    assert!(matches!(
        poll_once(failed.as_mut()),
        Poll::Ready(Err(CallError::Failed(DepError::Outage(_))))
    ));
    // The test classifier ignores a business error, as `call` does.
    let business = async { Err::<u32, _>(DepError::Business(crate::support::breaker::Business)) };
    assert!(poll_once(pin!(breaker.call_async(business))).is_ready());
    let t = breaker.snapshot().totals;
    assert_eq!((t.calls, t.failures, t.ignored), (2, 1, 1));
}

#[test]
fn call_any_async_classifies_an_error_of_any_type_as_call_any_does() {
    let (breaker, _mock) = consecutive(1);
    let boxed = async { Err::<u32, Box<dyn std::error::Error + Send + Sync>>(Box::new(Outage)) };
    assert!(poll_once(pin!(breaker.call_any_async(boxed))).is_ready());
    assert_eq!(
        breaker.state(),
        State::Open,
        "the boxed Outage is seen as one"
    );
}

#[tokio::test]
async fn five_cancelled_lookups_in_a_row_do_not_trip_a_default_breaker() {
    let breaker = default_breaker("lookups");
    for _ in 0..5 {
        tokio::select! {
            biased;
            _ = breaker.call_async(future::pending::<Result<u32, io::Error>>()) => {
                unreachable!("the vendor never answers")
            }
            () = future::ready(()) => {}
        }
    }
    let s = breaker.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(
        (
            s.totals.cancelled,
            s.totals.calls,
            s.totals.failures,
            s.totals.successes
        ),
        (5, 0, 0, 0)
    );
}

#[test]
fn a_cancelled_probe_gives_its_place_back_and_decides_nothing() {
    let (breaker, mock) = consecutive(1);
    trip(&breaker, 1);
    mock.increment(10 * SEC);
    let mut probe = Box::pin(breaker.call_async(future::pending::<Result<u32, DepError>>()));
    assert!(poll_once(probe.as_mut()).is_pending());
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    drop(probe);
    assert_eq!(breaker.state(), State::HalfOpen);
    let next = pin!(breaker.call_async(future::ready(Ok::<u32, DepError>(3))));
    assert!(
        matches!(poll_once(next), Poll::Ready(Ok(3))),
        "a probe may go again"
    );
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().totals.cancelled, 1);
}

#[test]
fn a_panic_in_the_vendors_future_counts_as_a_failure() {
    let (breaker, _mock) = consecutive(1);
    let mut call = Box::pin(breaker.call_async(async {
        panic!("vendor client bug");
        #[allow(unreachable_code)]
        Ok::<u32, DepError>(0)
    }));
    let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
    assert!(unwound.is_err());
    drop(call);
    let t = breaker.snapshot().totals;
    assert_eq!((t.failures, t.cancelled), (1, 0));
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_tasks_at_a_half_open_breaker_send_one_probe() {
    let (breaker, mock) = consecutive(1);
    trip(&breaker, 1);
    mock.increment(10 * SEC);
    let admitted = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(Notify::new());
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (breaker, admitted, release) =
                (breaker.clone(), Arc::clone(&admitted), Arc::clone(&release));
            tokio::spawn(async move {
                breaker
                    .call_async(async {
                        admitted.fetch_add(1, Ordering::SeqCst);
                        release.notified().await;
                        Ok::<u32, DepError>(1)
                    })
                    .await
            })
        })
        .collect();
    // Every task but the probe is refused without waiting for it. (The
    // probe counts itself as its vendor's future starts, just after its
    // admission: wait for both.)
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while breaker.snapshot().totals.short_circuits < 49 || admitted.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the refusals never came"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(admitted.load(Ordering::SeqCst), 1);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    release.notify_one();
    let mut answers = 0;
    for task in tasks {
        match task.await.expect("no task panics") {
            Ok(1) => answers += 1,
            Err(CallError::Rejected(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(answers, 1);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_timeout_inside_the_guard_is_a_failure_and_one_outside_a_cancellation() {
    let vendor = HttpServer::start();
    vendor.reply(Reply::hang());
    let breaker = Breaker::builder("hanging-vendor")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .consecutive_failure_threshold(2)
        .build()
        .unwrap();
    let url = vendor.url("/quote");
    let quick = Duration::from_millis(50);

    // Outside: the timeout drops the guard. Nothing is learned.
    let outside = tokio::time::timeout(quick, breaker.call_async(async_http::get(&url))).await;
    assert!(outside.is_err(), "the vendor hangs");
    let t = breaker.snapshot().totals;
    assert_eq!((t.cancelled, t.failures), (1, 0));

    // Inside, converted to the call's io::Error: a failure.
    let inside = breaker
        .call_async(async { tokio::time::timeout(quick, async_http::get(&url)).await? })
        .await;
    assert!(matches!(inside, Err(CallError::Failed(ref e)) if e.kind() == io::ErrorKind::TimedOut));
    // Inside, as tokio's own Elapsed, boxed: the HTTP classifier knows it.
    let boxed = breaker
        .call_any_async(async {
            let answer = tokio::time::timeout(quick, async_http::get(&url)).await;
            answer.map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        })
        .await;
    assert!(matches!(boxed, Err(CallError::Failed(_))));
    let t = breaker.snapshot().totals;
    assert_eq!((t.cancelled, t.failures), (1, 2));
    assert_eq!(breaker.state(), State::Open);
    assert!(vendor.wait_for_requests(3));
}

#[test]
fn a_thread_and_a_task_share_one_breaker() {
    let (breaker, _mock) = consecutive(4);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let rounds = 1_000;
    let both = Arc::new(Barrier::new(2));
    let thread = {
        let (breaker, both) = (breaker.clone(), Arc::clone(&both));
        std::thread::spawn(move || {
            both.wait();
            for _ in 0..rounds {
                breaker.call(|| Ok::<u32, DepError>(1)).unwrap();
            }
        })
    };
    let task = {
        let breaker = breaker.clone();
        runtime.spawn(async move {
            both.wait();
            for _ in 0..rounds {
                breaker
                    .call_async(async { Ok::<u32, DepError>(2) })
                    .await
                    .unwrap();
            }
        })
    };
    thread.join().unwrap();
    runtime.block_on(task).unwrap();
    assert_eq!(breaker.snapshot().totals.successes, 2 * rounds);

    // One run of failures: two from the thread, two from the task, open.
    for _ in 0..2 {
        let _ = breaker.call(outage);
    }
    runtime.block_on(async {
        for _ in 0..2 {
            let _ = breaker.call_async(async { outage() }).await;
        }
    });
    assert_eq!(breaker.state(), State::Open);
    assert!(matches!(
        breaker.call(|| Ok::<u32, DepError>(1)),
        Err(CallError::Rejected(_))
    ));
}

#[test]
fn a_guarded_closed_success_allocates_nothing() {
    let (breaker, _mock) = consecutive(5);
    let n = allocations_per_1000(|| {
        let call = pin!(breaker.call_async(future::ready(Ok::<u32, DepError>(1))));
        assert!(poll_once(call).is_ready());
    });
    assert_eq!(n, 0);
}

#[test]
fn a_guarded_future_is_send_and_unpin_when_its_vendor_is() {
    fn send_unpin<T: Send + Unpin>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let (breaker, _mock) = consecutive(5);
    let ready: Guarded<'_, _> = breaker.call_async(future::ready(Ok::<u32, DepError>(1)));
    send_unpin(&ready);
    let not_unpin = breaker.call_async(async { Ok::<u32, DepError>(1) });
    send(&not_unpin);
}

#[test]
fn a_cancelled_call_leaves_the_calls_in_flight_and_cannot_open_the_breaker() {
    let (builder, mock) = crate::support::breaker::quiet("pricing");
    let breaker = builder
        .slow_call_duration(Duration::from_millis(50))
        .stuck_call_threshold(2)
        .build()
        .expect("valid configuration");
    // Two calls go out and are cancelled (their futures dropped): they are
    // in flight no more.
    for _ in 0..2 {
        let mut call = Box::pin(breaker.call_async(future::pending::<Result<u32, DepError>>()));
        assert!(poll_once(call.as_mut()).is_pending(), "admitted and out");
    }
    let mut held = Box::pin(breaker.call_async(future::pending::<Result<u32, DepError>>()));
    assert!(poll_once(held.as_mut()).is_pending());
    mock.increment(Duration::from_millis(51));
    let answer = pin!(breaker.call_async(async { Ok::<u32, DepError>(1) }));
    assert!(
        matches!(poll_once(answer), Poll::Ready(Ok(1))),
        "one stuck call is one short"
    );
    assert_eq!(breaker.snapshot().totals.cancelled, 2);

    // A second call out past the mark, not cancelled: two stuck.
    let mut second = Box::pin(breaker.call_async(future::pending::<Result<u32, DepError>>()));
    assert!(poll_once(second.as_mut()).is_pending());
    mock.increment(Duration::from_millis(51));
    let refused = pin!(breaker.call_async(async { Ok::<u32, DepError>(1) }));
    assert!(matches!(
        poll_once(refused),
        Poll::Ready(Err(CallError::Rejected(_)))
    ));
    assert_eq!(breaker.state(), State::Open);
}
