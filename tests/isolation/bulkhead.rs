//! The bulkhead: its limit holds under racing threads, its refusals are
//! distinct from the breaker's and never count against the dependency, and
//! it composes with the breaker in the right order. Its adaptive limit on
//! the mock clock (steady at a healthy load, cut before a stalled vendor's
//! calls return, back after it heals, each limit shown moving by the
//! documented rule within its floor and ceiling) and against a loopback
//! vendor that hangs; its lanes' guarantees and borrowing.
#![cfg(feature = "isolation")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use fusebox::isolation::{AdaptiveLimit, Bulkhead, IsolationError, Layer};
use fusebox::{ConfigError, State};

use crate::support::breaker::*;
use crate::support::{counting_alloc, log_capture};

fn bulkhead(n: usize) -> Bulkhead {
    Bulkhead::builder("pricing")
        .max_concurrent(n)
        .build()
        .expect("valid bulkhead")
}

#[test]
fn peak_never_exceeds_the_limit_under_32_racing_threads() {
    const THREADS: usize = 32;
    const CALLS: usize = 100;
    let (breaker, _mock) = consecutive(1_000_000);
    let bulkhead = bulkhead(4);
    let inside = Arc::new(AtomicUsize::new(0));
    let most_inside = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (breaker, bulkhead) = (breaker.clone(), bulkhead.clone());
            let (inside, most_inside, start) = (inside.clone(), most_inside.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let (mut ok, mut full) = (0, 0);
                for _ in 0..CALLS {
                    let r = bulkhead.call(&breaker, || {
                        let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most_inside.fetch_max(n, Ordering::SeqCst);
                        thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, DepError>(())
                    });
                    match r {
                        Ok(()) => ok += 1,
                        Err(IsolationError::Full(f)) => {
                            assert_eq!(f.layer(), Layer::Bulkhead);
                            full += 1
                        }
                        Err(other) => panic!("unexpected {other:?}"),
                    }
                }
                (ok, full)
            })
        })
        .collect();
    let (ok, full) = handles
        .into_iter()
        .map(|h| h.join().expect("caller thread"))
        .fold((0u64, 0u64), |a, b| (a.0 + b.0, a.1 + b.1));

    let snap = bulkhead.snapshot();
    assert!(
        most_inside.load(Ordering::SeqCst) <= 4,
        "more than 4 calls ran at once"
    );
    assert!(snap.peak <= 4, "peak {} over the limit", snap.peak);
    assert!(snap.peak >= 1);
    assert_eq!(snap.in_use, 0, "every slot was given back");
    assert_eq!(ok + full, (THREADS * CALLS) as u64);
    assert_eq!(snap.refusals, full, "every refusal is counted");
    let totals = breaker.snapshot().totals;
    assert_eq!(
        totals.successes, ok,
        "only admitted calls reach the breaker's counts"
    );
    assert_eq!(totals.failures, 0);
}

#[test]
fn a_bulkhead_refusal_never_counts_against_the_breaker() {
    // A breaker that opens on the first failure: one counted refusal would
    // open it.
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    let held = bulkhead.try_enter().expect("a free slot");
    for _ in 0..5 {
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
        let full = r.expect_err("the only slot is held");
        assert!(full.nothing_attempted());
        assert!(
            full.rejected().is_none(),
            "a bulkhead refusal is not a breaker refusal"
        );
        assert!(matches!(full, IsolationError::Full(f) if f.limit() == 1));
    }
    drop(held);
    let s = breaker.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(s.totals.failures, 0);
    assert_eq!(s.consecutive_failures, 0);
    // With the breaker closed, a full bulkhead refuses without asking it:
    // nothing is recorded there at all (no permit taken and handed back).
    assert_eq!((s.totals.calls, s.totals.ignored), (0, 0));
    assert_eq!(bulkhead.snapshot().refusals, 5);
    assert_eq!(bulkhead.call(&breaker, || Ok::<_, DepError>(7)).unwrap(), 7);
}

#[test]
fn a_breaker_refusal_takes_no_slot_and_comes_first() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    breaker.force_open("test", "maintenance");
    let entered = AtomicUsize::new(0);
    let r = bulkhead.call(&breaker, || {
        entered.fetch_add(1, Ordering::SeqCst);
        Ok::<_, DepError>(7)
    });
    assert!(r.expect_err("forced open").rejected().is_some());
    // With the bulkhead full too, the breaker's refusal is the one reported,
    // and the bulkhead counts nothing.
    let _held = bulkhead.try_enter().expect("a free slot");
    let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
    assert!(r.expect_err("forced open").rejected().is_some());
    let snap = bulkhead.snapshot();
    assert_eq!((snap.refusals, snap.peak), (0, 1));
    assert_eq!(entered.load(Ordering::SeqCst), 0);
}

