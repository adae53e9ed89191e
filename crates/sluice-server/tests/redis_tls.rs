//! sluiced on a TLS-only Redis that requires client certificates (`rediss://`,
//! `[backend.tls]`): exact counts with the default leases; and a wrong CA, a wrong server
//! name, an expired server certificate and a missing client certificate each answered by the
//! policy's fail mode, `/readyz` 503, and the outage's log line naming the reason.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::path::Path;

use sluice_testkit::RedisServer;
use sluice_testkit::certs::{Certs, Pair};

use common::daemon::{Daemon, assert_ready_and_exact, fail_modes, readyz, twelve_checks};

/// The `[backend]` lines of `server` over TLS, trusting `ca` and presenting `client`.
fn backend(server: &RedisServer, ca: &Path, client: Option<&Pair>) -> String {
    let (cert, key) = client.map_or((String::new(), String::new()), |pair| {
        (
            pair.cert.display().to_string(),
            pair.key.display().to_string(),
        )
    });
    format!(
        "kind = \"redis\"\nurl = \"{}\"\ntimeout = \"500ms\"\n\n[backend.tls]\nca_file = {:?}\ncert_file = {cert:?}\nkey_file = {key:?}",
        server.tls_url(),
        ca.display().to_string(),
    )
}

#[tokio::test]
async fn checks_over_tls_with_a_client_certificate_are_exact() {
    let certs = Certs::new();
    let server = RedisServer::start_tls(&certs);
    let daemon = Daemon::start(
        &backend(&server, &certs.ca_file, Some(&certs.client)),
        "closed",
    );
    assert_ready_and_exact(&daemon, "tls-key").await;
}

#[tokio::test]
async fn each_tls_failure_serves_the_fail_mode_and_is_logged_once_with_its_reason() {
    let certs = Certs::new();
    let good = RedisServer::start_tls(&certs);
    let expired = RedisServer::start_tls_serving(&certs, &certs.expired);
    let elsewhere = RedisServer::start_tls_serving(&certs, &certs.wrong_name);
    let cases = [
        (
            backend(&good, &certs.other_ca_file, Some(&certs.client)),
            "unknown authority",
        ),
        (
            backend(&elsewhere, &certs.ca_file, Some(&certs.client)),
            "name mismatch",
        ),
        (
            backend(&expired, &certs.ca_file, Some(&certs.client)),
            "expired",
        ),
        (
            backend(&good, &certs.ca_file, None),
            "client certificate required",
        ),
    ];
    for (lines, reason) in cases {
        for (fail, answered) in fail_modes() {
            let daemon = Daemon::start(&lines, fail);
            let client = daemon.client();
            assert_eq!(
                twelve_checks(&client, "k").await,
                answered,
                "{reason} {fail}"
            );
            assert_eq!(readyz(&client).await, 503, "{reason}");
            let log = daemon.log();
            // Named once by the outage's line (the health tracker's, or the start's when the
            // daemon came up during the outage: both when the start wait saw it first), never
            // once per check or per connection attempt.
            let failing = log
                .lines()
                .filter(|l| l.contains("backend failing"))
                .count();
            let with_reason = log.lines().filter(|l| l.contains(reason)).count();
            assert!(failing <= 1, "{reason} ({fail}):\n{log}");
            assert!((1..=2).contains(&with_reason), "{reason} ({fail}):\n{log}");
            assert!(log.contains("localhost:"), "{log}");
            assert!(!log.contains("PRIVATE KEY"), "{log}");
        }
    }
}

/// Daemons started on the wrong scheme for the port, per direction: each attempt a new
/// process, new connections, new TLS hellos.
const WRONG_SCHEME_STARTS: usize = 5;

#[tokio::test]
async fn the_wrong_scheme_for_the_port_is_named_by_readyz_and_the_log_every_time() {
    let certs = Certs::new();
    let tls_only = RedisServer::start_tls(&certs);
    let plain = RedisServer::start();
    let plain_url = tls_only.tls_url().replace("rediss://", "redis://");
    let cases = [
        // redis:// against a port that speaks TLS only.
        (
            format!("kind = \"redis\"\nurl = \"{plain_url}\"\ntimeout = \"500ms\""),
            "use rediss://",
        ),
        // rediss:// against a plain port: Redis mostly answers the TLS hello with nothing.
        (
            format!(
                "kind = \"redis\"\nurl = \"{}\"\ntimeout = \"500ms\"\n\n[backend.tls]\nca_file = {:?}",
                plain.url().replace("redis://", "rediss://"),
                certs.ca_file.display().to_string()
            ),
            "does not speak TLS",
        ),
    ];
    for (lines, reason) in &cases {
        for attempt in 0..WRONG_SCHEME_STARTS {
            let daemon = Daemon::start(lines, "closed");
            let client = daemon.client();
            let checks = twelve_checks(&client, "k").await;
            assert_eq!(checks.unavailable, 12, "{reason} #{attempt}: {checks:?}");
            let ready = client
                .send(http::Method::GET, "/readyz", &[], "")
                .await
                .unwrap();
            let body = String::from_utf8_lossy(&ready.body).into_owned();
            assert_eq!(ready.status, 503, "{reason} #{attempt}: {body}");
            assert!(body.contains(reason), "{reason} #{attempt}: {body}");
            let log = daemon.log();
            let failing = log.lines().find(|l| l.contains("backend failing"));
            assert!(
                failing.is_some_and(|l| l.contains("WARN") && l.contains(reason)),
                "{reason} #{attempt}:\n{log}"
            );
            assert!(
                !log.to_lowercase().contains("timed out"),
                "{reason} #{attempt}:\n{log}"
            );
        }
    }
}

#[test]
fn check_config_names_an_unreadable_backend_tls_file_and_tls_files_without_tls() {
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let out = common::check_config_text(dir.path(), text);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = check(
        "[backend]\nkind = \"redis\"\nurl = \"rediss://app:hunter22@redis.internal:6380\"\n\
         [backend.tls]\nca_file = \"/nonexistent/ca.pem\"\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("backend.tls.ca_file") && stderr.contains("/nonexistent/ca.pem"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter22"), "{stderr}");

    let (code, stderr) = check(
        "[backend]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n[backend.tls]\nca_file = \"/etc/ssl/ca.pem\"\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("backend.tls.ca_file") && stderr.contains("TLS is off"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_client_certificate_swapped_on_disk_is_used_after_sighup() {
    let certs = Certs::new();
    let server = RedisServer::start_tls(&certs);
    // The daemon starts with a client certificate Redis does not trust.
    let dir = tempfile::tempdir().unwrap();
    let served = Pair {
        cert: dir.path().join("client.crt"),
        key: dir.path().join("client.key"),
    };
    std::fs::copy(&certs.other_client.cert, &served.cert).unwrap();
    std::fs::copy(&certs.other_client.key, &served.key).unwrap();
    let daemon = Daemon::start(&backend(&server, &certs.ca_file, Some(&served)), "closed");
    let client = daemon.client();
    assert_eq!(readyz(&client).await, 503);

    // Renewed (a certificate of the CA Redis trusts) and SIGHUP: the next connection presents
    // it, well before the rebuild that persistent failures trigger would (fewer calls).
    std::fs::copy(&certs.client.cert, &served.cert).unwrap();
    std::fs::copy(&certs.client.key, &served.key).unwrap();
    common::signal(&daemon.child, "HUP");
    let started = std::time::Instant::now();
    while readyz(&client).await != 200 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "not ready after SIGHUP:\n{}",
            daemon.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        daemon.log().contains("TLS files are read again"),
        "{}",
        daemon.log()
    );
}
