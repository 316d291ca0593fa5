//! Fallback chains: every skip reason, the deterministic "no", all links
//! down, the cache's staleness, the builder's refusals, concurrent lookups
//! with one probe per open period, and a healthy lookup that allocates
//! nothing. Breaker time is the mock clock's; waits on threads are bounded.
#![cfg(feature = "chain")]

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use fusebox::chain::{Boxed, Chain, FirstLink, Origin, Skip, SkipReason};
use fusebox::last_good::LastGood;
use fusebox::{Breaker, CallPath, ConfigError, State};
use quanta::{Clock, Mock};

use crate::support::breaker::*;
use crate::support::counting_alloc;

/// How long a thread waits for another before the test fails.
const BOUND: Duration = Duration::from_secs(30);

/// A breaker on `clock` that opens on the first failure for 10 s.
fn vendor(name: &str, clock: &Clock) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::Classifier::failures_of::<Outage>())
        .clock(clock.clone())
        .jitter(0.0)
        .consecutive_failure_threshold(1)
        .failure_rate_threshold(None)
        .open_duration(10 * SEC)
        .build()
        .unwrap()
}

fn clock() -> (Clock, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    mock.increment(1_000 * SEC);
    (clock, mock)
}

/// What a provider does, switchable from the test, and how often it ran.
#[derive(Default)]
struct Script {
    /// 0: answer, 1: outage, 2: business "no".
    mode: AtomicU32,
    calls: AtomicU32,
}

impl Script {
    fn set(&self, mode: u32) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    fn provider(self: &Arc<Self>, price: f64) -> impl Fn(&str) -> Result<f64, DepError> {
        let me = Arc::clone(self);
        move |_sym: &str| {
            me.calls.fetch_add(1, Ordering::SeqCst);
            match me.mode.load(Ordering::SeqCst) {
                0 => Ok(price),
                1 => Err(DepError::Outage(Outage)),
                _ => Err(DepError::Business(Business)),
            }
        }
    }
}

struct Fixture<L> {
    chain: Chain<str, f64, DepError, L>,
    primary: Breaker,
    secondary: Breaker,
    p: Arc<Script>,
    s: Arc<Script>,
    mock: Arc<Mock>,
}

/// primary (100.0), secondary (200.0), a cache kept 60 s, a default (0.0);
/// the primary goes on past a "no" when `past_no` says so. The chain as
/// built: its first provider's closure in its type.
fn fixture(past_no: bool) -> Fixture<impl FirstLink<str, f64, DepError>> {
    let (clock, mock) = clock();
    let (primary, secondary) = (vendor("primary", &clock), vendor("secondary", &clock));
    let (p, s) = (Arc::new(Script::default()), Arc::new(Script::default()));
    let cache = LastGood::new(60 * SEC).clock(clock.clone());
    let builder = Chain::builder("closing-price").provider("primary", &primary, p.provider(100.0));
    let builder = if past_no {
        builder.continue_past_no()
    } else {
        builder
    };
    let chain = builder
        .provider("secondary", &secondary, s.provider(200.0))
        .cache("last-good", cache)
        .default_value("default", 0.0)
        .clock(clock)
        .build()
        .unwrap();
    Fixture {
        chain,
        primary,
        secondary,
        p,
        s,
        mock,
    }
}

/// The same fixture with its first link behind a box: the type a struct
/// field names.
fn boxed(
    f: Fixture<impl FirstLink<str, f64, DepError> + 'static>,
) -> Fixture<Boxed<str, f64, DepError>> {
    Fixture {
        chain: f.chain.boxed(),
        primary: f.primary,
        secondary: f.secondary,
        p: f.p,
        s: f.s,
        mock: f.mock,
    }
}

/// primary (100.0), secondary (200.0), a default (0.0): no cache and no
/// deadline, so that a lookup asks the first link at once, on the path of
/// a healthy lookup, and walks the rest only when it does not answer.
fn lean(past_no: bool) -> Fixture<impl FirstLink<str, f64, DepError>> {
    let (clock, mock) = clock();
    let (primary, secondary) = (vendor("primary", &clock), vendor("secondary", &clock));
    let (p, s) = (Arc::new(Script::default()), Arc::new(Script::default()));
    let builder = Chain::builder("lean").provider("primary", &primary, p.provider(100.0));
    let builder = if past_no {
        builder.continue_past_no()
    } else {
        builder
    };
    let chain = builder
        .provider("secondary", &secondary, s.provider(200.0))
        .default_value("default", 0.0)
        .build()
        .unwrap();
    Fixture {
        chain,
        primary,
        secondary,
        p,
        s,
        mock,
    }
}

