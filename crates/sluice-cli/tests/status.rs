//! `sluice status` against real daemons (in-process `serve` on a temp socket and a loopback
//! port): one under concurrent load with denials, and one whose backend is down, so every
//! number of the table and of `--json` is one the test caused.
#![allow(clippy::unwrap_used)] // set-up helpers outside #[test] fns may unwrap too

use std::path::Path;
use std::sync::Arc;

use sluice_client::api::{CheckRequest, StatusResponse};
use sluice_server::App;
use sluice_server::clock::ManualClock;
use sluice_server::service::stores::Stores;
use sluice_server::testing::{self, Daemon, Down, T0};

mod common;

use common::sluice;

const CONFIG: &str = r#"
[policies.api]
algorithm = "fixed_window"
limit = 5
window = "1h"

[policies.quiet]
algorithm = "gcra"
limit = 100
window = "1s"
"#;

/// Workers checking at once, and checks each sends.
const WORKERS: usize = 8;
const PER_WORKER: usize = 50;

/// One check over `client`; answers the HTTP status.
async fn check(client: &sluice_client::Client, policy: &str, key: &str) -> u16 {
    let body = serde_json::to_vec(&CheckRequest::new(policy, key)).unwrap();
    client
        .send(http::Method::POST, "/v1/check", &[], body)
        .await
        .unwrap()
        .status
}

