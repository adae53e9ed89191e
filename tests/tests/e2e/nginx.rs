//! Real nginx (`auth_request` to the daemon's Unix socket) in front of a tiny app: the
//! `examples/nginx/nginx.conf` file as it is, with the test's socket and free loopback ports
//! in place of the example's, and the default policies of `examples/sluice.toml`.

use sluice_api::{CheckResponse, Problem};
use sluice_client::Client;
use sluice_testkit::{Nginx, free_port};
use sluice_tests::{Upstream, header, replace_once, repo_file};

use crate::through_proxy::{LIMIT, Proxied, daemon, get, rotating_ids};

#[tokio::test]
async fn through_nginx_the_limit_holds_against_rotating_ids_and_the_headers_reach_the_client() {
    let daemon = daemon().await;
    let app = Upstream::start().await;
    let port = free_port();
    let mut config = repo_file("examples/nginx/nginx.conf");
    config = replace_once(
        &config,
        "server unix:/tmp/sluiced.sock;",
        &format!("server unix:{};", daemon.socket.display()),
    );
    config = replace_once(
        &config,
        "listen 127.0.0.1:8088;",
        &format!("listen 127.0.0.1:{port};"),
    );
    config = replace_once(
        &config,
        "server 127.0.0.1:8000;",
        &format!("server {};", app.addr),
    );
    let nginx = tokio::task::spawn_blocking(move || Nginx::start(&config, port))
        .await
        .unwrap();
    let client = Client::tcp(format!("127.0.0.1:{port}"));
    let hits = || app.hits();
    let log = || nginx.log();
    let proxied = Proxied {
        daemon: &daemon,
        client: &client,
        app_hits: &hits,
        log: &log,
    };
    let passed = rotating_ids(&proxied, 0, 150).await;
    assert_eq!(passed, LIMIT, "150 requests with rotating ids");
    // The 429 is nginx's own page (auth_request drops sluiced's body), built from sluiced's
    // headers into the check API's problem document: the very body of a denial.
    let denied = get(&client, &[]).await;
    assert_eq!(denied.status, 429, "{}", nginx.log());
    assert_eq!(header(&denied.headers, "ratelimit"), "\"public\";r=0;t=1");
    assert_eq!(
        header(&denied.headers, "content-type"),
        "application/problem+json"
    );
    let number = |name: &str| -> u64 { header(&denied.headers, name).parse().unwrap() };
    let check_api_denial = CheckResponse {
        allowed: false,
        policy: "public".into(),
        limit: number("x-ratelimit-limit"),
        remaining: 0,
        reset: number("x-ratelimit-reset"),
        retry_after: Some(number("retry-after")),
        delay_ms: 0,
        degraded: false,
        problem: Some(Problem::quota_exceeded(vec!["public".into()])),
        debt: None,
    };
    let body: serde_json::Value = serde_json::from_slice(&denied.body).unwrap();
    assert_eq!(body, serde_json::to_value(&check_api_denial).unwrap());
    assert_eq!(
        (body["limit"].as_u64(), body["retry_after"].as_u64()),
        (Some(LIMIT), Some(1))
    );
}
