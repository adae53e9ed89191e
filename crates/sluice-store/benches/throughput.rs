//! A quick throughput loop per backend (not a criterion bench): `C` tasks checking random
//! keys for a few seconds against memory, a real redis-server and a real 6-node cluster,
//! started by the testkit. Prints checks/s per backend.
//!
//! `CARGO_TARGET_DIR=/work/target-b cargo bench -p sluice-store --bench throughput`

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Params};
use sluice_store::StoreExt;
use sluice_store::{
    Check, ClusterStore, ClusterStoreConfig, MemoryStore, RedisStore, RedisStoreConfig, Store,
};
use sluice_testkit::{RedisCluster, RedisServer};

const CONCURRENCY: usize = 64;
const KEYS: u64 = 10_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn run(name: &str, store: Arc<dyn Store>, algorithm: Algorithm, seconds: u64) {
    let params = Params::new(algorithm, 100_000, 60_000, 100_000).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..CONCURRENCY {
        let (store, stop, done, errors) = (
            Arc::clone(&store),
            Arc::clone(&stop),
            Arc::clone(&done),
            Arc::clone(&errors),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = t as u64;
            while !stop.load(Ordering::Relaxed) {
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let key = format!("user:{}", (i >> 33) % KEYS);
                let check = Check::new("bench", &key, params, 1);
                // The memory store never yields by itself; let the timer run.
                tokio::task::yield_now().await;
                match store.check(&check, now_ms()).await {
                    Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    println!(
        "{name:8} {:22} {CONCURRENCY} tasks: {:>9.0} checks/s ({n} in {secs:.1} s, {} errors)",
        algorithm.as_str(),
        n as f64 / secs,
        errors.load(Ordering::Relaxed)
    );
}

fn main() {
    let seconds = std::env::var("SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let redis = RedisServer::start();
    let cluster = RedisCluster::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let redis_store = RedisStore::new(RedisStoreConfig {
            url: redis.url(),
            timeout: Duration::from_secs(1),
            ..RedisStoreConfig::default()
        })
        .unwrap();
        let cluster_store = ClusterStore::new(ClusterStoreConfig {
            nodes: cluster.urls(),
            timeout: Duration::from_secs(1),
            ..ClusterStoreConfig::default()
        })
        .unwrap();
        cluster_store
            .wait_connected(Duration::from_secs(10))
            .await
            .unwrap();
        let stores: [(&str, Arc<dyn Store>); 3] = [
            ("memory", Arc::new(MemoryStore::default())),
            ("redis", Arc::new(redis_store)),
            ("cluster", Arc::new(cluster_store)),
        ];
        for (name, store) in stores {
            for algorithm in [Algorithm::TokenBucket, Algorithm::SlidingWindowLog] {
                run(name, Arc::clone(&store), algorithm, seconds).await;
            }
        }
    });
}
