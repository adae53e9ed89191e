//! Candidate limits on every backend (memory, a real redis-server, a real 6-node cluster): a
//! candidate judged beside a check never changes the check's answer (a twin key checked
//! without one answers the same), decides exactly as `sluice-core` does for its own
//! parameters (the conformance table replayed through the candidate path), keeps a state of
//! its own (stricter and looser candidates, another algorithm than the limit's), stays exact
//! under concurrency and group commit, rides in the check's own script call (one EVALSHA per
//! check or group, counted by Redis), and judges batches' checks each on its own.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use sluice_core::conformance::{Case, cases, generated_cases};
use sluice_core::{Algorithm, Decision, Params, State};
use sluice_store::StoreExt;
use sluice_store::keys::{candidate_keys, limit_keys};
use sluice_store::{
    Check, MemoryStore, RedisStore, ReplicatedStore, ReplicatedStoreConfig, Replication,
    SharedBackend, Store, StoreKind,
};
use sluice_testkit::info_field;

/// Synthetic time replays run faster than Redis's clock: keys are kept an hour longer (see
/// `common::all_stores_with`), which changes no decision.
const GRACE: Duration = Duration::from_secs(3600);

fn params(algorithm: Algorithm, limit: u64, window_ms: u64, burst: u64) -> Params {
    Params::new(algorithm, limit, window_ms, burst).unwrap()
}

fn check<'a>(policy: &'a str, key: &'a str, params: Params, cost: u64) -> Check<'a> {
    Check::new(policy, key, params, cost)
}

/// The limit in force while a conformance case is replayed as the candidate: another
/// algorithm and shape than the case's (so the states could not be confused), with room for
/// every cost of the case.
fn limit_beside(case: &Case, n: usize) -> Params {
    let most = case.steps.iter().map(|s| s.cost).max().unwrap_or(1).max(2);
    let others: Vec<Algorithm> = Algorithm::ALL
        .into_iter()
        .filter(|&a| a != case.params.algorithm)
        .collect();
    params(others[n % others.len()], most, 700, most)
}

/// What the core answers a candidate asked `cost` at `now_ms`: its own decision, or for a
/// cost beyond its capacity a rejection describing the state as a peek finds it.
fn core_candidate(candidate: &Params, state: &mut State, now_ms: u64, cost: u64) -> Decision {
    if cost > candidate.max_cost() {
        let peek = sluice_core::decide(candidate, state, now_ms, 0).unwrap();
        Decision {
            allowed: false,
            retry_after_ms: 0,
            delay_ms: 0,
            ..peek
        }
    } else {
        sluice_core::decide(candidate, state, now_ms, cost).unwrap()
    }
}

