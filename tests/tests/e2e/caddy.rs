//! Real Caddy (`forward_auth` to the daemon's Unix socket) in front of a tiny app: the
//! `examples/caddy/Caddyfile` file as it is, with the test's socket and free loopback ports in
//! place of the example's, and the default policies of `examples/sluice.toml`.

use sluice_client::Client;
use sluice_testkit::{Caddy, free_port};
use sluice_tests::{Upstream, replace_once, repo_file};

use crate::through_proxy::{LIMIT, Proxied, daemon, rotating_ids};

#[tokio::test]
async fn through_caddy_the_limit_holds_against_rotating_ids_and_the_headers_reach_the_client() {
    let daemon = daemon().await;
    let app = Upstream::start().await;
    let port = free_port();
    let mut config = repo_file("examples/caddy/Caddyfile");
    config = replace_once(
        &config,
        "forward_auth unix//tmp/sluiced.sock {",
        &format!("forward_auth unix/{} {{", daemon.socket.display()),
    );
    config = replace_once(&config, ":8088 {", &format!(":{port} {{"));
    config = replace_once(
        &config,
        "reverse_proxy 127.0.0.1:8000",
        &format!("reverse_proxy {}", app.addr),
    );
    let caddy = tokio::task::spawn_blocking(move || Caddy::start(&config, port))
        .await
        .unwrap();
    let client = Client::tcp(format!("127.0.0.1:{port}"));
    let hits = || app.hits();
    let log = || caddy.log();
    let proxied = Proxied {
        daemon: &daemon,
        client: &client,
        app_hits: &hits,
        log: &log,
    };
    let passed = rotating_ids(&proxied, 0, 150).await;
    assert_eq!(passed, LIMIT, "150 requests with rotating ids");
}
