//! What an operator reads of the real `sluiced`: its startup line, one WARN and one INFO per
//! outage with `/readyz` following the checks, admin and candidate changes as audit lines, never
//! a token, and `--help` naming the environment, signals and log filter.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use http::Method;
use sluice_api::CheckRequest;
use sluice_client::Client;

mod common;

use common::daemon::readyz;
use common::{BIN, wait_for_socket, write_config, write_config_with};

/// `sluiced` on the Redis at `url` with its stderr in `log`, and one fail-closed policy.
fn start_on_redis(dir: &Path, url: &str, log: &Path) -> (Child, PathBuf) {
    let socket = dir.join("d.sock");
    let config = dir.join("sluice.toml");
    let backend = format!("[backend]\nkind = \"redis\"\nurl = \"{url}\"\ntimeout = \"100ms\"\n");
    // `lease = "off"`: every check reaches Redis, so its failures are what the watchdog hears
    // (a leased hot key would keep admitting from its block through the outage).
    let policies = "[policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000000\nwindow = \"1h\"\n\
                    fail = \"closed\"\nlease = \"off\"\n";
    write_config_with(&config, &socket, "", &format!("{backend}\n{policies}"));
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    wait_for_socket(&socket);
    (child, socket)
}

/// How many lines of the log at `path` contain `text`.
fn lines_with(path: &Path, text: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(text))
        .count()
}

