//! The core's conformance table replayed on every backend: memory, Redis, Redis Cluster and
//! the master Redis Sentinel names must answer exactly the decisions `sluice-core` computes.
//! One test body, every backend.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::time::Duration;

use sluice_core::conformance::{Case, cases, generated_cases, generated_usage_cases, usage_cases};
use sluice_core::{Algorithm, Counting, Decision, Params};
use sluice_store::StoreExt;
use sluice_store::{
    Check, MemoryStore, ReplicatedStore, ReplicatedStoreConfig, Replication, SharedBackend, Store,
};

/// Steps are replayed as fast as they go, not at their own pace: keys are kept an hour
/// longer than their state needs (see `common::all_stores_with`).
const GRACE: Duration = Duration::from_secs(3600);

async fn replay(name: &str, store: &dyn Store, all: &[Case], tag: &str) {
    for (n, case) in all.iter().enumerate() {
        let key = format!("{tag}:{n}");
        for (i, step) in case.steps.iter().enumerate() {
            let check = Check::new("conf", &key, case.params, step.cost).in_mode(step.mode);
            let got = store.check(&check, step.at_ms).await.unwrap();
            assert_eq!(
                got, step.expect,
                "{name}: case {:?} step {i} (at {}, {:?} {})",
                case.name, step.at_ms, step.mode, step.cost
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_backend_answers_the_conformance_table() {
    let servers = common::Servers::start();
    let all = the_table();
    for (name, store) in common::all_stores_with(&servers, "conf", GRACE).await {
        replay_table(name, store, &all).await;
    }
}

/// The hand-checked and generated cases, usage ones included.
fn the_table() -> Vec<Case> {
    let mut all = cases();
    all.extend(usage_cases());
    for seed in [1, 2, 3, 42] {
        all.extend(generated_cases(seed, 200));
        // Asks, charges into debt and refunds: the Lua scripts' debt arithmetic is the core's.
        all.extend(generated_usage_cases(seed, 200));
    }
    assert!(all.len() > 60);
    all
}

/// Every case of `all` on `store`, each on its own key, concurrently by chunk.
async fn replay_table(name: &'static str, store: Arc<dyn Store>, all: &[Case]) {
    let mut tasks = Vec::new();
    for (c, chunk) in all.chunks(8).enumerate() {
        let store = Arc::clone(&store);
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            replay(name, store.as_ref(), &chunk, &format!("chunk{c}")).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// The master the sentinels name answers the table as one Redis server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sentinel_store_answers_the_conformance_table() {
    let group = sluice_testkit::RedisSentinels::start();
    let store = sluice_store::SentinelStore::new(sluice_store::SentinelStoreConfig {
        sentinels: group.sentinel_urls(),
        master: group.master_name.clone(),
        prefix: "conf".into(),
        timeout: common::TEST_TIMEOUT,
        ttl_grace: GRACE,
        ..sluice_store::SentinelStoreConfig::default()
    })
    .unwrap();
    let started = std::time::Instant::now();
    while store.ping().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no master found"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    replay_table("sentinel", Arc::new(store), &the_table()).await;
}

/// The replicated store (one region, no peers, on a real redis-server) answers the table's
/// window counters exactly as the core does: its weighting is the check scripts' own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_replicated_store_answers_the_conformance_table() {
    let redis = sluice_testkit::RedisServer::start();
    let mut all = cases();
    for seed in [1, 2, 3, 42] {
        all.extend(generated_cases(seed, 200));
    }
    // envoyproxy/ratelimit's counting is for `scope = "local"` limits only (its YAML has no
    // scope), so the replicated store is held to sluice's own counting.
    all.retain(|case| {
        sluice_store::replicated::unreplicable(case.params.algorithm).is_none()
            && case.params.counting == sluice_core::Counting::Admitted
            && case.params.calendar.is_none()
            && !case.steps.is_empty()
    });
    assert!(all.len() > 10, "{} window counter cases", all.len());
    let local = common::redis_store_with(&redis, "conf", common::TEST_TIMEOUT, GRACE);
    let store = Arc::new(ReplicatedStore::new(ReplicatedStoreConfig {
        region: "here".into(),
        local: SharedBackend::from(local),
        peers: Vec::new(),
        max_pending: 1000,
    }));
    store.set_policies(std::collections::HashMap::from([(
        "conf".into(),
        Replication {
            sync_interval: Duration::from_millis(100),
            overshoot_budget: 1.0,
        },
    )]));
    let mut tasks = Vec::new();
    for (c, chunk) in all.chunks(8).enumerate() {
        let store = Arc::clone(&store);
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            replay("replicated", store.as_ref(), &chunk, &format!("r{c}")).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Random all-or-nothing batches (mixed algorithms, keys on many slots, repeated keys in one
/// batch) replayed on every backend give exactly the memory store's decisions, which are
/// all-or-nothing by construction: so a denied batch leaves every key as if it never ran,
/// including on the cluster, where the batch is consume-then-refund across slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_match_the_reference_on_every_backend() {
    let servers = common::Servers::start();
    // Every algorithm, and fixed_window counting every hit (whose denials cancel nothing).
    let every_hit = Params {
        counting: Counting::EveryHit,
        calendar: None,
        ..Params::new(Algorithm::FixedWindow, 4, 1000, 4).unwrap()
    };
    let policies: Vec<(&str, Params)> = Algorithm::ALL
        .iter()
        .map(|&algorithm| {
            let name = match algorithm {
                Algorithm::FixedWindow => "fw",
                Algorithm::SlidingWindowLog => "swl",
                Algorithm::SlidingWindowCounter => "swc",
                Algorithm::TokenBucket => "tb",
                Algorithm::LeakyBucket => "leaky",
                Algorithm::Gcra => "gcra",
            };
            (
                name,
                Params::new(
                    algorithm,
                    4,
                    1000,
                    if algorithm.uses_burst() { 6 } else { 4 },
                )
                .unwrap(),
            )
        })
        .chain([("every", every_hit)])
        .collect();
    let keys = ["k0", "k1", "k2", "k3", "a}b", "{x}"];
    // The script: (at offset, checks as (policy index, key index, cost)).
    let mut rng = common::Rng(7);
    let mut now = sluice_core::conformance::BASE_MS;
    let mut script = Vec::new();
    for _ in 0..300 {
        now += [0, 0, 0, 10, 100, 400][rng.below(6) as usize];
        let n = 1 + rng.below(5) as usize;
        let checks: Vec<(usize, usize, u64)> = (0..n)
            .map(|_| {
                (
                    rng.below(policies.len() as u64) as usize,
                    rng.below(keys.len() as u64) as usize,
                    rng.below(4),
                )
            })
            .collect();
        script.push((now, checks));
    }
    let run = |store: Arc<dyn Store>| {
        let script = script.clone();
        let policies = policies.clone();
        async move {
            let mut out: Vec<Vec<Decision>> = Vec::new();
            for (at, checks) in &script {
                let batch: Vec<Check<'_>> = checks
                    .iter()
                    .map(|&(p, k, cost)| Check::new(policies[p].0, keys[k], policies[p].1, cost))
                    .collect();
                out.push(store.check_all(&batch, *at).await.unwrap());
                // A peek at every key after each batch: the state must match too.
                let peeks: Vec<Check<'_>> = policies
                    .iter()
                    .flat_map(|(name, params)| {
                        keys.iter()
                            .map(move |key| Check::new(name, key, *params, 0))
                    })
                    .collect();
                let mut peeked = Vec::new();
                for peek in &peeks {
                    peeked.push(store.check(peek, *at).await.unwrap());
                }
                out.push(peeked);
            }
            out
        }
    };
    let reference = run(Arc::new(MemoryStore::default())).await;
    let denied = reference
        .iter()
        .step_by(2)
        .filter(|batch| batch.iter().any(|d| !d.allowed))
        .count();
    assert!(denied > 30, "the script must deny batches ({denied})");
    for (name, store) in common::all_stores_with(&servers, "batch", GRACE).await {
        let got = run(store).await;
        for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
            assert_eq!(
                g,
                r,
                "{name}: {} {} of the script",
                if i % 2 == 0 {
                    "batch"
                } else {
                    "peeks after batch"
                },
                i / 2
            );
        }
    }
}

/// Time that goes backwards (another daemon's clock behind this one's) is clamped the same
/// way on every backend: sequences with backward jumps, each on its own key, replayed on
/// every backend give exactly the memory store's (the core's) decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clocks_going_backwards_decide_alike() {
    let servers = common::Servers::start();
    let mut rng = common::Rng(99);
    let mut sequences = Vec::new();
    for algorithm in Algorithm::ALL {
        for (limit, window_ms, burst) in [(5, 1000, 8), (7, 300, 3), (3, 10_000, 3)] {
            let params = Params::new(algorithm, limit, window_ms, burst).unwrap();
            let mut now = sluice_core::conformance::BASE_MS + 5 * window_ms;
            let mut steps = Vec::new();
            for _ in 0..150 {
                match rng.below(8) {
                    0..=2 => {}
                    3 | 4 => now += rng.below(window_ms / 3 + 1),
                    5 => now += rng.below(2 * window_ms),
                    _ => now -= rng.below(window_ms),
                }
                steps.push((params, now, rng.below(params.capacity().min(4) + 1)));
            }
            sequences.push(steps);
        }
    }
    let reference = replay_sequences(&MemoryStore::default(), "back", &sequences).await;
    for (name, store) in common::all_stores_with(&servers, "back", GRACE).await {
        let got = replay_sequences(store.as_ref(), "back", &sequences).await;
        for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
            assert_eq!(g, r, "{name}: step {i} of {:?}", sequences[i / 150][0].0);
        }
    }
}

/// A limit changed at run time (config reload, tier override) keeps each key's state, and
/// every backend reads the kept state alike: sequences that switch between a small and a
/// large limit/burst, each on its own key, give exactly the memory store's decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limit_changes_keep_state_alike() {
    let servers = common::Servers::start();
    let mut rng = common::Rng(7);
    let mut sequences = Vec::new();
    for algorithm in Algorithm::ALL {
        let small = Params::new(algorithm, 4, 1000, 4).unwrap();
        let large = Params::new(algorithm, 9, 1000, 12).unwrap();
        let mut now = sluice_core::conformance::BASE_MS;
        let mut steps = Vec::new();
        for _ in 0..120 {
            now += rng.below(200);
            let params = if rng.below(3) == 0 { large } else { small };
            steps.push((params, now, rng.below(params.capacity().min(4) + 1)));
        }
        sequences.push(steps);
    }
    let reference = replay_sequences(&MemoryStore::default(), "change", &sequences).await;
    for (name, store) in common::all_stores_with(&servers, "change", GRACE).await {
        let got = replay_sequences(store.as_ref(), "change", &sequences).await;
        for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
            assert_eq!(g, r, "{name}: step {i} ({:?})", sequences[i / 120][i % 120]);
        }
    }
}

/// Each sequence of (params, at, cost) steps on its own key `<policy><n>`: every decision, in
/// order.
async fn replay_sequences(
    store: &dyn Store,
    policy: &str,
    sequences: &[Vec<(Params, u64, u64)>],
) -> Vec<Decision> {
    let mut out = Vec::new();
    for (n, steps) in sequences.iter().enumerate() {
        let key = format!("{policy}{n}");
        for &(params, at, cost) in steps {
            let check = Check::new(policy, &key, params, cost);
            out.push(store.check(&check, at).await.unwrap());
        }
    }
    out
}