/// What the first link's answer, "no", failure and refusal make of a
/// lookup, and how each is counted.
fn first_link_outcomes<L: FirstLink<str, f64, DepError>>(f: Fixture<L>) {
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!((*answer.value(), answer.link()), (100.0, "primary"));
    assert_eq!(answer.origin(), Origin::Provider);
    assert!(answer.skipped().is_empty());

    f.p.set(2);
    let err = f.chain.lookup("GONE").unwrap_err();
    assert_eq!(err.declined().map(|(link, _)| link), Some("primary"));
    assert!(err.skipped().is_empty());
    assert_eq!(f.s.calls(), 0, "a no stops the chain");

    f.p.set(1);
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!((answer.link(), *answer.value()), ("secondary", 200.0));
    assert!(matches!(
        answer.skipped()[0].skip(),
        Skip::Failed(DepError::Outage(_))
    ));
    assert_eq!(f.primary.state(), State::Open, "the failure counted");

    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!(answer.link(), "secondary");
    assert_eq!(answer.skipped()[0].skip().reason(), SkipReason::Refused);
    assert_eq!(f.p.calls(), 3, "not called while open");

    let snap = f.chain.snapshot();
    let (first, second) = (&snap.links[0], &snap.links[1]);
    assert_eq!((first.answers, first.declined), (1, 1));
    assert_eq!(
        (
            first.skips.get(SkipReason::Failed),
            first.skips.get(SkipReason::Refused)
        ),
        (1, 1)
    );
    assert_eq!((second.answers, second.declined), (2, 0));
}

#[test]
fn a_chain_without_cache_or_deadline_answers_declines_and_falls_back_from_its_first_link() {
    first_link_outcomes(lean(false));
}

#[test]
fn a_boxed_chain_answers_declines_and_falls_back_from_its_first_link_the_same() {
    first_link_outcomes(boxed(lean(false)));
}

#[test]
fn a_first_link_built_to_continue_past_a_no_hands_over_as_built_and_boxed() {
    fn check<L: FirstLink<str, f64, DepError>>(f: Fixture<L>) {
        f.p.set(2);
        let answer = f.chain.lookup("NEWLISTING").unwrap();
        assert_eq!((answer.link(), *answer.value()), ("secondary", 200.0));
        assert_eq!(answer.skipped()[0].skip().reason(), SkipReason::Declined);
        assert_eq!(
            f.chain.snapshot().links[0].skips.get(SkipReason::Declined),
            1
        );
    }
    check(lean(true));
    check(boxed(lean(true)));
}

#[test]
fn a_chain_keeps_its_name_links_and_counters_when_boxed() {
    let f = lean(false);
    f.chain.lookup("AAPL").unwrap();
    let registry = fusebox::registry::Registry::new();
    registry.register_chain(&f.chain).unwrap();
    let chain: Chain<str, f64, DepError> = f.chain.boxed();
    assert_eq!(chain.name(), "lean");
    assert_eq!(
        chain
            .snapshot()
            .links
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["primary", "secondary", "default"]
    );
    chain.lookup("AAPL").unwrap();
    assert_eq!(
        registry.chain_snapshots()[0].links[0].answers,
        2,
        "one set of counters"
    );
    assert!(format!("{chain:?}").contains("provider"));
}

#[test]
fn a_healthy_primary_answers_and_nothing_else_is_called() {
    let f = fixture(false);
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!(*answer.value(), 100.0);
    assert_eq!(answer.link(), "primary");
    assert_eq!(answer.origin(), Origin::Provider);
    assert!(answer.skipped().is_empty());
    assert_eq!((f.p.calls(), f.s.calls()), (1, 0));
}

#[test]
fn a_failing_link_is_recorded_with_its_error_and_the_next_answers() {
    let f = fixture(false);
    f.p.set(1);
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!((*answer.value(), answer.link()), (200.0, "secondary"));
    let [skipped] = answer.skipped() else {
        panic!("one skip expected: {:?}", answer.skipped())
    };
    assert_eq!(skipped.link(), "primary");
    assert!(matches!(skipped.skip(), Skip::Failed(DepError::Outage(_))));
    assert!(!skipped.skip().nothing_attempted());
    assert_eq!(
        skipped.to_string(),
        "`primary`: provider error (dependency unavailable)"
    );
    assert_eq!(f.primary.state(), State::Open, "the failure counted");
}

