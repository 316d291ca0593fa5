//! `fusebox-ctl` round trips: the built binary, run as an operator would,
//! against a real `redis-server` on a free loopback port, with `Fleet`s in
//! this process standing for the processes it reaches.
//!
//! The fleet's time is the Redis server's: the tests wait for it by
//! polling, bounded by `PATIENCE`, and never assert on how long anything
//! took.
#![cfg(feature = "ctl")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use fusebox::fleet::Fleet;
use fusebox::{Breaker, Reason, State};
use serde_json::Value;

use crate::support::breaker::{fail, quiet, MS, SEC};
use crate::support::certs;
use crate::support::redis_server;
use crate::support::redis_server::{wait_for, Options, RedisServer, TlsFiles, PATIENCE};

/// `fusebox-ctl` with the URL in its environment, as the help advises.
fn ctl_at(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env("FUSEBOX_REDIS_URL", url)
        .args(args)
        .output()
        .expect("run fusebox-ctl")
}

fn ctl(redis: &RedisServer, args: &[&str]) -> Output {
    ctl_at(&redis.url(), args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs it and expects success; answers its output.
fn ok(redis: &RedisServer, args: &[&str]) -> String {
    let o = ctl(redis, args);
    assert!(o.status.success(), "{args:?}: {o:?}");
    stdout(&o)
}

fn json(redis: &RedisServer, args: &[&str]) -> Value {
    let out = ok(redis, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
}

/// One agent (process) under `prefix` with a breaker `vendor` that opens on
/// its first failure, for 200 ms of its mock clock (which never moves).
fn process(redis: &RedisServer, prefix: &str) -> (Fleet, Breaker) {
    let fleet = Fleet::builder(redis.url())
        .prefix(prefix)
        .tick(2 * MS)
        .refresh(20 * MS)
        .build()
        .unwrap();
    let (b, _mock) = quiet("vendor");
    let breaker = b
        .consecutive_failure_threshold(1)
        .open_duration(200 * MS)
        .max_probe_duration(60 * SEC)
        .build()
        .unwrap();
    fleet.join(&breaker).unwrap();
    wait_for("the agent to connect and read", || {
        let s = fleet.snapshot();
        s.connected && s.reads > 0
    });
    (fleet, breaker)
}

#[test]
fn status_shows_the_members_tripped_alone_and_what_opened_the_fleet() {
    let redis = RedisServer::start();
    let (_fa, a) = process(&redis, "quorum");
    let (_fb, b) = process(&redis, "quorum");
    wait_for("two members", || {
        json(
            &redis,
            &["--prefix", "quorum", "status", "vendor", "--json"],
        )["members"]
            == 2
    });
    assert!(fail(&a).is_err());
    wait_for("A's lone trip to count", || {
        json(
            &redis,
            &["--prefix", "quorum", "status", "vendor", "--json"],
        )["tripped"]
            == 1
    });
    let one = json(
        &redis,
        &["--prefix", "quorum", "status", "vendor", "--json"],
    );
    assert_eq!(one["state"], "closed", "one of two is no quorum: {one}");
    assert!(one["opened_by"].is_null());
    let table = ok(&redis, &["--prefix", "quorum", "status"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("TRIPPED") && lines[0].contains("OPENED BY"),
        "{table}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&row[..2], ["vendor", "closed"], "{table}");
    assert_eq!(&row[6..8], ["1", "-"], "members 2, tripped 1: {table}");

    assert!(fail(&b).is_err());
    wait_for("the quorum to open the fleet", || {
        json(
            &redis,
            &["--prefix", "quorum", "status", "vendor", "--json"],
        )["opened_by"]
            == "quorum"
    });
    let table = ok(&redis, &["--prefix", "quorum", "status"]);
    assert!(
        table.lines().nth(1).unwrap().contains(" quorum "),
        "{table}"
    );
}

#[test]
fn status_prints_the_fleets_state_as_a_table_and_as_json() {
    let redis = RedisServer::start();
    let (_fleet, breaker) = process(&redis, "st");
    assert!(fail(&breaker).is_err());
    wait_for("the trip to reach Redis", || {
        json(&redis, &["--prefix", "st", "status", "vendor", "--json"])["state"] == "open"
    });
    ok(
        &redis,
        &[
            "--prefix",
            "st",
            "force-closed",
            "quotes",
            "--actor",
            "alice",
            "--reason",
            "vendor \"green\"",
            // No process has written `quotes`.
            "--create",
        ],
    );

    let one = json(&redis, &["--prefix", "st", "status", "vendor", "--json"]);
    assert_eq!(one["name"], "vendor");
    assert_eq!(one["epoch"], 1);
    assert_eq!(one["members"], 1);
    assert_eq!(one["tripped"], 0);
    assert_eq!(
        one["opened_by"], "quorum",
        "a fleet of one opens at its trip"
    );
    assert!(one["override"].is_null());
    let all = json(&redis, &["--prefix", "st", "status", "--json"]);
    let all = all.as_array().expect("an array for every breaker");
    let names: Vec<&str> = all.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["quotes", "vendor"]);
    assert_eq!(all[0]["state"], "forced_closed");
    assert_eq!(all[0]["members"], 0);
    assert!(all[0]["opened_by"].is_null(), "forced closed");
    assert_eq!(all[0]["override"]["actor"], "alice");
    assert_eq!(all[0]["override"]["reason"], "vendor \"green\"");
    assert!(all[0]["override"]["expires_in_ms"].is_null());

    let table = ok(&redis, &["--prefix", "st", "status"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("NAME") && lines[0].contains("OVERRIDE"));
    assert!(lines[1].starts_with("quotes") && lines[1].contains("forced_closed"));
    assert!(lines[1].contains("by alice until reset: vendor \"green\""));
    assert!(lines[2].starts_with("vendor"), "{table}");

    // Another prefix is another fleet.
    let other = json(&redis, &["--prefix", "uat", "status", "--json"]);
    assert_eq!(other, Value::Array(vec![]));
}

#[test]
fn force_open_for_a_while_reaches_the_process_expires_and_is_audited() {
    let redis = RedisServer::start();
    let (_fleet, breaker) = process(&redis, "fo");

    let out = ok(
        &redis,
        &[
            "--prefix",
            "fo",
            "force-open",
            "vendor",
            "--actor",
            "alice",
            "--reason",
            "drill",
            "--for",
            "200ms",
        ],
    );
    assert!(out.contains("forced_open"), "{out}");
    wait_for("the process to be forced open", || {
        breaker.state() == State::ForcedOpen
    });
    let change = breaker.snapshot().last_transition.unwrap();
    assert_eq!(
        change.reason,
        Reason::ForcedOpen {
            actor: "alice".into(),
            note: "drill".into()
        }
    );
    wait_for("the override to expire", || {
        breaker.state() == State::Closed
    });

    ok(
        &redis,
        &[
            "--prefix",
            "fo",
            "force-closed",
            "vendor",
            "--actor",
            "bob",
            "--reason",
            "known good",
        ],
    );
    wait_for("the process to be forced closed", || {
        breaker.state() == State::ForcedClosed
    });
    ok(
        &redis,
        &[
            "--prefix", "fo", "reset", "vendor", "--actor", "carol", "--reason", "done",
        ],
    );
    wait_for("the process to close", || breaker.state() == State::Closed);
    assert_eq!(
        breaker.snapshot().last_transition.unwrap().reason,
        Reason::Reset {
            actor: "carol".into(),
            note: "done".into()
        }
    );

    let audit = json(&redis, &["--prefix", "fo", "audit", "vendor", "--json"]);
    let rows: Vec<(&str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [
            ("force-open", "alice"),
            ("expired", "alice"),
            ("force-closed", "bob"),
            ("reset", "carol")
        ]
    );
    let first = &audit[0];
    assert!(first["expires_ms"].as_u64().unwrap() > first["time_ms"].as_u64().unwrap());
    assert!(audit[2]["expires_ms"].is_null());

    let last = json(
        &redis,
        &["--prefix", "fo", "audit", "--count", "1", "--json"],
    );
    assert_eq!(last.as_array().unwrap().len(), 1);
    assert_eq!(last[0]["kind"], "reset");

    let table = ok(&redis, &["--prefix", "fo", "audit"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    assert!(
        lines[1].contains("force-open")
            && lines[1].contains("alice")
            && lines[1].ends_with("drill")
    );
    assert!(lines[4].contains("reset") && lines[4].ends_with("done"));
}

#[test]
fn watch_prints_each_change_as_a_line_of_json() {
    let redis = RedisServer::start();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env("FUSEBOX_REDIS_URL", redis.url())
        .args(["--prefix", "w", "watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut admin = Fleet::builder(redis.url())
        .prefix("w")
        .timeout(SEC)
        .admin()
        .unwrap();
    admin.create_unknown(true);
    // The watch is subscribed some time after it starts: act until it
    // reports.
    let start = Instant::now();
    let line = loop {
        assert!(start.elapsed() < PATIENCE, "no change printed");
        admin.force_open("vendor", "alice", "drill", None).unwrap();
        if let Ok(line) = rx.recv_timeout(100 * MS) {
            break line;
        }
    };
    let change: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(change["status"]["name"], "vendor");
    assert_eq!(change["status"]["state"], "forced_open");
    assert_eq!(change["status"]["override"]["actor"], "alice");
    while rx.recv_timeout(50 * MS).is_ok() {}

    admin.reset("vendor", "bob", "done").unwrap();
    let line = rx.recv_timeout(PATIENCE).expect("the reset printed");
    let change: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (&change["from"], &change["status"]["state"]),
        (&Value::from("forced_open"), &Value::from("closed"))
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_bad_argument_is_a_usage_error_and_nothing_is_written() {
    let redis = RedisServer::start();
    let cases: [&[&str]; 6] = [
        &["force-open", "a`b", "--actor", "alice", "--reason", "x"],
        &[
            "force-open",
            "vendor",
            "--actor",
            "alice\u{1b}[2K",
            "--reason",
            "x",
        ],
        &["force-closed", "vendor", "--actor", "alice", "--reason", ""],
        &[
            "force-open",
            "vendor",
            "--actor",
            "alice",
            "--reason",
            "x",
            "--for",
            "soon",
        ],
        &["reset", "vendor", "--reason", "x"],
        &["status", "this-name-is-much-longer-than-32-bytes"],
    ];
    for args in cases {
        let o = ctl(&redis, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let err = stderr(&o);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
    let o = ctl(&redis, &["status", "a`b"]);
    assert!(
        stderr(&o).contains("`name` must be printable ASCII"),
        "{o:?}"
    );
    // Durations are read in the crate's one grammar, with its messages.
    let o = ctl(
        &redis,
        &[
            "force-open",
            "v",
            "--actor",
            "a",
            "--reason",
            "x",
            "--for=-5s",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        stderr(&o).contains("`-5s`: durations cannot be negative"),
        "{o:?}"
    );
    let o = ctl(
        &redis,
        &["force-open", "v", "--actor", "a\nb", "--reason", "x"],
    );
    assert!(
        stderr(&o).contains("`actor` must not contain control characters"),
        "{o:?}"
    );

    // Without a URL.
    let o = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env_remove("FUSEBOX_REDIS_URL")
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("FUSEBOX_REDIS_URL"));

    assert_eq!(json(&redis, &["status", "--json"]), Value::Array(vec![]));
    assert_eq!(json(&redis, &["audit", "--json"]), Value::Array(vec![]));
}

#[test]
fn an_unreachable_redis_is_one_line_and_exit_1_without_the_password() {
    let redis = RedisServer::start();
    let port = redis
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    drop(redis);
    let url = format!("redis://ops:s3cret-pw@127.0.0.1:{port}/");
    for o in [
        ctl_at(&url, &["--timeout", "500ms", "status"]),
        ctl_at(
            "",
            &[
                "--url",
                &url,
                "--timeout",
                "PT0.5S",
                "force-open",
                "v",
                "--actor",
                "a",
                "--reason",
                "r",
            ],
        ),
    ] {
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("fusebox-ctl: Redis unavailable: "), "{err}");
        assert!(
            !err.contains("s3cret") && !stdout(&o).contains("s3cret"),
            "{err}"
        );
    }
    // A URL that does not parse is a usage error.
    let o = ctl_at("http://ops:s3cret-pw@127.0.0.1/", &["status"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(!stderr(&o).contains("s3cret"), "{o:?}");
    assert!(stderr(&o).contains("not a valid redis:// URL"), "{o:?}");
}

#[test]
fn over_mutual_tls_with_a_private_ca_an_override_reaches_the_fleet() {
    let certs = certs::Certs::generate("ctl");
    let redis = RedisServer::start_with(Options {
        tls: Some(TlsFiles {
            cert: certs.path("server.crt"),
            key: certs.path("server.key"),
            ca: certs.path("ca.crt"),
            auth_clients: "yes",
            client: None,
        }),
        ..Options::default()
    });
    assert!(redis.url().starts_with("rediss://"));
    let fleet = Fleet::builder(redis.url())
        .prefix("tls")
        .timeout(SEC)
        .tick(2 * MS)
        .refresh(20 * MS)
        .tls_ca(certs.read("ca.crt"))
        .tls_client_auth(certs.read("client.crt"), certs.read("client.key"))
        .build()
        .unwrap();
    let (b, _mock) = quiet("vendor");
    let breaker = b.consecutive_failure_threshold(1).build().unwrap();
    fleet.join(&breaker).unwrap();
    wait_for("the agent to connect over TLS", || {
        let s = fleet.snapshot();
        s.connected && s.reads > 0
    });

    let path = |f: &str| certs.path(f).display().to_string();
    let tls = [
        "--tls-ca".to_owned(),
        path("ca.crt"),
        "--tls-cert".to_owned(),
        path("client.crt"),
        "--tls-key".to_owned(),
        path("client.key"),
    ];
    let args = |rest: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--prefix".into(),
            "tls".into(),
            "--timeout".into(),
            "5s".into(),
        ];
        v.extend(tls.iter().cloned());
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    let run = |rest: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
            .env("FUSEBOX_REDIS_URL", redis.url())
            .args(args(rest))
            .output()
            .expect("run fusebox-ctl")
    };
    let o = run(&[
        "force-open",
        "vendor",
        "--actor",
        "ops",
        "--reason",
        "vendor migration",
    ]);
    assert!(o.status.success(), "{o:?}");
    wait_for("the override to reach the process", || {
        breaker.state() == State::ForcedOpen
    });

    // Without the client certificate the server refuses the tool: exit 1,
    // one line, and nothing reaches the fleet.
    let o = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env("FUSEBOX_REDIS_URL", redis.url())
        .args([
            "--prefix",
            "tls",
            "--tls-ca",
            &path("ca.crt"),
            "reset",
            "vendor",
        ])
        .args(["--actor", "ops", "--reason", "done"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(stderr(&o).lines().count(), 1, "{o:?}");
    assert_eq!(breaker.state(), State::ForcedOpen);

    // The library's operator handle takes the same settings.
    let mut admin = Fleet::builder(redis.url())
        .prefix("tls")
        .timeout(5 * SEC)
        .tls_ca(certs.read("ca.crt"))
        .tls_client_auth(certs.read("client.crt"), certs.read("client.key"))
        .admin()
        .unwrap();
    admin.reset("vendor", "ops", "done").unwrap();
    wait_for("the reset to reach the process", || {
        breaker.state() == State::Closed
    });

    // A CA file that is not there is a usage error, before any connection.
    let o = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env("FUSEBOX_REDIS_URL", redis.url())
        .args(["--tls-ca", "/nonexistent/ca.pem", "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("/nonexistent/ca.pem"), "{o:?}");
}

#[test]
fn a_typo_in_an_override_is_refused_with_exit_3_unless_created() {
    let redis = RedisServer::start();
    let (_fleet, _breaker) = process(&redis, "typo");
    let typo = [
        "--prefix",
        "typo",
        "force-open",
        "vendr",
        "--actor",
        "alice",
        "--reason",
        "down",
    ];
    let o = ctl(&redis, &typo);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(stderr(&o).contains("`vendr`") && stderr(&o).contains("--create"));
    assert_eq!(stdout(&o), "");
    assert!(
        ok(&redis, &["--prefix", "typo", "audit", "vendr"])
            .lines()
            .count()
            == 1
    );

    ok(&redis, &[&typo[..], &["--create"]].concat());
    let status = json(&redis, &["--prefix", "typo", "status", "vendr", "--json"]);
    assert_eq!(status["state"], "forced_open");
}

#[test]
fn forget_refuses_a_served_breaker_with_exit_3_and_deletes_it_with_force() {
    let redis = RedisServer::start();
    let (_fleet, _breaker) = process(&redis, "fg");
    let forget = [
        "--prefix", "fg", "forget", "vendor", "--actor", "alice", "--reason", "retired",
    ];
    let o = ctl(&redis, &forget);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(stderr(&o).contains("serve breaker `vendor`"), "{o:?}");
    assert!(stderr(&o).contains("--force"), "{o:?}");

    assert_eq!(
        ok(&redis, &[&forget[..], &["--force"]].concat()),
        "vendor: forgotten\n"
    );
    let audit = json(&redis, &["--prefix", "fg", "audit", "vendor", "--json"]);
    assert_eq!(audit[0]["kind"], "forget");
    assert_eq!(audit[0]["reason"], "retired");
}

#[test]
fn the_timeout_bounds_the_whole_command_on_a_hung_redis() {
    let redis = RedisServer::start();
    // Connected, then hung: the connection is accepted by the kernel, and
    // nothing answers.
    redis.pause();
    let start = Instant::now();
    let o = ctl(&redis, &["--timeout", "4s", "status"]);
    let took = start.elapsed();
    redis.resume();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stderr(&o).contains("timed out"), "{o:?}");
    // Each step waited the whole timeout before: 8 s and more. The
    // process's own start and exit, on a busy machine, are in the 3 s
    // margin.
    assert!(took < 7 * SEC, "{took:?}");
    println!("fusebox-ctl --timeout 4s on a hung Redis: {took:?}");
}

#[test]
fn status_of_a_cluster_lists_the_breakers_of_every_master() {
    let cluster = redis_server::RedisCluster::start();
    let urls = cluster.urls().join(",");
    let run = |args: &[&str]| {
        let mut all = vec!["--cluster", "--prefix", "cl"];
        all.extend_from_slice(args);
        let o = ctl_at(&urls, &all);
        assert!(o.status.success(), "{args:?}: {o:?}");
        stdout(&o)
    };
    let names: Vec<String> = (0..12).map(|i| format!("b{i}")).collect();
    for n in &names {
        run(&[
            "force-open",
            n,
            "--actor",
            "alice",
            "--reason",
            "spread",
            "--create",
        ]);
    }
    let masters: std::collections::BTreeSet<u16> = names
        .iter()
        .filter_map(|n| cluster.master_of(&format!("{{cl:{n}}}:state")))
        .collect();
    assert_eq!(masters.len(), 3, "the names spread over every master");
    let all: Value = serde_json::from_str(&run(&["status", "--json"])).unwrap();
    let mut listed: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    listed.sort();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(listed, expected);
}

#[test]
fn behind_sentinels_over_tls_it_takes_the_masters_password_from_the_environment() {
    use crate::secured::{
        secured_sentinels, sentinel_urls, MASTER_PASSWORD, SENTINEL_PASSWORD, WRONG_PASSWORD,
    };
    let certs = certs::Certs::generate("ctl-sentinel");
    let group = secured_sentinels(&certs);
    let urls = sentinel_urls(&group, SENTINEL_PASSWORD);
    let fleet = Fleet::sentinel_builder(redis_server::SERVICE, urls.clone())
        .master_auth(None, MASTER_PASSWORD)
        .prefix("cs")
        .timeout(2 * SEC)
        .tick(2 * MS)
        .refresh(20 * MS)
        .tls_ca(certs.read("ca.crt"))
        .tls_client_auth(certs.read("client.crt"), certs.read("client.key"))
        .build()
        .unwrap();
    let (b, _mock) = quiet("vendor");
    let breaker = b.consecutive_failure_threshold(1).build().unwrap();
    fleet.join(&breaker).unwrap();
    wait_for("the agent to connect to the master", || {
        let s = fleet.snapshot();
        s.connected && s.reads > 0
    });

    let path = |f: &str| certs.path(f).display().to_string();
    let (ca, cert, key) = (path("ca.crt"), path("client.crt"), path("client.key"));
    // The master's password is in the environment only: nothing on the
    // command line (which `ps` shows) holds a password.
    let run = |password: Option<&str>, rest: &[&str]| {
        let mut args = vec![
            "--sentinel",
            redis_server::SERVICE,
            "--prefix",
            "cs",
            "--timeout",
            "10s",
            "--tls-ca",
            &ca,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ];
        args.extend_from_slice(rest);
        for a in &args {
            assert!(!a.contains(MASTER_PASSWORD) && !a.contains(SENTINEL_PASSWORD));
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"));
        command.env("FUSEBOX_REDIS_URL", urls.join(",")).args(&args);
        match password {
            Some(p) => command.env("FUSEBOX_MASTER_PASSWORD", p),
            None => command.env_remove("FUSEBOX_MASTER_PASSWORD"),
        };
        command.output().expect("run fusebox-ctl")
    };
    let o = run(Some(MASTER_PASSWORD), &["status", "vendor", "--json"]);
    assert!(o.status.success(), "{o:?}");
    let status: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(status["members"], 1, "{status}");
    let o = run(
        Some(MASTER_PASSWORD),
        &[
            "force-open",
            "vendor",
            "--actor",
            "ops",
            "--reason",
            "drill",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    wait_for("the override to reach the member", || {
        breaker.state() == State::ForcedOpen
    });

    // A wrong password, or none: exit 1, one line that says the master
    // refused it, no password shown; nothing written.
    for password in [Some(WRONG_PASSWORD), None] {
        let o = run(
            password,
            &["reset", "vendor", "--actor", "ops", "--reason", "done"],
        );
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        let says = match password {
            Some(_) => "the master refused the one given for it",
            None => "NOAUTH",
        };
        assert!(err.contains(says), "{err}");
        print!("{err}");
        for secret in [MASTER_PASSWORD, SENTINEL_PASSWORD, WRONG_PASSWORD] {
            assert!(
                !err.contains(secret) && !stdout(&o).contains(secret),
                "{err}"
            );
        }
    }
    assert_eq!(breaker.state(), State::ForcedOpen);

    // The master's password without --sentinel is a usage error.
    let o = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env("FUSEBOX_REDIS_URL", "redis://127.0.0.1:1/")
        .env("FUSEBOX_MASTER_PASSWORD", MASTER_PASSWORD)
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("FUSEBOX_MASTER_PASSWORD"), "{o:?}");
    assert!(!stderr(&o).contains(MASTER_PASSWORD), "{o:?}");
    // So is a master's user without its password.
    let o = Command::new(env!("CARGO_BIN_EXE_fusebox-ctl"))
        .env("FUSEBOX_REDIS_URL", "redis://127.0.0.1:1/")
        .env_remove("FUSEBOX_MASTER_PASSWORD")
        .args(["--sentinel", "m", "--master-user", "ops", "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("FUSEBOX_MASTER_PASSWORD"), "{o:?}");
}

#[test]
fn with_a_cluster_the_timeout_bounds_the_whole_command_on_a_hung_node() {
    // No replicas, and a node timeout far beyond the test: the hung master
    // is neither replaced nor marked failed, as with a node that stalls.
    let cluster = redis_server::RedisCluster::start_with(Options::default(), 0, 120_000);
    let urls = cluster.urls().join(",");
    let run = |args: &[&str]| {
        let mut all = vec!["--cluster", "--prefix", "ch", "--timeout", "4s"];
        all.extend_from_slice(args);
        let start = Instant::now();
        let o = ctl_at(&urls, &all);
        (o, start.elapsed())
    };
    let (o, _) = run(&[
        "force-open",
        "v0",
        "--actor",
        "a",
        "--reason",
        "r",
        "--create",
    ]);
    assert!(o.status.success(), "{o:?}");
    let hung = cluster.master_of("{ch:v0}:state").expect("a master");
    cluster.node(hung).pause();
    let commands: [&[&str]; 3] = [
        &["status", "v0"],
        &["status"],
        &["force-open", "v0", "--actor", "a", "--reason", "r"],
    ];
    let mut took = Vec::new();
    for args in commands {
        let (o, t) = run(args);
        took.push(t);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {o:?}");
        assert!(stderr(&o).contains("timed out"), "{args:?}: {o:?}");
        // Before, each connection to the hung node and each retry waited
        // the whole timeout: 8 s and more. The process's own start and
        // exit, on a busy machine, are in the 3 s margin.
        assert!(t < 7 * SEC, "{args:?} took {t:?}");
    }
    cluster.node(hung).resume();
    println!("fusebox-ctl --cluster --timeout 4s with a hung master: {took:?}");
}
