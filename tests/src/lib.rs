//! Shared helpers of the end-to-end tests in `tests/`: the policies they use, request and
//! header helpers, a counting upstream for the proxy tests. The daemon itself is the library's
//! own harness, [`Daemon`] (`sluice_server::testing`).

// Only tests use this crate: a failed set-up should panic the test that asked for it.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use sluice_api::CheckRequest;
use tokio::task::JoinHandle;

pub mod region;

pub use sluice_server::testing::{Daemon, T0};

/// The `/metrics` text of `d`, asked over its Unix socket.
pub async fn metrics_text(d: &Daemon) -> String {
    let raw = d
        .unix()
        .send(http::Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    String::from_utf8(raw.body.to_vec()).unwrap()
}

/// Policies the tests use; each test picks its own keys so tests never share state.
pub const TEST_CONFIG: &str = r#"
[policies.fw]
algorithm = "fixed_window"
limit = 5
window = "10s"

[policies.log]
algorithm = "sliding_window_log"
limit = 5
window = "10s"

[policies.counter]
algorithm = "sliding_window_counter"
limit = 5
window = "10s"

[policies.public]
algorithm = "token_bucket"
limit = 100
window = "60s"
burst = 100
tiers = { free = { limit = 2 }, pro = { limit = 1000, burst = 2000 } }
endpoints = ["/orders"]

[policies.leaky]
algorithm = "leaky_bucket"
limit = 10
window = "10s"
burst = 3

[policies.gcra]
algorithm = "gcra"
limit = 10
window = "10s"
burst = 2

[policies.shadowed]
algorithm = "fixed_window"
limit = 1
window = "10s"
shadow = true

[policies.exact_fw]
algorithm = "fixed_window"
limit = 100
window = "1h"

[policies.exact_log]
algorithm = "sliding_window_log"
limit = 100
window = "1h"
"#;

/// A check of cost 1.
pub fn req(policy: &str, key: &str) -> CheckRequest {
    CheckRequest::new(policy, key)
}

/// A check of `cost`.
pub fn req_cost(policy: &str, key: &str, cost: u64) -> CheckRequest {
    CheckRequest {
        cost: Some(cost),
        ..CheckRequest::new(policy, key)
    }
}

/// A header as text, panicking (in tests) when absent.
pub fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("header {name} missing"))
        .to_str()
        .unwrap()
}

/// Asserts the decision headers of an allowed answer, as a daemon or a proxy in front of it
/// passes them on: the limit, what is left, the policy's `RateLimit-Policy`, no Retry-After.
pub fn assert_allowed_headers(
    headers: &http::HeaderMap,
    limit: u64,
    remaining: u64,
    ratelimit_policy: &str,
) {
    assert_eq!(header(headers, "x-ratelimit-limit"), limit.to_string());
    assert_eq!(
        header(headers, "x-ratelimit-remaining"),
        remaining.to_string()
    );
    assert_eq!(header(headers, "ratelimit-policy"), ratelimit_policy);
    assert!(headers.get("retry-after").is_none());
}

/// Requests admitted when `clients` concurrent clients (half over the socket, half over TCP:
/// the listeners share one limiter) each send `each` checks of `policy` for one hot key.
/// A degraded (fail-open) answer fails the test: it would count as admitted.
pub async fn admitted(d: &Daemon, policy: &str, clients: usize, each: usize) -> usize {
    let mut tasks = Vec::new();
    for i in 0..clients {
        let client = std::sync::Arc::new(if i % 2 == 0 { d.unix() } else { d.tcp() });
        let policy = policy.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut allowed = 0;
            for _ in 0..each {
                let out = client.check(&req(&policy, "hot")).await.unwrap();
                assert!(out.status == 200 || out.status == 429, "{}", out.status);
                assert!(
                    !out.body.degraded,
                    "{policy}: a healthy backend never degrades"
                );
                allowed += usize::from(out.status == 200);
            }
            allowed
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total
}

/// A tiny upstream app for the proxy tests: answers every request `200 app` and counts them,
/// so a test can tell which requests the proxy let through.
#[derive(Debug)]
pub struct Upstream {
    pub addr: SocketAddr,
    pub hits: Arc<std::sync::atomic::AtomicUsize>,
    task: JoinHandle<()>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                "app"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Upstream { addr, hits, task }
    }

    /// Requests that reached the app.
    pub fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a file or directory of the repository (`examples/...`) is, by its path from the root.
pub fn repo_path(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// The text of a file of the repository (`examples/...`), by its path from the root.
pub fn repo_file(path: &str) -> String {
    let full = repo_path(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// `text` with `from` replaced by `to`, which must occur exactly once (so a template and the
/// test cannot drift apart silently).
pub fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once");
    text.replacen(from, to, 1)
}