#[test]
fn an_open_breaker_is_skipped_without_calling_its_provider() {
    let f = fixture(false);
    f.p.set(1);
    f.chain.lookup("AAPL").unwrap();
    assert_eq!(f.p.calls(), 1);
    f.mock.increment(4 * SEC);
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!(answer.link(), "secondary");
    assert_eq!(f.p.calls(), 1, "not called while open");
    let rejected = answer.skipped()[0].skip().rejected().expect("refused");
    assert_eq!(rejected.state(), State::Open);
    assert_eq!(rejected.retry_after(), Some(6 * SEC));
    assert!(answer.skipped()[0].skip().nothing_attempted());
    assert_eq!(
        answer.skipped()[0].to_string(),
        "`primary`: refused (breaker `primary` is open, retry after 6s)"
    );
}

#[test]
fn a_link_whose_call_an_inner_breaker_refused_is_a_refused_skip_with_nothing_attempted() {
    // A provider whose closure calls through its own endpoint breaker,
    // which is open.
    let (clock, mock) = clock();
    let (link, endpoint) = (vendor("provider", &clock), vendor("endpoint", &clock));
    let _ = fail(&endpoint);
    mock.increment(4 * SEC);
    let s = Arc::new(Script::default());
    let call = s.provider(1.0);
    let chain = Chain::builder("c")
        .provider("provider", &link, {
            let endpoint = endpoint.clone();
            move |sym: &str| endpoint.call(|| call(sym))
        })
        .provider("backup", &vendor("backup", &clock), |_: &str| {
            Ok::<_, fusebox::CallError<DepError>>(2.0)
        })
        .build()
        .unwrap();
    let answer = chain.lookup("AAPL").unwrap();
    assert_eq!(answer.link(), "backup");
    assert_eq!(s.calls(), 0, "the provider was not called");
    let skip = answer.skipped()[0].skip();
    assert!(skip.nothing_attempted());
    assert_eq!(skip.reason(), SkipReason::Refused);
    let rejected = skip.rejected().expect("the endpoint's refusal");
    assert_eq!(rejected.breaker(), "endpoint");
    assert_eq!(rejected.retry_after(), Some(6 * SEC));
    assert_eq!(
        answer.skipped()[0].to_string(),
        "`provider`: refused (breaker `endpoint` is open, retry after 6s)"
    );
    let totals = link.snapshot().totals;
    assert_eq!((totals.failures, totals.ignored), (0, 1), "counted nowhere");
}

#[test]
fn no_link_is_called_twice_in_one_lookup() {
    let f = fixture(false);
    f.p.set(1);
    f.s.set(1);
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!(answer.link(), "default");
    assert_eq!((f.p.calls(), f.s.calls()), (1, 1));
    let reasons: Vec<_> = answer.skipped().iter().map(|s| s.skip().reason()).collect();
    assert_eq!(
        reasons,
        [
            SkipReason::Failed,
            SkipReason::Failed,
            SkipReason::NotCached
        ]
    );
}

#[test]
fn a_deterministic_no_stops_the_chain_and_no_older_yes_papers_over_it() {
    let f = fixture(false);
    // The cache holds an older "yes".
    f.chain.lookup("DELISTED").unwrap();
    f.p.set(2);
    let err = f.chain.lookup("DELISTED").unwrap_err();
    assert!(err.declined().is_some());
    let (link, error) = err.declined().unwrap();
    assert_eq!((link, error), ("primary", &DepError::Business(Business)));
    assert!(err.skipped().is_empty());
    assert_eq!(f.s.calls(), 0, "the secondary was not asked");
    assert_eq!(f.primary.state(), State::Closed, "a no is not an outage");
    assert_eq!(
        err.to_string(),
        "chain `closing-price`: `primary` said no (unknown symbol)"
    );
    assert_eq!(err.source().unwrap().to_string(), "unknown symbol");
}

#[test]
fn a_link_built_to_continue_past_a_no_hands_over_to_the_next() {
    let f = fixture(true);
    f.p.set(2);
    let answer = f.chain.lookup("NEWLISTING").unwrap();
    assert_eq!((answer.link(), *answer.value()), ("secondary", 200.0));
    assert!(matches!(
        answer.skipped()[0].skip(),
        Skip::Declined(DepError::Business(_))
    ));
    assert!(!answer.skipped()[0].skip().nothing_attempted());
    assert_eq!(f.primary.state(), State::Closed);
    // The secondary was not built to go on: its "no" stands.
    f.s.set(2);
    let err = f.chain.lookup("NEWLISTING").unwrap_err();
    assert_eq!(err.declined().unwrap().0, "secondary");
    assert_eq!(err.skipped().len(), 1);
}