#[test]
fn a_probe_refused_by_the_bulkhead_is_handed_back_undecided() {
    let (breaker, mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    let _ = fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    mock.increment(10 * SEC);
    {
        let _held = bulkhead.try_enter().expect("a free slot");
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
        assert!(matches!(r, Err(IsolationError::Full(_))), "{r:?}");
        // The probe was not counted as failed: the breaker did not re-open.
        assert_ne!(breaker.state(), State::Open);
    }
    // And its slot is free again: the next call probes and closes it.
    assert_eq!(bulkhead.call(&breaker, || Ok::<_, DepError>(7)).unwrap(), 7);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().trips, 1);
}

#[test]
fn the_dependencys_errors_are_classified_as_by_the_breaker() {
    let (breaker, _mock) = consecutive(2);
    let bulkhead = bulkhead(2);
    let r = bulkhead.call(&breaker, || Err::<(), _>(DepError::Business(Business)));
    assert!(matches!(
        r,
        Err(IsolationError::Failed(DepError::Business(_)))
    ));
    assert_eq!(breaker.snapshot().totals.ignored, 1);
    for _ in 0..2 {
        let r = bulkhead.call(&breaker, || Err::<(), _>(DepError::Outage(Outage)));
        assert!(matches!(
            r,
            Err(IsolationError::Failed(DepError::Outage(_)))
        ));
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(bulkhead.snapshot().in_use, 0);
}

#[test]
fn a_panicking_call_gives_its_slot_back_and_counts_as_a_failure() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bulkhead.call(&breaker, || -> Result<(), DepError> {
            panic!("vendor sdk")
        })
    }));
    assert!(r.is_err());
    assert_eq!(bulkhead.snapshot().in_use, 0);
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_waiting_caller_takes_the_slot_freed_within_its_wait() {
    waits_for_the_freed_slot(Duration::from_secs(30));
}

#[test]
fn a_wait_too_long_to_represent_is_a_wait_without_end_not_a_panic() {
    waits_for_the_freed_slot(Duration::MAX);
}

fn waits_for_the_freed_slot(max_wait: Duration) {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(1)
        .max_wait(max_wait)
        .build()
        .unwrap();
    let holder = {
        let bulkhead = bulkhead.clone();
        let (entered_tx, entered_rx) = crossbeam_channel::bounded(0);
        let h = thread::spawn(move || {
            let _slot = bulkhead.try_enter().expect("a free slot");
            entered_tx.send(()).unwrap();
            thread::sleep(Duration::from_millis(20));
        });
        entered_rx.recv().unwrap();
        h
    };
    let waited = Instant::now();
    assert_eq!(bulkhead.call(&breaker, || Ok::<_, DepError>(7)).unwrap(), 7);
    // Woken by the release, long before the 30 s wait ran out.
    assert!(waited.elapsed() < Duration::from_secs(10));
    holder.join().unwrap();
    assert_eq!(bulkhead.snapshot().refusals, 0);
    assert_eq!(bulkhead.snapshot().in_use, 0);
}

#[test]
fn a_waiting_caller_is_refused_once_its_wait_runs_out() {
    let (breaker, _mock) = consecutive(1);
    let wait = Duration::from_millis(20);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(1)
        .max_wait(wait)
        .build()
        .unwrap();
    let _held = bulkhead.try_enter().expect("a free slot");
    let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
    let Err(IsolationError::Full(full)) = r else {
        panic!("the slot stays held: {r:?}")
    };
    assert!(
        full.waited() >= wait,
        "refused before its wait: {:?}",
        full.waited()
    );
    assert!(full.waited() < wait * 250, "waited far past its wait");
    assert_eq!(breaker.snapshot().totals.failures, 0);
}

#[test]
fn a_guarded_closed_success_does_not_allocate() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(4);
    let run = || {
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(std::hint::black_box(7)));
        std::hint::black_box(r.unwrap());
    };
    for _ in 0..100 {
        run();
    }
    assert_eq!(
        counting_alloc::allocations_in(|| (0..1_000).for_each(|_| run())),
        0
    );
    let _held: Vec<_> = (0..4).map(|_| bulkhead.try_enter().unwrap()).collect();
    let refuse = || {
        std::hint::black_box(bulkhead.try_enter().unwrap_err());
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
        std::hint::black_box(r.unwrap_err());
    };
    refuse();
    assert_eq!(
        counting_alloc::allocations_in(|| (0..1_000).for_each(|_| {
            refuse();
        })),
        0
    );
}