async fn status_json(socket: &Path) -> StatusResponse {
    let out = sluice(socket, &["status", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_shows_the_last_hour_of_a_daemon_under_load() {
    let d = Daemon::start(CONFIG).await;
    // Three noisy keys denied 40, 30 and 20 times, and 370 keys checked once, all at once
    // from several connections. Key i of worker w: user:w:i, except the noisy ones.
    let noisy = [("noisy:a", 45), ("noisy:b", 35), ("noisy:c", 25)];
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let client = sluice_client::Client::unix(&d.socket);
        tasks.push(tokio::spawn(async move {
            let mut denied = 0;
            for i in 0..PER_WORKER {
                let key = format!("user:{worker}:{i}");
                denied += usize::from(check(&client, "api", &key).await == 429);
            }
            denied
        }));
    }
    for (key, times) in noisy {
        let client = sluice_client::Client::tcp(d.tcp.to_string());
        tasks.push(tokio::spawn(async move {
            let mut denied = 0;
            for _ in 0..times {
                denied += usize::from(check(&client, "api", key).await == 429);
            }
            denied
        }));
    }
    let mut denied = 0;
    for task in tasks {
        denied += task.await.unwrap();
    }
    let checks = WORKERS * PER_WORKER + 45 + 35 + 25;
    assert_eq!(denied, 40 + 30 + 20, "each noisy key is allowed 5 times");

    let status = status_json(&d.socket).await;
    let names: Vec<&str> = status.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["api", "quiet"]);
    let api = &status.policies[0];
    assert_eq!(api.checks, checks as u64);
    #[allow(clippy::cast_precision_loss)]
    let ratio = denied as f64 / checks as f64;
    assert!((api.rejected_ratio - ratio).abs() < 1e-9, "{api:?}");
    assert_eq!((api.fail_open, api.fail_closed), (0, 0));
    assert_eq!(api.burn_rate.availability_1h, 0.0);
    let p99 = api.p99_ms.unwrap();
    assert!(p99 > 0.0 && p99 <= 100.0, "{api:?}");
    assert!(api.burn_rate.latency_1h >= 0.0 && api.burn_rate.latency_1h <= 100.0);
    let top: Vec<(&str, u64)> = api
        .top_limited
        .iter()
        .map(|k| (k.key.as_str(), k.rejected))
        .collect();
    assert_eq!(top, [("noisy:a", 40), ("noisy:b", 30), ("noisy:c", 20)]);
    let quiet = &status.policies[1];
    assert_eq!((quiet.checks, quiet.p99_ms), (0, None));

    // The table says the same.
    let out = sluice(&d.socket, &["status"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("api "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[1], checks.to_string(), "{text}");
    assert_eq!(row[2], format!("{:.2}%", ratio * 100.0), "{text}");
    assert_eq!(row[3..5], ["0", "0"], "{text}");
    assert_eq!(row[6], "0.00", "{text}");
    assert!(text.contains("  limited: noisy:a (40 rejected)"), "{text}");
    assert!(text.contains("  limited: noisy:c (20 rejected)"), "{text}");

    // Over TCP too.
    let out = sluice(
        &d.socket,
        &["--http", &d.tcp.to_string(), "status", "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // An hour later the load has left the window (the daemon's housekeeping snapshots each
    // new minute of its clock, about every second).
    d.clock.advance(61 * 60 * 1000);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let api = status_json(&d.socket).await.policies.remove(0);
        if api.checks == 0 {
            assert!(api.top_limited.is_empty(), "{api:?}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{api:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_down_backend_burns_the_availability_budget() {
    let settings = testing::settings(
        "[policies.open]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\n\
         [policies.closed]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\nfail = \"closed\"\n",
    );
    let clock = Arc::new(ManualClock::new(T0));
    let app = App::new(settings, Stores::local(Arc::new(Down)), clock.clone());
    let d = Daemon::serving(app, clock).await;
    let client = sluice_client::Client::unix(&d.socket);
    for i in 0..7 {
        assert_eq!(check(&client, "open", &format!("k{i}")).await, 200);
    }
    for i in 0..3 {
        assert_eq!(check(&client, "closed", &format!("k{i}")).await, 503);
    }
    let status = status_json(&d.socket).await;
    let closed = &status.policies[0];
    assert_eq!(closed.policy, "closed");
    assert_eq!(
        (closed.checks, closed.fail_open, closed.fail_closed),
        (0, 0, 3)
    );
    assert!((closed.burn_rate.availability_1h - 1000.0).abs() < 1e-6);
    let open = &status.policies[1];
    assert_eq!((open.checks, open.fail_open, open.fail_closed), (7, 7, 0));
    assert_eq!(open.rejected_ratio, 0.0);
    assert!((open.burn_rate.availability_1h - 1000.0).abs() < 1e-6);

    let out = sluice(&d.socket, &["status"]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = text.lines().find(|l| l.starts_with("open ")).unwrap();
    assert!(
        row.contains("1000.00") && row.ends_with("! burning"),
        "{text}"
    );
}

#[tokio::test]
async fn with_an_admin_token_the_status_wants_it_as_top_does() {
    let d = Daemon::start(&format!("[admin]\ntoken = \"t0k3n\"\n{CONFIG}")).await;
    let out = sluice(&d.socket, &["status"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401"),
        "{out:?}"
    );
    let out = sluice(&d.socket, &["status", "--token", "t0k3n"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[tokio::test]
async fn status_shows_the_units_charged_to_each_usage_policy_and_tier() {
    let d = Daemon::start(
        "[policies.llm]\nalgorithm = \"token_bucket\"\nlimit = 100\nwindow = \"1h\"\nusage = true\n\
         tiers = { pro = { limit = 1000 } }\n\
         [policies.api]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1h\"\n",
    )
    .await;
    let client = sluice_client::Client::unix(&d.socket);
    // 40 + 90 to user:1 (the second takes it 30 into debt: charged all the same), 500 to a
    // pro user, a refund of 10 (not a charge), and an ordinary check of another policy.
    for (key, tier, amount) in [
        ("user:1", None, 40),
        ("user:1", None, 90),
        ("user:2", Some("pro"), 500),
        ("user:1", None, -10),
    ] {
        let mut charge = sluice_client::api::ChargeRequest::new("llm", key, amount);
        charge.tier = tier.map(str::to_owned);
        assert_eq!(client.charge_request(&charge).await.unwrap().status, 200);
    }
    assert_eq!(check(&client, "api", "k").await, 200);

    let out = sluice(&d.socket, &["status"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let usage = text
        .split_once("\nusage policies")
        .map(|(_, usage)| usage)
        .unwrap_or_else(|| panic!("no usage section: {text}"));
    let llm: Vec<&str> = usage
        .lines()
        .find(|l| l.starts_with("llm "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(llm, ["llm", "630"], "{text}");
    assert!(usage.contains("  tier none: 130\n"), "{text}");
    assert!(usage.contains("  tier pro: 500\n"), "{text}");
    assert!(!usage.contains("api"), "{text}");
    // --json stays the status document as the daemon sent it.
    let status = status_json(&d.socket).await;
    assert_eq!(status.policies.len(), 2);
}