#[test]
fn the_cache_serves_the_last_good_answer_with_its_age_when_both_vendors_are_down() {
    let f = fixture(false);
    f.chain.lookup("AAPL").unwrap();
    f.mock.increment(20 * SEC);
    f.primary.force_open("test", "vendor down");
    f.s.set(1);
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!((*answer.value(), answer.link()), (100.0, "last-good"));
    assert_eq!(answer.origin(), Origin::Cache { age: 20 * SEC });
    let reasons: Vec<_> = answer.skipped().iter().map(|s| s.skip().reason()).collect();
    assert_eq!(reasons, [SkipReason::Refused, SkipReason::Failed]);
    assert_eq!(
        answer.skipped()[0].skip().rejected().unwrap().state(),
        State::ForcedOpen
    );
}

#[test]
fn a_cached_answer_past_its_staleness_is_skipped_and_the_default_answers() {
    let f = fixture(false);
    f.chain.lookup("AAPL").unwrap();
    f.mock.increment(61 * SEC);
    f.primary.force_open("test", "");
    f.secondary.force_open("test", "");
    let answer = f.chain.lookup("AAPL").unwrap();
    assert_eq!((*answer.value(), answer.origin()), (0.0, Origin::Default));
    assert!(matches!(
        answer.skipped()[2].skip(),
        Skip::TooOld { age } if *age == 61 * SEC
    ));
    assert_eq!(
        answer.skipped()[2].to_string(),
        "`last-good`: cached answer too old (1m1s)"
    );
}

#[test]
fn when_every_link_fails_the_error_lists_each_reason_and_is_a_std_error() {
    let (clock, _mock) = clock();
    let (primary, secondary) = (vendor("primary", &clock), vendor("secondary", &clock));
    let p = Arc::new(Script::default());
    p.set(1);
    let chain: Chain<str, f64, DepError, _> = Chain::builder("fx")
        .provider("primary", &primary, p.provider(1.0))
        .provider("secondary", &secondary, p.provider(2.0))
        .cache("cache", LastGood::new(SEC).clock(clock))
        .build()
        .unwrap();
    secondary.force_open("test", "");
    let err = chain.lookup("EURUSD").unwrap_err();
    assert!(err.declined().is_none());
    let reasons: Vec<_> = err.skipped().iter().map(|s| s.skip().reason()).collect();
    assert_eq!(
        reasons,
        [
            SkipReason::Failed,
            SkipReason::Refused,
            SkipReason::NotCached
        ]
    );
    assert_eq!(
        err.to_string(),
        "chain `fx`: no link answered: `primary`: provider error (dependency unavailable); \
         `secondary`: refused (breaker `secondary` is forced_open); `cache`: nothing cached"
    );
    // The last link with an error: the secondary's refusal.
    let source = err.source().expect("a source");
    assert!(source.downcast_ref::<fusebox::Rejected>().is_some());
    let boxed: Box<dyn StdError + Send + Sync> = Box::new(err);
    assert!(boxed.to_string().starts_with("chain `fx`"));
    assert_eq!(chain.snapshot().exhausted, 1);
}

#[test]
fn a_provider_past_the_lookup_deadline_is_skipped_and_the_cache_still_answers() {
    let (clock, mock) = clock();
    let primary = vendor("slow", &clock);
    let cache = LastGood::new(60 * SEC).clock(clock.clone());
    let s = Arc::new(Script::default());
    let slow = {
        let mock = Arc::clone(&mock);
        move |_: &str| {
            mock.increment(3 * SEC);
            Err::<f64, _>(DepError::Outage(Outage))
        }
    };
    cache.file("AAPL", &99.0);
    let chain = Chain::builder("deadline")
        .provider("slow", &primary, slow)
        .provider("secondary", &vendor("secondary", &clock), s.provider(1.0))
        .cache("cache", cache)
        .deadline(2 * SEC)
        .clock(clock)
        .build()
        .unwrap();
    let answer = chain.lookup("AAPL").unwrap();
    assert_eq!((answer.link(), *answer.value()), ("cache", 99.0));
    assert_eq!(s.calls(), 0, "past the deadline: not called");
    assert!(matches!(
        answer.skipped()[1].skip(),
        Skip::DeadlinePassed { deadline } if *deadline == 2 * SEC
    ));
    assert!(answer.skipped()[1].skip().nothing_attempted());
}

