//! The retry policy on the mock clock: a sleeper that moves the clock
//! instead of sleeping, so every attempt's time is exact.
#![cfg(feature = "retry")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::retry::{GaveUp, RetryBudget, RetryPolicy, RetryPolicyBuilder};
use fusebox::{Breaker, CallError, CallPath, Classifier, State, Verdict};
use quanta::{Clock, Mock};

use crate::support::breaker::*;

/// A mock clock, and the sleeps a policy took on it.
struct Time {
    clock: Clock,
    mock: Arc<Mock>,
    sleeps: Arc<Mutex<Vec<Duration>>>,
    start: quanta::Instant,
}

impl Time {
    fn new() -> Time {
        let (clock, mock) = Clock::mock();
        mock.increment(1_000 * SEC);
        let start = clock.now();
        Time {
            clock,
            mock,
            sleeps: Arc::default(),
            start,
        }
    }

    /// A policy builder whose sleeper moves this clock.
    fn policy(&self) -> RetryPolicyBuilder {
        let (mock, sleeps) = (Arc::clone(&self.mock), Arc::clone(&self.sleeps));
        RetryPolicy::builder()
            .idempotent(true)
            .backoff(100 * MS, 10 * SEC)
            .jitter(0.0)
            .clock(self.clock.clone())
            .sleeper(move |d: Duration| {
                sleeps.lock().unwrap().push(d);
                mock.increment(d);
            })
    }

    fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.lock().unwrap().clone()
    }

    /// Time since the test began.
    fn elapsed(&self) -> Duration {
        self.clock.now().duration_since(self.start)
    }

    /// A breaker on this clock opening after `n` consecutive failures for 2 s.
    fn breaker(&self, n: u32) -> Breaker {
        Breaker::builder("vendor")
            .call_path(CallPath::ReferenceData)
            .classifier(Classifier::failures_of::<Outage>())
            .clock(self.clock.clone())
            .jitter(0.0)
            .consecutive_failure_threshold(n)
            .failure_rate_threshold(None)
            .open_duration(2 * SEC)
            .build()
            .unwrap()
    }
}

#[test]
fn failed_attempts_back_off_exponentially_at_exact_times() {
    let t = Time::new();
    let breaker = t.breaker(100);
    let policy = t.policy().max_attempts(4).build().unwrap();
    let mut at = Vec::new();
    let err = policy
        .call(&breaker, || {
            at.push(t.elapsed());
            Err::<u32, _>(DepError::Outage(Outage))
        })
        .unwrap_err();
    assert_eq!(at, [Duration::ZERO, 100 * MS, 300 * MS, 700 * MS]);
    assert_eq!(t.sleeps(), [100 * MS, 200 * MS, 400 * MS]);
    assert_eq!(err.gave_up(), GaveUp::Attempts);
    assert_eq!((err.attempts(), err.refusals()), (4, 0));
    assert!(matches!(
        err.error(),
        CallError::Failed(DepError::Outage(_))
    ));
    assert_eq!(
        err.to_string(),
        "gave up after 4 attempts and 0 refusals: attempts exhausted"
    );
    assert_eq!(breaker.snapshot().totals.failures, 4);
}

#[test]
fn a_success_after_failures_ends_the_loop() {
    let t = Time::new();
    let breaker = t.breaker(100);
    let policy = t.policy().max_attempts(5).build().unwrap();
    let mut calls = 0;
    let value = policy
        .call(&breaker, || {
            calls += 1;
            if calls < 3 {
                Err(DepError::Outage(Outage))
            } else {
                Ok(calls)
            }
        })
        .unwrap();
    assert_eq!(value, 3);
    assert_eq!(t.sleeps(), [100 * MS, 200 * MS]);
}

