//! Stacked limits end to end, on every backend: 10 a second and 25 a minute on one key under
//! 32 concurrent clients for 70 seconds of the daemon's clock; the headers of the limit that
//! bound; a batch holding a stacked check, all or nothing; a charge debiting every limit.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_tests::{Daemon, T0};

use crate::backends::Backend;

const TOML: &str = r#"
[policies.stk]
algorithm = "fixed_window"
limits = [ { limit = 10, window = "1s" }, { limit = 25, window = "1m" } ]

[policies.one]
algorithm = "fixed_window"
limit = 1
window = "1h"

[policies.llm]
algorithm = "token_bucket"
limits = [ { limit = 100, window = "1m" }, { limit = 1000, window = "1d" } ]
usage = true
"#;

async fn daemon(backend: &Backend) -> Daemon {
    Daemon::start(&format!("{}{TOML}", backend.section("5s"))).await
}

/// `body` posted to `path`: (status, body, headers).
async fn post(d: &Daemon, path: &str, body: String) -> (u16, serde_json::Value, http::HeaderMap) {
    let out = d
        .unix()
        .send(http::Method::POST, path, &[], body)
        .await
        .unwrap();
    (
        out.status,
        serde_json::from_slice(&out.body).unwrap(),
        out.headers,
    )
}