#[cfg(feature = "isolation")]
#[test]
fn a_full_bulkhead_is_a_skip_and_nothing_is_attempted() {
    use fusebox::isolation::{Bulkhead, Isolated};
    let (clock, _mock) = clock();
    let bulkhead = Bulkhead::builder("primary")
        .max_concurrent(1)
        .build()
        .unwrap();
    let isolated = Isolated::new(vendor("primary", &clock)).with_bulkhead(bulkhead.clone());
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let s = Arc::new(Script::default());
    let chain = Chain::builder("isolated")
        .isolated("primary", isolated, move |_sym: &str| {
            counted.fetch_add(1, Ordering::SeqCst);
            || Ok::<f64, DepError>(1.0)
        })
        .provider("secondary", &vendor("secondary", &clock), s.provider(2.0))
        .build()
        .unwrap();
    assert_eq!(chain.lookup("A").unwrap().link(), "primary");
    let held = bulkhead.try_enter().unwrap();
    let answer = chain.lookup("A").unwrap();
    assert_eq!(answer.link(), "secondary");
    let Skip::Full(full) = answer.skipped()[0].skip() else {
        panic!("expected a full bulkhead: {:?}", answer.skipped())
    };
    assert_eq!((full.name(), full.limit()), ("primary", 1));
    assert!(answer.skipped()[0].skip().nothing_attempted());
    drop(held);
    assert_eq!(chain.lookup("A").unwrap().link(), "primary");
    assert_eq!(chain.snapshot().links[0].skips.get(SkipReason::Full), 1);
}

#[cfg(feature = "isolation")]
#[test]
fn a_lane_of_an_adaptive_limit_that_fell_is_a_full_skip_and_nothing_is_attempted() {
    use fusebox::isolation::{AdaptiveLimit, Bulkhead, Isolated};
    let (clock, _mock) = clock();
    let (limiter_clock, mock) = Clock::mock();
    let bulkhead = Bulkhead::builder("primary")
        .max_concurrent(8)
        .adaptive(AdaptiveLimit::new().floor(2).min_samples(4))
        .lane("intraday", 0.75)
        .lane("batch", 0.25)
        .shed_last("intraday")
        .clock(limiter_clock)
        .build()
        .unwrap();
    // A baseline of 8 ms, then intraday calls that hang until the limit
    // falls to its floor, where batch is guaranteed nothing.
    for _ in 0..4 {
        let slot = bulkhead.try_enter().unwrap();
        mock.increment(8 * MS);
        drop(slot);
    }
    let _hung: Vec<_> = (0..8).map(|_| bulkhead.try_enter().unwrap()).collect();
    for _ in 0..10 {
        mock.increment(20 * MS);
        assert!(bulkhead.try_enter().is_err());
    }
    assert_eq!(bulkhead.snapshot().limit, 2);
    let batch =
        Isolated::new(vendor("primary", &clock)).with_bulkhead(bulkhead.lane("batch").unwrap());
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let s = Arc::new(Script::default());
    let chain = Chain::builder("batch")
        .isolated("primary", batch, move |_sym: &str| {
            let counted = Arc::clone(&counted);
            move || {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<f64, DepError>(1.0)
            }
        })
        .provider("secondary", &vendor("secondary", &clock), s.provider(2.0))
        .build()
        .unwrap();
    let answer = chain.lookup("A").unwrap();
    assert_eq!(answer.link(), "secondary");
    let skip = answer.skipped()[0].skip();
    let Skip::Full(full) = skip else {
        panic!("expected a full bulkhead: {:?}", answer.skipped())
    };
    assert_eq!((full.lane(), full.limit()), (Some("batch"), 2));
    assert!(skip.nothing_attempted());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the provider was not called"
    );
}

#[cfg(feature = "isolation")]
#[test]
fn a_call_abandoned_at_its_deadline_pool_deadline_is_a_timed_out_skip() {
    use fusebox::isolation::{DeadlinePool, Isolated};
    let (clock, _mock) = clock();
    let pool = DeadlinePool::builder("primary")
        .threads(1)
        .deadline(Duration::from_millis(20))
        .build()
        .unwrap();
    let primary = vendor("primary", &clock);
    let isolated = Isolated::new(primary.clone()).with_deadline_pool(pool);
    let (release, released) = mpsc::channel::<()>();
    let released = Arc::new(parking_lot::Mutex::new(released));
    let s = Arc::new(Script::default());
    let chain = Chain::builder("pool")
        .isolated("primary", isolated, move |_sym: &str| {
            let released = Arc::clone(&released);
            move || {
                // Hangs until the test lets it go (bounded, so it cannot
                // outlive a failed test by long).
                let _ = released.lock().recv_timeout(BOUND);
                Ok::<f64, DepError>(1.0)
            }
        })
        .provider("secondary", &vendor("secondary", &clock), s.provider(2.0))
        .build()
        .unwrap();
    let answer = chain.lookup("A").unwrap();
    release.send(()).unwrap();
    assert_eq!(answer.link(), "secondary");
    let Skip::TimedOut(t) = answer.skipped()[0].skip() else {
        panic!("expected a timeout: {:?}", answer.skipped())
    };
    assert_eq!(t.deadline(), Duration::from_millis(20));
    assert!(!answer.skipped()[0].skip().nothing_attempted());
    assert_eq!(primary.state(), State::Open, "the timeout counted");
}

