//! Usage budgets end to end, on every backend: a real Envoy 1.40 asking sluiced before each
//! request (a descriptor's `hits_addend` 0) and charging after each response
//! (`apply_on_stream_done`, `hits_addend` from the response's `x-tokens`), with
//! `examples/envoy/usage.yaml` and `usage.toml` as they are; and `POST /v1/charge` and
//! `SLUICE.CHARGE` counting every unit of a debt.

use std::time::{Duration, Instant};

use sluice_client::Client;
use sluice_testkit::{Envoy, free_port};
use sluice_tests::{Daemon, replace_once, repo_file};

use crate::backends::Backend;

/// An app answering every request with `x-tokens: 40`, as an LLM upstream reports usage.
async fn token_app() -> std::net::SocketAddr {
    let app = axum::Router::new().fallback(|| async { ([("x-tokens", "40")], "completion") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// The example's daemon on `backend` (its own `[backend]` section before the file's).
async fn daemon(backend: &Backend, toml: &str) -> Daemon {
    let section = match backend {
        Backend::Memory => String::new(),
        other => other.section("5s"),
    };
    Daemon::start(&format!("{section}{toml}")).await
}

/// What an ask (a usage policy's check of cost 0, which consumes nothing) answers for `key`.
async fn ask(d: &Daemon, policy: &str, key: &str) -> serde_json::Value {
    let body = format!(r#"{{"policy":"{policy}","key":"{key}"}}"#);
    let out = d
        .unix()
        .send(http::Method::POST, "/v1/check", &[], body)
        .await
        .unwrap();
    serde_json::from_slice(&out.body).unwrap()
}

/// Waits until the charge Envoy sends after a response has landed: `remaining` and `debt`
/// of the key as expected.
async fn until_charged(d: &Daemon, key: &str, remaining: u64, debt: u64) {
    let start = Instant::now();
    loop {
        let body = ask(d, "llm_tokens", key).await;
        if body["remaining"] == remaining && body["debt"] == debt {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never charged to remaining {remaining}, debt {debt}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_envoy_a_token_budget_denies_the_fourth_request_on_every_backend() {
    let toml = repo_file("examples/envoy/usage.toml");
    for backend in Backend::all() {
        let name = backend.name();
        let d = daemon(&backend, &toml).await;
        let app = token_app().await;
        let (listen, admin) = (free_port(), free_port());
        let mut config = repo_file("examples/envoy/usage.yaml");
        for (from, to) in [
            (10000, listen),
            (9901, admin),
            (8000, app.port()),
            (8081, d.grpc.port()),
        ] {
            config = replace_once(
                &config,
                &format!("port_value: {from} }}"),
                &format!("port_value: {to} }}"),
            );
        }
        let envoy = tokio::task::spawn_blocking(move || Envoy::start(&config, admin))
            .await
            .unwrap();
        let client = Client::tcp(format!("127.0.0.1:{listen}"));
        let get = || async {
            client
                .send(http::Method::GET, "/v1/chat", &[("x-user-id", "ann")], "")
                .await
                .unwrap()
        };
        // 100 tokens an hour, 40 a response: 60 left, 20 left, then 20 in debt.
        for (i, (remaining, debt)) in [(60, 0), (20, 0), (0, 20)].into_iter().enumerate() {
            let answer = get().await;
            assert_eq!(
                answer.status,
                200,
                "{name}: request {}: {}",
                i + 1,
                envoy.log()
            );
            until_charged(&d, "user:ann", remaining, debt).await;
        }
        let raw = match &backend {
            Backend::Redis(server) => Some(server.cli(&["GET", "rl:{llm_tokens:user:ann}:fw"])),
            _ => None,
        };
        for _ in 0..3 {
            assert_eq!(get().await.status, 429, "{name}: the budget is spent");
        }
        // A denied request is never charged (it never reached the app), and the asks of
        // Envoy's hits_addend 0 consumed nothing: the counter is what the charges made it.
        until_charged(&d, "user:ann", 0, 20).await;
        if let (Backend::Redis(server), Some(before)) = (&backend, raw) {
            let after = server.cli(&["GET", "rl:{llm_tokens:user:ann}:fw"]);
            assert_eq!(after, before, "{name}: asks left the counter unchanged");
            assert!(
                after.trim().ends_with(":120"),
                "{name}: 3 × 40 counted: {after}"
            );
        }
        // Another user has a budget of their own.
        let other = client
            .send(http::Method::GET, "/v1/chat", &[("x-user-id", "bob")], "")
            .await
            .unwrap();
        assert_eq!(other.status, 200, "{name}");
        // Until the window ends: then the debt is gone with it.
        d.clock.advance(3_600_000 - 1);
        assert_eq!(get().await.status, 429, "{name}: 1 ms before the hour ends");
        d.clock.advance(1);
        assert_eq!(get().await.status, 200, "{name}: a new hour");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charges_beyond_the_balance_are_all_counted_on_every_backend() {
    const TOML: &str = r#"
[policies.tokens]
algorithm = "token_bucket"
limit = 10
window = "1s"
usage = true

[policies.monthly]
algorithm = "fixed_window"
limit = 100
window = "1h"
usage = true
"#;
    for backend in Backend::all() {
        let name = backend.name();
        let d = daemon(&backend, TOML).await;
        let charge = |policy: &'static str, amount: i64| {
            let client = d.unix();
            async move {
                let body = format!(r#"{{"policy":"{policy}","key":"k","amount":{amount}}}"#);
                let out = client
                    .send(http::Method::POST, "/v1/charge", &[], body)
                    .await
                    .unwrap();
                assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
                let body = serde_json::from_slice::<serde_json::Value>(&out.body).unwrap();
                assert!(body.get("degraded").is_none(), "a charge not counted: {body}");
                body
            }
        };
        // Concurrent charges far beyond the budget: every unit counts, none refused.
        let mut tasks = Vec::new();
        for i in 0..40 {
            tasks.push(tokio::spawn(charge("monthly", 7 + (i % 5))));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let total: u64 = (0..40).map(|i| 7 + (i % 5)).sum();
        let body = ask(&d, "monthly", "k").await;
        assert_eq!(body["debt"], total - 100, "{name}: {body}");
        assert_eq!(body["remaining"], 0, "{name}");
        if let Backend::Redis(server) = &backend {
            let raw = server.cli(&["GET", "rl:{monthly:k}:fw"]);
            assert!(raw.trim().ends_with(&format!(":{total}")), "{name}: {raw}");
        }
        // Token bucket: 25 tokens from a bucket of 10 owe 15; an ask of 1 waits for 16
        // tokens at 10 a second, 1.6 s to the millisecond.
        let body = charge("tokens", 25).await;
        assert_eq!(
            (body["debt"].as_u64(), body["allowed"].as_bool()),
            (Some(15), Some(false))
        );
        d.clock.advance(1599);
        assert_eq!(
            ask(&d, "tokens", "k").await["allowed"],
            false,
            "{name}: 1 ms early"
        );
        d.clock.advance(1);
        assert_eq!(
            ask(&d, "tokens", "k").await["allowed"],
            true,
            "{name}: repaid"
        );
        // The Rust client's charge reaches the same state.
        let out = d.unix().charge("tokens", "k", 0).await.unwrap();
        assert_eq!((out.status, out.body.debt), (200, Some(0)), "{name}");
        // A refund gives back, never above full.
        let body = charge("tokens", -100).await;
        assert_eq!(
            (body["remaining"].as_u64(), body["debt"].as_u64()),
            (Some(10), Some(0))
        );
        // RESP: SLUICE.CHARGE answers as SLUICE.CHECK does (allowed, limit, remaining, reset,
        // retry_after, delay_ms, degraded), on the same state.
        let reply = crate::resp::cli(&d, &["SLUICE.CHARGE", "tokens", "k", "30"]).await;
        assert_eq!(reply[..3], ["0", "10", "0"], "{name}: {reply:?}");
        assert_eq!(ask(&d, "tokens", "k").await["debt"], 20, "{name}");
        let refused = crate::resp::cli(&d, &["SLUICE.CHARGE", "tokens", "k", "x"]).await;
        assert!(refused[0].starts_with("ERR"), "{name}: {refused:?}");
    }
}

/// Four daemons on one Redis, each taking asks and charges from several clients at once:
/// the counter ends at exactly the sum of the charges (asks of 0 consume nothing), and
/// every daemon answers the same debt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_daemons_on_redis_keep_the_sum_of_concurrent_charges_exact() {
    const TOML: &str = r#"
[policies.budget]
algorithm = "fixed_window"
limit = 500
window = "1h"
usage = true
"#;
    let backend = Backend::Redis(sluice_testkit::RedisServer::start());
    let mut daemons = Vec::new();
    for _ in 0..4 {
        daemons.push(std::sync::Arc::new(daemon(&backend, TOML).await));
    }
    let mut tasks = Vec::new();
    for (n, d) in daemons.iter().enumerate() {
        for c in 0..4u64 {
            let d = d.clone();
            tasks.push(tokio::spawn(async move {
                let client = if c % 2 == 0 { d.unix() } else { d.tcp() };
                let mut charged = 0;
                for i in 0..25u64 {
                    let amount = 1 + (n as u64 + c + i) % 9;
                    let body = format!(r#"{{"policy":"budget","key":"k","amount":{amount}}}"#);
                    let out = client
                        .send(http::Method::POST, "/v1/charge", &[], body)
                        .await
                        .unwrap();
                    assert_eq!(out.status, 200);
                    charged += amount;
                    let ask = r#"{"policy":"budget","key":"k"}"#;
                    let out = client
                        .send(http::Method::POST, "/v1/check", &[], ask)
                        .await
                        .unwrap();
                    assert!(out.status == 200 || out.status == 429, "{}", out.status);
                }
                charged
            }));
        }
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let Backend::Redis(server) = &backend else {
        unreachable!()
    };
    let raw = server.cli(&["GET", "rl:{budget:k}:fw"]);
    assert!(
        raw.trim().ends_with(&format!(":{total}")),
        "{raw} != {total}"
    );
    // Each daemon's answer comes from Redis (or its denied cache, which holds the latest).
    for d in &daemons {
        let body = r#"{"policy":"budget","key":"k","amount":0}"#;
        let out = d
            .unix()
            .send(http::Method::POST, "/v1/charge", &[], body)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&out.body).unwrap();
        assert_eq!(body["debt"], total.saturating_sub(500), "{body}");
    }
}