#[test]
fn full_jitter_stays_within_the_nominal_wait_and_a_seed_repeats_it() {
    let waits = |seed: u64| {
        let t = Time::new();
        let breaker = t.breaker(1_000);
        let policy = t
            .policy()
            .jitter(1.0)
            .jitter_seed(seed)
            .max_attempts(8)
            .build()
            .unwrap();
        let _ = policy.call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)));
        t.sleeps()
    };
    let (a, b, c) = (waits(7), waits(7), waits(8));
    assert_eq!(a, b, "the same seed, the same waits");
    assert_ne!(a, c);
    for (i, d) in a.iter().enumerate() {
        let nominal = (100 * MS * (1 << i)).min(10 * SEC);
        assert!(*d <= nominal, "retry {}: {d:?} > {nominal:?}", i + 1);
    }
    assert!(a.iter().any(|d| *d < 50 * MS * (1 << 6)), "{a:?}");
}

#[test]
fn a_jitter_fraction_shortens_each_wait_by_at_most_that_fraction_as_a_breakers_does() {
    let t = Time::new();
    let breaker = t.breaker(1_000);
    let policy = t
        .policy()
        .jitter(0.25)
        .jitter_seed(3)
        .max_attempts(8)
        .build()
        .unwrap();
    let _ = policy.call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)));
    let waits = t.sleeps();
    assert_eq!(waits.len(), 7);
    for (i, d) in waits.iter().enumerate() {
        let nominal = (100 * MS * (1 << i)).min(10 * SEC);
        assert!(
            *d <= nominal && *d >= nominal.mul_f64(0.75),
            "retry {}: {d:?} outside [0.75, 1] x {nominal:?}",
            i + 1
        );
    }
    assert!(
        waits
            .iter()
            .enumerate()
            .any(|(i, d)| *d < (100 * MS * (1 << i)).min(10 * SEC)),
        "some wait is shortened: {waits:?}"
    );
}

#[test]
fn the_total_deadline_stops_a_wait_that_would_end_past_it() {
    let t = Time::new();
    let breaker = t.breaker(100);
    let policy = t
        .policy()
        .backoff(SEC, 10 * SEC)
        .max_attempts(10)
        .deadline(2_500 * MS)
        .build()
        .unwrap();
    let mut at = Vec::new();
    let err = policy
        .call(&breaker, || {
            at.push(t.elapsed());
            Err::<u32, _>(DepError::Outage(Outage))
        })
        .unwrap_err();
    // At 1 s the next wait (2 s) would end at 3 s, past 2.5 s.
    assert_eq!(at, [Duration::ZERO, SEC]);
    assert_eq!(err.gave_up(), GaveUp::Deadline);
}

