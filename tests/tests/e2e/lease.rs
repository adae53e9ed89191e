//! Leases and the denied cache on a real Redis: four daemons on one server, 32 concurrent
//! callers each on hot keys (and on a zipf-like key set), never admit more than the limit in
//! any window and, with demand
//! above it, no fewer than the limit less the units the fleet can hold; a limit raised
//! through the admin API lifts the denied cache's denials on every daemon; with Redis
//! stopped (SIGSTOP), a key holding a lease keeps admitting from its block while the others
//! meet their fail mode.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::Method;
use sluice_server::service::limiter::{CheckInput, LimitError};
use sluice_testkit::{RedisCluster, RedisServer};
use sluice_tests::Daemon;

const TOKEN: &str = "s3cret-token";

fn wall_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn config(redis: &RedisServer, policies: &str) -> String {
    backend(
        &format!("kind = \"redis\"\nurl = \"{}\"", redis.url()),
        policies,
    )
}

fn backend(target: &str, policies: &str) -> String {
    format!("[backend]\n{target}\ntimeout = \"2s\"\n[admin]\ntoken = \"{TOKEN}\"\n{policies}")
}

/// Where the four daemons of [`four_daemons_on_hot_keys`] keep their counters.
enum Shared {
    Redis(RedisServer),
    Cluster(RedisCluster),
}

impl Shared {
    fn config(&self) -> String {
        match self {
            Shared::Redis(redis) => config(redis, HOT),
            Shared::Cluster(cluster) => {
                let nodes: Vec<String> =
                    cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
                backend(
                    &format!("kind = \"cluster\"\nnodes = [{}]", nodes.join(", ")),
                    HOT,
                )
            }
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Shared::Redis(_) => "redis",
            Shared::Cluster(_) => "cluster",
        }
    }
}

fn input<'a>(policy: &'a str, key: &'a str, tier: Option<&'a str>) -> CheckInput<'a> {
    CheckInput {
        policy,
        key,
        cost: None,
        tier,
        endpoint: None,
        mode: sluice_core::Mode::Consume,
        detail: None,
    }
}

/// The value of the series `name{labels}` in `d`'s metrics (0 when absent).
fn metric(d: &Daemon, series: &str) -> f64 {
    let text = d.app.limiter.metrics().encode();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

const HOT: &str = r#"
[policies.hot]
algorithm = "fixed_window"
limit = 800
window = "1s"

[policies.hot_swc]
algorithm = "sliding_window_counter"
limit = 800
window = "1s"
"#;
const LIMIT: u64 = 800;
/// Each daemon holds at most limit / 80 unspent units of a key (the README's rule).
const FLEET_HOLDS: u64 = 4 * (LIMIT / 80);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_daemons_never_admit_more_than_the_limit_in_a_window_and_lose_at_most_the_held_units()
{
    four_daemons_on_hot_keys("hot", Shared::Redis(RedisServer::start())).await;
}

/// The same on a Redis Cluster: blocks taken and given back on the key's master.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_daemons_on_a_cluster_never_admit_more_than_the_limit_in_a_window() {
    four_daemons_on_hot_keys("hot", Shared::Cluster(RedisCluster::start())).await;
}

/// sliding_window_counter: never more than the limit in a fixed window either (the current
/// window's count alone is under the sliding sum); leases and the denied cache answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_daemons_lease_sliding_window_counter_within_the_limit() {
    four_daemons_on_hot_keys("hot_swc", Shared::Redis(RedisServer::start())).await;
}

/// A zipf-like key set (64 keys, key `i` drawn about `1/(i+1)` as often): a few keys hot and
/// leased, many cold and checked on the backend, the middle ones crossing between; every key
/// stays within its limit in every window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_daemons_on_a_zipf_key_set_never_admit_more_than_the_limit() {
    four_daemons_on("hot", Shared::Redis(RedisServer::start()), Spread::Zipf(64)).await;
}

/// Which keys the callers check.
#[derive(Clone, Copy)]
enum Spread {
    /// Two keys, alternately: both far over their limit.
    Hot,
    /// `n` keys, key `i` drawn about `1/(i+1)` as often as key 0.
    Zipf(usize),
}

