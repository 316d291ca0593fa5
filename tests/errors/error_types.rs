//! Calls whose error type is not a `std::error::Error`: `anyhow::Error`,
//! boxed errors, `String`, an application's own enum. Each is accepted,
//! classified (typed, without a downcast where the type is known), and an
//! inner breaker's refusal inside it never trips an outer breaker.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use fusebox::{Breaker, CallError, Classifier, Rejected, State, Verdict};

use crate::support::breaker::*;

type BoxError = Box<dyn StdError + Send + Sync>;

fn timed_out() -> io::Error {
    io::Error::from(io::ErrorKind::TimedOut)
}

/// Timeouts are the dependency's failures; every other `io::Error` is not.
fn timeouts() -> Classifier {
    Classifier::new(|err| {
        let io = std::iter::successors(Some(err), |e| (*e).source())
            .find_map(|e| e.downcast_ref::<io::Error>());
        match io.map(io::Error::kind) {
            Some(io::ErrorKind::TimedOut) | None => Verdict::Failure,
            Some(_) => Verdict::Ignore,
        }
    })
}

/// What a breaker with `classifier` counted `err`, returned by `call_any`,
/// as: "success", "failure" or "ignored".
fn counted_as<E: 'static>(classifier: &Classifier, err: E) -> &'static str {
    let b = with(classifier.clone(), 100);
    b.call_any(|| Err::<(), _>(err)).unwrap_err();
    let totals = b.snapshot().totals;
    match (totals.successes, totals.failures, totals.ignored) {
        (1, 0, 0) => "success",
        (0, 1, 0) => "failure",
        (0, 0, 1) => "ignored",
        other => panic!("one call counted as {other:?}"),
    }
}

fn with(classifier: Classifier, threshold: u32) -> Breaker {
    let (builder, _mock) = quiet("vendor");
    builder
        .classifier(classifier)
        .consecutive_failure_threshold(threshold)
        .open_duration(10 * SEC)
        .build()
        .unwrap()
}

#[test]
fn call_any_accepts_anyhow_errors_and_classifies_them_by_what_they_wrap() {
    let b = with(timeouts(), 2);
    let permission_denied = b.call_any(|| -> anyhow::Result<u32> {
        Err(io::Error::from(io::ErrorKind::PermissionDenied))?
    });
    let text = format!(
        "{:#}",
        permission_denied.unwrap_err().into_failed().unwrap()
    );
    assert_eq!(text, "permission denied");
    // Through a context layer: the io::Error is found down the chain.
    let r = b.call_any(|| -> anyhow::Result<u32> {
        Err(anyhow::Error::new(timed_out()).context("loading the curve"))
    });
    assert!(matches!(r, Err(CallError::Failed(_))));
    let s = b.snapshot();
    #[cfg(feature = "anyhow")]
    assert_eq!((s.totals.ignored, s.totals.failures), (1, 1));
    // Without the feature a `dyn Error` classifier cannot see inside an
    // anyhow::Error, and counts what it cannot read as a failure.
    #[cfg(not(feature = "anyhow"))]
    assert_eq!((s.totals.ignored, s.totals.failures), (0, 2));
}