#[test]
fn a_refusal_is_not_an_attempt_and_its_retry_after_is_waited_out() {
    let t = Time::new();
    let breaker = t.breaker(1);
    let _ = fail(&breaker);
    t.mock.increment(500 * MS);
    let policy = t.policy().max_attempts(1).build().unwrap();
    let mut at = Vec::new();
    let value = policy
        .call(&breaker, || {
            at.push(t.elapsed());
            Ok::<_, DepError>(42)
        })
        .unwrap();
    assert_eq!(value, 42);
    assert_eq!(t.sleeps(), [1_500 * MS], "the breaker's retry_after");
    assert_eq!(
        at,
        [2 * SEC],
        "one attempt, the probe, when the period ended"
    );
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn an_inner_breakers_refusal_is_waited_out_like_the_outer_breakers_own() {
    // A service-level breaker over an endpoint-level one that is open: the
    // outer breaker admits the call, the inner refuses it, nothing is sent.
    let t = Time::new();
    let outer = t.breaker(100);
    let inner = t.breaker(1);
    let _ = fail(&inner);
    let policy = t.policy().max_retry_after(5 * SEC).build().unwrap();
    let mut sent = Vec::new();
    let value = policy
        .call(&outer, || {
            inner.call(|| {
                sent.push(t.elapsed());
                Ok::<_, DepError>(42)
            })
        })
        .unwrap();
    assert_eq!(value, 42);
    assert_eq!(t.sleeps(), [2 * SEC], "the inner breaker's retry_after");
    assert_eq!(
        sent,
        [2 * SEC],
        "sent once, when the inner breaker admitted"
    );
    assert_eq!(
        outer.snapshot().totals.ignored,
        1,
        "the refusal counted nowhere"
    );

    // Past max_retry_after: a refusal, not a deterministic failure.
    let _ = fail(&inner);
    let short = t.policy().max_retry_after(SEC).build().unwrap();
    let err = short
        .call(&outer, || {
            inner.call(|| -> Result<u32, DepError> { panic!("not sent") })
        })
        .unwrap_err();
    assert_eq!(err.gave_up(), GaveUp::Refused);
    assert_eq!((err.attempts(), err.refusals()), (0, 1));
}

#[test]
fn a_non_idempotent_call_is_repeated_after_an_inner_breakers_refusal() {
    let t = Time::new();
    let outer = t.breaker(100);
    let inner = t.breaker(1);
    let _ = fail(&inner);
    let policy = t.policy().idempotent(false).build().unwrap();
    let value = policy
        .call(&outer, || inner.call(|| Ok::<_, DepError>(7)))
        .unwrap();
    assert_eq!(value, 7);
    assert_eq!(t.sleeps(), [2 * SEC]);
}

#[test]
fn a_refusal_longer_than_max_retry_after_gives_up_at_once_without_a_call() {
    let t = Time::new();
    let breaker = t.breaker(1);
    let _ = fail(&breaker);
    let policy = t.policy().max_retry_after(SEC).build().unwrap();
    let err = policy
        .call(&breaker, || -> Result<u32, DepError> {
            panic!("not called")
        })
        .unwrap_err();
    assert_eq!(err.gave_up(), GaveUp::Refused);
    assert_eq!((err.attempts(), err.refusals()), (0, 1));
    assert_eq!(err.error().rejected().unwrap().retry_after(), Some(2 * SEC));
    assert!(t.sleeps().is_empty());
}

#[test]
fn a_forced_open_breaker_has_no_retry_after_and_ends_the_call() {
    let t = Time::new();
    let breaker = t.breaker(1);
    breaker.force_open("ops", "maintenance");
    let policy = t.policy().build().unwrap();
    let err = policy
        .call(&breaker, || -> Result<u32, DepError> {
            panic!("not called")
        })
        .unwrap_err();
    assert_eq!(err.gave_up(), GaveUp::Refused);
    assert!(t.sleeps().is_empty());
}

#[test]
fn a_refusal_wait_past_the_deadline_is_not_taken() {
    let t = Time::new();
    let breaker = t.breaker(1);
    let _ = fail(&breaker);
    let policy = t.policy().deadline(SEC).build().unwrap();
    let err = policy
        .call(&breaker, || -> Result<u32, DepError> {
            panic!("not called")
        })
        .unwrap_err();
    assert_eq!(err.gave_up(), GaveUp::Deadline);
    assert!(t.sleeps().is_empty());
}

#[test]
fn a_deterministic_failure_is_never_retried() {
    let t = Time::new();
    let breaker = t.breaker(100);
    let policy = t.policy().max_attempts(5).build().unwrap();
    let mut calls = 0;
    let err = policy
        .call(&breaker, || {
            calls += 1;
            Err::<u32, _>(DepError::Business(Business))
        })
        .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.gave_up(), GaveUp::Deterministic);
    assert_eq!(err.attempts(), 1);
    assert!(t.sleeps().is_empty());
}

#[test]
fn a_non_idempotent_call_is_not_repeated_after_an_attempt_only_after_a_refusal() {
    let t = Time::new();
    let breaker = t.breaker(1);
    let policy = t
        .policy()
        .idempotent(false)
        .max_attempts(5)
        .build()
        .unwrap();
    let mut calls = 0;
    let err = policy
        .call(&breaker, || {
            calls += 1;
            Err::<u32, _>(DepError::Outage(Outage))
        })
        .unwrap_err();
    assert_eq!((calls, err.gave_up()), (1, GaveUp::NotIdempotent));
    assert!(t.sleeps().is_empty());

    // Now open: the refusal sent nothing, so waiting it out is safe.
    let value = policy
        .call(&breaker, || {
            calls += 1;
            Ok::<_, DepError>(calls)
        })
        .unwrap();
    assert_eq!(value, 2);
    assert_eq!(t.sleeps(), [2 * SEC]);
}