/// Checks until one is answered 200 (or `limit` passes).
async fn until_answered(client: &Client, limit: Duration) {
    let start = std::time::Instant::now();
    let req = CheckRequest::new("p", "user:1");
    loop {
        if client.check(&req).await.is_ok_and(|o| o.status == 200) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "no check answered within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status of one check of `user:1` (a 503 has no decision body to decode).
async fn check_status(client: &Client) -> u16 {
    client
        .send(
            Method::POST,
            "/v1/check",
            &[("content-type", "application/json")],
            r#"{"policy": "p", "key": "user:1"}"#,
        )
        .await
        .unwrap()
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_logs_one_warn_and_one_info_and_readyz_follows_the_checks() {
    let mut redis = sluice_testkit::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let (mut child, socket) = start_on_redis(dir.path(), &redis.url(), &log);
    let client = Client::unix(&socket).with_timeout(Duration::from_secs(5));
    until_answered(&client, Duration::from_secs(5)).await;
    assert_eq!(readyz(&client).await, 200);

    // Down: many failed checks, one WARN line naming the address.
    redis.kill();
    for _ in 0..30 {
        assert_eq!(check_status(&client).await, 503);
    }
    assert_eq!(readyz(&client).await, 503);
    assert_eq!(
        lines_with(&log, "backend failing"),
        1,
        "{:?}",
        std::fs::read_to_string(&log)
    );
    let warn = std::fs::read_to_string(&log).unwrap();
    assert!(warn.contains(&redis.url()), "{warn}");
    assert_eq!(lines_with(&log, "backend answers again"), 0);

    // Back: one INFO line, ready again.
    redis.restart();
    until_answered(&client, Duration::from_secs(10)).await;
    for _ in 0..10 {
        check_status(&client).await;
    }
    assert_eq!(lines_with(&log, "backend answers again"), 1);
    assert_eq!(lines_with(&log, "backend failing"), 1);
    assert_eq!(readyz(&client).await, 200);

    // PING works but every write is refused: not ready while the checks fail.
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    redis.cli(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(redis.cli(&["PING"]), "PONG");
    for _ in 0..10 {
        assert_eq!(check_status(&client).await, 503);
    }
    let ready = client.send(Method::GET, "/readyz", &[], "").await.unwrap();
    assert_eq!(ready.status, 503);
    let body = String::from_utf8_lossy(&ready.body);
    assert!(body.contains("OOM"), "{body}");
    assert_eq!(lines_with(&log, "backend failing"), 2);

    redis.cli(&["CONFIG", "SET", "maxmemory", "0"]);
    until_answered(&client, Duration::from_secs(5)).await;
    assert_eq!(readyz(&client).await, 200);
    assert_eq!(lines_with(&log, "backend answers again"), 2);
    let _ = child.kill();
    let _ = child.wait();
}

/// What an operator reads on the first day, from the real daemon's stderr: one startup line
/// naming version, config, backend, listeners, policies and whether the admin API is on; a
/// backend that fails every check for a while gets its client rebuilt (logged), and serves
/// again once Redis is up, without a restart; an admin change as `limit a→b burst c→d`; and
/// never the admin token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_startup_line_the_watchdog_and_admin_changes_are_logged_without_the_token() {
    const TOKEN: &str = "tok-5ecret-never-logged";
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let socket = dir.path().join("d.sock");
    let config = dir.path().join("sluice.toml");
    // Nothing listens on the backend's port yet: every check fails until Redis starts there.
    let port = sluice_testkit::free_port();
    write_config_with(
        &config,
        &socket,
        "",
        &format!(
            "[admin]\ntoken = \"{TOKEN}\"\n[backend]\nkind = \"redis\"\n\
             url = \"redis://127.0.0.1:{port}\"\ntimeout = \"100ms\"\n\
             [policies.p]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow = \"1h\"\n\
             fail = \"closed\"\n"
        ),
    );
    let _daemon = logging(&config, &log, "debug");
    wait_for_socket(&socket);
    let client = Client::unix(&socket).with_timeout(Duration::from_secs(5));

    let text = std::fs::read_to_string(&log).unwrap();
    let started = text
        .lines()
        .find(|l| l.contains("sluiced started"))
        .unwrap_or_else(|| panic!("no startup line in:\n{text}"));
    for part in [
        env!("CARGO_PKG_VERSION"),
        &config.display().to_string(),
        "backend=redis",
        &format!("127.0.0.1:{port}"),
        &socket.display().to_string(),
        "policies=p",
        "admin_api=\"on\"",
    ] {
        assert!(started.contains(part), "{part:?} missing from {started}");
    }

    // Every check fails for longer than the watchdog waits: the client is rebuilt.
    let failing = std::time::Instant::now();
    while lines_with(&log, "backend client rebuilt") == 0 {
        assert_eq!(check_status(&client).await, 503);
        assert!(
            failing.elapsed() < Duration::from_secs(30),
            "no rebuild logged:\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Redis comes up on that port: checks are answered, no restart.
    let _redis = sluice_testkit::RedisServer::start_on(port);
    until_answered(&client, Duration::from_secs(15)).await;

    let auth = format!("Bearer {TOKEN}");
    let set = client
        .send(
            Method::PUT,
            "/v1/admin/policies/p/tiers/pro",
            &[
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
            ],
            r#"{"limit": 2000, "burst": 4000}"#,
        )
        .await
        .unwrap();
    assert_eq!(set.status, 200, "{:?}", String::from_utf8_lossy(&set.body));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("policy=p tier=pro limit 1000→2000 burst 1000→4000")),
        "{text}"
    );
    assert!(
        !text.contains(TOKEN),
        "the admin token reached the log:\n{text}"
    );
}

/// Candidate changes through the admin API are audit lines of their own: set and removed with
/// the candidate before and after, a promotion as the limit change it is, marked
/// `(promoted candidate)`; the token is never logged.
#[tokio::test]
async fn candidate_changes_and_promotions_are_logged_without_the_token() {
    const TOKEN: &str = "tok-candidate-never-logged";
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let socket = dir.path().join("d.sock");
    let config = dir.path().join("sluice.toml");
    write_config(
        &config,
        &socket,
        &format!(
            "[admin]\ntoken = \"{TOKEN}\"\n\
             [policies.p]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"60s\"\n\
             [policies.p.candidate]\nlimit = 120\n"
        ),
    );
    let _daemon = logging(&config, &log, "info");
    wait_for_socket(&socket);
    let client = Client::unix(&socket).with_timeout(Duration::from_secs(5));
    let auth = format!("Bearer {TOKEN}");
    let path = "/v1/admin/policies/p/tiers/none/candidate";
    for (method, at, body) in [
        (Method::PUT, path.to_owned(), r#"{"limit": 150}"#),
        (Method::DELETE, path.to_owned(), ""),
        (Method::PUT, path.to_owned(), r#"{"limit": 150}"#),
        (Method::POST, format!("{path}/promote"), ""),
    ] {
        let out = client
            .send(method, &at, &[("authorization", auth.as_str())], body)
            .await
            .unwrap();
        assert_eq!(
            out.status,
            200,
            "{at}: {:?}",
            String::from_utf8_lossy(&out.body)
        );
    }
    let text = std::fs::read_to_string(&log).unwrap();
    for line in [
        "candidate set: policy=p tier=none candidate 120 per 60s burst 120 fixed_window (file)→150 per 60s burst 150 fixed_window (admin)",
        "candidate removed: policy=p tier=none candidate 150 per 60s burst 150 fixed_window (admin)→120 per 60s burst 120 fixed_window (file)",
        "limit override set: policy=p tier=none limit 100→150 (promoted candidate) burst 100→150",
    ] {
        assert!(
            text.lines().any(|l| l.contains(line)),
            "{line:?} not in:\n{text}"
        );
    }
    assert!(
        !text.contains(TOKEN),
        "the admin token reached the log:\n{text}"
    );
}

/// `sluiced` on `config`, logging at `level` into the file `log`; killed when dropped.
fn logging(config: &Path, log: &Path, level: &str) -> Guard {
    Guard(
        Command::new(BIN)
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", level)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// Kills the process when the test ends, also when it fails.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sluiced_help_names_the_environment_signals_and_log_filter() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for part in ["SLUICE_", "SIGHUP", "RUST_LOG", "--check-config"] {
        assert!(help.contains(part), "{part} missing from:\n{help}");
    }
}