#[test]
fn a_typed_classifier_for_anyhow_errors_needs_no_feature() {
    let b = with(
        Classifier::for_type(|e: &anyhow::Error| {
            if e.chain().any(|c| c.to_string().contains("timed out")) {
                Verdict::Failure
            } else {
                Verdict::Ignore
            }
        }),
        1,
    );
    b.call_any(|| Err::<(), _>(anyhow::anyhow!("no such instrument")))
        .unwrap_err();
    assert_eq!(b.state(), State::Closed);
    b.call_any(|| Err::<(), _>(anyhow::Error::new(timed_out())))
        .unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn call_any_accepts_boxed_errors_and_classifiers_see_inside_the_box() {
    let b = with(timeouts(), 2);
    let r = b.call_any(|| -> Result<u32, BoxError> { Err("bad symbol".into()) });
    assert_eq!(
        r.unwrap_err().into_failed().unwrap().to_string(),
        "bad symbol"
    );
    assert_eq!(b.snapshot().totals.failures, 1, "no io::Error in it");
    let r = b.call_any(|| -> Result<u32, BoxError> {
        Err(Box::new(io::Error::from(io::ErrorKind::NotFound)))
    });
    r.unwrap_err();
    assert_eq!(
        b.snapshot().totals.ignored,
        1,
        "an io::Error that is not a timeout"
    );
    b.call_any(|| -> Result<u32, Box<dyn StdError>> { Err(Box::new(timed_out())) })
        .unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn call_any_accepts_strings_with_a_typed_classifier() {
    let b = with(
        Classifier::for_type(|e: &String| {
            if e.starts_with("timeout") {
                Verdict::Failure
            } else {
                Verdict::Ignore
            }
        }),
        2,
    );
    let r = b.call_any(|| Err::<u32, _>(String::from("unknown symbol XYZ")));
    assert_eq!(
        r.unwrap_err().into_failed().as_deref(),
        Some("unknown symbol XYZ")
    );
    b.call_any(|| Err::<u32, _>(String::from("timeout after 2s")))
        .unwrap_err();
    b.call_any(|| Err::<u32, _>(String::from("timeout after 2s")))
        .unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().totals.ignored, 1);
}

/// An application's own error enum, with no `Error` impl.
#[derive(Debug, Clone, PartialEq)]
enum Quote {
    NoDataForDate,
    Timeout,
    BadRequest,
}

fn quotes() -> Classifier {
    Classifier::for_type(|e: &Quote| match e {
        Quote::NoDataForDate => Verdict::Success,
        Quote::Timeout => Verdict::Failure,
        Quote::BadRequest => Verdict::Ignore,
    })
}

#[test]
fn a_plain_enum_is_classified_without_a_downcast() {
    let b = with(quotes(), 2);
    b.call_any(|| Err::<f64, _>(Quote::Timeout)).unwrap_err();
    assert_eq!(b.snapshot().consecutive_failures, 1);
    let r = b.call_any(|| Err::<f64, _>(Quote::BadRequest));
    assert_eq!(r.unwrap_err().into_failed(), Some(Quote::BadRequest));
    assert_eq!(
        b.snapshot().consecutive_failures,
        1,
        "ignored: the run stands"
    );
    b.call_any(|| Err::<f64, _>(Quote::Timeout)).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_error_classified_as_a_success_counts_as_one_and_ends_a_run_of_failures() {
    let b = with(quotes(), 2);
    b.call_any(|| Err::<f64, _>(Quote::Timeout)).unwrap_err();
    let r = b.call_any(|| Err::<f64, _>(Quote::NoDataForDate));
    assert_eq!(
        r.unwrap_err().into_failed(),
        Some(Quote::NoDataForDate),
        "still returned as the error it is"
    );
    let s = b.snapshot();
    assert_eq!((s.totals.successes, s.totals.failures), (1, 1));
    assert_eq!(s.consecutive_failures, 0, "a success resets the run");
    b.call_any(|| Err::<f64, _>(Quote::Timeout)).unwrap_err();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn an_error_classified_as_a_success_closes_a_half_open_breaker() {
    let (builder, mock) = quiet("eod");
    let b = builder
        .classifier(quotes())
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    b.call_any(|| Err::<f64, _>(Quote::Timeout)).unwrap_err();
    assert_eq!(b.state(), State::Open);
    mock.increment(10 * SEC);
    b.call_any(|| Err::<f64, _>(Quote::NoDataForDate))
        .unwrap_err();
    assert_eq!(b.state(), State::Closed, "the vendor answered");
}

#[test]
fn a_typed_classifier_counts_an_error_of_another_type_as_a_failure() {
    let c = quotes();
    assert_eq!(counted_as(&c, String::from("?")), "failure");
    assert_eq!(c.classify(&timed_out()), Verdict::Failure);
    let b = with(quotes(), 1);
    b.call(|| Err::<(), _>(timed_out())).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_dyn_error_classifier_counts_a_value_that_is_not_an_error_as_a_failure() {
    let c = Classifier::new(|_| Verdict::Ignore);
    assert_eq!(counted_as(&c, Quote::BadRequest), "failure");
    assert_eq!(counted_as(&c, "str"), "failure");
    assert_eq!(counted_as(&c, BoxError::from("boxed")), "ignored");
}

// --- refusals by inner breakers, in every shape -----------------------

/// An inner breaker, open, and an outer one that counts every error it can
/// see and opens on the first.
fn nested() -> (Breaker, Breaker) {
    let (inner, _mock) = consecutive(1);
    trip(&inner, 1);
    let outer = with(Classifier::every_error_is_a_failure(), 1);
    (inner, outer)
}

#[track_caller]
fn outer_untouched(outer: &Breaker, calls: u64) {
    let s = outer.snapshot();
    assert_eq!(
        s.state,
        State::Closed,
        "an inner refusal tripped the outer breaker"
    );
    assert_eq!((s.totals.failures, s.totals.ignored), (0, calls));
}

#[test]
fn an_inner_refusal_in_a_boxed_error_does_not_trip_the_outer_breaker() {
    let (inner, outer) = nested();
    for _ in 0..3 {
        let r = outer.call_any(|| -> Result<u32, BoxError> { Ok(succeed(&inner)?) });
        let boxed = r.unwrap_err().into_failed().unwrap();
        assert!(Rejected::in_chain(&*boxed));
    }
    outer_untouched(&outer, 3);
}

#[test]
fn an_inner_refusal_of_a_string_error_breaker_does_not_trip_the_outer_breaker() {
    let (inner, outer) = nested();
    let r = outer.call_any(|| inner.call_any(|| Err::<u32, _>(String::from("never run"))));
    assert!(matches!(r, Err(CallError::Failed(CallError::Rejected(_)))));
    outer_untouched(&outer, 1);
    // A string error that is not a refusal still counts.
    let healthy = with(Classifier::every_error_is_a_failure(), 5);
    let r = outer.call_any(|| healthy.call_any(|| Err::<u32, _>(String::from("boom"))));
    assert!(matches!(r, Err(CallError::Failed(CallError::Failed(_)))));
    assert_eq!(outer.state(), State::Open);
}

#[test]
fn an_inner_refusal_in_an_io_error_does_not_trip_the_outer_breaker() {
    // io::Error::source() returns the source of the error it wraps, not the
    // wrapped error: a walk of source() alone never sees this refusal.
    let (inner, outer) = nested();
    for _ in 0..3 {
        let r = outer.call(|| -> Result<u32, io::Error> {
            let permit = inner.try_acquire().map_err(io::Error::other)?;
            permit.record(Verdict::Success);
            Ok(1)
        });
        assert!(r
            .unwrap_err()
            .into_failed()
            .unwrap()
            .get_ref()
            .unwrap()
            .is::<Rejected>());
    }
    outer_untouched(&outer, 3);
}

#[test]
fn an_inner_refusal_deep_in_io_errors_and_wrappers_is_found() {
    let (inner, _mock) = consecutive(1);
    trip(&inner, 1);
    let rejected = *succeed(&inner).unwrap_err().rejected().unwrap();
    let twice = io::Error::other(io::Error::other(rejected));
    assert!(Rejected::in_chain(&twice));
    let in_call_error = io::Error::other(CallError::<io::Error>::Rejected(rejected));
    assert!(Rejected::in_chain(&in_call_error));
    assert!(!Rejected::in_chain(&io::Error::other("not a refusal")));
    // Box<T> and Arc<T> are errors whose source() is T's source: the
    // refusal inside them is found all the same.
    assert!(Rejected::in_chain(&Box::new(rejected)));
    assert!(Rejected::in_chain(&std::sync::Arc::new(rejected)));
}

/// An error whose `source()` is itself.
#[derive(Debug)]
struct Cyclic;

impl fmt::Display for Cyclic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cyclic")
    }
}

impl StdError for Cyclic {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}

#[test]
fn a_cyclic_source_chain_ends() {
    assert!(!Rejected::in_chain(&Cyclic));
    assert_eq!(
        Classifier::failures_of::<Outage>().classify(&Cyclic),
        Verdict::Ignore
    );
    let b = with(Classifier::every_error_is_a_failure(), 1);
    b.call(|| Err::<(), _>(Cyclic)).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[cfg(feature = "anyhow")]
mod anyhow_chain {
    use super::*;

    #[test]
    fn an_inner_refusal_in_anyhows_chain_does_not_trip_the_outer_breaker() {
        let (inner, outer) = nested();
        for _ in 0..3 {
            let r = outer.call_any(|| -> anyhow::Result<u32> {
                let n = inner.call(|| Ok::<u32, io::Error>(1))?;
                Ok(n)
            });
            r.unwrap_err();
        }
        outer_untouched(&outer, 3);
    }

    #[test]
    fn an_inner_refusal_under_anyhow_context_does_not_trip_the_outer_breaker() {
        let (inner, outer) = nested();
        let r = outer.call_any(|| -> anyhow::Result<u32> {
            use anyhow::Context as _;
            let n = inner
                .call(|| Ok::<u32, io::Error>(1))
                .context("loading instruments")?;
            Ok(n)
        });
        let text = format!("{:#}", r.unwrap_err().into_failed().unwrap());
        assert!(
            text.starts_with("loading instruments: call not attempted: breaker `refdata` is open"),
            "{text}"
        );
        outer_untouched(&outer, 1);
    }

    /// A call through `breaker` in a function that returns `anyhow::Result`.
    fn curve(breaker: &Breaker, fail: bool) -> anyhow::Result<u32> {
        use anyhow::Context as _;
        let n = breaker
            .call_any(|| -> anyhow::Result<u32> {
                if fail {
                    Err(anyhow::Error::new(timed_out()).context("reading the curve"))
                } else {
                    Ok(1)
                }
            })
            .map_err(CallError::into_anyhow)
            .context("loading the curve")?;
        Ok(n)
    }

    #[test]
    fn into_anyhow_lets_a_refusal_be_told_apart_after_question_mark_and_context() {
        let b = with(timeouts(), 1);
        let failed = curve(&b, true).unwrap_err();
        assert!(failed.downcast_ref::<Rejected>().is_none());
        assert!(
            failed.downcast_ref::<io::Error>().is_some(),
            "the cause kept"
        );
        assert_eq!(
            format!("{failed:#}"),
            "loading the curve: reading the curve: timed out"
        );

        let refused = curve(&b, false).unwrap_err();
        let rejected = refused
            .downcast_ref::<Rejected>()
            .expect("nothing was attempted");
        assert_eq!(rejected.state(), State::Open);
        let text = format!("{refused:#}");
        assert!(
            text.starts_with("loading the curve: breaker `vendor` is open"),
            "{text}"
        );
    }

    #[test]
    fn an_inner_refusal_returned_by_into_anyhow_does_not_trip_the_outer_breaker() {
        let (inner, outer) = nested();
        for _ in 0..3 {
            outer.call_any(|| curve(&inner, false)).unwrap_err();
        }
        outer_untouched(&outer, 3);
    }

    #[test]
    fn an_inner_refusal_of_an_anyhow_breaker_does_not_trip_the_outer_breaker() {
        let (inner, outer) = nested();
        let r = outer.call_any(|| inner.call_any(|| Err::<u32, _>(anyhow::anyhow!("never run"))));
        assert!(matches!(r, Err(CallError::Failed(CallError::Rejected(_)))));
        outer_untouched(&outer, 1);
    }

    #[test]
    fn a_dyn_error_classifier_sees_inside_anyhow() {
        let c = Classifier::failures_of::<Outage>();
        assert_eq!(counted_as(&c, anyhow::Error::new(Outage)), "failure");
        assert_eq!(counted_as(&c, anyhow::Error::new(Business)), "ignored");
    }
}

#[test]
fn an_inner_refusal_of_an_io_error_breaker_does_not_trip_an_outer_call_any() {
    let (inner, outer) = nested();
    let r = outer.call_any(|| inner.call(|| Ok::<u32, io::Error>(1)));
    assert!(matches!(r, Err(CallError::Failed(CallError::Rejected(_)))));
    outer_untouched(&outer, 1);
}

#[test]
fn call_any_sees_an_io_error_as_an_error() {
    let b = with(timeouts(), 1);
    b.call_any(|| Err::<(), _>(io::Error::from(io::ErrorKind::NotFound)))
        .unwrap_err();
    assert_eq!(b.state(), State::Closed);
    b.call_any(|| Err::<(), _>(timed_out())).unwrap_err();
    assert_eq!(b.state(), State::Open);
}