#[test]
fn a_limit_of_zero_or_none_is_refused_at_build() {
    let err = Bulkhead::builder("x")
        .max_concurrent(0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_concurrent");
    assert!(matches!(err, ConfigError::Invalid { .. }));
    let err = Bulkhead::builder("x").build().unwrap_err();
    assert!(matches!(
        err,
        ConfigError::Missing {
            field: "max_concurrent",
            ..
        }
    ));
}

#[test]
fn a_bulkhead_name_follows_the_breaker_name_rules() {
    for bad in ["", "a\nforged log line", "back`tick", &"x".repeat(33)] {
        let err = Bulkhead::builder(bad)
            .max_concurrent(1)
            .build()
            .expect_err("a name that could forge a log line or grow an error is refused");
        assert_eq!(err.field(), "name", "{bad:?}");
    }
    let ok = Bulkhead::builder("refdata-bulkhead")
        .max_concurrent(1)
        .build()
        .unwrap();
    assert_eq!(ok.name(), "refdata-bulkhead");
    assert_eq!(&*ok.snapshot().name, "refdata-bulkhead");
}

#[test]
fn a_call_through_the_bulkhead_is_judged_by_the_result_classifier() {
    let (builder, _mock) = quiet("quotes");
    let breaker = builder
        .consecutive_failure_threshold(1)
        .result_classifier(fusebox::ResultClassifier::for_type(|price: &f64| {
            if *price > 0.0 {
                fusebox::Verdict::Success
            } else {
                fusebox::Verdict::Failure
            }
        }))
        .build()
        .unwrap();
    let zero = bulkhead(1).call(&breaker, || Ok::<f64, DepError>(0.0));
    assert_eq!(zero.unwrap(), 0.0, "returned unchanged");
    assert_eq!(breaker.state(), State::Open, "a zero price is a failure");
}

#[test]
fn a_failure_through_the_bulkhead_is_what_opened_the_breaker() {
    let (breaker, _mock) = consecutive(1);
    bulkhead(1)
        .call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)))
        .unwrap_err();
    assert_eq!(breaker.state(), State::Open);
    assert!(breaker.last_failure().is_some(), "the failure is kept");
}

// ------------------------------------------------------- the adaptive limit

/// A small seeded generator, so that every run sees the same traffic.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A healthy vendor's latency: 8 ms ±10%, one call in twenty three times
/// that and one in two hundred twenty times.
fn healthy(rng: &mut Rng) -> Duration {
    let base = MS.mul_f64(8.0 * (0.9 + 0.2 * rng.unit()));
    match rng.unit() {
        u if u < 0.005 => base * 20,
        u if u < 0.055 => base * 3,
        _ => base,
    }
}

/// Calls through `bulkhead` on the mock clock, in steps of 1 ms: one
/// arrives every `gap`, and holds its slot for the latency `latency` gives
/// it (from the time it was admitted).
struct Traffic<'a> {
    bulkhead: &'a Bulkhead,
    mock: Arc<quanta::Mock>,
    now: Duration,
    next: Duration,
    gap: Duration,
    out: Vec<(Duration, fusebox::isolation::Slot<'a>)>,
    admitted: u64,
    refused: u64,
    /// Calls that returned, and when the last one did.
    returned: u64,
    last_return: Duration,
    /// Every limit shown, in order: each refusal's, and the snapshot's
    /// after each step.
    shown: Vec<usize>,
}

impl<'a> Traffic<'a> {
    fn new(bulkhead: &'a Bulkhead, mock: Arc<quanta::Mock>, gap: Duration) -> Self {
        Traffic {
            bulkhead,
            mock,
            now: Duration::ZERO,
            next: Duration::ZERO,
            gap,
            out: Vec::new(),
            admitted: 0,
            refused: 0,
            returned: 0,
            last_return: Duration::ZERO,
            shown: Vec::new(),
        }
    }

    /// Runs until `until`, calling `each` with the time and the limit after
    /// every step.
    fn run(
        &mut self,
        until: Duration,
        mut latency: impl FnMut(Duration) -> Duration,
        mut each: impl FnMut(Duration, usize),
    ) {
        while self.now < until {
            self.now += MS;
            self.mock.increment(MS);
            let now = self.now;
            let before = self.out.len();
            self.out.retain(|(end, _)| *end > now);
            if self.out.len() < before {
                self.returned += (before - self.out.len()) as u64;
                self.last_return = now;
            }
            while self.next <= now {
                self.next += self.gap;
                match self.bulkhead.try_enter() {
                    Ok(slot) => {
                        self.admitted += 1;
                        self.out.push((now + latency(now), slot));
                    }
                    Err(full) => {
                        self.refused += 1;
                        self.shown.push(full.limit());
                    }
                }
            }
            let limit = self.bulkhead.snapshot().limit;
            self.shown.push(limit);
            each(now, limit);
        }
    }
}