impl Spread {
    /// The key of the caller's `n`-th check.
    fn key(self, n: usize) -> usize {
        match self {
            Spread::Hot => n % 2,
            Spread::Zipf(keys) => {
                // n hashed to a uniform u in [0, 1), then i = floor(keys^u) - 1: P(i) ~ 1/(i+1).
                let h = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
                #[allow(clippy::cast_precision_loss)]
                let u = h as f64 / (1u64 << 53) as f64;
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let i = ((keys as f64).powf(u) as usize).saturating_sub(1);
                i.min(keys - 1)
            }
        }
    }
}

/// Four daemons on one Redis, 32 callers each on two hot keys of `policy` for 3.5 s.
async fn four_daemons_on_hot_keys(policy: &'static str, shared: Shared) {
    four_daemons_on(policy, shared, Spread::Hot).await;
}

/// Four daemons on one backend, 32 callers each on the keys of `spread` for 3.5 s.
async fn four_daemons_on(policy: &'static str, shared: Shared, spread: Spread) {
    let fixed = policy == "hot";
    let mut daemons = Vec::new();
    for _ in 0..4 {
        daemons.push(Arc::new(Daemon::with_wall_clock(&shared.config()).await));
    }
    // (key, window index) -> admitted; the window is the one the answer's reset ends.
    let admitted: Arc<Mutex<HashMap<(usize, u64), u64>>> = Arc::default();
    let tried: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
    let until = Instant::now() + Duration::from_millis(3_500);
    let mut callers = Vec::new();
    for (d, daemon) in daemons.iter().enumerate() {
        for c in 0..32 {
            let daemon = daemon.clone();
            let admitted = admitted.clone();
            let tried = tried.clone();
            callers.push(tokio::spawn(async move {
                let mut n = d * 32 + c;
                while Instant::now() < until {
                    n += 1;
                    let key = spread.key(n);
                    let name = format!("tenant:{key}");
                    let now = wall_ms();
                    let v = daemon
                        .app
                        .limiter
                        .check(&input(policy, &name, None), now)
                        .await
                        .unwrap();
                    assert!(!v.degraded, "Redis is up");
                    *tried.lock().unwrap().entry(wall_ms() / 1_000).or_default() += 1;
                    if v.allowed {
                        // fixed_window answers its window's end as reset; the sliding window's
                        // block is used within the window of the daemon's now.
                        let window = if fixed {
                            v.decision.reset_ms / 1_000 - 1
                        } else {
                            now / 1_000
                        };
                        *admitted.lock().unwrap().entry((key, window)).or_default() += 1;
                    }
                }
            }));
        }
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let admitted = admitted.lock().unwrap().clone();
    let attempts = tried.lock().unwrap().clone();
    let windows: Vec<u64> = {
        let mut w: Vec<u64> = admitted.keys().map(|(_, w)| *w).collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    assert!(windows.len() >= 3, "{windows:?}");
    for (&(key, window), &n) in &admitted {
        assert!(n <= LIMIT, "key {key} window {window}: {n} admitted");
    }
    // The windows the run covered whole (not its first and last), with demand above the limit
    // (fixed_window: a sliding window admits less when the previous window was full).
    let hot_only = matches!(spread, Spread::Hot);
    for &window in windows[1..windows.len() - 1]
        .iter()
        .filter(|_| fixed && hot_only)
    {
        for key in 0..2 {
            let n = admitted.get(&(key, window)).copied().unwrap_or(0);
            assert!(
                n >= LIMIT - FLEET_HOLDS,
                "key {key} window {window}: {n} admitted, under {LIMIT} - {FLEET_HOLDS}: {admitted:?} {attempts:?}"
            );
        }
    }
    let local: f64 = daemons
        .iter()
        .flat_map(|d| {
            ["lease", "denied_cache"].map(|source| {
                let series = format!(
                    "rate_limit_local_decisions_total{{policy=\"{policy}\",source=\"{source}\"}}"
                );
                metric(d, &series)
            })
        })
        .sum();
    let calls: f64 = daemons
        .iter()
        .map(|d| {
            let series = format!(
                "rate_limit_lease_calls_total{{backend=\"{}\"}}",
                shared.label()
            );
            metric(d, &series)
        })
        .sum();
    assert!(
        local > 0.0 && calls > 0.0,
        "local {local}, lease calls {calls}"
    );
}

const TIGHT: &str = r#"
[policies.tight]
algorithm = "fixed_window"
limit = 2
window = "1h"
tiers = { pro = { limit = 2 } }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_limit_lifts_the_denied_cache_on_every_daemon() {
    let redis = RedisServer::start();
    let mut daemons = Vec::new();
    for _ in 0..4 {
        // Manual clocks at T0: nothing but the raise can lift a denial of a 1h window.
        daemons.push(Daemon::start(&config(&redis, TIGHT)).await);
    }
    let check = |d: &Daemon| {
        let limiter = d.app.limiter.clone();
        let now = d.app.clock.now_ms();
        async move {
            limiter
                .check(&input("tight", "user:1", Some("pro")), now)
                .await
                .unwrap()
        }
    };
    let mut allowed = 0;
    for d in &daemons {
        for _ in 0..2 {
            allowed += u64::from(check(d).await.allowed);
        }
    }
    assert_eq!(allowed, 2, "the limit across the four daemons");
    for d in &daemons {
        check(d).await;
        let denied = check(d).await;
        assert!(!denied.allowed);
        assert!(denied.decision.retry_after_ms > 0);
        assert_eq!(denied.decision.remaining, 0);
        let cached = r#"rate_limit_local_decisions_total{policy="tight",source="denied_cache"}"#;
        assert!(metric(d, cached) >= 1.0, "answered from the cache");
    }

    let auth = format!("Bearer {TOKEN}");
    let out = daemons[0]
        .unix()
        .send(
            Method::PUT,
            "/v1/admin/policies/tight/tiers/pro",
            &[("authorization", &auth)],
            r#"{"limit": 10}"#.to_owned(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, 200, "{:?}", out.body);
    for (i, d) in daemons.iter().enumerate() {
        let start = Instant::now();
        while !check(d).await.allowed {
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "daemon {i} still denies 2s after the raise"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

const PAUSED: &str = r#"
[policies.leased]
algorithm = "fixed_window"
limit = 8000
window = "1h"
fail = "closed"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_a_leased_key_admits_from_its_block_and_the_rest_fail_closed() {
    let redis = RedisServer::start();
    let d = Daemon::with_wall_clock(&config(&redis, PAUSED)).await;
    let limiter = d.app.limiter.clone();
    // 40 checks in a row: blocks of 2, 4, 8, 16 and 32 units, 23 of the last one unspent.
    for _ in 0..40 {
        let v = limiter
            .check(&input("leased", "tenant:hot", None), wall_ms())
            .await
            .unwrap();
        assert!(v.allowed && !v.degraded);
    }
    let held_before = metric(
        &d,
        r#"rate_limit_local_decisions_total{policy="leased",source="lease"}"#,
    );
    assert!(held_before >= 30.0, "{held_before} answered from leases");

    redis.pause();
    let mut from_block = 0;
    for _ in 0..10 {
        let v = limiter
            .check(&input("leased", "tenant:hot", None), wall_ms())
            .await
            .unwrap();
        assert!(v.allowed && !v.degraded, "the block answers");
        from_block += 1;
    }
    let cold = limiter
        .check(&input("leased", "tenant:cold", None), wall_ms())
        .await;
    redis.resume();
    assert_eq!(from_block, 10);
    assert_eq!(cold.unwrap_err(), LimitError::BackendUnavailable);
    // Every unit admitted was counted in Redis, and what the daemon held goes back on
    // shutdown: then the window's count is exactly what was admitted.
    limiter.return_leases(wall_ms(), true).await;
    let key = redis.cli(&["--scan", "--pattern", "*tenant:hot*"]);
    let state = redis.cli(&["GET", key.trim()]);
    let count = state.trim().rsplit(':').next().unwrap_or_default();
    assert_eq!(count, "50", "state {state:?} of {key:?}");
    let returned = metric(
        &d,
        r#"rate_limit_lease_units_total{policy="leased",outcome="returned"}"#,
    );
    assert!(returned > 0.0, "{}", limiter.metrics().encode());
}