/// (a) and (b): every conformance case replayed as the candidate of a check of another
/// limit: the candidate answers the table's decisions, and the check answers exactly what a
/// twin key checked without a candidate answers (the lone path, and the batch path with the
/// check alone in its batch).
async fn replay_as_candidate(name: &str, store: &dyn Store, all: &[Case], tag: &str) {
    for (n, case) in all.iter().enumerate() {
        let limit = limit_beside(case, n);
        let (key, twin) = (format!("{tag}:{n}"), format!("{tag}:{n}:twin"));
        let batched = n % 3 == 0;
        for (i, step) in case.steps.iter().enumerate() {
            let check = check("cand", &key, limit, step.cost);
            let (decision, judged) = if batched {
                let mut both = store
                    .check_all_with_candidates(&[check], &[Some(case.params)], step.at_ms)
                    .await
                    .unwrap();
                let (decision, judged) = both.pop().unwrap();
                (decision, judged.unwrap())
            } else {
                store
                    .check_with_candidate(&check, &case.params, step.at_ms)
                    .await
                    .unwrap()
            };
            let alone = Check {
                key: &twin,
                ..check
            };
            let want = if batched {
                store.check_all(&[alone], step.at_ms).await.unwrap()[0]
            } else {
                store.check(&alone, step.at_ms).await.unwrap()
            };
            let at = format!(
                "{name}: case {:?} step {i} (at {}, cost {}, batched {batched})",
                case.name, step.at_ms, step.cost
            );
            assert_eq!(judged, step.expect, "candidate, {at}");
            assert_eq!(decision, want, "the caller's answer, {at}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn candidates_answer_the_conformance_table_and_leave_the_answer_alone() {
    let servers = common::Servers::start();
    let mut all = cases();
    for seed in [5, 6] {
        all.extend(generated_cases(seed, 120));
    }
    for (name, store) in common::all_stores_with(&servers, "candconf", GRACE).await {
        let mut tasks = Vec::new();
        for (c, chunk) in all.chunks(8).enumerate() {
            let store = Arc::clone(&store);
            let chunk = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                replay_as_candidate(name, store.as_ref(), &chunk, &format!("c{c}")).await;
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    }
}

/// (c) A stricter and a looser candidate beside one limit, each on its own key: each counts
/// on a state of its own, consumed when it alone allows, whatever the limit answers; the
/// limit's answers are those of a check without a candidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stricter_and_looser_candidates_keep_their_own_state() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let limit = params(Algorithm::FixedWindow, 10, 3_600_000, 10);
    let stricter = params(Algorithm::FixedWindow, 4, 3_600_000, 4);
    let looser = params(Algorithm::TokenBucket, 25, 3_600_000, 25);
    for (name, store) in common::all_stores(&servers, "strict").await {
        for (label, candidate, would_allow) in [("stricter", stricter, 4), ("looser", looser, 15)] {
            let key = format!("k-{label}");
            let (mut allowed, mut judged_allowed) = (0, 0);
            for i in 0..15u64 {
                let check = check("strict", &key, limit, 1);
                let (decision, judged) = store
                    .check_with_candidate(&check, &candidate, now)
                    .await
                    .unwrap();
                allowed += u64::from(decision.allowed);
                judged_allowed += u64::from(judged.allowed);
                assert_eq!(decision.limit, 10, "{name} {label}");
                assert_eq!(
                    decision.remaining,
                    10u64.saturating_sub(i + 1),
                    "{name} {label}"
                );
                assert_eq!(judged.limit, candidate.limit, "{name} {label}");
            }
            assert_eq!(allowed, 10, "{name} {label}: the limit");
            assert_eq!(judged_allowed, would_allow, "{name} {label}: the candidate");
            // Peeks of both states: the limit's is spent, the candidate's holds what it
            // admitted, whatever the limit answered.
            let peek = check("strict", &key, limit, 0);
            let (limit_left, candidate_left) = store
                .check_with_candidate(&peek, &candidate, now)
                .await
                .unwrap();
            assert_eq!(limit_left.remaining, 0, "{name} {label}");
            assert_eq!(
                candidate_left.remaining,
                candidate.limit - would_allow,
                "{name} {label}"
            );
            assert_eq!(store.check(&peek, now).await.unwrap().remaining, 0);
        }
    }
}

/// (g) A candidate of another algorithm than the limit's, and one of the same algorithm,
/// keep their states in keys of their own under the limit's hash tag (`cand:<suffix>`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn candidate_keys_are_their_own() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let limit = params(Algorithm::Gcra, 10, 60_000, 10);
    for (name, store) in common::all_stores(&servers, "own").await {
        for candidate in [
            params(Algorithm::SlidingWindowLog, 3, 60_000, 3),
            params(Algorithm::Gcra, 3, 60_000, 3),
        ] {
            let key = format!("k-{}", candidate.algorithm);
            let check = check("own", &key, limit, 2);
            let (first, judged) = store
                .check_with_candidate(&check, &candidate, now)
                .await
                .unwrap();
            assert!(first.allowed && judged.allowed, "{name}");
            assert_eq!((first.remaining, judged.remaining), (8, 1), "{name}");
            let (second, judged) = store
                .check_with_candidate(&check, &candidate, now)
                .await
                .unwrap();
            assert!(second.allowed && !judged.allowed, "{name}");
            assert_eq!((second.remaining, judged.remaining), (6, 1), "{name}");
            if !store.kind().is_redis() {
                continue;
            }
            let cli = |args: &[&str]| match store.kind() {
                StoreKind::Cluster => servers.cluster.cli(args),
                _ => servers.redis.cli(args),
            };
            for redis_key in limit_keys("own", "own", &key, limit.algorithm)
                .into_iter()
                .chain(candidate_keys("own", "own", &key, candidate.algorithm))
            {
                assert_eq!(
                    cli(&["EXISTS", &redis_key]).trim(),
                    "1",
                    "{name} {redis_key}"
                );
            }
        }
    }
}

/// A check costing more than the candidate's capacity: the candidate would reject it (its
/// state unchanged), the caller's answer is the limit's, and nothing fails; alone, grouped
/// and in batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cost_beyond_the_candidate_is_a_rejection_not_an_error() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let limit = params(Algorithm::TokenBucket, 20, 60_000, 20);
    let candidate = params(Algorithm::FixedWindow, 3, 60_000, 3);
    for (name, store) in common::all_stores(&servers, "beyond").await {
        let big = check("beyond", "k", limit, 5);
        let (decision, judged) = store
            .check_with_candidate(&big, &candidate, now)
            .await
            .unwrap();
        assert!(decision.allowed && decision.remaining == 15, "{name}");
        assert!(!judged.allowed, "{name}");
        assert_eq!((judged.remaining, judged.retry_after_ms), (3, 0), "{name}");
        let batch = store
            .check_all_with_candidates(&[big, big], &[Some(candidate), None], now)
            .await
            .unwrap();
        assert!(batch[0].0.allowed && batch[1].0.allowed, "{name}");
        assert_eq!(batch[1].1, None, "{name}");
        let judged = batch[0].1.unwrap();
        assert!(!judged.allowed && judged.remaining == 3, "{name}");
        // The candidate's state was never touched: a check it can take passes.
        let small = Check { cost: 1, ..big };
        let (_, judged) = store
            .check_with_candidate(&small, &candidate, now)
            .await
            .unwrap();
        assert!(judged.allowed && judged.remaining == 2, "{name}");
    }
}

const TASKS: usize = 40;
const PER_TASK: usize = 25;

/// (d) Many tasks on one key at one `now`: the limit admits exactly its limit and the
/// candidate would allow exactly its own, for exact candidates (fixed_window,
/// sliding_window_log) beside limits of several algorithms; on Redis through group commit
/// (groups of several checks and their candidates seen), on a cluster through master lanes
/// (one-key pairs) and slot lanes (the log's two keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_candidates_allow_exactly_their_limit() {
    let servers = common::Servers::start();
    let now = common::now_ms();
    let pairs = [
        (Algorithm::TokenBucket, Algorithm::FixedWindow),
        (Algorithm::FixedWindow, Algorithm::FixedWindow),
        (Algorithm::SlidingWindowCounter, Algorithm::SlidingWindowLog),
        (Algorithm::SlidingWindowLog, Algorithm::SlidingWindowLog),
    ];
    for (name, store) in common::all_stores(&servers, "candconc").await {
        let largest = Arc::new(common::LargestGroup::default());
        store.set_batch_observer(largest.clone());
        for (limit_algorithm, candidate_algorithm) in pairs {
            let limit = params(limit_algorithm, 300, 3_600_000, 300);
            let candidate = params(candidate_algorithm, 120, 3_600_000, 120);
            let key: &'static str =
                Box::leak(format!("{limit_algorithm}-{candidate_algorithm}").into_boxed_str());
            let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
            let mut tasks = Vec::new();
            for _ in 0..TASKS {
                let (store, counts) = (Arc::clone(&store), Arc::clone(&counts));
                tasks.push(tokio::spawn(async move {
                    for _ in 0..PER_TASK {
                        let check = Check::new("candconc", key, limit, 1);
                        let (decision, judged) = store
                            .check_with_candidate(&check, &candidate, now)
                            .await
                            .unwrap();
                        counts[0].fetch_add(u64::from(decision.allowed), Ordering::Relaxed);
                        counts[1].fetch_add(u64::from(judged.allowed), Ordering::Relaxed);
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            let at = format!("{name} {limit_algorithm} beside {candidate_algorithm}");
            assert_eq!(counts[0].load(Ordering::Relaxed), 300, "{at}: the limit");
            assert_eq!(
                counts[1].load(Ordering::Relaxed),
                120,
                "{at}: the candidate"
            );
        }
        if store.kind().is_redis() {
            let largest = largest.0.load(Ordering::Relaxed);
            assert!(
                largest > 1,
                "{name}: no checks with candidates were grouped"
            );
            // 64 entries a call at most: 32 checks with their candidates.
            assert!(largest <= 32, "{name}: a group of {largest}");
        }
    }
}

/// (d) The same on the real clock with 1 s windows for 2.5 s, every check stamped with its
/// own time: the candidate's would-allows, counted at the time each was decided at (what its
/// answer's `reset` says, as `window_edges.rs` counts admissions), never exceed its limit in
/// any aligned window (fixed_window) or any window-long span (sliding_window_log).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn candidates_stay_within_their_limit_in_every_window() {
    const W: u64 = 1000;
    const CANDIDATE: u64 = 40;
    let servers = common::Servers::start();
    let limit = params(Algorithm::TokenBucket, 1000, W, 1000);
    for (name, store) in common::all_stores(&servers, "candtime").await {
        for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindowLog] {
            let candidate = params(algorithm, CANDIDATE, W, CANDIDATE);
            let key: &'static str = algorithm.as_str();
            let decided_at = Arc::new(Mutex::new(Vec::new()));
            let end = common::now_ms() + 2500;
            let mut tasks = Vec::new();
            for _ in 0..16 {
                let (store, decided_at) = (Arc::clone(&store), Arc::clone(&decided_at));
                tasks.push(tokio::spawn(async move {
                    while common::now_ms() < end {
                        let check = Check::new("candtime", key, limit, 1);
                        let (_, judged) = store
                            .check_with_candidate(&check, &candidate, common::now_ms())
                            .await
                            .unwrap();
                        if judged.allowed {
                            // fixed_window: reset is its window's end; the log: its newest
                            // entry (this one) plus the window.
                            decided_at.lock().push(judged.reset_ms - W);
                        }
                        // The memory store never yields by itself.
                        tokio::task::yield_now().await;
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            let mut times = decided_at.lock().clone();
            times.sort_unstable();
            assert!(
                times.len() as u64 > CANDIDATE,
                "{name} {algorithm}: {}",
                times.len()
            );
            let most = match algorithm {
                // Per aligned window: `decided_at` is the window's start.
                Algorithm::FixedWindow => {
                    let mut most = 0;
                    for chunk in times.chunk_by(|a, b| a == b) {
                        most = most.max(chunk.len());
                    }
                    most
                }
                // Per window-long span (t - W, t].
                _ => (0..times.len())
                    .map(|i| times[..=i].iter().filter(|&&t| t + W > times[i]).count())
                    .max()
                    .unwrap_or(0),
            };
            println!(
                "{name} {algorithm}: {} would-allows, at most {most} per window",
                times.len()
            );
            assert!(
                most as u64 <= CANDIDATE,
                "{name} {algorithm}: {most} in one window"
            );
        }
    }
}

/// (e) One script call per check with a candidate, as Redis counts them (EVALSHA calls in
/// `INFO commandstats`): sequential checks, one each; concurrent checks, one per group; a
/// batch with candidates, one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidate_rides_in_its_checks_call() {
    let redis = sluice_testkit::RedisServer::start();
    let store = Arc::new(common::redis_store(&redis, "calls", common::TEST_TIMEOUT));
    let carried = Arc::new(common::Carried::default());
    store.set_batch_observer(carried.clone());
    // Check `i`: every algorithm in turn beside another, on 17 keys.
    let check = |store: Arc<RedisStore>, i: u64| async move {
        let limit = params(Algorithm::ALL[(i % 6) as usize], 1000, 60_000, 1000);
        let candidate = params(Algorithm::ALL[((i + 1) % 6) as usize], 500, 60_000, 500);
        let key = format!("user:{}", i % 17);
        let check = check("calls", &key, limit, 1);
        store
            .check_with_candidate(&check, &candidate, common::now_ms())
            .await
            .unwrap();
    };
    // Loads the scripts (the group script, which carries a lone check with its candidate).
    for i in 0..12 {
        check(Arc::clone(&store), i).await;
    }
    redis.cli(&["CONFIG", "RESETSTAT"]);
    const CHECKS: u64 = 100;
    for i in 0..CHECKS {
        check(Arc::clone(&store), i).await;
    }
    let stats = redis.cli(&["INFO", "commandstats"]);
    assert_eq!(common::evalsha_calls(&stats), CHECKS, "sequential: {stats}");
    assert!(info_field(&stats, "cmdstat_eval").is_none(), "{stats}");

    // Concurrent: as many EVALSHA as script calls, fewer than checks (grouped).
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let before = carried.calls.load(Ordering::Relaxed);
    let mut tasks = Vec::new();
    for t in 0..TASKS as u64 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            for i in 0..PER_TASK as u64 {
                check(Arc::clone(&store), t * 31 + i).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let calls = carried.calls.load(Ordering::Relaxed) - before;
    let evalsha = common::evalsha_calls(&redis.cli(&["INFO", "commandstats"]));
    let checks = (TASKS * PER_TASK) as u64;
    println!("{checks} concurrent checks with candidates: {calls} script calls, {evalsha} EVALSHA");
    assert_eq!(evalsha, calls, "one EVALSHA per script call");
    assert!(
        calls < checks,
        "{checks} checks took {calls} calls: not grouped"
    );

    // A batch with candidates: one call.
    let keys: Vec<String> = (0..10).map(|i| format!("b{i}")).collect();
    let batch: Vec<Check<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| Check::new("calls", key, params(Algorithm::ALL[i % 6], 9, 60_000, 9), 1))
        .collect();
    let candidates: Vec<Option<Params>> = (0..10)
        .map(|i| (i % 3 != 0).then(|| params(Algorithm::ALL[(i + 2) % 6], 4, 60_000, 4)))
        .collect();
    store
        .check_all_with_candidates(&batch, &candidates, common::now_ms())
        .await
        .unwrap();
    redis.cli(&["CONFIG", "RESETSTAT"]);
    store
        .check_all_with_candidates(&batch, &candidates, common::now_ms())
        .await
        .unwrap();
    assert_eq!(
        common::evalsha_calls(&redis.cli(&["INFO", "commandstats"])),
        1
    );
}

/// (f) Random all-or-nothing batches (every algorithm, keys on many slots, repeated keys,
/// costs beyond some candidates' capacity) with candidates on some checks: the checks answer
/// exactly what `check_all` alone answers (the memory store's plain batches), and every
/// candidate what the core answers it judged on its own after its batch, whatever the batch's
/// answer; on the cluster, candidates ride in the per-slot calls of consume-then-refund.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_judge_their_candidates_each_on_its_own() {
    let servers = common::Servers::start();
    let policies: Vec<(&str, Params, Params)> = Algorithm::ALL
        .iter()
        .enumerate()
        .map(|(i, &algorithm)| {
            let name = ["fw", "swl", "swc", "tb", "leaky", "gcra"][i];
            let burst = if algorithm.uses_burst() { 6 } else { 4 };
            let candidate = Algorithm::ALL[(i + 2) % 6];
            (
                name,
                params(algorithm, 4, 1000, burst),
                params(candidate, 2, 700, 2),
            )
        })
        .collect();
    let keys = ["k0", "k1", "k2", "a}b", "{x}"];
    let mut rng = common::Rng(11);
    let mut now = sluice_core::conformance::BASE_MS;
    // (at, checks as (policy index, key index, cost, with a candidate))
    let mut script = Vec::new();
    for _ in 0..250 {
        now += [0, 0, 10, 100, 400][rng.below(5) as usize];
        let n = 1 + rng.below(5) as usize;
        let checks: Vec<(usize, usize, u64, bool)> = (0..n)
            .map(|_| {
                (
                    rng.below(policies.len() as u64) as usize,
                    rng.below(keys.len() as u64) as usize,
                    rng.below(4),
                    rng.below(3) != 0,
                )
            })
            .collect();
        script.push((now, checks));
    }
    let batch_of = |checks: &[(usize, usize, u64, bool)]| -> Vec<Check<'static>> {
        checks
            .iter()
            .map(|&(p, k, cost, _)| Check::new(policies[p].0, keys[k], policies[p].1, cost))
            .collect()
    };
    // The references: the checks' plain batches on memory; each candidate by the core, on
    // a state per (policy, key), judged in batch order after its batch.
    let reference_store = MemoryStore::default();
    let mut reference = Vec::new();
    let mut states: std::collections::HashMap<(usize, usize), State> = Default::default();
    for (at, checks) in &script {
        let decisions = reference_store
            .check_all(&batch_of(checks), *at)
            .await
            .unwrap();
        let judged: Vec<Option<Decision>> = checks
            .iter()
            .map(|&(p, k, cost, with)| {
                with.then(|| {
                    let state = states.entry((p, k)).or_insert(State::Fresh);
                    core_candidate(&policies[p].2, state, *at, cost)
                })
            })
            .collect();
        reference.push(decisions.into_iter().zip(judged).collect::<Vec<_>>());
    }
    let denied = reference
        .iter()
        .filter(|b| b.iter().any(|(d, _)| !d.allowed))
        .count();
    let rejected = reference
        .iter()
        .flatten()
        .filter(|(_, j)| j.is_some_and(|j| !j.allowed))
        .count();
    assert!(
        denied > 30 && rejected > 30,
        "{denied} batches denied, {rejected} rejections"
    );
    for (name, store) in common::all_stores_with(&servers, "candbatch", GRACE).await {
        for (i, (at, checks)) in script.iter().enumerate() {
            let candidates: Vec<Option<Params>> = checks
                .iter()
                .map(|&(p, _, _, with)| with.then_some(policies[p].2))
                .collect();
            let got = store
                .check_all_with_candidates(&batch_of(checks), &candidates, *at)
                .await
                .unwrap();
            assert_eq!(got, reference[i], "{name}: batch {i} {checks:?}");
        }
    }
}

/// The replicated store (candidates are refused with `scope = "replicated"` by the config)
/// still answers one: the check replicated as without a candidate, the candidate decided on
/// this region's backend alone, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_replicated_store_judges_candidates_locally() {
    let redis = sluice_testkit::RedisServer::start();
    let local = common::redis_store(&redis, "repl", common::TEST_TIMEOUT);
    let store = ReplicatedStore::new(ReplicatedStoreConfig {
        region: "here".into(),
        local: SharedBackend::from(local.clone()),
        peers: Vec::new(),
        max_pending: 1000,
    });
    store.set_policies(std::collections::HashMap::from([(
        "r".into(),
        Replication {
            sync_interval: Duration::from_millis(100),
            overshoot_budget: 1.0,
        },
    )]));
    let now = common::now_ms();
    let limit = params(Algorithm::FixedWindow, 5, 3_600_000, 5);
    let candidate = params(Algorithm::SlidingWindowLog, 2, 3_600_000, 2);
    let check = check("r", "k", limit, 1);
    let mut judged_allowed = 0;
    for i in 0..4 {
        let (decision, judged) = store
            .check_with_candidate(&check, &candidate, now)
            .await
            .unwrap();
        assert!(decision.allowed && decision.remaining == 4 - i);
        judged_allowed += u64::from(judged.allowed);
    }
    assert_eq!(judged_allowed, 2);
    let batch = store
        .check_all_with_candidates(&[check, check], &[None, Some(candidate)], now)
        .await
        .unwrap();
    assert!(batch[0].0.allowed && !batch[1].0.allowed, "{batch:?}");
    assert_eq!(batch[0].1, None);
    assert!(batch[1].1.is_some_and(|j| !j.allowed));
    // The candidate's state is the plain store's, on the local backend.
    let (_, judged) = local
        .check_with_candidate(&Check { cost: 0, ..check }, &candidate, now)
        .await
        .unwrap();
    assert_eq!(judged.remaining, 0);
}
