//! A bulkhead around a future: a full bulkhead refuses at once (never
//! waits, whatever `max_wait` says), and a slot is given back when the
//! future completes or is dropped.

use std::future::{self, Future};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::isolation::{Bulkhead, Isolated, IsolationError};
use fusebox::State;

use crate::support::breaker::{consecutive, trip, DepError};

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_full_bulkhead_refuses_a_future_at_once_even_with_a_wait() {
    let (breaker, _mock) = consecutive(5);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(1)
        .max_wait(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut first =
        Box::pin(bulkhead.call_async(&breaker, future::pending::<Result<u32, DepError>>()));
    assert!(poll_once(first.as_mut()).is_pending());
    assert_eq!(bulkhead.snapshot().in_use, 1);
    let polled = std::cell::Cell::new(false);
    let second = pin!(bulkhead.call_async(&breaker, async {
        polled.set(true);
        Ok::<u32, DepError>(1)
    }));
    match poll_once(second) {
        Poll::Ready(Err(IsolationError::Full(full))) => assert_eq!(full.waited(), Duration::ZERO),
        other => panic!("expected a refusal for want of a slot, got {other:?}"),
    }
    assert!(!polled.get());
    // Dropped while out: the slot comes back, the call is cancelled.
    drop(first);
    assert_eq!(bulkhead.snapshot().in_use, 0);
    let s = breaker.snapshot();
    assert_eq!(
        (s.totals.cancelled, s.totals.failures, s.totals.ignored),
        (1, 0, 0)
    );
}

#[test]
fn a_slot_is_given_back_the_moment_the_future_completes() {
    let (breaker, _mock) = consecutive(5);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(1)
        .build()
        .unwrap();
    let mut call = Box::pin(bulkhead.call_async(&breaker, future::ready(Ok::<u32, DepError>(4))));
    assert!(matches!(poll_once(call.as_mut()), Poll::Ready(Ok(4))));
    assert_eq!(
        bulkhead.snapshot().in_use,
        0,
        "before the future is dropped"
    );
    drop(call);
    assert_eq!(breaker.snapshot().totals.successes, 1);
    assert_eq!(bulkhead.snapshot().peak, 1);
}

#[test]
fn isolated_asks_the_breaker_first_and_takes_no_slot_when_refused() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(2)
        .build()
        .unwrap();
    let isolated = Isolated::new(breaker.clone()).with_bulkhead(bulkhead.clone());
    let failed = pin!(isolated
        .call_async(async { Err::<u32, _>(DepError::Outage(crate::support::breaker::Outage)) }));
    assert!(matches!(
        poll_once(failed),
        Poll::Ready(Err(IsolationError::Failed(_)))
    ));
    trip(&breaker, 0);
    assert_eq!(breaker.state(), State::Open);
    let refused = pin!(isolated.call_async(future::ready(Ok::<u32, DepError>(1))));
    assert!(matches!(
        poll_once(refused),
        Poll::Ready(Err(IsolationError::Rejected(_)))
    ));
    let b = bulkhead.snapshot();
    assert_eq!((b.in_use, b.peak, b.refusals), (0, 1, 0));
}