fn adaptive(max: usize, floor: usize) -> (Bulkhead, Arc<quanta::Mock>) {
    let (clock, mock) = quanta::Clock::mock();
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(max)
        .adaptive(AdaptiveLimit::new().floor(floor))
        .clock(clock)
        .build()
        .expect("valid bulkhead");
    (bulkhead, mock)
}

#[test]
fn an_adaptive_limit_holds_within_a_fifth_of_its_settled_value_over_a_minute_of_healthy_traffic() {
    let (bulkhead, mock) = adaptive(32, 2);
    let mut rng = Rng(1);
    let mut traffic = Traffic::new(&bulkhead, mock, 10 * MS);
    traffic.run(10 * SEC, |_| healthy(&mut rng), |_, _| {});
    let settled = bulkhead.snapshot().limit as f64;
    let (mut low, mut high) = (f64::MAX, 0.0f64);
    traffic.run(
        70 * SEC,
        |_| healthy(&mut rng),
        |_, limit| {
            low = low.min(limit as f64);
            high = high.max(limit as f64);
        },
    );
    assert!(
        low >= 0.8 * settled && high <= 1.2 * settled,
        "the limit ranged over {low} to {high} around {settled}"
    );
    assert_eq!(traffic.refused, 0, "no refusal at a healthy load");
    let snap = bulkhead.snapshot();
    let adaptive = snap.adaptive.expect("an adaptive snapshot");
    let baseline = adaptive.baseline.expect("a baseline").as_secs_f64() * 1e3;
    assert!((7.0..10.0).contains(&baseline), "{baseline} ms");
}

/// Healthy for 10 s, then the vendor takes 900 ms for 5 s, then healthy
/// again: what the outage profile does, on the mock clock. Returns the
/// limit at each millisecond, from the step.
fn outage(bulkhead: &Bulkhead, mock: Arc<quanta::Mock>) -> (usize, Vec<usize>, u64) {
    let mut rng = Rng(2);
    let mut traffic = Traffic::new(bulkhead, mock, 10 * MS);
    traffic.run(10 * SEC, |_| healthy(&mut rng), |_, _| {});
    assert_eq!(traffic.refused, 0, "no refusal at a healthy load");
    let healthy_limit = bulkhead.snapshot().limit;
    let step = traffic.now;
    let mut limits = Vec::new();
    traffic.run(
        step + 10 * SEC,
        |now| {
            if now < step + 5 * SEC {
                (900.0 * (0.9 + 0.2 * rng.unit())) as u32 * MS
            } else {
                healthy(&mut rng)
            }
        },
        |_, limit| limits.push(limit),
    );
    (healthy_limit, limits, traffic.refused)
}

#[test]
fn a_vendor_that_stops_answering_cuts_the_limit_to_its_floor_before_a_slow_call_returns() {
    let (bulkhead, mock) = adaptive(16, 2);
    let (healthy_limit, limits, _) = outage(&bulkhead, mock);
    assert_eq!(healthy_limit, 16);
    // The first slow call returns 810 ms after the step at the soonest.
    let fell = limits.iter().position(|&l| l < healthy_limit).unwrap();
    let floor = limits.iter().position(|&l| l == 2).unwrap();
    assert!(fell < 300, "the limit fell {fell} ms after the step");
    assert!(floor < 300, "at its floor {floor} ms after the step");
    assert!(
        limits[floor..5_000].iter().all(|&l| l < 4),
        "near its floor for the rest of the outage"
    );
    assert!(limits.iter().all(|&l| (2..=16).contains(&l)));
}

#[test]
fn the_limit_is_back_within_a_tenth_of_its_healthy_value_two_seconds_after_the_vendor_heals() {
    let (bulkhead, mock) = adaptive(16, 2);
    let (healthy_limit, limits, _) = outage(&bulkhead, mock);
    let back = limits[5_000..]
        .iter()
        .position(|&l| l as f64 >= 0.9 * healthy_limit as f64)
        .expect("the limit came back");
    assert!(back <= 2_000, "back {back} ms after the vendor healed");
    assert!(
        limits[5_000 + back..]
            .iter()
            .all(|&l| l as f64 >= 0.8 * healthy_limit as f64),
        "and stays"
    );
}

/// The shown limits with each run of one value kept once.
fn changes(shown: &[usize]) -> Vec<usize> {
    let mut v = shown.to_vec();
    v.dedup();
    v
}

/// Why the step from limit `a` to limit `b`, both as shown, breaks the
/// documented rule: a healthy window grows the limit by half of it rounded
/// down (at least one call) up to `max`, a slow one cuts it to no less than
/// half of it rounded up, nor than `floor`.
fn breaks_the_rule(a: usize, b: usize, floor: usize, max: usize) -> Option<String> {
    let grown = (a + (a / 2).max(1)).min(max);
    match b {
        _ if b > a && b != grown => Some(format!("{a} grew to {b}, not {grown}")),
        _ if b < a && b < a.div_ceil(2) => Some(format!("{a} was cut to {b}, below half")),
        _ if !(floor..=max).contains(&b) => Some(format!("{b} is outside {floor}..={max}")),
        _ => None,
    }
}

