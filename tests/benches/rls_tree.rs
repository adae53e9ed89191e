//! RLS matching benchmark (not a test): what a descriptor tree of envoyproxy/ratelimit YAML
//! costs beside a one-key rule. One in-process daemon (memory backend, so matching is not
//! hidden behind a Redis round trip) serves three domains; gRPC clients send
//! `ShouldRateLimit` as fast as they are answered, each shape in turn, for the same time, in
//! rounds that alternate the shapes (so drift of the machine falls on each alike):
//!
//! - `rule`: a `[[rls.descriptors]]` one-key rule (`remote_address`), sluice's own mapping;
//! - `one-key`: the YAML's one-key limit (`remote_address` alone);
//! - `tree`: the YAML's three-level tree (remote address, then a path among 20 values and
//!   wildcards, then a tenant header among 10), a descriptor of three entries.
//!
//! Each shape's requests are built before the rounds (one per client address, so each shape
//! counts on as many keys) and the clients cycle through them: formatting a request's values is
//! the client's work, not the daemon's matching, and would cost the tree's three entries more
//! than the others' one in the CPU measured. Every key is fresh enough never to be denied
//! (limits far above the load). Prints a Markdown table, and the ratio tree ÷ one-key rule
//! twice: of checks per second, and of checks per CPU second of the process (daemon and
//! clients, from `/proc/self/stat`). On a machine other work shares, checks per second swing
//! with what the others take in each round; the CPU a check costs does not, and it is what
//! checks per second are once the daemon has the cores.
//!
//! Run: `cargo bench -p sluice-tests --bench rls_tree` (about 50 s). `PROFILE=tree` (or `rule`,
//! `one-key`) runs one shape alone for 20 s, for `perf record` to watch.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;
use sluice_server::rls::pb::{RateLimitRequest, rate_limit_response::Code};
use sluice_tests::Daemon;

/// Clients sending at once (HTTP/2 streams over one connection each).
const CLIENTS: usize = 16;
const ROUND: Duration = Duration::from_secs(3);
const ROUNDS: usize = 5;
/// Distinct client addresses: keys enough that no shard is a hot spot.
const ADDRESSES: u64 = 10_000;
/// Requests of a shape, built before the rounds and cycled through by the clients: one per
/// client address, so each shape counts on as many keys. Formatting a request's values is the
/// client's work, not the daemon's matching (and costs the tree's three entries more than
/// one), so it is not done while the CPU is measured.
fn pool(shape: Shape) -> Arc<Vec<RateLimitRequest>> {
    Arc::new((0..ADDRESSES).map(|n| shape.request(n)).collect())
}

/// The tree: 20 paths per address (exact values and wildcards) and 10 tenants per path.
fn yaml() -> String {
    let mut paths = String::new();
    for i in 0..16 {
        paths.push_str(&format!(
            "      - key: path\n        value: /exact/{i}\n        rate_limit: {{ unit: second, requests_per_unit: 1000000000 }}\n        descriptors:\n{}",
            tenants()
        ));
    }
    for prefix in ["/api/", "/static/", "/v2/"] {
        paths.push_str(&format!(
            "      - key: path\n        value: {prefix}*\n        rate_limit: {{ unit: second, requests_per_unit: 1000000000 }}\n        descriptors:\n{}",
            tenants()
        ));
    }
    paths.push_str(&format!(
        "      - key: path\n        rate_limit: {{ unit: second, requests_per_unit: 1000000000 }}\n        descriptors:\n{}",
        tenants()
    ));
    format!(
        "domain: tree\ndescriptors:\n  - key: remote_address\n    rate_limit: {{ unit: second, requests_per_unit: 1000000000 }}\n    descriptors:\n{paths}"
    )
}

