//! The first program of a user who writes anyhow code: a reference-data
//! vendor over HTTPS behind fusebox's ureq integration with a last-known-good
//! fallback, a corporate-actions function of the application's own (anyhow
//! all the way) behind a second breaker with `call_any` and `?`, an operator
//! forcing both breakers open from another thread, and their snapshots
//! logged as metric lines.
//!
//! `scripts/user-crate` builds it in a new crate whose only dependencies are
//! fusebox and anyhow, and runs it against `openssl s_server` on loopback:
//!
//! ```text
//! anyhow_vendor https://127.0.0.1:PORT ca.crt
//! ```
//!
//! It checks what it prints (`ensure!`), so a wrong answer fails the run.

use std::time::Duration;
use std::{env, fs, thread};

use anyhow::{bail, ensure, Context};
use fusebox::http::ureq;
use fusebox::http::ureq::tls::{Certificate, RootCerts, TlsConfig};
use fusebox::http::{GuardedClient, LastKnownGood};
use fusebox::{Breaker, CallError, CallPath, Rejected, Snapshot, State};

fn main() -> anyhow::Result<()> {
    let usage = "usage: anyhow_vendor <https base URL> <CA certificate file>";
    let mut args = env::args().skip(1);
    let base = args.next().context(usage)?;
    let ca_file = args.next().context(usage)?;
    let ca_pem = fs::read(&ca_file).with_context(|| format!("reading {ca_file}"))?;
    let ca = Certificate::from_pem(&ca_pem).context("the vendor's CA certificate")?;

    // The vendor's certificate is signed by a CA of its own: trust that one.
    // Any public vendor works with the default roots and no `tls_config`.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::new_with_certs(&[ca]))
                .build(),
        )
        .build()
        .into();

    let refdata = Breaker::builder("refdata")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .on_state_change(|change| eprintln!("alert: {change}"))
        .build()?;
    let client = GuardedClient::new(agent.clone(), refdata)?;
    let cache = LastKnownGood::new(Duration::from_secs(60));

    let actions = Breaker::builder("corporate-actions")
        .call_path(CallPath::ReferenceData)
        // It sees through anyhow's chain to the ureq error (feature `anyhow`).
        .classifier(fusebox::http::HttpClassifier::new())
        .on_state_change(|change| eprintln!("alert: {change}"))
        .build()?;

    // Fresh, over HTTPS.
    let es = instrument(&client, &cache, &base, "ESZ6")?;
    println!("refdata: {es}");
    ensure!(es == "ESZ6 tick=0.25", "unexpected answer {es:?}");
    let split = corporate_actions(&actions, &agent, &base, "AAPL")?;
    println!("corporate actions: {split}");
    ensure!(split == "AAPL 2-for-1 split", "unexpected answer {split:?}");

    // An operator takes the vendor out, from another thread.
    let (ops_refdata, ops_actions) = (client.breaker().clone(), actions.clone());
    thread::spawn(move || {
        ops_refdata.force_open("ops@desk", "vendor maintenance");
        ops_actions.force_open("ops@desk", "vendor maintenance");
    })
    .join()
    .expect("the operator's thread");
    ensure!(client.breaker().state() == State::ForcedOpen);

    // Nothing is sent now. Reference data falls back on the last good
    // answer, marked stale; corporate actions have no fallback, and the
    // refusal is told apart from a failure after `?`.
    let stale = instrument(&client, &cache, &base, "ESZ6")?;
    println!("refdata: {stale}");
    ensure!(stale.starts_with("ESZ6 tick=0.25 (stale"), "{stale:?}");
    match corporate_actions(&actions, &agent, &base, "AAPL") {
        Err(e) if e.downcast_ref::<Rejected>().is_some() => {
            println!("corporate actions: not attempted: {e:#}")
        }
        Err(e) => bail!("a refusal was expected, got a failure: {e:#}"),
        Ok(answer) => bail!("a refusal was expected, got {answer:?}"),
    }

    for breaker in [client.breaker(), &actions] {
        log_metrics(&breaker.snapshot());
    }
    let snap = client.breaker().snapshot();
    ensure!(snap.totals.successes == 1 && snap.totals.short_circuits == 1);
    Ok(())
}

/// An instrument's reference data: fresh, or the last good answer, marked.
fn instrument(
    client: &GuardedClient,
    cache: &LastKnownGood,
    base: &str,
    symbol: &str,
) -> anyhow::Result<String> {
    let answer = client
        .get(format!("{base}/refdata/{symbol}"))
        .call_or_stale(cache)
        .with_context(|| format!("reference data for {symbol}"))?;
    let body = String::from_utf8(answer.body().to_vec())?;
    let body = body.trim_end();
    Ok(match answer.stale_reason() {
        None => body.to_string(),
        Some(why) => format!("{body} (stale by {:?}: {why})", answer.age()),
    })
}

/// The application's own vendor call, anyhow throughout, behind a breaker:
/// `call_any` takes it, and `into_anyhow` lets `?` return the breaker's
/// error.
fn corporate_actions(
    breaker: &Breaker,
    agent: &ureq::Agent,
    base: &str,
    symbol: &str,
) -> anyhow::Result<String> {
    let text = breaker
        .call_any(|| -> anyhow::Result<String> {
            let mut response = agent
                .get(format!("{base}/corporate-actions/{symbol}"))
                .call()
                .context("GET corporate actions")?;
            ensure!(response.status() == 200, "status {}", response.status());
            Ok(response.body_mut().read_to_string()?)
        })
        .map_err(CallError::into_anyhow)
        .with_context(|| format!("corporate actions for {symbol}"))?;
    Ok(text.trim_end().to_string())
}

/// A snapshot as metric lines, as a scraper or a log shipper would take it.
fn log_metrics(s: &Snapshot) {
    let name = &s.name;
    println!("fusebox_state{{breaker=\"{name}\",state=\"{}\"}} 1", s.state);
    println!("fusebox_calls{{breaker=\"{name}\"}} {}", s.totals.calls);
    println!(
        "fusebox_short_circuits{{breaker=\"{name}\"}} {}",
        s.totals.short_circuits
    );
    println!("fusebox_failures{{breaker=\"{name}\"}} {}", s.totals.failures);
}
