//! Slots moving under load: 12 concurrent clients check a few keys while their slots move to a
//! new master, once by hand (slowly, time spent in the ASK window) and once with
//! `redis-cli --cluster reshard`. Each client checks a sliding-log limit (two keys: grouped per
//! slot) and a token bucket (one key: grouped per master, so its groups hold keys of slots that
//! move and of slots that stay) at once. The store follows MOVED and ASK: no key admits more
//! than its limit, at most 2% of the answers fail while slots move, and none from 2 s after.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::{BatchObserver, Check, ClusterStore, Store, StoreKind};
use sluice_testkit::RedisCluster;

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

/// One answer: when (since the start), which key, whether admitted, whether it failed.
struct Answer {
    at: Duration,
    key: usize,
    allowed: bool,
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
                    let checks = pair.map(|key| Check {
                        policy: keys[key].0,
                        key: &keys[key].1,
                        params: params(keys[key].0),
                        cost: 1,
                    });
                    let now = common::now_ms();
                    let (a, b) =
                        tokio::join!(store.check(&checks[0], now), store.check(&checks[1], now));
                    for (key, result) in pair.into_iter().zip([a, b]) {
                        answers.push(Answer {
                            at: start.elapsed(),
                            key,
                            allowed: result.as_ref().is_ok_and(|d| d.allowed),
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
    keys: Vec<(&'static str, String)>,
    what: &str,
    move_slots: impl FnOnce(&RedisCluster) + Send + 'static,
) -> (RedisCluster, u64) {
    let store = Arc::new(common::cluster_store(&cluster, what, Duration::from_millis(500)).await);
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
    let (cluster, sent_again) = under_load(cluster, keys, "by hand", move |cluster| {
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
    let cluster = RedisCluster::start_with_spare();
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
    let (cluster, _) = under_load(cluster, keys, "redis-cli reshard", |cluster| {
        cluster.reshard(2000, RedisCluster::SPARE);
    })
    .await;
    // redis-cli splits the 2000 between three masters, rounding.
    assert!(cluster.slots_of(RedisCluster::SPARE) >= 1990);
    for slot in slots {
        assert_eq!(cluster.master_of_slot(slot), RedisCluster::SPARE);
    }
}