#[test]
fn after_an_outage_the_limit_grows_back_by_half_of_each_limit_shown() {
    let (bulkhead, mock) = adaptive(16, 2);
    let (_, limits, _) = outage(&bulkhead, mock);
    let climb = changes(&limits[5_000..]);
    let from = climb.iter().rposition(|&l| l == 2).expect("at the floor");
    assert_eq!(climb[from..], [2, 3, 4, 6, 9, 13, 16]);
}

#[test]
fn a_slow_window_keeps_at_least_half_of_an_odd_limit_rounded_up() {
    let (bulkhead, mock) = adaptive(15, 1);
    let (healthy_limit, limits, _) = outage(&bulkhead, mock);
    assert_eq!(healthy_limit, 15);
    let fall = changes(&limits[..5_000]);
    assert_eq!(
        fall,
        [15, 8, 4, 2, 1],
        "cut by half, rounded up, each window"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever the latencies and the gaps between calls, each limit a
    /// user sees (a snapshot's, a refusal's) follows the last one by the
    /// documented rule, exactly: a growth is by half of the limit shown
    /// (at least one call), a cut is to `⌊L × gradient⌋`, at least half of
    /// `L` rounded up and at least the floor, the gradient being
    /// `tolerance × baseline ÷ latency` as the snapshots show them.
    #[test]
    fn every_limit_shown_follows_the_last_by_the_documented_rule(
        max in 1usize..64,
        floor_share in 0.0f64..1.0,
        tolerance in 1.0f64..4.0,
        min_samples in 1usize..20,
        phases in proptest::collection::vec((1u64..30, 0u64..2_000, 100u64..2_000), 1..8),
    ) {
        let floor = 1 + ((max - 1) as f64 * floor_share) as usize;
        let (clock, mock) = quanta::Clock::mock();
        let bulkhead = Bulkhead::builder("pricing")
            .max_concurrent(max)
            .adaptive(
                AdaptiveLimit::new()
                    .floor(floor)
                    .tolerance(tolerance)
                    .min_samples(min_samples),
            )
            .clock(clock)
            .build()
            .unwrap();
        let mut rng = Rng(max as u64 ^ min_samples as u64);
        let mut traffic = Traffic::new(&bulkhead, mock, MS);
        let mut until = Duration::ZERO;
        // The limit and the baseline after the last step: at most one
        // window is judged per step of 1 ms.
        let mut last = (max, None::<Duration>);
        let mut broken = Vec::new();
        for (gap, latency, span) in phases {
            traffic.gap = MS * gap as u32;
            until += MS * span as u32;
            traffic.run(
                until,
                |_| MS.mul_f64(latency as f64 * (0.5 + rng.unit())),
                |now, limit| {
                    let seen = bulkhead.snapshot().adaptive.expect("adaptive");
                    let (before, baseline) = last;
                    if limit < before {
                        let latency = seen.latency.expect("a judged window").as_nanos() as f64;
                        let baseline = baseline.expect("judged against a baseline").as_nanos();
                        let gradient = tolerance * baseline as f64 / latency;
                        let cut = ((before as f64 * gradient).floor() as usize)
                            .max(before.div_ceil(2))
                            .max(floor);
                        if gradient >= 1.0 || limit != cut {
                            broken.push(format!(
                                "at {now:?}: {before} cut to {limit} at a gradient of {gradient}, not {cut}"
                            ));
                        }
                    }
                    last = (limit, seen.baseline);
                },
            );
        }
        let shown = changes(&traffic.shown);
        broken.extend(
            shown
                .windows(2)
                .filter_map(|w| breaks_the_rule(w[0], w[1], floor, max)),
        );
        drop(traffic);
        proptest::prop_assert!(broken.is_empty(), "{:?} in {:?}", broken, shown);
        proptest::prop_assert_eq!(bulkhead.snapshot().in_use, 0);
    }
}

// ------------------------------------------------------------------ lanes

fn laned(max: usize) -> Bulkhead {
    Bulkhead::builder("pricing")
        .max_concurrent(max)
        .lane("intraday", 0.75)
        .lane("batch", 0.25)
        .shed_last("intraday")
        .build()
        .expect("valid bulkhead")
}

#[test]
fn a_lane_under_its_guarantee_is_admitted_when_another_lane_borrowed_every_slot() {
    let bulkhead = laned(4);
    let batch = bulkhead.lane("batch").expect("a lane");
    // Intraday idle: batch borrows every slot.
    let borrowed: Vec<_> = (0..4).map(|_| batch.try_enter().unwrap()).collect();
    let full = batch.try_enter().expect_err("at the limit, over its share");
    assert_eq!(full.lane(), Some("batch"));
    assert_eq!(full.limit(), 4);
    // The bulkhead as built calls in its first lane, intraday, whose three
    // guaranteed slots it gets though the limit is taken.
    let guaranteed: Vec<_> = (0..3).map(|_| bulkhead.try_enter().unwrap()).collect();
    let refused = bulkhead.try_enter().expect_err("its guarantee is used");
    assert_eq!(refused.lane(), Some("intraday"));
    let snap = bulkhead.snapshot();
    assert_eq!((snap.limit, snap.in_use, snap.refusals), (4, 7, 2));
    let lanes: Vec<_> = snap
        .lanes
        .iter()
        .map(|l| (&*l.name, l.guaranteed, l.in_use, l.refusals, l.shed_last))
        .collect();
    assert_eq!(
        lanes,
        [("intraday", 3, 3, 1, true), ("batch", 1, 4, 1, false)]
    );
    drop(borrowed);
    // With batch gone, intraday borrows the fourth slot too.
    let fourth = bulkhead.try_enter().expect("an idle slot");
    drop((guaranteed, fourth));
    assert_eq!(bulkhead.snapshot().in_use, 0);
    assert!(bulkhead.lane("overnight").is_none());
}

#[test]
fn a_lane_refusal_hands_the_breaker_its_permit_back_and_says_which_lane() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = laned(4);
    let batch = bulkhead.lane("batch").unwrap();
    let _held: Vec<_> = (0..3).map(|_| bulkhead.try_enter().unwrap()).collect();
    let _borrowed = batch.try_enter().unwrap();
    let err = batch
        .call(&breaker, || Ok::<_, DepError>(7))
        .expect_err("batch is over its share at the limit");
    assert!(err.nothing_attempted());
    assert_eq!(
        err.to_string(),
        "bulkhead `pricing` lane `batch` is full (4 in use): call not attempted"
    );
    let s = breaker.snapshot();
    assert_eq!((s.state, s.totals.failures), (State::Closed, 0));
}

