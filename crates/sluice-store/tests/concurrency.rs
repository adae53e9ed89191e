//! Exactness under concurrency, on every backend: many tasks checking one key at once admit
//! exactly what the limit allows, and batches racing each other account exactly.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::{Algorithm, Params};
use sluice_store::Check;
use sluice_store::StoreExt;

const TASKS: usize = 40;
const PER_TASK: usize = 25; // 1000 checks per key

/// Every check at the same `now` (no refill, no window edge): exactly the capacity passes,
/// on Redis through group commit (checks queued behind a call in flight go as one call).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checks_admit_exactly_the_limit() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    for (name, store) in common::all_stores(&servers, "conc").await {
        let largest = Arc::new(common::LargestGroup::default());
        store.set_batch_observer(largest.clone());
        for algorithm in Algorithm::ALL {
            let params = Params::new(algorithm, 300, 3_600_000, 300).unwrap();
            // gcra and leaky_bucket share their state: one key per algorithm.
            let key: &'static str = algorithm.as_str();
            let admitted = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::new();
            for _ in 0..TASKS {
                let store = Arc::clone(&store);
                let admitted = Arc::clone(&admitted);
                tasks.push(tokio::spawn(async move {
                    for _ in 0..PER_TASK {
                        let check = Check::new("conc", key, params, 1);
                        if store.check(&check, now).await.unwrap().allowed {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(
                admitted.load(Ordering::Relaxed),
                300,
                "{name} {algorithm}: {} checks from {TASKS} tasks",
                TASKS * PER_TASK
            );
        }
        if store.kind().is_redis() {
            let largest = largest.0.load(Ordering::Relaxed);
            assert!(largest > 1, "{name}: no checks were grouped");
            assert!(largest <= 64, "{name}: a group of {largest}");
        }
    }
}

/// Many tasks over many keys (on as many slots, in a cluster): every key admits exactly its
/// limit, and on Redis the checks went grouped, several per call. On a cluster that needs a
/// group per master: keys on distinct slots would rarely wait behind each other on one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_keys_group_per_master_and_admit_exactly() {
    const KEYS: usize = 200;
    const LIMIT: u64 = 5;
    const CHECKS_PER_TASK: usize = 50; // 16 checks per key
    let servers = common::Servers::start();
    let now = common::now_ms();
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("user:{i}")).collect());
    let mut slots: Vec<u16> = keys
        .iter()
        .map(|k| sluice_store::keys::slot("many", k))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    assert!(slots.len() > KEYS * 9 / 10, "{} slots", slots.len());
    for algorithm in [Algorithm::SlidingWindowCounter, Algorithm::Gcra] {
        let params = Params::new(algorithm, LIMIT, 3_600_000, LIMIT).unwrap();
        let prefix = format!("many-{algorithm}");
        for (name, store) in common::all_stores(&servers, &prefix).await {
            let carried = Arc::new(common::Carried::default());
            store.set_batch_observer(carried.clone());
            let admitted: Arc<Vec<AtomicU64>> =
                Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
            let mut tasks = Vec::new();
            for t in 0..TASKS * 2 {
                let (store, keys, admitted) =
                    (Arc::clone(&store), Arc::clone(&keys), Arc::clone(&admitted));
                tasks.push(tokio::spawn(async move {
                    for i in 0..CHECKS_PER_TASK {
                        let key = (t * 7 + i * 13) % KEYS;
                        let check = Check::new("many", &keys[key], params, 1);
                        if store.check(&check, now).await.unwrap().allowed {
                            admitted[key].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            let checks = (TASKS * 2 * CHECKS_PER_TASK) as u64;
            for (key, n) in admitted.iter().enumerate() {
                let n = n.load(Ordering::Relaxed);
                assert_eq!(n, LIMIT, "{name} {algorithm}: key {key} admitted {n}");
            }
            if store.kind().is_redis() {
                let carried_checks = carried.checks.load(Ordering::Relaxed);
                let calls = carried.calls.load(Ordering::Relaxed);
                println!("{name} {algorithm}: {checks} checks in {calls} script calls");
                assert_eq!(carried_checks, checks, "{name}: every check in one call");
                assert!(
                    calls * 2 <= checks,
                    "{name} {algorithm}: {checks} checks took {calls} calls: not grouped"
                );
            }
        }
    }
}

/// Racing batches over two keys (on different slots in the cluster, so consume-then-refund)
/// and single checks on one of them: every key ends exactly at `limit - what was admitted`,
/// so no refund was lost or applied twice, and no key was ever over-admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_batches_account_exactly() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let a = Params::new(Algorithm::FixedWindow, 150, 3_600_000, 150).unwrap();
    let b = Params::new(Algorithm::TokenBucket, 10, 3_600_000, 400).unwrap();
    // Different slots (checked for the cluster case below).
    assert_ne!(
        sluice_store::keys::slot("race", "a"),
        sluice_store::keys::slot("race", "b")
    );
    for (name, store) in common::all_stores(&servers, "race").await {
        let batches = Arc::new(AtomicU64::new(0));
        let singles = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let store = Arc::clone(&store);
            let batches = Arc::clone(&batches);
            let singles = Arc::clone(&singles);
            tasks.push(tokio::spawn(async move {
                for i in 0..PER_TASK {
                    if (t + i) % 3 == 0 {
                        let check = Check::new("race", "b", b, 1);
                        if store.check(&check, now).await.unwrap().allowed {
                            singles.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        let batch = [Check::new("race", "a", a, 1), Check::new("race", "b", b, 2)];
                        let decisions = store.check_all(&batch, now).await.unwrap();
                        if decisions.iter().all(|d| d.allowed) {
                            batches.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let batches = batches.load(Ordering::Relaxed);
        let singles = singles.load(Ordering::Relaxed);
        let peek = |key: &'static str, params: Params| Check::new("race", key, params, 0);
        let left_a = store.check(&peek("a", a), now).await.unwrap().remaining;
        let left_b = store.check(&peek("b", b), now).await.unwrap().remaining;
        assert!(batches <= 150, "{name}: {batches} batches admitted");
        assert_eq!(
            left_a,
            150 - batches,
            "{name}: key a after {batches} batches"
        );
        assert_eq!(
            left_b,
            400 - 2 * batches - singles,
            "{name}: key b after {batches} batches and {singles} singles"
        );
        // The limits were reached: the race was real.
        assert!(left_a == 0 || left_b <= 1, "{name}: {left_a} {left_b}");
    }
}
