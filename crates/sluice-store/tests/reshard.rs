//! Slots moving under load: 12 concurrent clients check a few keys while their slots move to a
//! new master, once by hand (slowly, time spent in the ASK window) and once with
//! `redis-cli --cluster reshard` (on plain TCP, and on a Cluster that speaks TLS only). Each client checks a sliding-log limit (two keys: grouped per
//! slot) and a token bucket (one key: grouped per master, so its groups hold keys of slots that
//! move and of slots that stay) at once, the token bucket with a candidate limit beside it
//! (one key too, so pairs ride master lanes; while a slot's keys migrate one by one, a check's
//! key and its candidate's may be on two nodes, and only one of them runs). The store follows
//! MOVED and ASK: no key admits more than its limit, every candidate accounts exactly (what it
//! would allow plus what it has left is its limit: no part of a pair ran twice), at most 2% of
//! the answers fail while slots move, and none from 2 s after.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::StoreExt;
use sluice_store::{BatchObserver, Check, ClusterStore, StoreKind};
use sluice_testkit::RedisCluster;
use sluice_testkit::certs::Certs;

const POLICY: &str = "reshard";
/// The one-key policy's name.
const ONE_KEY: &str = "reshard-one";
const CLIENTS: usize = 12;
/// Per key, over a window longer than the test: every admission of the run counts.
const LIMIT: u64 = 3000;
/// After the move ends, answers must all succeed from this long on.
const SETTLE: Duration = Duration::from_secs(2);

/// The limit of `policy`: a sliding log, or a token bucket refilling less than one token over
/// the test (so it too admits at most LIMIT in all).
fn params(policy: &str) -> Params {
    if policy == ONE_KEY {
        Params::new(Algorithm::TokenBucket, LIMIT, 30 * 86_400_000, LIMIT).unwrap()
    } else {
        Params::new(Algorithm::SlidingWindowLog, LIMIT, 600_000, LIMIT).unwrap()
    }
}

/// The candidate beside the one-key policy's checks: another one-key algorithm, refilling
/// less than one unit over the test, never reached (every check it judges, it would allow).
fn candidate() -> Params {
    Params::new(Algorithm::Gcra, LIMIT, 30 * 86_400_000, LIMIT).unwrap()
}

/// One answer: when (since the start), which key, whether admitted, whether its candidate
/// would have, whether it failed.
struct Answer {
    at: Duration,
    key: usize,
    allowed: bool,
    judged: bool,
    failed: Option<String>,
}

/// Script calls, the checks they carried, and the checks a group call did not run.
#[derive(Debug, Default)]
struct Calls {
    calls: AtomicU64,
    checks: AtomicU64,
    sent_again: AtomicU64,
}

impl BatchObserver for Calls {
    fn batch(&self, _backend: StoreKind, checks: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.checks.fetch_add(checks as u64, Ordering::Relaxed);
    }

    fn sent_again(&self, _backend: StoreKind, checks: usize) {
        self.sent_again.fetch_add(checks as u64, Ordering::Relaxed);
    }
}

