//! Real nginx (`auth_request` to the daemon's Unix socket) in front of a tiny app: the
//! `examples/nginx/nginx.conf` file as it is, with the test's socket and free loopback ports
//! in place of the example's, and the default policies of `examples/sluice.toml`.

use sluice_client::Client;
use sluice_testkit::{Nginx, free_port};
use sluice_tests::{Daemon, Upstream, assert_allowed_headers, header, replace_once, repo_file};

struct Stack {
    _daemon: Daemon,
    app: Upstream,
    nginx: Nginx,
    client: Client,
}

async fn stack() -> Stack {
    let daemon = Daemon::start(&repo_file("examples/sluice.toml")).await;
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
    Stack {
        _daemon: daemon,
        app,
        nginx,
        client: Client::tcp(format!("127.0.0.1:{port}")),
    }
}

impl Stack {
    async fn get(&self, headers: &[(&str, &str)]) -> sluice_client::RawResponse {
        self.client
            .send(http::Method::GET, "/orders?id=7", headers, "")
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn through_nginx_the_limit_holds_and_the_headers_reach_the_client() {
    let s = stack().await;
    let ann = [("x-user-id", "ann")];
    // `public`: a token bucket of 100, refilled 100 per 60 s.
    for left in (0..100).rev() {
        let answer = s.get(&ann).await;
        assert_eq!(answer.status, 200, "{}", s.nginx.log());
        assert_eq!(&answer.body[..], b"app");
        assert_allowed_headers(&answer.headers, 100, left, "\"public\";q=100;w=60");
        assert!(header(&answer.headers, "ratelimit").starts_with("\"public\";r="));
    }
    let denied = s.get(&ann).await;
    assert_eq!(denied.status, 429, "{}", s.nginx.log());
    assert_eq!(header(&denied.headers, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&denied.headers, "retry-after"), "1");
    assert_eq!(header(&denied.headers, "ratelimit"), "\"public\";r=0;t=1");
    let body: serde_json::Value = serde_json::from_slice(&denied.body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded", "{body}");
    assert_eq!(
        (body["remaining"].as_u64(), body["retry_after"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        s.app.hits(),
        100,
        "the denied request never reached the app"
    );
    // Without `[forward_auth] identity_header` a client-sent X-User-Id names nothing: a new
    // id is the same caller (its address), so rotating ids cannot buy more requests.
    let bob = s.get(&[("x-user-id", "bob")]).await;
    assert_eq!(bob.status, 429);
    let anonymous = s.get(&[]).await;
    assert_eq!(anonymous.status, 429);
    assert_eq!(s.app.hits(), 100);
}