#[test]
fn the_snapshot_counts_answers_and_skips_by_reason_per_link() {
    let f = fixture(false);
    f.chain.lookup("A").unwrap();
    f.p.set(1);
    f.chain.lookup("A").unwrap(); // primary fails, secondary answers
    f.chain.lookup("A").unwrap(); // primary refused, secondary answers
    f.p.set(0);
    f.s.set(2);
    f.primary.reset("test", "");
    f.chain.lookup("B").unwrap();
    let snap = f.chain.snapshot();
    assert_eq!(snap.name, "closing-price");
    let primary = &snap.links[0];
    assert_eq!(
        (primary.name.as_str(), primary.kind),
        ("primary", "provider")
    );
    assert_eq!(primary.answers, 2);
    assert_eq!(primary.skips.get(SkipReason::Failed), 1);
    assert_eq!(primary.skips.get(SkipReason::Refused), 1);
    assert_eq!(primary.skips.iter().map(|(_, n)| n).sum::<u64>(), 2);
    assert_eq!(snap.links[1].answers, 2);
    assert_eq!(snap.links[2].kind, "cache");
    let labels: Vec<String> = primary.skips.iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(
        labels,
        [
            "refused",
            "full",
            "deadline",
            "not_cached",
            "too_old",
            "failed",
            "timed_out",
            "declined"
        ]
    );
}

#[test]
fn a_healthy_first_provider_is_asked_once_counted_once_and_filed_with_or_without_a_deadline() {
    for deadline in [None, Some(2 * SEC)] {
        let (clock, _mock) = clock();
        let primary = vendor("primary", &clock);
        let p = Arc::new(Script::default());
        let cache = LastGood::new(60 * SEC).clock(clock.clone());
        let builder = Chain::builder("fx")
            .provider("primary", &primary, p.provider(1.5))
            .cache("last-good", cache.clone())
            .clock(clock);
        let builder = match deadline {
            Some(d) => builder.deadline(d),
            None => builder,
        };
        let chain: Chain<str, f64, DepError, _> = builder.build().unwrap();
        let answer = chain.lookup("EURUSD").unwrap();
        assert_eq!((answer.link(), *answer.value()), ("primary", 1.5));
        assert_eq!(answer.origin(), Origin::Provider);
        assert_eq!(p.calls(), 1, "deadline {deadline:?}: asked once");
        assert_eq!(chain.snapshot().links[0].answers, 1, "counted once");
        assert_eq!(chain.snapshot().links[1].answers, 0);
        let fresh = matches!(cache.get("EURUSD"), fusebox::last_good::Kept::Fresh { value, .. } if value == 1.5);
        assert!(fresh, "deadline {deadline:?}: filed in the cache");
    }
}

#[test]
fn a_chain_led_by_a_cache_asks_it_first_and_falls_through_to_the_provider() {
    let (clock, _mock) = clock();
    let primary = vendor("primary", &clock);
    let p = Arc::new(Script::default());
    let cache = LastGood::new(60 * SEC).clock(clock.clone());
    let chain: Chain<str, f64, DepError> = Chain::builder("cache-first")
        .cache("last-good", cache.clone())
        .provider("primary", &primary, p.provider(2.5))
        .clock(clock)
        .build()
        .unwrap();
    let answer = chain.lookup("EURUSD").unwrap();
    assert_eq!(answer.link(), "primary");
    assert_eq!(answer.skipped()[0].skip().reason(), SkipReason::NotCached);
    let answer = chain.lookup("EURUSD").unwrap();
    assert_eq!((answer.link(), *answer.value()), ("last-good", 2.5));
    assert!(matches!(answer.origin(), Origin::Cache { .. }));
    assert_eq!(p.calls(), 1);
    let snap = chain.snapshot();
    assert_eq!((snap.links[0].answers, snap.links[1].answers), (1, 1));
}

#[test]
fn the_builder_refuses_what_cannot_work_naming_the_field() {
    let (clock, _mock) = clock();
    let b = vendor("a", &clock);
    let ok = |_: &str| Ok::<f64, DepError>(1.0);
    fn field<L>(r: Result<Chain<str, f64, DepError, L>, ConfigError>) -> &'static str {
        r.unwrap_err().field()
    }
    assert_eq!(
        field(
            Chain::builder("dup")
                .provider("a", &b, ok)
                .provider("a", &b, ok)
                .build()
        ),
        "link"
    );
    assert_eq!(
        field(Chain::builder("bad name").provider("", &b, ok).build()),
        "link"
    );
    assert_eq!(
        field(Chain::builder("").provider("a", &b, ok).build()),
        "name"
    );
    assert_eq!(
        field(
            Chain::builder("after-default")
                .provider("a", &b, ok)
                .default_value("d", 0.0)
                .continue_past_no()
                .build()
        ),
        "continue_past_no"
    );
    assert_eq!(
        field(
            Chain::builder("zero")
                .provider("a", &b, ok)
                .deadline(Duration::ZERO)
                .build()
        ),
        "deadline"
    );
}

