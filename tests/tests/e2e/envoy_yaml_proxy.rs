//! Real Envoy in front of an app, asking a real daemon that reads envoyproxy/ratelimit YAML:
//! `examples/envoy-ratelimit/envoy.yaml` and its `config/` as they are (free loopback ports in
//! place of the example's). The three-level tree of `edge.yaml` (client address, path, a
//! header) gives each route its limit, Envoy's 429 carries sluice's body and headers, and the
//! token flow (ask before, count the response's tokens after) is enforced on a YAML limit.

use std::time::{Duration, Instant};

use sluice_client::Client;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sluice_server::rls::pb::RateLimitRequest;
use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;
use sluice_testkit::{Envoy, free_port};
use sluice_tests::{Daemon, header, replace_once, repo_file, repo_path};

/// An app answering 200 with `x-tokens-used` set to the request's `x-tokens` (what an LLM
/// gateway reports after the fact).
async fn token_app() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().fallback(|headers: http::HeaderMap| async move {
        let used = headers
            .get("x-tokens")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("1")
            .to_owned();
        ([("x-tokens-used", used)], "app")
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, task)
}

struct Stack {
    daemon: Daemon,
    _app: tokio::task::JoinHandle<()>,
    _envoy: Envoy,
    client: Client,
}

async fn stack() -> Stack {
    let toml = replace_once(
        &repo_file("examples/envoy-ratelimit/sluice.toml"),
        "envoy_config = \"config\"",
        &format!(
            "envoy_config = {:?}",
            repo_path("examples/envoy-ratelimit/config")
                .display()
                .to_string()
        ),
    );
    let daemon = Daemon::start(&toml).await;
    let (app, task) = token_app().await;
    let (listen, admin) = (free_port(), free_port());
    let mut config = repo_file("examples/envoy-ratelimit/envoy.yaml");
    for (from, to) in [
        (10000, listen),
        (9901, admin),
        (8000, app.port()),
        (8081, daemon.grpc.port()),
    ] {
        config = replace_once(
            &config,
            &format!("port_value: {from} }}"),
            &format!("port_value: {to} }}"),
        );
    }
    // A loaded machine running a debug build may take longer than the example's budget; past
    // it Envoy would let requests through unchecked, which is not what is under test.
    config = replace_once(&config, "timeout: 0.25s", "timeout: 5s");
    let envoy = tokio::task::spawn_blocking(move || Envoy::start(&config, admin))
        .await
        .unwrap();
    Stack {
        daemon,
        _app: task,
        _envoy: envoy,
        client: Client::tcp(format!("127.0.0.1:{listen}")),
    }
}

impl Stack {
    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> sluice_client::RawResponse {
        self.client
            .send(http::Method::GET, path, headers, "")
            .await
            .unwrap()
    }

    /// The statuses of `n` requests to `path` from `address` (X-Forwarded-For).
    async fn statuses(
        &self,
        path: &str,
        address: &str,
        extra: &[(&str, &str)],
        n: usize,
    ) -> Vec<u16> {
        let mut headers = vec![("x-forwarded-for", address)];
        headers.extend_from_slice(extra);
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.get(path, &headers).await.status);
        }
        out
    }
}

#[tokio::test]
async fn each_route_gets_the_limit_of_its_level_of_the_tree() {
    let s = stack().await;
    // /api/…: 2 a second per address and path, below the address's 3 a minute: the third
    // request is denied by the path level (its headers are that limit's).
    assert_eq!(
        s.statuses("/api/orders", "10.1.0.1", &[], 2).await,
        [200, 200]
    );
    let denied = s
        .get("/api/orders", &[("x-forwarded-for", "10.1.0.1")])
        .await;
    assert_eq!(denied.status, 429);
    assert_eq!(header(&denied.headers, "x-ratelimit-limit"), "2");
    assert_eq!(header(&denied.headers, "x-ratelimit-remaining"), "0");
    assert!(!header(&denied.headers, "retry-after").is_empty());
    assert_eq!(
        header(&denied.headers, "content-type"),
        "application/problem+json"
    );
    let body: serde_json::Value = serde_json::from_slice(&denied.body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded");
    assert_eq!(
        body["violated-policies"],
        serde_json::json!(["edge.remote_address.path__api__"])
    );

    // Another path: 4 a day, so the address's 3 a minute decides.
    let other = s.statuses("/other", "10.1.0.2", &[], 4).await;
    assert_eq!(other, [200, 200, 200, 429]);
    let third = s.get("/other", &[("x-forwarded-for", "10.1.0.3")]).await;
    assert_eq!(header(&third.headers, "x-ratelimit-limit"), "3");
    assert_eq!(header(&third.headers, "x-ratelimit-remaining"), "2");

    // The third level: the gold tenant's 5 an hour is named; any other tenant has 1.
    let tin = [("x-tenant", "tin")];
    assert_eq!(s.statuses("/api/x", "10.1.0.4", &tin, 2).await, [200, 429]);
    let gold = [("x-tenant", "gold")];
    assert_eq!(s.statuses("/api/x", "10.1.0.5", &gold, 2).await, [200, 200]);

    // /health is unlimited at the path level: only the address's 3 a minute applies.
    assert_eq!(
        s.statuses("/health", "10.1.0.6", &[], 4).await,
        [200, 200, 200, 429]
    );
}

/// `limit_remaining` of `user` as sluiced has it now: a question (hits_addend 0) sent
/// straight to its RLS, counting nothing.
async fn tokens_left(s: &Stack, user: &str) -> u32 {
    let mut rls = RateLimitServiceClient::connect(format!("http://{}", s.daemon.grpc))
        .await
        .unwrap();
    let ask = RateLimitRequest {
        domain: "edge".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".to_owned(),
                value: user.to_owned(),
            }],
            hits_addend: Some(0),
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    };
    rls.should_rate_limit(ask)
        .await
        .unwrap()
        .into_inner()
        .statuses[0]
        .limit_remaining
}

/// Polls until `user` has `left` tokens (Envoy counts after the response is sent).
async fn until_left(s: &Stack, user: &str, left: u32) {
    let started = Instant::now();
    while tokens_left(s, user).await != left {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{user} never had {left} tokens left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_token_flow_asks_before_and_counts_the_response_after() {
    let s = stack().await;
    let llm = |tokens: &'static str| [("x-user-id", "ann"), ("x-tokens", tokens)];
    // 100 tokens a minute: the request-time question consumes nothing; the response's 60 are
    // counted when the stream is done.
    assert_eq!(s.get("/llm", &llm("60")).await.status, 200);
    until_left(&s, "ann", 40).await;
    // 40 left: asked, allowed; the response's 60 go beyond the limit and are counted all the
    // same, as envoyproxy/ratelimit counts.
    assert_eq!(s.get("/llm", &llm("60")).await.status, 200);
    until_left(&s, "ann", 0).await;
    // Nothing left: the question is answered OVER_LIMIT, so Envoy denies.
    let denied = s.get("/llm", &llm("1")).await;
    assert_eq!(denied.status, 429);
    assert_eq!(header(&denied.headers, "x-ratelimit-limit"), "100");
    // Another user is untouched.
    assert_eq!(
        s.get("/llm", &[("x-user-id", "bob"), ("x-tokens", "5")])
            .await
            .status,
        200
    );
}
