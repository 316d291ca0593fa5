//! What a fallback chain costs over calling its first provider's breaker
//! directly, with the primary closed and answering: paired rounds that
//! alternate `breaker.call(f)` and `chain.lookup(q)` over the same closure,
//! for the default and the cheapest breaker configuration; the chain as
//! built (its first provider's closure in its type), then the same chain
//! boxed (`Chain<str, u64, io::Error>`, the type written in a struct field).
//!
//! Run with `cargo bench -p fusebox-benches --bench chain`.

use std::hint::black_box;
use std::io;
use std::time::{Duration, Instant};

use fusebox::chain::Chain;
use fusebox::{Breaker, CallPath, Classifier};

const HOUR: Duration = Duration::from_secs(3600);
const ROUNDS: usize = 201;
const CALLS: usize = 5_000;

/// The provider: a few nanoseconds of work on the query.
#[inline]
fn quote(sym: &str) -> Result<u64, io::Error> {
    Ok(black_box(sym.len() as u64))
}

fn breaker(name: &str, cheapest: bool) -> Breaker {
    let b = Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(HOUR)
        .max_open_duration(HOUR);
    let b = if cheapest {
        b.consecutive_failure_threshold(5)
            .failure_rate_threshold(None)
    } else {
        b
    };
    b.build().expect("valid config")
}

/// Median, quartiles and fastest-round ratio of `b` over `a`, and `a`'s
/// median time per call (the method of `docs/performance.md`).
fn paired(a: &dyn Fn(), b: &dyn Fn()) -> (f64, f64, f64, f64, f64, f64) {
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..CALLS {
            f();
        }
        start.elapsed().as_secs_f64() / CALLS as f64
    };
    for _ in 0..20 {
        time(a);
        time(b);
    }
    let (mut ratios, mut a_times, mut b_times) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (ta, tb) = if round % 2 == 0 {
            let ta = time(a);
            (ta, time(b))
        } else {
            let tb = time(b);
            (time(a), tb)
        };
        ratios.push(tb / ta);
        a_times.push(ta);
        b_times.push(tb);
    }
    ratios.sort_by(f64::total_cmp);
    a_times.sort_by(f64::total_cmp);
    b_times.sort_by(f64::total_cmp);
    (
        ratios[ROUNDS / 2],
        ratios[ROUNDS / 4],
        ratios[3 * ROUNDS / 4],
        b_times[0] / a_times[0],
        a_times[ROUNDS / 2],
        b_times[ROUNDS / 2],
    )
}

fn report(what: &str, (median, q1, q3, fastest, direct, through): (f64, f64, f64, f64, f64, f64)) {
    println!(
        "{what}: lookup / breaker.call = {median:.2} (median of {ROUNDS} rounds of {CALLS} \
         calls; quartiles {q1:.2} to {q3:.2}); fastest rounds {fastest:.2}; breaker.call \
         median {:.1} ns, lookup median {:.1} ns",
        direct * 1e9,
        through * 1e9,
    );
}

fn main() {
    for (label, cheapest) in [("default", false), ("cheapest", true)] {
        let primary = breaker("primary", cheapest);
        let secondary = breaker("secondary", cheapest);
        let chain = Chain::builder("bench")
            .provider("primary", &primary, quote)
            .provider("secondary", &secondary, quote)
            .default_value("default", 0)
            .build()
            .expect("valid chain");
        report(
            &format!("chain paired ({label})"),
            paired(
                &|| {
                    black_box(primary.call(|| quote(black_box("EURUSD"))).unwrap());
                },
                &|| {
                    black_box(*chain.lookup(black_box("EURUSD")).unwrap().value());
                },
            ),
        );
        let boxed: Chain<str, u64, io::Error> = chain.boxed();
        report(
            &format!("boxed chain paired ({label})"),
            paired(
                &|| {
                    black_box(primary.call(|| quote(black_box("EURUSD"))).unwrap());
                },
                &|| {
                    black_box(*boxed.lookup(black_box("EURUSD")).unwrap().value());
                },
            ),
        );
    }
}