#[test]
fn no_breaker_for_an_order_cancel_or_risk_path_can_be_built_for_a_link() {
    // A chain stands only on breakers, and no breaker can be declared for
    // those paths, under their own names or a custom label that names them.
    for label in [
        "order_cancel",
        "Order-Cancel",
        "cancel order",
        "kill switch",
        "pre-trade risk check",
        "order_submission",
        "new-order",
    ] {
        let err = Breaker::builder("x")
            .call_path(CallPath::custom(label))
            .classifier(fusebox::Classifier::every_error_is_a_failure())
            .build()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::ForbiddenCallPath { .. }),
            "{label}: {err}"
        );
    }
    for label in ["order_book", "orders_history", "risk_reports_eod"] {
        let built = Breaker::builder("x")
            .call_path(CallPath::custom(label))
            .classifier(fusebox::Classifier::every_error_is_a_failure())
            .build();
        assert!(built.is_ok(), "{label} is not a refused path");
    }
}

#[test]
fn concurrent_lookups_send_one_probe_per_open_period_and_the_rest_fall_back() {
    let f = fixture(false);
    f.p.set(1);
    f.chain.lookup("A").unwrap();
    assert_eq!(f.primary.state(), State::Open);
    f.mock.increment(10 * SEC);
    f.p.set(0);

    // The probe blocks inside the primary until the test releases it.
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let released = Arc::new(parking_lot::Mutex::new(released));
    let probe_calls = Arc::new(AtomicU32::new(0));
    let primary = f.primary.clone();
    let secondary = f.secondary.clone();
    let s = Arc::clone(&f.s);
    let chain = Arc::new(
        Chain::builder("probe")
            .provider("primary", &primary, {
                let probe_calls = Arc::clone(&probe_calls);
                let entered_tx = parking_lot::Mutex::new(entered_tx);
                let released = Arc::clone(&released);
                move |_: &str| {
                    probe_calls.fetch_add(1, Ordering::SeqCst);
                    let _ = entered_tx.lock().send(());
                    released
                        .lock()
                        .recv_timeout(BOUND)
                        .map(|_| 100.0)
                        .map_err(|_| DepError::Outage(Outage))
                }
            })
            .provider("secondary", &secondary, s.provider(200.0))
            .build()
            .unwrap(),
    );
    let (done_tx, done) = mpsc::channel();
    let prober = {
        let chain = Arc::clone(&chain);
        let done_tx = done_tx.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(("probe", chain.lookup("A").map(|a| a.link().to_owned())));
        })
    };
    entered
        .recv_timeout(BOUND)
        .expect("the probe reached the primary");
    const OTHERS: usize = 8;
    let mut others = Vec::new();
    for _ in 0..OTHERS {
        let chain = Arc::clone(&chain);
        let done_tx = done_tx.clone();
        others.push(std::thread::spawn(move || {
            // Reported, not asserted here: a panic on this thread would
            // only show as a missing report.
            let seen = chain.lookup("A").map(|a| {
                let refused = a
                    .skipped()
                    .first()
                    .and_then(|s| s.skip().rejected().copied());
                format!("{} {:?}", a.link(), refused.map(|r| r.state()))
            });
            let _ = done_tx.send(("other", seen));
        }));
    }
    for _ in 0..OTHERS {
        let (who, link) = done.recv_timeout(BOUND).expect("a lookup finished");
        assert_eq!(who, "other", "the probe is still held");
        assert_eq!(link.unwrap(), "secondary Some(HalfOpen)");
    }
    release.send(()).unwrap();
    let (who, link) = done.recv_timeout(BOUND).expect("the probe finished");
    assert_eq!((who, link.unwrap().as_str()), ("probe", "primary"));
    assert_eq!(probe_calls.load(Ordering::SeqCst), 1, "one probe");
    assert_eq!(primary.state(), State::Closed);
    prober.join().unwrap();
    for t in others {
        t.join().unwrap();
    }
}