#[test]
fn as_an_adaptive_limit_falls_the_other_lanes_are_shed_first() {
    let (clock, mock) = quanta::Clock::mock();
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(16)
        .adaptive(AdaptiveLimit::new().floor(2).min_samples(4))
        .lane("intraday", 0.8)
        .lane("batch", 0.2)
        .shed_last("intraday")
        .clock(clock)
        .build()
        .unwrap();
    let batch = bulkhead.lane("batch").unwrap();
    let guaranteed = |b: &Bulkhead| {
        let s = b.snapshot();
        (s.limit, s.lanes[0].guaranteed, s.lanes[1].guaranteed)
    };
    assert_eq!(guaranteed(&bulkhead), (16, 13, 3));
    // A baseline of 8 ms.
    for _ in 0..8 {
        let slot = bulkhead.try_enter().unwrap();
        mock.increment(8 * MS);
        drop(slot);
    }
    // Then sixteen intraday calls that do not return, and intraday's
    // refusals that judge them.
    let stuck: Vec<_> = (0..16).map(|_| bulkhead.try_enter().unwrap()).collect();
    for _ in 0..30 {
        mock.increment(20 * MS);
        let _ = bulkhead
            .try_enter()
            .expect_err("over its guarantee and the limit");
    }
    assert_eq!(guaranteed(&bulkhead), (2, 2, 0), "batch has lost its share");
    drop(stuck);
    // The stuck calls returned: batch may borrow what is idle, but once
    // intraday holds its two, batch is refused and intraday is not.
    let borrowed = batch.try_enter().expect("an idle slot");
    drop(borrowed);
    let intraday: Vec<_> = (0..2).map(|_| bulkhead.try_enter().unwrap()).collect();
    assert_eq!(batch.try_enter().unwrap_err().lane(), Some("batch"));
    drop(intraday);
}

