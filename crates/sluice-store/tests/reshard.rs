//! Slots moving under load: 12 concurrent clients check a sliding-log limit on a few keys while
//! their slots move to a new master, once by hand (slowly, time spent in the ASK window) and
//! once with `redis-cli --cluster reshard`. The store follows MOVED and ASK: no key admits more
//! than its limit, at most 2% of the answers fail while slots move, and none from 2 s after.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::{Check, ClusterStore, Store};
use sluice_testkit::RedisCluster;

const POLICY: &str = "reshard";
const CLIENTS: usize = 12;
/// Per key, over a window longer than the test: every admission of the run counts.
const LIMIT: u64 = 3000;
/// After the move ends, answers must all succeed from this long on.
const SETTLE: Duration = Duration::from_secs(2);

fn params() -> Params {
    Params::new(Algorithm::SlidingWindowLog, LIMIT, 600_000, LIMIT).unwrap()
}

/// One answer: when (since the start), which key, whether admitted, whether it failed.
struct Answer {
    at: Duration,
    key: usize,
    allowed: bool,
    failed: Option<String>,
}

/// Starts the clients; they run until `stop`.
fn clients(
    store: &Arc<ClusterStore>,
    keys: &[String],
    start: Instant,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Answer>>> {
    (0..CLIENTS)
        .map(|client| {
            let (store, keys, stop) = (store.clone(), keys.to_vec(), stop.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = client;
                while !stop.load(Ordering::Relaxed) {
                    let key = n % keys.len();
                    n += 1;
                    let check = Check {
                        policy: POLICY,
                        key: &keys[key],
                        params: params(),
                        cost: 1,
                    };
                    let result = store.check(&check, common::now_ms()).await;
                    answers.push(Answer {
                        at: start.elapsed(),
                        key,
                        allowed: result.as_ref().is_ok_and(|d| d.allowed),
                        failed: result.err().map(|e| e.to_string()),
                    });
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                answers
            })
        })
        .collect()
}

/// Runs the clients from 1 s before `move_slots` until 3 s after it, then checks the bounds.
async fn under_load(
    cluster: RedisCluster,
    keys: Vec<String>,
    what: &str,
    move_slots: impl FnOnce(&RedisCluster) + Send + 'static,
) -> RedisCluster {
    let store = Arc::new(common::cluster_store(&cluster, what, Duration::from_millis(500)).await);
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
    println!(
        "{what}: slots moved in {:?}; {failed_during} of {} answers failed while moving, \
         {failed_after} of {} after; admitted per key {admitted:?} (limit {LIMIT}); \
         failures: {reasons:?}",
        moved - moving,
        during.len(),
        after.len(),
    );
    for (key, n) in admitted.iter().enumerate() {
        assert!(*n <= LIMIT, "key {} admitted {n} > {LIMIT}", keys[key]);
    }
    assert!(!during.is_empty() && !after.is_empty());
    assert!(
        failed_during * 50 <= during.len(),
        "{failed_during} of {} answers failed while slots moved (over 2%)",
        during.len()
    );
    assert_eq!(failed_after, 0, "answers failed after the move ended");
    cluster
}

/// `n` keys of the policy whose slots satisfy `wanted`.
fn keys_where(n: usize, wanted: impl Fn(u16) -> bool) -> Vec<String> {
    (0..100_000)
        .map(|i| format!("user:{i}"))
        .filter(|k| wanted(sluice_store::keys::slot(POLICY, k)))
        .take(n)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slots_moved_by_hand_through_a_long_ask_window() {
    let cluster = RedisCluster::start_with_spare();
    // Four keys on four slots: one on each master, and one more.
    let keys: Vec<String> = [100, 6000, 12000, 15000]
        .iter()
        .flat_map(|s: &u16| keys_where(1, |slot| slot.abs_diff(*s) < 200))
        .collect();
    let slots: Vec<u16> = keys
        .iter()
        .map(|k| sluice_store::keys::slot(POLICY, k))
        .collect();
    let moving = slots.clone();
    let cluster = under_load(cluster, keys, "by hand", move |cluster| {
        for slot in &moving {
            // A pause after each key: checks on a key already moved get ASK meanwhile.
            let moved =
                cluster.migrate_slot(*slot, RedisCluster::SPARE, Duration::from_millis(1500));
            assert!(moved > 0, "slot {slot} had no keys to move");
        }
    })
    .await;
    for slot in slots {
        assert_eq!(cluster.master_of_slot(slot), RedisCluster::SPARE);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_reshards_2000_slots_under_load() {
    let cluster = RedisCluster::start_with_spare();
    // redis-cli takes the lowest slots of each master (0-5460, 5461-10922, 10923-16383):
    // keys there move.
    let keys = keys_where(4, |slot| {
        slot < 400 || (5461..5861).contains(&slot) || (10923..11323).contains(&slot)
    });
    let slots: Vec<u16> = keys
        .iter()
        .map(|k| sluice_store::keys::slot(POLICY, k))
        .collect();
    let cluster = under_load(cluster, keys, "redis-cli reshard", |cluster| {
        cluster.reshard(2000, RedisCluster::SPARE);
    })
    .await;
    // redis-cli splits the 2000 between three masters, rounding.
    assert!(cluster.slots_of(RedisCluster::SPARE) >= 1990);
    for slot in slots {
        assert_eq!(cluster.master_of_slot(slot), RedisCluster::SPARE);
    }
}
