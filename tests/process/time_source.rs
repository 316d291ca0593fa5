//! The breaker's default time source against the things other code in the
//! process can do to quanta's shared "recent" time: start an upkeep thread
//! and drop its handle, run one with a coarse interval, or fork.
//!
//! The subject here is real time, so these tests use it, briefly (about two
//! seconds in all). They never bound how long anything took: each check
//! compares what the breaker decided with `std::time::Instant` reads taken
//! around the decision, so a slow or loaded machine only widens the bounds.
//! quanta's upkeep state is process-wide, so the tests run one at a time.

use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use fusebox::{Breaker, CallError, CallPath, Classifier, State};

/// How far the breaker's time may be from a direct clock read.
const SLACK: Duration = Duration::from_millis(2);
const OPEN: Duration = Duration::from_millis(100);
const PROBE_BUDGET: Duration = Duration::from_millis(40);
const WINDOW: Duration = Duration::from_millis(100);
const SLOW: Duration = Duration::from_millis(20);

/// quanta's upkeep thread and recent time are global: one test at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::support::process::alone()
}

fn builder() -> fusebox::BreakerBuilder {
    Breaker::builder("time-source")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .failure_rate_threshold(None)
        .jitter(0.0)
}

/// Opens on one failure, for `OPEN`; a probe may stay out `PROBE_BUDGET`.
fn one_failure_opens() -> Breaker {
    builder()
        .consecutive_failure_threshold(1)
        .open_duration(OPEN)
        .max_probe_duration(PROBE_BUDGET)
        .build()
        .expect("valid config")
}

fn ok() -> Result<(), io::Error> {
    Ok(())
}

fn fail() -> Result<(), io::Error> {
    Err(io::Error::from(io::ErrorKind::TimedOut))
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        sleep(t - now);
    }
}

/// The end of an open period and the expiry of a probe, each checked
/// against `std::time::Instant`.
fn open_period_and_probe_follow_the_clock(b: &Breaker) -> Result<(), String> {
    let before_trip = Instant::now();
    let _ = b.call(fail);
    let after_trip = Instant::now();
    if b.state() != State::Open {
        return Err(format!("one failure left the breaker {:?}", b.state()));
    }

    // Partway through the open period: the refusal's retry_after is the open
    // period's end as the clock has it. The trip happened between
    // `before_trip` and `after_trip`, the refusal between `before` and `after`.
    sleep(OPEN / 4);
    let before = Instant::now();
    let answer = b.call(ok);
    let after = Instant::now();
    match answer {
        Err(CallError::Rejected(r)) => {
            let retry = r
                .retry_after()
                .ok_or("an open breaker's refusal has no retry_after")?;
            let least = (before_trip + OPEN).saturating_duration_since(after);
            let most = (after_trip + OPEN).saturating_duration_since(before);
            if retry + SLACK < least || retry > most + SLACK {
                return Err(format!(
                    "retry_after {retry:?}, but the clock says between {least:?} and {most:?}"
                ));
            }
        }
        // Only if the whole period had passed by then (a very busy machine);
        // that call was the probe, and it closed the breaker.
        Ok(()) if after + SLACK >= before_trip + OPEN => return Ok(()),
        other => return Err(format!("{other:?} partway through the open period")),
    }

    // Once the period has passed by the clock, the next call is the probe.
    sleep_until(after_trip + OPEN + SLACK);
    let probe = b
        .try_acquire()
        .map_err(|r| format!("open period over by the clock, yet refused: {r:?}"))?;
    let admitted = Instant::now();

    // A probe that has not reported back within its budget has expired: the
    // next call reopens the breaker.
    sleep_until(admitted + PROBE_BUDGET + SLACK);
    let after_budget = b.call(ok);
    drop(probe);
    match after_budget {
        Err(CallError::Rejected(r)) if r.state() == State::Open => Ok(()),
        other => Err(format!(
            "{other:?} after the probe's budget had passed: it did not expire"
        )),
    }
}

/// One breaker per kind of decision, built before the checks run (as an
/// application builds its breakers before anything else happens to time).
struct Breakers {
    open: Breaker,
    window: Breaker,
    slow: Breaker,
}

impl Breakers {
    fn build() -> Breakers {
        Breakers {
            open: one_failure_opens(),
            window: builder()
                .consecutive_failure_threshold(None)
                .window_failure_threshold(2)
                .failure_window(WINDOW)
                .build()
                .expect("valid config"),
            slow: builder()
                .consecutive_failure_threshold(None)
                .failure_window(Duration::from_secs(60))
                .slow_call_duration(SLOW)
                .slow_call_rate_threshold(1.0)
                .minimum_calls(1_000)
                .build()
                .expect("valid config"),
        }
    }