#[test]
fn lanes_and_an_adaptive_limit_are_checked_at_build() {
    let err = |b: fusebox::isolation::BulkheadBuilder| b.build().expect_err("refused");
    let base = || Bulkhead::builder("pricing").max_concurrent(8);
    assert!(matches!(
        err(base().lane("intraday", 1.0)),
        ConfigError::Missing {
            field: "shed_last",
            ..
        }
    ));
    for (builder, field) in [
        (base().lane("a", 0.8).lane("b", 0.3).shed_last("a"), "lane"),
        (base().lane("a", 0.5).lane("a", 0.5).shed_last("a"), "lane"),
        (base().lane("a", 0.0).shed_last("a"), "lane"),
        (base().lane("bad\nname", 0.5).shed_last("bad\nname"), "lane"),
        (
            base()
                .lane("a", 0.2)
                .lane("b", 0.2)
                .lane("c", 0.2)
                .lane("d", 0.2)
                .shed_last("a"),
            "lane",
        ),
        (base().lane("a", 1.0).shed_last("b"), "shed_last"),
        (base().shed_last("a"), "shed_last"),
        (
            Bulkhead::builder("pricing").max_concurrent(16_385),
            "max_concurrent",
        ),
        (
            base().adaptive(AdaptiveLimit::new()).max_wait(MS),
            "max_wait",
        ),
        (base().adaptive(AdaptiveLimit::new().floor(0)), "floor"),
        (base().adaptive(AdaptiveLimit::new().floor(9)), "floor"),
        (
            base().adaptive(AdaptiveLimit::new().tolerance(0.9)),
            "tolerance",
        ),
        (
            base().adaptive(AdaptiveLimit::new().tolerance(f64::NAN)),
            "tolerance",
        ),
        (
            base().adaptive(AdaptiveLimit::new().min_samples(0)),
            "min_samples",
        ),
        (
            base().adaptive(AdaptiveLimit::new().min_samples(65)),
            "min_samples",
        ),
        (
            base().adaptive(AdaptiveLimit::new().baseline_window(Duration::ZERO)),
            "baseline_window",
        ),
    ] {
        assert_eq!(err(builder).field(), field);
    }
    assert!(base()
        .adaptive(AdaptiveLimit::new().floor(8))
        .lane("a", 0.5)
        .lane("b", 0.5)
        .shed_last("b")
        .build()
        .is_ok());
}

#[test]
fn an_adaptive_guarded_closed_success_does_not_allocate() {
    let (breaker, _) = consecutive(1);
    let (bulkhead, mock) = adaptive(8, 1);
    let run = || {
        let r = bulkhead.call(&breaker, || {
            mock.increment(MS);
            Ok::<_, DepError>(std::hint::black_box(7))
        });
        std::hint::black_box(r.unwrap());
    };
    for _ in 0..100 {
        run();
    }
    assert_eq!(
        counting_alloc::allocations_in(|| (0..1_000).for_each(|_| run())),
        0
    );
    assert!(
        bulkhead.snapshot().adaptive.unwrap().latency.is_some(),
        "windows were judged"
    );
}

