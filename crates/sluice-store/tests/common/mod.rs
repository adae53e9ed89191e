//! Shared fixture: every backend (memory, redis, cluster) behind `Arc<dyn Store>`, on real
//! servers started by the testkit, so one test body runs over all of them.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use sluice_store::{
    ClusterStore, ClusterStoreConfig, MemoryStore, OverrideStore, RedisStore, RedisStoreConfig,
    Store,
};
use sluice_testkit::{RedisCluster, RedisServer};

/// Generous for tests on a loaded 2-core machine; the failure tests set their own.
pub const TEST_TIMEOUT: Duration = Duration::from_millis(2000);

pub struct Servers {
    pub redis: RedisServer,
    pub cluster: RedisCluster,
}

impl Servers {
    pub fn start() -> Servers {
        // Start both at once: the cluster takes a few seconds.
        let redis = std::thread::spawn(RedisServer::start);
        let cluster = RedisCluster::start();
        Servers {
            redis: redis.join().unwrap(),
            cluster,
        }
    }
}

pub fn redis_store(server: &RedisServer, prefix: &str, timeout: Duration) -> RedisStore {
    redis_store_with(server, prefix, timeout, Duration::ZERO)
}

pub fn redis_store_with(
    server: &RedisServer,
    prefix: &str,
    timeout: Duration,
    ttl_grace: Duration,
) -> RedisStore {
    RedisStore::new(RedisStoreConfig {
        url: server.url(),
        prefix: prefix.into(),
        timeout,
        ttl_grace,
        ..RedisStoreConfig::default()
    })
    .unwrap()
}

pub async fn cluster_store(
    cluster: &RedisCluster,
    prefix: &str,
    timeout: Duration,
) -> ClusterStore {
    cluster_store_with(cluster, prefix, timeout, Duration::ZERO).await
}

pub async fn cluster_store_with(
    cluster: &RedisCluster,
    prefix: &str,
    timeout: Duration,
    ttl_grace: Duration,
) -> ClusterStore {
    let store = ClusterStore::new(ClusterStoreConfig {
        nodes: cluster.urls(),
        prefix: prefix.into(),
        timeout,
        ttl_grace,
        ..ClusterStoreConfig::default()
    })
    .unwrap();
    store.wait_connected(Duration::from_secs(10)).await.unwrap();
    store
}

/// One store per backend, each with its own key prefix and exact TTLs.
pub async fn all_stores(servers: &Servers, prefix: &str) -> Vec<(&'static str, Arc<dyn Store>)> {
    all_stores_with(servers, prefix, Duration::ZERO).await
}

/// Replays of synthetic time (the conformance table) run far faster or slower than the clock
/// Redis expires keys by, so they keep keys `ttl_grace` longer (which changes no decision).
pub async fn all_stores_with(
    servers: &Servers,
    prefix: &str,
    ttl_grace: Duration,
) -> Vec<(&'static str, Arc<dyn Store>)> {
    vec![
        ("memory", Arc::new(MemoryStore::default()) as Arc<dyn Store>),
        (
            "redis",
            Arc::new(redis_store_with(
                &servers.redis,
                prefix,
                TEST_TIMEOUT,
                ttl_grace,
            )),
        ),
        (
            "cluster",
            Arc::new(cluster_store_with(&servers.cluster, prefix, TEST_TIMEOUT, ttl_grace).await),
        ),
    ]
}

/// One override store per backend, each with its own key prefix.
pub async fn override_stores(
    servers: &Servers,
    prefix: &str,
) -> Vec<(&'static str, Arc<dyn OverrideStore>)> {
    vec![
        (
            "memory",
            Arc::new(MemoryStore::default()) as Arc<dyn OverrideStore>,
        ),
        (
            "redis",
            Arc::new(redis_store(&servers.redis, prefix, TEST_TIMEOUT)),
        ),
        (
            "cluster",
            Arc::new(cluster_store(&servers.cluster, prefix, TEST_TIMEOUT).await),
        ),
    ]
}

/// Unix ms now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