    /// Every kind of decision, each against the clock.
    fn follow_the_clock(&self) {
        let checks = [
            open_period_and_probe_follow_the_clock(&self.open),
            window_follows_the_clock(&self.window),
            slow_calls_are_timed_by_the_clock(&self.slow),
        ];
        let failed: Vec<String> = checks.into_iter().filter_map(Result::err).collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }
}

/// Window buckets: failures further apart than the window never add up.
fn window_follows_the_clock(b: &Breaker) -> Result<(), String> {
    let _ = b.call(fail);
    sleep(WINDOW + WINDOW / 2);
    let _ = b.call(fail);
    match b.state() {
        State::Closed => Ok(()),
        s => Err(format!(
            "two failures {:?} apart opened a breaker with a {WINDOW:?} window ({s:?})",
            WINDOW + WINDOW / 2
        )),
    }
}

/// Slow-call timing: a call that took longer than the limit is slow.
fn slow_calls_are_timed_by_the_clock(b: &Breaker) -> Result<(), String> {
    let _ = b.call(|| {
        sleep(SLOW + SLOW / 2);
        ok()
    });
    match b.snapshot().totals.slow {
        1 => Ok(()),
        n => Err(format!(
            "a call of {:?} with a {SLOW:?} limit counted {n} slow",
            SLOW + SLOW / 2
        )),
    }
}

#[test]
fn decisions_follow_the_clock_after_an_application_drops_its_upkeep_handle() {
    let _serial = serial();
    let upkeep = quanta::Upkeep::new(Duration::from_millis(1))
        .start()
        .expect("no other upkeep thread runs in this test binary");
    let breakers = Breakers::build();
    // The application stops its upkeep thread: quanta's recent time stands
    // still from here on.
    drop(upkeep);
    breakers.follow_the_clock();
}

#[test]
fn decisions_follow_the_clock_while_another_library_runs_a_coarse_upkeep_thread() {
    let _serial = serial();
    // Recent time moves once a second from here (the checks take well under
    // a second, unless the machine is very busy).
    let _upkeep = quanta::Upkeep::new(Duration::from_secs(1))
        .start()
        .expect("no other upkeep thread runs in this test binary");
    Breakers::build().follow_the_clock();
}

#[test]
fn building_a_breaker_starts_no_upkeep_thread() {
    let _serial = serial();
    let breakers = Breakers::build();
    // Starting one succeeds only if none runs.
    let upkeep = quanta::Upkeep::new(Duration::from_millis(1)).start();
    assert!(
        upkeep.is_ok(),
        "building breakers left an upkeep thread running"
    );
    // And with none running, recent time stands still.
    drop(upkeep);
    breakers.follow_the_clock();
}

#[cfg(unix)]
#[test]
fn an_open_breaker_admits_a_probe_in_a_forked_child() {
    let _serial = serial();
    // The parent runs an upkeep thread, as an application might; the child
    // of a fork has none, and quanta still believes one runs.
    let upkeep = quanta::Upkeep::new(Duration::from_millis(1))
        .start()
        .expect("no other upkeep thread runs in this test binary");
    let b = one_failure_opens();
    let tripped_by = Instant::now();
    let _ = b.call(fail);
    assert_eq!(b.state(), State::Open);

    // SAFETY: the other threads of this process (the test harness, tests
    // waiting on `serial()`, the upkeep thread) hold no lock the child takes.
    // The child never returns: it leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", io::Error::last_os_error());
    if pid == 0 {
        let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The breaker opened before the fork ends its period in the child.
            sleep_until(tripped_by + OPEN + SLACK);
            let inherited = b.call(ok).is_ok();
            // And a breaker built and opened in the child behaves throughout.
            let fresh = open_period_and_probe_follow_the_clock(&one_failure_opens());
            match (inherited, fresh) {
                (true, Ok(())) => 0,
                (false, _) => 10,
                (true, Err(e)) => {
                    eprintln!("child: {e}");
                    11
                }
            }
        }));
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(verdict.unwrap_or(12)) };
    }
    drop(upkeep);
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid: {}", io::Error::last_os_error());
    assert!(libc::WIFEXITED(status), "the child died: status {status}");
    match libc::WEXITSTATUS(status) {
        0 => {}
        10 => panic!("the child's open breaker refused after its open period"),
        11 => panic!("a breaker opened in the child did not follow the clock (see stderr)"),
        code => panic!("the child panicked or failed (exit code {code})"),
    }
}
