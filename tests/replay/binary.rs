//! `fusebox-replay`, run as a user runs it: over the repository's own
//! example configuration file and recordings written to a temporary
//! directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fusebox-replay-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A call every 250 ms for 15 minutes, 40 ms each; `bad` says which fail.
fn write_recording(path: &Path, outage_from: Option<&str>, bad: impl Fn(u32) -> bool) {
    let mut text = String::from("# start duration outcome\n");
    if let Some(at) = outage_from {
        text += &format!("# outage-from {at}\n");
    }
    for i in 0..3600u32 {
        let ms = 250 * u64::from(i);
        let outcome = if bad(i) { "failure" } else { "success" };
        text += &format!(
            "2026-12-07T14:{:02}:{:02}.{:03}Z 40ms {outcome}\n",
            30 + ms / 60_000,
            ms / 1000 % 60,
            ms % 1000
        );
    }
    std::fs::write(path, text).unwrap();
}

fn replay(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fusebox-replay"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn text(out: &[u8]) -> String {
    String::from_utf8(out.to_vec()).unwrap()
}

#[test]
fn it_replays_every_template_of_a_file_and_draws_them() {
    let d = dir("templates");
    let rec = d.join("outage.log");
    write_recording(&rec, None, |i| i > 1800);
    let svg = d.join("timeline.svg");
    let out = replay(&[
        "--config",
        "examples/ops.toml",
        "--svg",
        svg.to_str().unwrap(),
        rec.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let summaries: Vec<&str> = stdout.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(summaries.len(), 2, "refdata and vendor:\n{stdout}");
    assert!(summaries[0].starts_with("refdata: 1 trips"), "{stdout}");
    assert!(summaries[1].starts_with("vendor: 1 trips"), "{stdout}");
    assert!(
        stdout.contains("5 consecutive failures"),
        "refdata's threshold:\n{stdout}"
    );
    assert!(
        stdout.contains("3 consecutive failures"),
        "vendor's:\n{stdout}"
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(picture.matches(">refdata</text>").count(), 1);
    // The same run again prints the same.
    let again = replay(&["--config", "examples/ops.toml", rec.to_str().unwrap()]);
    assert_eq!(text(&again.stdout), stdout);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_sweep_prints_false_trips_against_time_to_trip_for_every_combination() {
    let d = dir("sweep");
    let (healthy, outage) = (d.join("healthy.log"), d.join("outage.log"));
    // Healthy: two failures in a row now and then, never three.
    let noise = |i: u32| i % 50 == 0 || i % 50 == 1;
    write_recording(&healthy, None, noise);
    write_recording(&outage, Some("2026-12-07T14:37:30Z"), |i| {
        i >= 1800 || noise(i)
    });
    let out = replay(&[
        "--config",
        "examples/ops.toml",
        "--template",
        "vendor",
        "--vary",
        "consecutive_failure_threshold=2,3",
        "--vary",
        "failure_rate_threshold=off,0.5",
        "--outage",
        outage.to_str().unwrap(),
        healthy.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    // point (two words), false trips, flapping, healthy refused, time to
    // trip, outage refused.
    assert_eq!(rows[0][0], "consecutive_failure_threshold=2");
    assert_ne!(rows[0][2], "0", "2 trips on the noise:\n{stdout}");
    assert_eq!(rows[2][2], "0", "3 never does:\n{stdout}");
    // The outage's second and third failures end 290 ms and 540 ms in.
    assert_eq!(rows[0][5], "290ms", "{stdout}");
    assert_eq!(rows[2][5], "540ms", "{stdout}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn bad_input_is_refused_with_an_error_that_says_where() {
    let d = dir("bad");
    let rec = d.join("bad.log");
    std::fs::write(
        &rec,
        "2026-12-07T14:30:00Z 80ms success\n2026-12-07T14:30:01Z 80ms oops\n",
    )
    .unwrap();
    let out = replay(&["--config", "examples/ops.toml", rec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("bad.log: recording line 2, outcome"), "{err}");

    let out = replay(&[
        "--config",
        "examples/ops.toml",
        "--template",
        "nope",
        rec.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no template nope (the file has refdata, vendor)"));

    let good = d.join("good.log");
    write_recording(&good, None, |_| false);
    let g = good.to_str().unwrap();
    let sweep = |vary: &str| {
        replay(&[
            "--config",
            "examples/ops.toml",
            "--template",
            "vendor",
            "--outage",
            g,
            "--vary",
            vary,
            g,
        ])
    };
    let out = sweep("jitter=0.1,0.2");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`jitter` is not a setting a sweep varies"));
    let out = sweep("failure_window=10s,ten");
    assert!(
        text(&out.stderr).contains("--vary failure_window"),
        "{}",
        text(&out.stderr)
    );
    let out = sweep("failure_rate_threshold=1.5");
    assert!(
        text(&out.stderr).contains("failure_rate_threshold"),
        "the builder's check names the field: {}",
        text(&out.stderr)
    );
    let out = replay(&[
        "--config",
        "examples/ops.toml",
        "--vary",
        "minimum_calls=5",
        g,
    ]);
    assert!(text(&out.stderr).contains("needs --outage and exactly one --template"));
    std::fs::remove_dir_all(d).unwrap();
}
