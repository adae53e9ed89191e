//! Shared fixture: every backend (memory, redis, cluster) behind `Arc<dyn Store>`, on real
//! servers started by the testkit, so one test body runs over all of them.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_store::{
    BatchObserver, ClusterStore, ClusterStoreConfig, MemoryStore, OverrideStore, RedisStore,
    RedisStoreConfig, RedisTls, Store, StoreKind,
};
use sluice_testkit::certs::Certs;
use sluice_testkit::{RedisCluster, RedisServer, info_field};

/// Generous for tests on a loaded 2-core machine; the failure tests set their own.
pub const TEST_TIMEOUT: Duration = Duration::from_millis(2000);

pub struct Servers {
    pub redis: RedisServer,
    /// TLS only, a client certificate required (`--tls-auth-clients yes`), as managed Redis.
    pub redis_tls: RedisServer,
    pub cluster: RedisCluster,
    pub certs: Certs,
}

impl Servers {
    pub fn start() -> Servers {
        // Start them at once: the cluster takes a few seconds.
        let redis = std::thread::spawn(RedisServer::start);
        let certs = Certs::new();
        let redis_tls = RedisServer::start_tls(&certs);
        let cluster = RedisCluster::start();
        Servers {
            redis: redis.join().unwrap(),
            redis_tls,
            cluster,
            certs,
        }
    }
}

/// The TLS of a client of the test servers: their CA, the client certificate.
pub fn client_tls(certs: &Certs) -> RedisTls {
    RedisTls {
        files: sluice_tls::ClientFiles {
            ca_file: Some(certs.ca_file.clone()),
            cert_file: Some(certs.client.cert.clone()),
            key_file: Some(certs.client.key.clone()),
        },
        server_name: None,
    }
}

/// A store on the TLS-only server.
pub fn redis_tls_store_with(
    servers: &Servers,
    prefix: &str,
    timeout: Duration,
    ttl_grace: Duration,
) -> RedisStore {
    RedisStore::new(RedisStoreConfig {
        url: servers.redis_tls.tls_url(),
        prefix: prefix.into(),
        timeout,
        ttl_grace,
        tls: Some(client_tls(&servers.certs)),
        ..RedisStoreConfig::default()
    })
    .unwrap()
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
    cluster_store_over(cluster, None, prefix, timeout, ttl_grace).await
}

/// A store on `cluster`, connected; over TLS with the client certificate of `certs` when given
/// (a cluster started TLS only).
pub async fn cluster_store_over(
    cluster: &RedisCluster,
    certs: Option<&Certs>,
    prefix: &str,
    timeout: Duration,
    ttl_grace: Duration,
) -> ClusterStore {
    let store = ClusterStore::new(ClusterStoreConfig {
        nodes: cluster.urls(),
        prefix: prefix.into(),
        timeout,
        ttl_grace,
        tls: certs.map(client_tls),
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
            "redis-tls",
            Arc::new(redis_tls_store_with(
                servers,
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

/// The largest group of checks a script call carried.
#[derive(Debug, Default)]
pub struct LargestGroup(pub AtomicU64);

impl BatchObserver for LargestGroup {
    fn batch(&self, _backend: StoreKind, checks: usize) {
        self.0.fetch_max(checks as u64, Ordering::Relaxed);
    }
}

/// Checks and the script calls that carried them.
#[derive(Debug, Default)]
pub struct Carried {
    pub checks: AtomicU64,
    pub calls: AtomicU64,
}

impl BatchObserver for Carried {
    fn batch(&self, _backend: StoreKind, checks: usize) {
        self.checks.fetch_add(checks as u64, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

/// The EVALSHA calls `INFO commandstats` counts.
pub fn evalsha_calls(commandstats: &str) -> u64 {
    info_field(commandstats, "cmdstat_evalsha")
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("calls=").map(str::to_owned))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A small deterministic generator for test scripts.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}
