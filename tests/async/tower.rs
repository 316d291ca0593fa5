//! The breaker as a tower layer, inside a `ServiceBuilder` with tower's
//! timeout and retry, in front of a loopback HTTP vendor: a 503 response
//! is a failure and a 404 is not, a timeout inside the breaker is a
//! failure, a refusal never calls the vendor and is an error a retry
//! policy tells apart, and an open breaker leaves the service ready.

use std::future::{self, Future};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::http::HttpClassifier;
use fusebox::tower::BreakerLayer;
use fusebox::{Breaker, CallPath, Rejected, ResultClassifier, State, Verdict};
use tower::retry::Policy;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

use crate::support::async_http;
use crate::support::http_server::{HttpServer, Reply};

type Response = http::Response<String>;

/// A breaker that judges responses by their status (below 400 a success,
/// above as the HTTP classifier judges a ureq status error), and errors
/// with the HTTP classifier.
fn vendor_breaker(threshold: u32) -> Breaker {
    Breaker::builder("vendor")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .result_classifier(ResultClassifier::for_type(|r: &Response| {
            match r.status().as_u16() {
                ..400 => Verdict::Success,
                status => HttpClassifier::new().verdict_for_status(status, None),
            }
        }))
        .consecutive_failure_threshold(threshold)
        .build()
        .unwrap()
}

/// The vendor's client as a tower service: `GET` of a path.
fn client(
    vendor: &HttpServer,
) -> impl Service<&'static str, Response = Response, Error = BoxError> + Clone {
    let base = vendor.url("");
    tower::service_fn(move |path: &'static str| {
        let url = format!("{base}{path}");
        async move { Ok::<_, BoxError>(async_http::get(&url).await?) }
    })
}

/// Retries the vendor's own errors up to `left` times, never a refusal:
/// nothing was sent, and the breaker says when to come back.
#[derive(Clone)]
struct RetryVendorErrors {
    left: usize,
    refusals_seen: Arc<AtomicUsize>,
}

impl<Req: Clone, Res> Policy<Req, Res, BoxError> for RetryVendorErrors {
    type Future = future::Ready<()>;

    fn retry(&mut self, _: &mut Req, result: &mut Result<Res, BoxError>) -> Option<Self::Future> {
        let err = result.as_ref().err()?;
        if err.downcast_ref::<Rejected>().is_some() {
            self.refusals_seen.fetch_add(1, Ordering::SeqCst);
            return None;
        }
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(future::ready(()))
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

#[tokio::test]
async fn a_503_response_trips_the_layer_and_a_404_does_not() {
    let vendor = HttpServer::start();
    let breaker = vendor_breaker(2);
    let mut service = ServiceBuilder::new()
        .layer(BreakerLayer::new(breaker.clone()))
        .timeout(Duration::from_secs(10))
        .service(client(&vendor));

    vendor.reply(Reply::ok("1.0842"));
    let answer = service.ready().await.unwrap().call("/quote").await.unwrap();
    assert_eq!(answer.body(), "1.0842");
    assert_eq!(breaker.snapshot().totals.successes, 1);

    vendor.reply(Reply::status(404));
    for _ in 0..3 {
        let answer = service
            .ready()
            .await
            .unwrap()
            .call("/missing")
            .await
            .unwrap();
        assert_eq!(answer.status(), 404);
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().totals.ignored, 3);

    vendor.reply(Reply::status(503));
    for _ in 0..2 {
        let answer = service.ready().await.unwrap().call("/quote").await.unwrap();
        assert_eq!(answer.status(), 503, "the response reaches the caller");
    }
    assert_eq!(breaker.state(), State::Open);
    let sent = vendor.requests();
    let refused = service
        .ready()
        .await
        .unwrap()
        .call("/quote")
        .await
        .unwrap_err();
    assert!(refused.downcast_ref::<Rejected>().is_some(), "{refused}");
    assert_eq!(vendor.requests(), sent, "a refusal sends nothing");
}

#[tokio::test]
async fn a_timeout_inside_the_layer_is_the_vendors_failure() {
    let vendor = HttpServer::start();
    vendor.reply(Reply::hang());
    let breaker = vendor_breaker(1);
    let service = ServiceBuilder::new()
        .layer(BreakerLayer::new(breaker.clone()))
        .timeout(Duration::from_millis(50))
        .service(client(&vendor));
    let err = service.oneshot("/quote").await.unwrap_err();
    assert!(err.downcast_ref::<Rejected>().is_none());
    assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    let t = breaker.snapshot().totals;
    assert_eq!((t.failures, t.cancelled), (1, 0));
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test]
async fn a_retry_policy_retries_the_vendors_errors_and_tells_a_refusal_apart() {
    // A vendor that is down: connections refused.
    let vendor = HttpServer::start();
    vendor.stop();
    let breaker = vendor_breaker(3);
    let refusals_seen = Arc::new(AtomicUsize::new(0));
    let policy = RetryVendorErrors {
        left: 10,
        refusals_seen: Arc::clone(&refusals_seen),
    };
    let service = ServiceBuilder::new()
        .retry(policy)
        .layer(BreakerLayer::new(breaker.clone()))
        .timeout(Duration::from_secs(10))
        .service(client(&vendor));
    let err = service.oneshot("/quote").await.unwrap_err();
    // Three refused connections opened the breaker; the fourth attempt was
    // refused by it, and the policy stopped there.
    assert!(err.downcast_ref::<Rejected>().is_some(), "{err}");
    assert_eq!(refusals_seen.load(Ordering::SeqCst), 1);
    let s = breaker.snapshot();
    assert_eq!((s.totals.failures, s.totals.short_circuits), (3, 1));
}

#[test]
fn an_open_breaker_leaves_the_service_ready() {
    let breaker = vendor_breaker(1);
    breaker.force_open("ops", "drill");
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = {
        let calls = Arc::clone(&calls);
        tower::service_fn(move |_: ()| {
            calls.fetch_add(1, Ordering::SeqCst);
            future::ready(Ok::<Response, BoxError>(Response::default()))
        })
    };
    let mut service = tower::Layer::layer(&BreakerLayer::new(breaker), inner);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut refused = std::pin::pin!(service.call(()));
    match refused.as_mut().poll(&mut cx) {
        Poll::Ready(Err(e)) => assert!(e.is::<Rejected>()),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the inner service was not called"
    );
}