#[test]
fn a_vendors_retry_after_is_honoured_up_to_the_cap() {
    let t = Time::new();
    let breaker = Breaker::builder("throttling")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::new(|_| {
            Verdict::Throttled(Duration::from_secs(30))
        }))
        .clock(t.clock.clone())
        .consecutive_failure_threshold(100)
        .failure_rate_threshold(None)
        .build()
        .unwrap();
    let policy = t
        .policy()
        .max_attempts(3)
        .max_retry_after(3 * SEC)
        .build()
        .unwrap();
    let err = policy
        .call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)))
        .unwrap_err();
    assert_eq!(t.sleeps(), [3 * SEC, 3 * SEC]);
    assert_eq!(err.gave_up(), GaveUp::Attempts);
}

#[test]
fn an_exhausted_budget_stops_retries_across_calls_that_share_it() {
    let t = Time::new();
    let breaker = t.breaker(1_000);
    // No share of calls, one retry per 10 s window whatever the traffic.
    let budget = RetryBudget::new(0.0, 1, 10 * SEC)
        .unwrap()
        .clock(t.clock.clone());
    let policy = t
        .policy()
        .max_attempts(5)
        .budget(budget.clone())
        .build()
        .unwrap();
    let first = policy
        .call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)))
        .unwrap_err();
    assert_eq!((first.attempts(), first.gave_up()), (2, GaveUp::Budget));
    let second = policy
        .call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)))
        .unwrap_err();
    assert_eq!((second.attempts(), second.gave_up()), (1, GaveUp::Budget));
    // The window slides: the retry taken 10 s ago no longer counts.
    t.mock.increment(10 * SEC);
    assert!(budget.try_retry());
    assert!(!budget.try_retry());
}

#[test]
fn waiting_out_a_refusal_spends_no_retry_budget() {
    let t = Time::new();
    // One retry per window whatever the traffic.
    let budget = RetryBudget::new(0.0, 1, 10 * SEC)
        .unwrap()
        .clock(t.clock.clone());
    let policy = t
        .policy()
        .max_attempts(3)
        .budget(budget.clone())
        .build()
        .unwrap();
    let failing = t.breaker(100);
    let fails_once = || {
        let mut calls = 0;
        move || {
            calls += 1;
            if calls == 1 {
                Err(DepError::Outage(Outage))
            } else {
                Ok(calls)
            }
        }
    };

    let refusing = t.breaker(1);
    let _ = fail(&refusing);
    let value = policy.call(&refusing, || Ok::<_, DepError>(1)).unwrap();
    assert_eq!((value, t.sleeps()), (1, vec![2 * SEC]));
    // The next call's real failure still has its retry.
    assert_eq!(policy.call(&failing, fails_once()).unwrap(), 2);
    assert!(!budget.try_retry(), "that retry was the one the budget had");

    // Nor does an inner breaker's refusal spend it.
    t.mock.increment(10 * SEC);
    let (outer, inner) = (t.breaker(100), t.breaker(1));
    let _ = fail(&inner);
    let value = policy
        .call(&outer, || inner.call(|| Ok::<_, DepError>(3)))
        .unwrap();
    assert_eq!(value, 3);
    assert_eq!(policy.call(&failing, fails_once()).unwrap(), 2);
    assert!(!budget.try_retry());
}

#[test]
fn a_budget_allows_its_share_of_the_calls() {
    let t = Time::new();
    let budget = RetryBudget::new(0.2, 0, 10 * SEC)
        .unwrap()
        .clock(t.clock.clone());
    for _ in 0..10 {
        budget.record_call();
    }
    assert!(budget.try_retry());
    assert!(budget.try_retry());
    assert!(!budget.try_retry(), "20% of 10 calls is 2 retries");
}

