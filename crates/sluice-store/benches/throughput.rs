//! A quick throughput loop per backend (not a criterion bench): `C` tasks checking random
//! keys for a few seconds against memory, a real redis-server and a real 6-node cluster,
//! started by the testkit. Prints checks/s per backend, then on memory and Redis side by side
//! what a usage policy costs: asks alone, and asks with a charge after every one
//! (checks+charges/s ÷ checks/s).
//!
//! `CARGO_TARGET_DIR=/work/target-b cargo bench -p sluice-store --bench throughput`

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{Algorithm, Mode, Params};
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

/// What the loop sends: ordinary checks, or a usage policy's asks with every other call a
/// charge.
#[derive(Clone, Copy, PartialEq)]
enum Mix {
    Checks,
    Asks,
    AsksAndCharges,
}

async fn run(
    name: &str,
    store: Arc<dyn Store>,
    algorithm: Algorithm,
    seconds: u64,
    mix: Mix,
) -> f64 {
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
                let mode = match mix {
                    Mix::Checks => Mode::Consume,
                    Mix::AsksAndCharges if i & (1 << 40) != 0 => Mode::Charge,
                    Mix::Asks | Mix::AsksAndCharges => Mode::Ask,
                };
                let check = Check::new("bench", &key, params, 1).in_mode(mode);
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
    let what = match mix {
        Mix::Checks => "checks",
        Mix::Asks => "asks",
        Mix::AsksAndCharges => "asks+charges",
    };
    println!(
        "{name:8} {:22} {CONCURRENCY} tasks: {:>9.0} {what}/s ({n} in {secs:.1} s, {} errors)",
        algorithm.as_str(),
        n as f64 / secs,
        errors.load(Ordering::Relaxed)
    );
    n as f64 / secs
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
        let only_usage = std::env::var("USAGE_ONLY").is_ok();
        for (name, store) in &stores {
            if only_usage {
                break;
            }
            for algorithm in [Algorithm::TokenBucket, Algorithm::SlidingWindowLog] {
                run(name, Arc::clone(store), algorithm, seconds, Mix::Checks).await;
            }
        }
        // A charge costs what a check costs: one script call, one lock. The two mixes run in
        // the order A B B A, so what drifts during a run (the machine's load, a table that
        // grows, a server warming up) weighs on both alike; the ratio is of their sums.
        for (name, store) in &stores[..2] {
            for algorithm in [Algorithm::FixedWindow, Algorithm::TokenBucket] {
                let (mut asks, mut mixed) = (0.0, 0.0);
                for mix in [Mix::Asks, Mix::AsksAndCharges, Mix::AsksAndCharges, Mix::Asks] {
                    let rate = run(name, Arc::clone(store), algorithm, seconds, mix).await;
                    match mix {
                        Mix::AsksAndCharges => mixed += rate,
                        _ => asks += rate,
                    }
                }
                println!(
                    "{name:8} {:22} asks+charges/s ÷ asks/s = {:.3} (A B B A)",
                    algorithm.as_str(),
                    mixed / asks
                );
            }
        }
    });
}
