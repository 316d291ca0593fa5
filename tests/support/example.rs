//! An example of this package, built for a test by the cargo that runs the
//! tests, into the same target directory and with the features the tests
//! were built with: a test runs what its own command built, never a binary
//! left from an older build. When `cargo test` has built the example
//! already, the build finds it up to date and compiles nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The features of Cargo.toml, each with whether this build has it.
const FEATURES: &[(&str, bool)] = &[
    ("http", cfg!(feature = "http")),
    ("rustls", cfg!(feature = "rustls")),
    ("native-tls", cfg!(feature = "native-tls")),
    ("platform-verifier", cfg!(feature = "platform-verifier")),
    ("anyhow", cfg!(feature = "anyhow")),
    ("coarse-clock", cfg!(feature = "coarse-clock")),
    ("isolation", cfg!(feature = "isolation")),
    ("async", cfg!(feature = "async")),
    ("tower", cfg!(feature = "tower")),
    ("chain", cfg!(feature = "chain")),
    ("retry", cfg!(feature = "retry")),
    ("registry", cfg!(feature = "registry")),
    ("prometheus", cfg!(feature = "prometheus")),
    ("serde", cfg!(feature = "serde")),
    ("admin", cfg!(feature = "admin")),
    ("calendar", cfg!(feature = "calendar")),
    ("replay", cfg!(feature = "replay")),
    ("redis", cfg!(feature = "redis")),
    ("ctl", cfg!(feature = "ctl")),
];

/// The variables cargo sets for a test's process (beside `CARGO_PKG_*` and
/// `CARGO_BIN_EXE_*`), which the cargo that ran the test did not have.
const SET_FOR_TESTS: &[&str] = &[
    "CARGO",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "OUT_DIR",
];

/// Builds `examples/NAME.rs` with this build's features and `required`
/// (the example's `required-features`), and returns its executable.
pub fn build(name: &str, required: &[&str]) -> PathBuf {
    let declared = declared_features();
    let listed: Vec<&str> = FEATURES.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        listed, declared,
        "tests/support/example.rs lists the features of Cargo.toml, in order"
    );
    let wanted: Vec<&str> = FEATURES
        .iter()
        .filter(|(f, on)| *on || required.contains(f))
        .map(|(f, _)| *f)
        .collect();
    // target/<profile>/deps/<this test> → target, <profile>
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the profile's directory");
    let target_dir = profile_dir.parent().expect("the target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut cargo = Command::new(cargo);
    // What cargo set for this test's process goes: build scripts that read
    // one of these (ring reads CARGO_MANIFEST_DIR) would otherwise run
    // again, and everything above them be rebuilt twice, here and by the
    // next `cargo test`.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if SET_FOR_TESTS.contains(&&*key)
            || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_BIN_EXE_")
        {
            cargo.env_remove(&*key);
        }
    }
    cargo
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "--package",
            "fusebox",
            "--example",
            name,
        ])
        .args(["--message-format", "json-render-diagnostics"])
        .arg("--target-dir")
        .arg(target_dir);
    match profile_dir.file_name().and_then(|p| p.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cargo.arg("--release");
        }
        Some(other) => {
            cargo.args(["--profile", other]);
        }
        None => panic!("no profile in {}", exe.display()),
    }
    if wanted.len() == FEATURES.len() {
        cargo.arg("--all-features");
    } else {
        cargo
            .arg("--no-default-features")
            .args(["--features", &wanted.join(",")]);
    }
    let out = cargo.stderr(Stdio::inherit()).output().expect("cargo runs");
    assert!(out.status.success(), "cargo could not build example {name}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|m| {
            m["reason"] == "compiler-artifact"
                && m["target"]["name"] == name
                && m["target"]["kind"][0] == "example"
        })
        .and_then(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo named no executable for example {name}"))
}

/// The names of `[features]` in Cargo.toml, `default` aside.
fn declared_features() -> Vec<&'static str> {
    let manifest = include_str!("../../Cargo.toml");
    let table = manifest
        .split_once("\n[features]\n")
        .expect("a [features] table")
        .1;
    table
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = ").map(|(name, _)| name))
        .filter(|name| !name.starts_with('#') && *name != "default")
        .collect()
}