#[test]
fn the_builder_names_the_field_at_fault() {
    let field = |b: RetryPolicyBuilder| b.build().unwrap_err().field();
    assert_eq!(field(RetryPolicy::builder()), "idempotent");
    let ok = || RetryPolicy::builder().idempotent(true);
    assert_eq!(field(ok().max_attempts(0)), "max_attempts");
    assert_eq!(field(ok().backoff(Duration::ZERO, SEC)), "backoff");
    assert_eq!(field(ok().backoff(SEC, MS)), "backoff");
    assert_eq!(field(ok().deadline(Duration::ZERO)), "deadline");
    for jitter in [-0.1, 1.5, f64::NAN] {
        assert_eq!(field(ok().jitter(jitter)), "jitter");
    }
    assert_eq!(RetryBudget::new(-1.0, 0, SEC).unwrap_err().field(), "ratio");
    assert_eq!(RetryBudget::new(0.1, 0, MS).unwrap_err().field(), "window");
}

#[cfg(feature = "chain")]
mod over_a_chain {
    use super::*;
    use fusebox::chain::Chain;

    #[test]
    fn a_failed_lookup_is_retried_and_a_declined_one_is_not() {
        let t = Time::new();
        let (a, b) = (t.breaker(100), t.breaker(100));
        let calls = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&calls);
        let chain: Chain<str, u32, DepError, _> = Chain::builder("c")
            .provider("a", &a, move |sym: &str| {
                let mut n = counted.lock().unwrap();
                *n += 1;
                match (sym, *n) {
                    ("GONE", _) => Err(DepError::Business(Business)),
                    (_, n) if n < 3 => Err(DepError::Outage(Outage)),
                    (_, n) => Ok(n),
                }
            })
            .provider("b", &b, |_: &str| Err(DepError::Outage(Outage)))
            .build()
            .unwrap();
        let policy = t.policy().max_attempts(3).build().unwrap();
        let answer = policy.lookup(&chain, "AAPL").unwrap();
        assert_eq!((answer.link(), *answer.value()), ("a", 3));
        assert_eq!(t.sleeps(), [100 * MS, 200 * MS]);

        let err = policy.lookup(&chain, "GONE").unwrap_err();
        assert_eq!(err.gave_up(), GaveUp::Deterministic);
        assert!(err.error().declined().is_some());
        assert_eq!(*calls.lock().unwrap(), 4, "the no was asked once");
    }

    #[test]
    fn a_lookup_whose_link_an_inner_breaker_refused_is_waited_out_even_when_not_idempotent() {
        let t = Time::new();
        let (link, endpoint) = (t.breaker(100), t.breaker(1));
        let _ = fail(&endpoint);
        let chain: Chain<str, u32, CallError<DepError>, _> = Chain::builder("c")
            .provider("a", &link, {
                let endpoint = endpoint.clone();
                move |_: &str| endpoint.call(|| Ok(1))
            })
            .build()
            .unwrap();
        let policy = t.policy().idempotent(false).build().unwrap();
        let answer = policy.lookup(&chain, "X").unwrap();
        assert_eq!(*answer.value(), 1);
        assert_eq!(t.sleeps(), [2 * SEC], "the endpoint breaker's retry_after");
    }

    #[test]
    fn a_lookup_every_link_refused_waits_for_the_first_breaker_to_admit() {
        let t = Time::new();
        let (a, b) = (t.breaker(1), t.breaker(1));
        let _ = fail(&a);
        t.mock.increment(SEC);
        let _ = fail(&b);
        let chain: Chain<str, u32, DepError, _> = Chain::builder("c")
            .provider("a", &a, |_: &str| Ok(1))
            .provider("b", &b, |_: &str| Ok(2))
            .cache("cache", fusebox::last_good::LastGood::new(SEC))
            .build()
            .unwrap();
        let policy = t.policy().max_attempts(2).build().unwrap();
        let answer = policy.lookup(&chain, "X").unwrap();
        assert_eq!(
            t.sleeps(),
            [SEC],
            "a admits first, 1 s on; the empty cache is no reason"
        );
        assert_eq!(answer.link(), "a");

        // Nothing refused with a time to wait for: the call ends at once.
        a.force_open("ops", "");
        b.force_open("ops", "");
        let err = policy.lookup(&chain, "Y").unwrap_err();
        assert_eq!((err.gave_up(), err.attempts()), (GaveUp::Refused, 0));
        assert_eq!(t.sleeps(), [SEC]);
    }
}