async fn check(d: &Daemon, policy: &str, key: &str) -> (u16, serde_json::Value, http::HeaderMap) {
    post(
        d,
        "/v1/check",
        format!(r#"{{"policy":"{policy}","key":"{key}"}}"#),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_second_admits_more_than_10_and_no_minute_more_than_25_under_32_clients() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = Arc::new(daemon(&backend).await);
        let mut per_second: BTreeMap<u64, u64> = BTreeMap::new();
        let mut per_minute: BTreeMap<u64, u64> = BTreeMap::new();
        // 70 s in steps of 250 ms, each step 32 clients at once.
        for step in 0..280u64 {
            let now = T0 + step * 250;
            d.clock.set(now);
            let tasks: Vec<_> = (0..32)
                .map(|_| {
                    let d = Arc::clone(&d);
                    tokio::spawn(async move { check(&d, "stk", "hot").await.0 })
                })
                .collect();
            for task in tasks {
                let status = task.await.unwrap();
                assert!(status == 200 || status == 429, "{name}: {status}");
                if status == 200 {
                    *per_second.entry(now / 1000).or_default() += 1;
                    *per_minute.entry(now / 60_000).or_default() += 1;
                }
            }
        }
        assert!(
            per_second.values().all(|&n| n <= 10),
            "{name}: {per_second:?}"
        );
        assert_eq!(
            per_minute.values().copied().collect::<Vec<_>>(),
            vec![25, 25],
            "{name}: each minute admits its 25, in seconds of at most 10"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_headers_name_the_limit_that_bound() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = daemon(&backend).await;
        d.clock.set(T0);
        for _ in 0..10 {
            assert_eq!(check(&d, "stk", "k").await.0, 200, "{name}");
        }
        let (status, body, headers) = check(&d, "stk", "k").await;
        assert_eq!(status, 429, "{name}: {body}");
        assert_eq!(
            headers["ratelimit-policy"], "\"stk.1s\";q=10;w=1, \"stk.1m\";q=25;w=60",
            "{name}"
        );
        assert_eq!(headers["ratelimit"], "\"stk.1s\";r=0;t=1", "{name}");
        assert_eq!(headers["x-ratelimit-limit"], "10", "{name}");
        d.clock.set(T0 + 1_000);
        for _ in 0..10 {
            assert_eq!(check(&d, "stk", "k").await.0, 200, "{name}");
        }
        d.clock.set(T0 + 2_000);
        for _ in 0..5 {
            assert_eq!(check(&d, "stk", "k").await.0, 200, "{name}");
        }
        // The second has room; the minute has none: the minute binds, until it ends.
        let (status, body, headers) = check(&d, "stk", "k").await;
        assert_eq!(status, 429, "{name}: {body}");
        assert_eq!(body["limit"], 25, "{name}: {body}");
        assert_eq!(body["retry_after"], 58, "{name}: {body}");
        assert_eq!(headers["ratelimit"], "\"stk.1m\";r=0;t=58", "{name}");
        assert_eq!(headers["x-ratelimit-limit"], "25", "{name}");
        d.clock.set(T0 + 60_000);
        assert_eq!(check(&d, "stk", "k").await.0, 200, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_with_a_stacked_check_is_all_or_nothing() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = daemon(&backend).await;
        d.clock.set(T0);
        assert_eq!(check(&d, "one", "used").await.0, 200, "{name}");
        let batch = r#"{"checks":[{"policy":"stk","key":"b"},{"policy":"one","key":"used"}]}"#;
        let (status, body, _) = post(&d, "/v1/check", batch.to_owned()).await;
        assert_eq!(status, 429, "{name}: {body}");
        assert_eq!(body["results"][0]["allowed"], true, "{name}: {body}");
        // Nothing of the stacked check was consumed: both its limits are full.
        if let Backend::Redis(server) = &backend {
            for key in ["rl:{stk:b}:fw", "rl:{stk:b}:s1:fw"] {
                assert_eq!(server.cli(&["EXISTS", key]).trim(), "0", "{name}: {key}");
            }
        }
        for _ in 0..10 {
            assert_eq!(
                check(&d, "stk", "b").await.0,
                200,
                "{name}: 10 left this second"
            );
        }
        let batch = r#"{"checks":[{"policy":"stk","key":"c"},{"policy":"one","key":"fresh"}]}"#;
        let (status, body, _) = post(&d, "/v1/check", batch.to_owned()).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["results"][0]["remaining"], 9, "{name}: {body}");
        if let Backend::Redis(server) = &backend {
            for key in ["rl:{stk:c}:fw", "rl:{stk:c}:s1:fw"] {
                assert_eq!(server.cli(&["EXISTS", key]).trim(), "1", "{name}: {key}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_charge_debits_every_stacked_limit() {
    for backend in Backend::all() {
        let name = backend.name();
        let d = daemon(&backend).await;
        d.clock.set(T0);
        let charge = r#"{"policy":"llm","key":"ann","amount":150}"#.to_owned();
        let (status, body, _) = post(&d, "/v1/charge", charge).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(
            (body["remaining"].clone(), body["debt"].clone()),
            (0.into(), 50.into()),
            "{name}: {body}"
        );
        let (status, body, headers) = check(&d, "llm", "ann").await;
        assert_eq!(status, 429, "{name}: {body}");
        assert_eq!(
            headers["ratelimit"].to_str().unwrap().split(';').next(),
            Some("\"llm.1m\""),
            "{name}"
        );
        // A minute later the minute's bucket is full again; the day's has 850 left.
        d.clock.set(T0 + 60_000 + 30_000);
        let (status, body, _) = check(&d, "llm", "ann").await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["remaining"], 100, "{name}: {body}");
        let charge = r#"{"policy":"llm","key":"ann","amount":800}"#.to_owned();
        let (_, body, _) = post(&d, "/v1/charge", charge).await;
        // The minute is 700 in debt, the day about 50 left: the minute binds.
        assert_eq!(body["debt"], 700, "{name}: {body}");
        d.clock.set(T0 + 10 * 60_000);
        let (status, body, headers) = check(&d, "llm", "ann").await;
        assert_eq!(status, 200, "{name}: {body}");
        // The day's bucket: 950 used, less 1000 × 510 s / 86 400 s refilled: 56 left.
        assert_eq!(
            body["remaining"], 56,
            "{name}: the day's bucket binds now: {body}"
        );
        assert_eq!(headers["x-ratelimit-limit"], "1000", "{name}");
    }
}
