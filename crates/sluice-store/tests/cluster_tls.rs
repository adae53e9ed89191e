//! A Redis Cluster that speaks TLS only (`--tls-cluster yes --tls-replication yes`, client
//! certificates required), as a managed cluster with in-transit encryption: checks on keys of
//! every master are exact through the nodes the cluster announces, and the same store serves a
//! slot again after its master is SIGKILLed and its replica takes over, what was replicated
//! kept.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::{Check, Store, StoreExt};
use sluice_testkit::RedisCluster;
use sluice_testkit::certs::Certs;

fn params(limit: u64) -> Params {
    Params::new(Algorithm::FixedWindow, limit, 86_400_000, limit).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tls_only_cluster_is_exact_and_followed_through_a_failover() {
    let certs = Certs::new();
    let mut cluster = RedisCluster::start_tls(&certs);
    assert!(cluster.urls()[0].starts_with("rediss://"));
    let store = common::cluster_store_over(
        &cluster,
        Some(&certs),
        "ctls",
        Duration::from_millis(500),
        Duration::ZERO,
    )
    .await;
    let store: Arc<dyn Store> = Arc::new(store);

    // Keys on every master, each exactly at its limit, checked from concurrent tasks.
    let keys: Vec<String> = (0..12).map(|i| format!("user:{i}")).collect();
    let masters: std::collections::HashSet<usize> = keys
        .iter()
        .map(|k| cluster.master_of_slot(sluice_store::keys::slot("p", k)))
        .collect();
    assert_eq!(masters.len(), 3, "the keys reach every master");
    let tasks: Vec<_> = keys
        .iter()
        .map(|key| {
            let (store, key) = (Arc::clone(&store), key.clone());
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..25 {
                    let check = Check::new("p", &key, params(20), 1);
                    if store.check(&check, common::now_ms()).await.unwrap().allowed {
                        admitted += 1;
                    }
                }
                admitted
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 20);
    }

    // The master of one key killed: its replica takes over (over TLS), the store follows.
    let key = &keys[0];
    let slot = sluice_store::keys::slot("p", key);
    let master = cluster.master_of_slot(slot);
    cluster.wait_replicated(master, Duration::from_secs(10));
    cluster.kill(master);
    let start = Instant::now();
    let check = Check::new("p", key, params(20), 0);
    let left = loop {
        match store.check(&check, common::now_ms()).await {
            Ok(decision) => break decision.remaining,
            Err(err) => assert!(
                start.elapsed() < Duration::from_secs(30),
                "not serving 30 s after the kill: {err}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "tls cluster: slot {slot} served again {:?} after kill -9 of its master",
        start.elapsed()
    );
    assert_ne!(cluster.master_of_slot(slot), master, "a replica took over");
    assert_eq!(left, 0, "the replicated count survived the failover");
}