#[test]
fn a_lookup_answered_by_a_healthy_primary_allocates_nothing() {
    let (clock, _mock) = clock();
    let (primary, secondary) = (vendor("primary", &clock), vendor("secondary", &clock));
    let chain: Chain<str, u64, DepError, _> = Chain::builder("alloc")
        .provider("primary", &primary, |s: &str| Ok(s.len() as u64))
        .provider("secondary", &secondary, |_: &str| Ok(0))
        .default_value("default", 0)
        .build()
        .unwrap();
    healthy_lookups_allocate_nothing(&chain, &primary);
    primary.reset("test", "");
    // Behind a box, the same.
    healthy_lookups_allocate_nothing(&chain.boxed(), &primary);
}

fn healthy_lookups_allocate_nothing<L: FirstLink<str, u64, DepError>>(
    chain: &Chain<str, u64, DepError, L>,
    primary: &Breaker,
) {
    let n = counting_alloc::allocations_per_1000(|| {
        let answer = chain.lookup(std::hint::black_box("EURUSD")).unwrap();
        assert_eq!(*answer.value(), 6);
    });
    assert_eq!(n, 0);
    // The counter is live: a lookup that skips a link allocates its list.
    primary.force_open("test", "");
    let n = counting_alloc::allocations_per_1000(|| {
        assert_eq!(chain.lookup("EURUSD").unwrap().link(), "secondary");
    });
    assert!(n >= 1_000, "{n}");
}

#[cfg(feature = "prometheus")]
#[test]
fn a_registered_chain_is_scraped_with_answers_and_skips_by_reason() {
    let f = fixture(false);
    f.chain.lookup("A").unwrap();
    f.p.set(1);
    f.chain.lookup("A").unwrap();
    f.chain.lookup("A").unwrap();
    let registry = fusebox::registry::Registry::new();
    registry.register_chain(&f.chain).unwrap();
    assert!(registry.register_chain(&f.chain).is_err(), "a name once");
    let text = fusebox::prometheus::encode(&registry);
    for line in [
        "fusebox_chain_answers_total{chain=\"closing-price\",link=\"primary\"} 1",
        "fusebox_chain_answers_total{chain=\"closing-price\",link=\"secondary\"} 2",
        "fusebox_chain_skips_total{chain=\"closing-price\",link=\"primary\",reason=\"failed\"} 1",
        "fusebox_chain_skips_total{chain=\"closing-price\",link=\"primary\",reason=\"refused\"} 1",
        "fusebox_chain_skips_total{chain=\"closing-price\",link=\"secondary\",reason=\"refused\"} 0",
        "fusebox_chain_declined_total{chain=\"closing-price\",link=\"primary\"} 0",
        "fusebox_chain_exhausted_total{chain=\"closing-price\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
    assert_eq!(registry.chain_snapshots(), [f.chain.snapshot()]);
}

#[test]
fn the_last_good_store_keeps_at_most_max_entries_and_evicts_the_oldest_filed() {
    use fusebox::last_good::Kept;
    let (clock, mock) = clock();
    let store: LastGood<String, u32> = LastGood::new(60 * SEC).max_entries(2).clock(clock);
    store.file("A", &1);
    store.file("B", &2);
    store.file("A", &10); // refiled in place: now the youngest
    mock.increment(SEC);
    store.file("C", &3);
    assert_eq!(store.len(), 2);
    assert_eq!(store.get("B"), Kept::Missing, "the oldest filed went");
    assert_eq!(
        store.get("A"),
        Kept::Fresh {
            value: 10,
            age: SEC
        }
    );
    assert_eq!(
        store.get("C"),
        Kept::Fresh {
            value: 3,
            age: Duration::ZERO
        }
    );
    let none: LastGood<String, u32> = LastGood::new(SEC).max_entries(0);
    none.file("A", &1);
    assert!(none.is_empty());
}

#[test]
fn an_error_the_classifier_counts_as_a_normal_answer_is_a_no_too() {
    // A vendor's "no data for this date": a success for the breaker, and an
    // answer that stops the chain.
    let (clock, _mock) = clock();
    let breaker = Breaker::builder("eod")
        .call_path(CallPath::HistoricalData)
        .classifier(fusebox::Classifier::for_type(|e: &DepError| match e {
            DepError::Business(_) => fusebox::Verdict::Success,
            DepError::Outage(_) => fusebox::Verdict::Failure,
        }))
        .clock(clock.clone())
        .build()
        .unwrap();
    let s = Arc::new(Script::default());
    let chain = Chain::builder("eod")
        .provider("eod", &breaker, |_: &str| {
            Err::<f64, _>(DepError::Business(Business))
        })
        .provider("backup", &vendor("backup", &clock), s.provider(1.0))
        .build()
        .unwrap();
    let err = chain.lookup("AAPL").unwrap_err();
    assert_eq!(err.declined().map(|d| d.0), Some("eod"));
    assert_eq!(s.calls(), 0);
    assert_eq!(breaker.snapshot().totals.successes, 1);
}
