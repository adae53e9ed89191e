//! Real Traefik (`forwardAuth` to the daemon's TCP listener) in front of a tiny app: the
//! `examples/traefik/` files as they are, with free loopback ports in place of the example's,
//! and the default policies of `examples/sluice.toml`. Traefik puts sluiced's headers on the
//! request the app receives, not on the client's answer, so the app here echoes them, as the
//! example says an app does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_client::Client;
use sluice_testkit::{Traefik, free_port};
use sluice_tests::{replace_once, repo_file};
use tokio::task::JoinHandle;

use crate::through_proxy::{LIMIT, Proxied, daemon, get, rotating_ids};

/// An app answering `200 app` with the rate-limit headers of its request copied onto the
/// answer; counts the requests it received.
struct EchoApp {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl EchoApp {
    async fn start() -> EchoApp {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = axum::Router::new().fallback(move |request: http::HeaderMap| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut echoed = http::HeaderMap::new();
                for (name, value) in &request {
                    let name_text = name.as_str();
                    if name_text.starts_with("x-ratelimit-") || name_text.starts_with("ratelimit") {
                        echoed.append(name.clone(), value.clone());
                    }
                }
                (echoed, "app")
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        EchoApp { addr, hits, task }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for EchoApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn through_traefik_the_limit_holds_against_rotating_ids_and_the_headers_reach_the_app() {
    let daemon = daemon().await;
    let app = EchoApp::start().await;
    let port = free_port();
    let mut static_config = repo_file("examples/traefik/traefik.yml");
    static_config = replace_once(
        &static_config,
        "address: \":8088\"",
        &format!("address: \":{port}\""),
    );
    let mut dynamic = repo_file("examples/traefik/dynamic.yml");
    dynamic = replace_once(
        &dynamic,
        "address: \"http://127.0.0.1:8080/v1/forward-auth/public\"",
        &format!("address: \"http://{}/v1/forward-auth/public\"", daemon.tcp),
    );
    dynamic = replace_once(
        &dynamic,
        "url: \"http://127.0.0.1:8000\"",
        &format!("url: \"http://{}\"", app.addr),
    );
    let traefik = tokio::task::spawn_blocking(move || {
        Traefik::start(&static_config, "dynamic.yml", &dynamic, port)
    })
    .await
    .unwrap();
    let client = Client::tcp(format!("127.0.0.1:{port}"));
    // The entry point opens before the file provider's router is in place; until then
    // Traefik answers 404 without asking sluiced. The first other answer spent one request.
    let start = std::time::Instant::now();
    loop {
        let probe = get(&client, &[]).await;
        if probe.status != 404 {
            assert_eq!(probe.status, 200, "{}", traefik.log());
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "Traefik never routed: {}",
            traefik.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let hits = || app.hits();
    let log = || traefik.log();
    let proxied = Proxied {
        daemon: &daemon,
        client: &client,
        app_hits: &hits,
        log: &log,
    };
    let passed = rotating_ids(&proxied, 1, 150).await;
    assert_eq!(
        passed,
        LIMIT - 1,
        "150 requests with rotating ids after the probe"
    );
}
