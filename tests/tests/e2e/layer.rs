//! sluice-client's tower layer against a real daemon: the `examples/axum-app` router served
//! over TCP (with axum's `ConnectInfo`), and the fail modes with the daemon gone.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use sluice_client::Client;
use sluice_client::layer::{ClientIp, FailMode, LayerError, RateLimitLayer};
use sluice_tests::{Daemon, TEST_CONFIG, assert_allowed_headers, header, req_cost};
use tower::ServiceExt;

/// Serves the example app limited by `policy` of `d`; its address.
async fn serve_example(d: &Daemon, policy: &str) -> SocketAddr {
    let app = sluice_axum_app::app(Arc::new(d.unix()), policy)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    addr
}

#[tokio::test]
async fn the_example_app_is_limited_per_user_then_per_address() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let app = Client::tcp(serve_example(&d, "fw").await.to_string());
    let get = |auth: Option<&'static str>| {
        let app = &app;
        async move {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("authorization", a)).into_iter().collect();
            app.send(http::Method::GET, "/orders", &headers, "")
                .await
                .unwrap()
        }
    };
    // `fw`: a fixed window of 5 per 10 s.
    for left in (0..5).rev() {
        let answer = get(Some("Bearer ann")).await;
        assert_eq!(answer.status, 200);
        assert_eq!(&answer.body[..], b"orders\n");
        assert_allowed_headers(&answer.headers, 5, left, "\"fw\";q=5;w=10");
    }
    let denied = get(Some("Bearer ann")).await;
    assert_eq!(denied.status, 429);
    assert_eq!(
        header(&denied.headers, "content-type"),
        "application/problem+json"
    );
    assert_eq!(header(&denied.headers, "retry-after"), "10");
    assert_eq!(header(&denied.headers, "ratelimit"), "\"fw\";r=0;t=10");
    let body: serde_json::Value = serde_json::from_slice(&denied.body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded");
    assert_eq!(body["status"], 429);
    assert_eq!(body["violated-policies"], serde_json::json!(["fw"]));
    assert_eq!(
        (body["allowed"].as_bool(), body["retry_after"].as_u64()),
        (Some(false), Some(10))
    );
    // Another user has a budget of their own.
    assert_eq!(get(Some("Bearer bob")).await.status, 200);
    // Anonymous callers are counted under their address, as the daemon sees.
    let anonymous = get(None).await;
    assert_eq!(header(&anonymous.headers, "x-ratelimit-remaining"), "4");
    let peek = d
        .unix()
        .check(&req_cost("fw", "ip:127.0.0.1", 0))
        .await
        .unwrap();
    assert_eq!(peek.body.remaining, 4);
}

#[tokio::test]
async fn with_the_daemon_gone_each_policy_applies_its_fail_mode() {
    let config = format!(
        "{TEST_CONFIG}\n[policies.strict]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"10s\"\nfail = \"closed\"\n"
    );
    let d = Daemon::start(&config).await;
    let client = Arc::new(d.unix());
    let open = RateLimitLayer::from_daemon(client.clone(), "fw")
        .await
        .unwrap();
    let closed = RateLimitLayer::from_daemon(client.clone(), "strict")
        .await
        .unwrap();
    let unknown = RateLimitLayer::from_daemon(client.clone(), "nope").await;
    assert!(matches!(unknown, Err(LayerError::UnknownPolicy(p)) if p == "nope"));
    d.stop().await.unwrap();

    let request = || {
        let mut request = http::Request::get("/orders").body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(ClientIp([10, 0, 0, 9].into()));
        request
    };
    let router = |layer: RateLimitLayer| {
        axum::Router::new()
            .route("/orders", axum::routing::get(|| async { "orders" }))
            .layer(layer)
    };
    let answer = router(open).oneshot(request()).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(header(answer.headers(), "x-ratelimit-degraded"), "1");

    let answer = router(closed).oneshot(request()).await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(header(answer.headers(), "retry-after"), "1");
    let body = axum::body::to_bytes(answer.into_body(), 1024)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"], "backend_unavailable");

    // Set by hand, the fail mode needs no daemon at all.
    let nowhere = Arc::new(Client::unix("/nonexistent/sluiced.sock"));
    let layer = RateLimitLayer::new(nowhere, "fw").fail(FailMode::Closed);
    assert_eq!(
        router(layer).oneshot(request()).await.unwrap().status(),
        503
    );
}

#[tokio::test]
async fn a_leaky_bucket_delay_is_waited_before_the_service_runs() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    // `leaky`: 10 per 10 s, a queue of 3: each admitted request waits its turn, 1 s apart.
    let layer = RateLimitLayer::from_daemon(Arc::new(d.unix()), "leaky")
        .await
        .unwrap();
    let router = axum::Router::new()
        .route("/orders", axum::routing::get(|| async { "orders" }))
        .layer(layer);
    let request = || {
        let mut request = http::Request::get("/orders").body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(ClientIp([10, 0, 0, 7].into()));
        request
    };
    let started = std::time::Instant::now();
    let first = router.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(started.elapsed() < std::time::Duration::from_millis(900));
    let started = std::time::Instant::now();
    let second = router.oneshot(request()).await.unwrap();
    assert_eq!(second.status(), 200);
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(950),
        "{waited:?}"
    );
}