/// Against a loopback vendor that stops answering: the limit falls to its
/// floor while every call it admitted hangs, callers beyond it are refused
/// at once in their lane (the breaker counting nothing), and the limit
/// grows back once the vendor answers again.
#[cfg(feature = "http")]
#[test]
fn an_adaptive_bulkhead_cuts_its_limit_while_a_vendor_hangs_and_recovers_after() {
    use crate::support::http_server::{Gate, HttpServer, Reply};

    let server = HttpServer::start();
    let url = server.url("/price");
    let get = |url: &str| -> Result<String, ureq::Error> {
        ureq::get(url).call()?.body_mut().read_to_string()
    };
    let (breaker, _breaker_mock) = consecutive(1);
    let (clock, mock) = quanta::Clock::mock();
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(6)
        .adaptive(AdaptiveLimit::new().min_samples(4))
        .lane("intraday", 0.75)
        .lane("batch", 0.25)
        .shed_last("intraday")
        .clock(clock)
        .build()
        .unwrap();
    let batch = bulkhead.lane("batch").unwrap();
    for _ in 0..20 {
        let answer = bulkhead.call(&breaker, || {
            let answer = get(&url);
            mock.increment(8 * MS);
            answer
        });
        assert_eq!(answer.unwrap(), "ok");
    }
    assert_eq!(bulkhead.snapshot().limit, 6);

    // The vendor stops answering; six callers go in and hang.
    let gate = Gate::new();
    server.reply(Reply::ok("late").held_by(&gate));
    let returned = Arc::new(AtomicUsize::new(0));
    let hung: Vec<_> = (0..6)
        .map(|_| {
            let (bulkhead, breaker, url) = (bulkhead.clone(), breaker.clone(), url.clone());
            let returned = Arc::clone(&returned);
            thread::spawn(move || {
                let r = bulkhead.call(&breaker, || get(&url));
                returned.fetch_add(1, Ordering::SeqCst);
                r.map_err(|e| e.to_string())
            })
        })
        .collect();
    assert!(
        server.wait_for_requests(26),
        "the six calls reached the vendor"
    );
    // Refused callers judge the calls in flight as the clock moves on.
    let mut waited = Duration::ZERO;
    while bulkhead.snapshot().limit > 1 {
        assert!(
            waited < 300 * MS,
            "the limit is still {}",
            bulkhead.snapshot().limit
        );
        mock.increment(20 * MS);
        waited += 20 * MS;
        for lane in [&bulkhead, &batch] {
            let full = lane
                .call(&breaker, || get(&url))
                .expect_err("refused at once");
            let full = match full {
                IsolationError::Full(full) => full,
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(full.waited(), Duration::ZERO);
        }
    }
    assert_eq!(returned.load(Ordering::SeqCst), 0, "no call had returned");
    assert_eq!(server.requests(), 26, "no refused call reached the vendor");
    let snap = bulkhead.snapshot();
    assert!(
        snap.lanes.iter().all(|l| l.refusals > 0),
        "{:?}",
        snap.lanes
    );
    assert_eq!(snap.lanes[1].guaranteed, 0, "batch is shed first");
    let s = breaker.snapshot();
    assert_eq!((s.state, s.totals.failures), (State::Closed, 0));

    // The vendor answers again: the hung calls return, and healthy calls
    // grow the limit back.
    gate.open();
    for h in hung {
        assert_eq!(h.join().unwrap().unwrap(), "late");
    }
    server.reply(Reply::ok("ok"));
    let mut healed = Duration::ZERO;
    while bulkhead.snapshot().limit < 6 {
        assert!(
            healed < 2 * SEC,
            "the limit is still {}",
            bulkhead.snapshot().limit
        );
        let answer = bulkhead.call(&breaker, || {
            let answer = get(&url);
            mock.increment(8 * MS);
            answer
        });
        assert_eq!(answer.unwrap(), "ok");
        healed += 8 * MS;
    }
}

#[test]
fn limit_changes_are_logged_at_most_once_a_second_never_per_call() {
    log_capture::install();
    let (clock, mock) = quanta::Clock::mock();
    let bulkhead = Bulkhead::builder("logged-limit")
        .max_concurrent(16)
        .adaptive(AdaptiveLimit::new().floor(2))
        .clock(clock)
        .build()
        .unwrap();
    for _ in 0..10 {
        let slot = bulkhead.try_enter().unwrap();
        mock.increment(8 * MS);
        drop(slot);
    }
    let lines = || log_capture::lines("bulkhead `logged-limit`");
    assert!(lines().is_empty(), "nothing moved");
    // Sixteen calls hang; a thousand refusals over 20 s judge them, the
    // limit falling from 16 to 2 within the first 100 ms.
    let stuck: Vec<_> = (0..16).map(|_| bulkhead.try_enter().unwrap()).collect();
    for _ in 0..1_000 {
        mock.increment(20 * MS);
        assert!(bulkhead.try_enter().is_err());
    }
    assert_eq!(bulkhead.snapshot().limit, 2);
    let logged = lines();
    assert_eq!(logged.len(), 2, "{logged:#?}");
    assert!(
        logged[0].starts_with("INFO") && logged[0].contains("(16 at the last report, floor 2)"),
        "{}",
        logged[0]
    );
    assert!(
        logged[1].starts_with("WARN") && logged[1].contains(": limit 2 ("),
        "{}",
        logged[1]
    );
    assert!(logged[1].contains("against a baseline of"), "{}", logged[1]);
    drop(stuck);
}

#[test]
fn a_full_bulkhead_of_stuck_calls_still_opens_a_breaker_that_counts_them() {
    let (builder, mock) = quiet("pricing");
    let breaker = builder
        .slow_call_duration(50 * MS)
        .stuck_call_threshold(2)
        .build()
        .expect("valid configuration");
    let bulkhead = bulkhead(2);
    let (entered, held) = (Arc::new(Barrier::new(3)), Arc::new(Barrier::new(3)));
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let (breaker, bulkhead) = (breaker.clone(), bulkhead.clone());
            let (entered, held) = (entered.clone(), held.clone());
            thread::spawn(move || {
                bulkhead.call(&breaker, || {
                    entered.wait();
                    held.wait();
                    Ok::<_, DepError>(7)
                })
            })
        })
        .collect();
    entered.wait();
    // Both slots are held by calls out for 51 ms: every caller now meets a
    // full bulkhead, and none reaches the breaker's admission.
    mock.increment(51 * MS);
    let refused = bulkhead
        .call(&breaker, || Ok::<_, DepError>(7))
        .expect_err("full, and the breaker opened");
    assert_eq!(breaker.state(), State::Open, "{refused}");
    assert_eq!(
        breaker.snapshot().last_transition.map(|c| c.reason),
        Some(fusebox::Reason::StuckCalls {
            count: 2,
            over: 50 * MS
        })
    );
    held.wait();
    for c in callers {
        assert_eq!(
            c.join().unwrap().unwrap(),
            7,
            "their late answers reach the callers"
        );
    }
    assert_eq!(breaker.state(), State::Open, "and count in the totals only");
}