/// Starts the clients; they run until `stop`. `keys` are `(policy, key)`: a client checks one
/// key of each policy at once.
fn clients(
    store: &Arc<ClusterStore>,
    keys: &[(&'static str, String)],
    start: Instant,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Answer>>> {
    let log: Vec<usize> = (0..keys.len()).filter(|&i| keys[i].0 == POLICY).collect();
    let one: Vec<usize> = (0..keys.len()).filter(|&i| keys[i].0 == ONE_KEY).collect();
    (0..CLIENTS)
        .map(|client| {
            let (store, keys, stop) = (store.clone(), keys.to_vec(), stop.clone());
            let (log, one) = (log.clone(), one.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = client;
                while !stop.load(Ordering::Relaxed) {
                    let pair = [log[n % log.len()], one[n % one.len()]];
                    n += 1;
                    let checks = pair
                        .map(|key| Check::new(keys[key].0, &keys[key].1, params(keys[key].0), 1));
                    let (now, candidate) = (common::now_ms(), candidate());
                    let (a, b) = tokio::join!(
                        store.check(&checks[0], now),
                        store.check_with_candidate(&checks[1], &candidate, now)
                    );
                    let b = b.map(|(decision, judged)| (decision, Some(judged)));
                    for (key, result) in pair.into_iter().zip([a.map(|d| (d, None)), b]) {
                        answers.push(Answer {
                            at: start.elapsed(),
                            key,
                            allowed: result.as_ref().is_ok_and(|(d, _)| d.allowed),
                            judged: result
                                .as_ref()
                                .is_ok_and(|(_, j)| j.is_some_and(|j| j.allowed)),
                            failed: result.err().map(|e| e.to_string()),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                answers
            })
        })
        .collect()
}

/// Runs the clients from 1 s before `move_slots` until 3 s after it, then checks the bounds.
/// Answers the cluster and how many checks group calls did not run (sent again alone).
async fn under_load(
    cluster: RedisCluster,
    certs: Option<&Certs>,
    keys: Vec<(&'static str, String)>,
    what: &str,
    move_slots: impl FnOnce(&RedisCluster) + Send + 'static,
) -> (RedisCluster, u64) {
    let timeout = Duration::from_millis(500);
    let store =
        Arc::new(common::cluster_store_over(&cluster, certs, what, timeout, Duration::ZERO).await);
    let calls = Arc::new(Calls::default());
    store.set_batch_observer(calls.clone());
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let running = clients(&store, &keys, start, &stop);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let moving = start.elapsed();
    let cluster = tokio::task::spawn_blocking(move || {
        move_slots(&cluster);
        cluster
    })
    .await
    .unwrap();
    let moved = start.elapsed();
    tokio::time::sleep(SETTLE + Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    for client in running {
        answers.extend(client.await.unwrap());
    }

    let mut admitted = vec![0u64; keys.len()];
    for a in answers.iter().filter(|a| a.allowed) {
        admitted[a.key] += 1;
    }
    let during: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.at >= moving && a.at < moved + SETTLE)
        .collect();
    let failed_during = during.iter().filter(|a| a.failed.is_some()).count();
    let mut reasons: Vec<&str> = answers.iter().filter_map(|a| a.failed.as_deref()).collect();
    reasons.sort_unstable();
    reasons.dedup();
    reasons.truncate(5);
    let after: Vec<&Answer> = answers.iter().filter(|a| a.at >= moved + SETTLE).collect();
    let failed_after = after.iter().filter(|a| a.failed.is_some()).count();
    let sent_again = calls.sent_again.load(Ordering::Relaxed);
    println!(
        "{what}: slots moved in {:?}; {failed_during} of {} answers failed while moving, \
         {failed_after} of {} after; admitted per key {admitted:?} (limit {LIMIT}); \
         failures: {reasons:?}; {} checks in {} script calls, {sent_again} not run by a \
         group and sent again alone",
        moved - moving,
        during.len(),
        after.len(),
        calls.checks.load(Ordering::Relaxed),
        calls.calls.load(Ordering::Relaxed),
    );
    for (key, n) in admitted.iter().enumerate() {
        assert!(*n <= LIMIT, "key {:?} admitted {n} > {LIMIT}", keys[key]);
    }
    // Each candidate: what it would have allowed plus what it has left is its limit, give or
    // take the calls that failed (which may or may not have run).
    for (key, (policy, name)) in keys.iter().enumerate() {
        if *policy != ONE_KEY {
            continue;
        }
        let judged = answers.iter().filter(|a| a.key == key && a.judged).count() as u64;
        let failed = answers
            .iter()
            .filter(|a| a.key == key && a.failed.is_some())
            .count() as u64;
        let peek = Check::new(policy, name, params(policy), 0);
        let (_, left) = store
            .check_with_candidate(&peek, &candidate(), common::now_ms())
            .await
            .unwrap();
        assert!(judged > 0, "key {name}: no candidate judged");
        assert!(
            judged + left.remaining <= LIMIT && judged + left.remaining + failed >= LIMIT,
            "key {name}: candidate would allow {judged}, {} left, {failed} failed",
            left.remaining
        );
    }
    assert!(!during.is_empty() && !after.is_empty());
    assert!(
        failed_during * 50 <= during.len(),
        "{failed_during} of {} answers failed while slots moved (over 2%)",
        during.len()
    );
    assert_eq!(failed_after, 0, "answers failed after the move ended");
    (cluster, sent_again)
}

/// `n` keys of `policy` whose slots satisfy `wanted`.
fn keys_where(
    policy: &'static str,
    n: usize,
    wanted: impl Fn(u16) -> bool,
) -> Vec<(&'static str, String)> {
    (0..100_000)
        .map(|i| format!("user:{i}"))
        .filter(|k| wanted(sluice_store::keys::slot(policy, k)))
        .take(n)
        .map(|k| (policy, k))
        .collect()
}

/// The slot of each key.
fn slots_of(keys: &[(&'static str, String)]) -> Vec<u16> {
    keys.iter()
        .map(|(policy, k)| sluice_store::keys::slot(policy, k))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slots_moved_by_hand_through_a_long_ask_window() {
    let cluster = RedisCluster::start_with_spare();
    // Keys on a few slots: per policy one on each of two masters; plus a one-key one that
    // stays, whose groups the moving keys share.
    let near = |s: u16| move |slot: u16| slot.abs_diff(s) < 200;
    let mut keys: Vec<(&'static str, String)> = Vec::new();
    for (policy, s) in [
        (POLICY, 100),
        (POLICY, 6000),
        (ONE_KEY, 12000),
        (ONE_KEY, 300),
    ] {
        keys.extend(keys_where(policy, 1, near(s)));
    }
    let slots = slots_of(&keys);
    let moving = slots.clone();
    keys.extend(keys_where(ONE_KEY, 1, near(700)));
    let (cluster, sent_again) = under_load(cluster, None, keys, "by hand", move |cluster| {
        for slot in &moving {
            // A pause after each key: checks on a key already moved get ASK meanwhile.
            let moved =
                cluster.migrate_slot(*slot, RedisCluster::SPARE, Duration::from_millis(1000));
            assert!(moved > 0, "slot {slot} had no keys to move");
        }
    })
    .await;
    for slot in slots {
        assert_eq!(cluster.master_of_slot(slot), RedisCluster::SPARE);
    }
    // Groups on a master met keys already moved (the ASK window is long): those checks came
    // back not run and went alone, and were still counted exactly.
    assert!(sent_again > 0, "no group met a moved key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_reshards_2000_slots_under_load() {
    reshard_2000_slots(RedisCluster::start_with_spare(), None, "redis-cli reshard").await;
}

/// The same over a Cluster that speaks TLS only (clients, bus, replication and the MIGRATEs
/// between nodes, client certificates required): redis-cli and the store speak TLS to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_reshards_2000_slots_of_a_tls_only_cluster_under_load() {
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls_with_spare(&certs);
    assert!(cluster.urls()[0].starts_with("rediss://"));
    reshard_2000_slots(cluster, Some(&certs), "redis-cli reshard over TLS").await;
}

/// `redis-cli --cluster reshard` of 2000 slots onto the spare master of `cluster` while the
/// clients run (over TLS with `certs` when given), then every moved key on the spare.
async fn reshard_2000_slots(cluster: RedisCluster, certs: Option<&Certs>, what: &str) {
    // redis-cli takes the lowest slots of each master (0-5460, 5461-10922, 10923-16383):
    // keys there move.
    let moves =
        |slot: u16| slot < 400 || (5461..5861).contains(&slot) || (10923..11323).contains(&slot);
    let mut keys = keys_where(POLICY, 4, moves);
    keys.extend(keys_where(ONE_KEY, 4, moves));
    let slots = slots_of(&keys);
    // And one-key keys that stay, sharing the groups of the moving ones.
    keys.extend(keys_where(ONE_KEY, 4, |slot| {
        (1000..5000).contains(&slot) || (7000..10000).contains(&slot)
    }));
    let (cluster, _) = under_load(cluster, certs, keys, what, |cluster| {
        cluster.reshard(2000, RedisCluster::SPARE);
    })
    .await;
    // redis-cli splits the 2000 between three masters, rounding.
    assert!(cluster.slots_of(RedisCluster::SPARE) >= 1990);
    for slot in slots {
        assert_eq!(cluster.master_of_slot(slot), RedisCluster::SPARE);
    }
}

/// A slot whose keys move one at a time (a limit's key and its candidate's on two nodes for a
/// while, as `redis-cli` may leave them): group calls on the old master run one part of a
/// pair and not the other, and that part alone goes again. Every limit and every candidate
/// accounts exactly: what it admitted (would allow) plus what it has left is its limit, give
/// or take the calls that failed, so no part of a pair ran twice or was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pairs_split_by_a_migration_run_each_part_once() {
    let cluster = RedisCluster::start_with_spare();
    let near = |s: u16| move |slot: u16| slot.abs_diff(s) < 200;
    let mut keys = keys_where(ONE_KEY, 3, near(100));
    let moving = slots_of(&keys);
    let moved = moving.clone();
    // One that stays on the old master, sharing its groups.
    keys.extend(keys_where(ONE_KEY, 1, near(1000)));
    let store =
        Arc::new(common::cluster_store(&cluster, "split", Duration::from_millis(500)).await);
    let calls = Arc::new(Calls::default());
    store.set_batch_observer(calls.clone());
    let stop = Arc::new(AtomicBool::new(false));
    // Per key: admitted, would allow, failed.
    let counts: Arc<Vec<[AtomicU64; 3]>> = Arc::new(
        (0..keys.len())
            .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            .collect(),
    );
    let running: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (store, keys, stop, counts) =
                (store.clone(), keys.clone(), stop.clone(), counts.clone());
            tokio::spawn(async move {
                let mut n = client;
                while !stop.load(Ordering::Relaxed) {
                    let key = n % keys.len();
                    n += 1;
                    let check = Check::new(ONE_KEY, &keys[key].1, params(ONE_KEY), 1);
                    let at = &counts[key];
                    match store
                        .check_with_candidate(&check, &candidate(), common::now_ms())
                        .await
                    {
                        Ok((decision, judged)) => {
                            at[0].fetch_add(u64::from(decision.allowed), Ordering::Relaxed);
                            at[1].fetch_add(u64::from(judged.allowed), Ordering::Relaxed);
                        }
                        Err(_) => {
                            at[2].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cluster = tokio::task::spawn_blocking(move || {
        for slot in &moving {
            // Short pauses: a lone pair whose keys are split meets TRYAGAIN until the second
            // key follows (the store retries it a few times, 20 ms apart).
            cluster.migrate_slot_key_by_key(*slot, RedisCluster::SPARE, Duration::from_millis(60));
        }
        cluster
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for client in running {
        client.await.unwrap();
    }
    let mut report = Vec::new();
    for (key, (policy, name)) in keys.iter().enumerate() {
        let [admitted, judged, failed] = counts[key].each_ref().map(|c| c.load(Ordering::Relaxed));
        let peek = Check::new(policy, name, params(policy), 0);
        let (left, candidate_left) = store
            .check_with_candidate(&peek, &candidate(), common::now_ms())
            .await
            .unwrap();
        report.push((admitted, judged, failed));
        for (what, n, left) in [
            ("limit", admitted, left.remaining),
            ("candidate", judged, candidate_left.remaining),
        ] {
            assert!(n > 0, "key {name}: the {what} admitted nothing");
            assert!(
                n + left <= LIMIT && n + left + failed >= LIMIT,
                "key {name}: the {what} admitted {n}, has {left} left, {failed} calls failed"
            );
        }
    }
    for slot in moved {
        assert_eq!(cluster.master_of_slot(slot), RedisCluster::SPARE);
    }
    println!(
        "split pairs: per key (admitted, would allow, failed) {report:?}; {} sent again alone",
        calls.sent_again.load(Ordering::Relaxed)
    );
}
