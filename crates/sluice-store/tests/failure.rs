//! Failure behaviour on real servers: a dead or hung backend gives errors within the timeout
//! (never a hang, never a pile-up), and the same store object serves again once the server
//! is back or the cluster has failed over.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::StoreExt;
use sluice_store::{Check, RedisStore, RedisStoreConfig, Store, StoreError};
use sluice_testkit::{RedisCluster, RedisServer};

const TIMEOUT: Duration = Duration::from_millis(200);
/// Scheduling slack on a loaded 2-core machine: "within the timeout" means within this.
const SLACK: Duration = Duration::from_millis(800);

fn params() -> Params {
    // A day-long window: what was consumed stays visible for the whole test.
    Params::new(Algorithm::FixedWindow, 1_000_000, 86_400_000, 1_000_000).unwrap()
}

async fn timed_check(store: &dyn Store, key: &str) -> (Result<(), StoreError>, Duration) {
    let check = Check::new("fail", key, params(), 1);
    let start = Instant::now();
    let result = store.check(&check, common::now_ms()).await.map(|d| {
        assert!(d.allowed);
    });
    (result, start.elapsed())
}

/// Polls until a check succeeds; the time it took.
async fn until_serving(store: &dyn Store, key: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let (result, took) = timed_check(store, key).await;
        assert!(took < TIMEOUT + SLACK, "a check took {took:?}");
        if result.is_ok() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "not serving {limit:?} later: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_killed_then_restarted() {
    let mut server = RedisServer::start();
    let store: Arc<dyn Store> = Arc::new(common::redis_store(&server, "fail", TIMEOUT));
    assert!(timed_check(store.as_ref(), "k").await.0.is_ok());
    assert!(store.ping().await.is_ok());

    server.kill();
    // Many concurrent checks while it is gone: each fails, and within the timeout.
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            timed_check(store.as_ref(), &format!("k{i}")).await
        }));
    }
    for task in tasks {
        let (result, took) = task.await.unwrap();
        let err = result.expect_err("the server is dead");
        assert!(err.is_backend_failure(), "{err:?}");
        assert!(
            took < TIMEOUT + SLACK,
            "a check against a dead server took {took:?}"
        );
    }
    assert!(store.ping().await.is_err());

    // Back on the same port (empty, no scripts loaded): the same store serves within 2 s.
    server.restart();
    let took = until_serving(store.as_ref(), "k", Duration::from_secs(2)).await;
    println!("redis: serving again {took:?} after restart");
    assert!(store.ping().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hung_redis_neither_blocks_nor_piles_up() {
    let server = RedisServer::start();
    let store: Arc<dyn Store> = Arc::new(
        RedisStore::new(RedisStoreConfig {
            url: server.url(),
            prefix: "hung".into(),
            timeout: TIMEOUT,
            max_in_flight: 8,
            ..RedisStoreConfig::default()
        })
        .unwrap(),
    );
    assert!(timed_check(store.as_ref(), "k").await.0.is_ok());

    server.pause();
    let mut tasks = Vec::new();
    for i in 0..64 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            timed_check(store.as_ref(), &format!("k{i}")).await
        }));
    }
    let mut refused = 0;
    for task in tasks {
        let (result, took) = task.await.unwrap();
        assert!(
            took < TIMEOUT + SLACK,
            "a check against a hung server took {took:?}"
        );
        match result {
            Err(StoreError::Unavailable(_)) => refused += 1,
            Err(StoreError::Timeout) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    // At most 8 waited for the hung server; the rest were refused at once.
    assert!(refused >= 64 - 8, "only {refused} refused");
    assert!(store.ping().await.is_err());

    server.resume();
    let took = until_serving(store.as_ref(), "k", Duration::from_secs(2)).await;
    println!("redis: serving again {took:?} after resume");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_serves_again_after_a_master_fails_over() {
    let mut cluster = RedisCluster::start();
    let store: Arc<dyn Store> =
        Arc::new(common::cluster_store(&cluster, "failover", Duration::from_millis(500)).await);
    let key = "user:42";
    let slot = sluice_store::keys::slot("fail", key);
    // A little state that must survive (replicated before the kill).
    for _ in 0..5 {
        assert!(timed_check(store.as_ref(), key).await.0.is_ok());
    }
    // Replicas synced (start waits for master_link_status:up; wait for the writes too).
    cluster.wait_healthy(Duration::from_secs(10));
    let master = cluster.master_of_slot(slot);
    cluster.wait_replicated(master, Duration::from_secs(10));
    cluster.kill(master);
    // Every call during the failover ends within the timeout, and the same store serves the
    // slot again once a replica took over.
    let took = {
        let start = Instant::now();
        loop {
            let (result, call) = timed_check(store.as_ref(), key).await;
            assert!(
                call < Duration::from_millis(500) + SLACK,
                "a check during failover took {call:?}"
            );
            if result.is_ok() {
                break start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "not serving 30 s after the kill: {result:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    println!("cluster: serving slot {slot} again {took:?} after kill -9 of its master");
    assert_ne!(cluster.master_of_slot(slot), master, "a replica took over");
    // The state written before the kill was replicated: 5 (+ the successful check) consumed.
    let peek = Check::new("fail", key, params(), 0);
    let left = store
        .check(&peek, common::now_ms())
        .await
        .unwrap()
        .remaining;
    assert!(left <= 1_000_000 - 6, "state lost in failover: {left} left");
    assert!(store.ping().await.is_ok());
}

/// One cluster master hung (SIGSTOP, shorter than the node timeout, so no failover) while 48
/// tasks check keys on every master: grouped per master, a check on the hung master fails
/// within its timeout, and checks on the other masters are answered as usual, so a group
/// that times out fails its own checks only. Once resumed, the master serves again.
/// The first group calls meet a script cache without the group script: it reaches each node
/// as EVAL of that node alone (loading it on every master would wait for the hung one, and
/// it did: 134 of 136 checks on live masters timed out before).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_cluster_master_fails_only_its_own_checks() {
    let cluster = RedisCluster::start();
    let store: Arc<dyn Store> =
        Arc::new(common::cluster_store(&cluster, "hungmaster", TIMEOUT).await);
    let keys: Arc<Vec<String>> = Arc::new((0..60).map(|i| format!("user:{i}")).collect());
    for key in keys.iter() {
        assert!(timed_check(store.as_ref(), key).await.0.is_ok());
    }
    let hung = cluster.master_of_slot(sluice_store::keys::slot("fail", &keys[0]));
    let on_hung: Vec<bool> = keys
        .iter()
        .map(|k| cluster.master_of_slot(sluice_store::keys::slot("fail", k)) == hung)
        .collect();
    assert!(on_hung.iter().any(|&h| !h), "every key on one master");

    cluster.pause(hung);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..48 {
        let (store, keys) = (Arc::clone(&store), Arc::clone(&keys));
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for i in 0..4 {
                let key = (t * 5 + i * 7) % keys.len();
                let (result, took) = timed_check(store.as_ref(), &keys[key]).await;
                answers.push((key, result, took));
            }
            answers
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.extend(task.await.unwrap());
    }
    let paused_for = start.elapsed();
    cluster.resume(hung);
    let (mut failed, mut served) = (0, 0);
    for (key, result, took) in &answers {
        assert!(
            *took < TIMEOUT + SLACK,
            "a check took {took:?} with a master hung"
        );
        if on_hung[*key] {
            assert!(
                matches!(
                    result,
                    Err(StoreError::Timeout | StoreError::Unavailable(_))
                ),
                "a check on the hung master answered {result:?}"
            );
            failed += 1;
        } else {
            assert!(
                result.is_ok(),
                "a check on a live master answered {result:?}"
            );
            served += 1;
        }
    }
    println!(
        "hung master: {failed} checks on it failed, {served} on the others served, in {paused_for:?}"
    );
    assert!(failed > 0 && served > 0);
    assert!(
        paused_for < Duration::from_millis(1500),
        "paused {paused_for:?}: near the node timeout, a failover may have begun"
    );
    let took = until_serving(store.as_ref(), &keys[0], Duration::from_secs(5)).await;
    println!("cluster: the hung master serves again {took:?} after resume");
}