/// Each path's tenant values with a limit of their own (`TENANT_VALUES`, 9 unless set; the
/// others fall back to the key-only `tenant` limit). Fewer, and the tree has as many levels
/// and entries per request but fewer limits (each a policy): 9 gives 221 limits, 0 gives 41.
fn tenants() -> String {
    let values: u32 = std::env::var("TENANT_VALUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let mut out = String::new();
    for t in 0..values {
        out.push_str(&format!(
            "          - key: tenant\n            value: t{t}\n            rate_limit: {{ unit: hour, requests_per_unit: 1000000000 }}\n"
        ));
    }
    out.push_str(
        "          - key: tenant\n            rate_limit: { unit: hour, requests_per_unit: 1000000000 }\n",
    );
    out
}

const ONE_KEY: &str = "domain: one\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 1000000000 }\n";

const RULE: &str = r#"
[policies.per_ip]
algorithm = "fixed_window"
limit = 1000000000
window = "1s"
lease = "off"

[[rls.descriptors]]
domain = "rule"
keys = ["remote_address"]
policy = "per_ip"
key = "ip:{remote_address}"
"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Rule,
    OneKey,
    Tree,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Rule => "rule ([[rls.descriptors]], one key)",
            Shape::OneKey => "one-key (YAML)",
            Shape::Tree => "tree (YAML, 3 levels)",
        }
    }

    fn request(self, n: u64) -> RateLimitRequest {
        let a = n % ADDRESSES;
        let address = format!("10.0.{}.{}", a / 250, a % 250);
        let mut entries = vec![("remote_address", address)];
        let domain = match self {
            Shape::Rule => "rule",
            Shape::OneKey => "one",
            Shape::Tree => {
                // Paths that hit an exact value, a wildcard and the key alone in turn.
                let path = match n % 3 {
                    0 => format!("/exact/{}", n % 16),
                    1 => format!("/api/orders/{}", n % 100),
                    _ => format!("/other/{}", n % 100),
                };
                entries.push(("path", path));
                entries.push(("tenant", format!("t{}", n % 12)));
                "tree"
            }
        };
        RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: vec![RateLimitDescriptor {
                entries: entries
                    .into_iter()
                    .map(|(key, value)| Entry {
                        key: key.to_owned(),
                        value,
                    })
                    .collect(),
                ..RateLimitDescriptor::default()
            }],
            hits_addend: 0,
        }
    }
}

/// Name of the client runtime's threads, so their CPU can be told from the daemon's.
const CLIENT_THREADS: &str = "bench-client";

/// CPU time (user + system, in clock ticks of 1/100 s) of the process's threads: all of them,
/// and the daemon's alone (every thread but the clients').
fn cpu_ticks() -> (u64, u64) {
    let (mut all, mut daemon) = (0, 0);
    for (name, seconds) in sluice_bench::thread_cpu_seconds() {
        let ticks = (seconds * 100.0).round() as u64;
        all += ticks;
        if name != CLIENT_THREADS {
            daemon += ticks;
        }
    }
    (all, daemon)
}

/// Requests answered in `length` by `CLIENTS` clients (on the `clients` runtime) sending
/// `shape`, and the CPU ticks the process, and the daemon alone, spent meanwhile.
async fn round(
    clients: &tokio::runtime::Handle,
    grpc: std::net::SocketAddr,
    shape: Shape,
    requests: &Arc<Vec<RateLimitRequest>>,
    length: Duration,
) -> (u64, u64, u64) {
    let started = cpu_ticks();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (done, stop, requests) = (done.clone(), stop.clone(), requests.clone());
        tasks.push(clients.spawn(async move {
            let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
                .await
                .unwrap();
            // Each client starts at its own place in the pool.
            let mut n = c * requests.len() / CLIENTS;
            while !stop.load(Ordering::Relaxed) {
                let request = requests[n % requests.len()].clone();
                let answer = client
                    .should_rate_limit(request)
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(answer.overall_code, i32::from(Code::Ok));
                assert!(
                    answer.statuses[0].current_limit.is_some(),
                    "{shape:?} matched nothing"
                );
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let ended = cpu_ticks();
    (
        done.load(Ordering::Relaxed),
        ended.0 - started.0,
        ended.1 - started.1,
    )
}

/// Checks per CPU second, from CPU clock ticks of /proc (USER_HZ: 100 on Linux).
fn per_cpu_second(done: u64, ticks: u64) -> f64 {
    done as f64 / (ticks.max(1) as f64 / 100.0)
}

#[tokio::main]
async fn main() {
    // The clients run on a runtime of their own, whose threads are named apart: the CPU the
    // daemon spends is then read alone (what a check costs the host Envoy sends it from).
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(CLIENT_THREADS)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tree.yaml"), yaml()).unwrap();
    std::fs::write(dir.path().join("one.yaml"), ONE_KEY).unwrap();
    let toml = format!(
        "[rls]\nenvoy_config = {:?}\n{RULE}",
        dir.path().display().to_string()
    );
    let daemon = Daemon::start(&toml).await;
    // Warm up every path (connections, allocator, key tables).
    let shapes = [Shape::Rule, Shape::OneKey, Shape::Tree];
    let pools = shapes.map(pool);
    // `PROFILE=rule|one-key|tree` runs that shape alone for 20 s, for a profiler to watch.
    if let Ok(only) = std::env::var("PROFILE") {
        let at = ["rule", "one-key", "tree"]
            .iter()
            .position(|name| *name == only)
            .expect("PROFILE is rule, one-key or tree");
        let length = Duration::from_secs(20);
        let (done, _, ticks) = round(
            clients.handle(),
            daemon.grpc,
            shapes[at],
            &pools[at],
            length,
        )
        .await;
        println!(
            "{}: {:.0} checks/s, {:.0} per CPU second of the daemon",
            shapes[at].name(),
            done as f64 / length.as_secs_f64(),
            per_cpu_second(done, ticks)
        );
        drop(daemon);
        clients.shutdown_background();
        return;
    }
    for (shape, requests) in shapes.iter().zip(&pools) {
        let warm = Duration::from_secs(1);
        round(clients.handle(), daemon.grpc, *shape, requests, warm).await;
    }
    // Per round and shape: checks answered, CPU ticks of the process, of the daemon.
    let mut rounds = vec![[(0u64, 0u64, 0u64); 3]; ROUNDS];
    for (r, measured) in rounds.iter_mut().enumerate() {
        // Alternate the order, so no shape always runs first.
        for i in 0..shapes.len() {
            let at = if r % 2 == 0 { i } else { shapes.len() - 1 - i };
            measured[at] =
                round(clients.handle(), daemon.grpc, shapes[at], &pools[at], ROUND).await;
        }
    }
    let seconds = (ROUND * ROUNDS as u32).as_secs_f64();
    let sum = |shape: usize, field: fn(&(u64, u64, u64)) -> u64| -> u64 {
        rounds.iter().map(|r| field(&r[shape])).sum()
    };
    println!(
        "| shape | checks/s | checks per CPU second (process) | checks per CPU second (daemon) |\n|---|---|---|---|"
    );
    for (i, shape) in shapes.iter().enumerate() {
        let done = sum(i, |m| m.0);
        println!(
            "| {} | {:.0} | {:.0} | {:.0} |",
            shape.name(),
            done as f64 / seconds,
            per_cpu_second(done, sum(i, |m| m.1)),
            per_cpu_second(done, sum(i, |m| m.2))
        );
    }
    // The tree against another shape, round by round (the two ran seconds apart, so a
    // spell of load from elsewhere falls on both), then the median of the rounds.
    let median_ratio = |of: usize, value: &dyn Fn(&(u64, u64, u64)) -> f64| -> f64 {
        let mut ratios: Vec<f64> = rounds
            .iter()
            .map(|r| value(&r[2]) / value(&r[of]))
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    };
    let ratios = |of: usize| {
        format!(
            "{:.3} of checks/s, {:.3} of checks per CPU second of the process, {:.3} of the daemon",
            median_ratio(of, &|m| m.0 as f64),
            median_ratio(of, &|m| per_cpu_second(m.0, m.1)),
            median_ratio(of, &|m| per_cpu_second(m.0, m.2))
        )
    };
    println!("\nMedians over {ROUNDS} rounds of the ratio in each round:");
    println!("tree ÷ one-key rule ([[rls.descriptors]]): {}", ratios(0));
    println!("tree ÷ one-key (YAML): {}", ratios(1));
    drop(daemon);
    clients.shutdown_background();
}
