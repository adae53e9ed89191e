//! The replicated store on real redis-servers (one per region, peers reached directly or
//! through the testkit's latency proxy), with time given by hand: deliveries merge with max
//! (late, duplicated and reordered ones change nothing), a region's decision counts what peers
//! shipped, unacknowledged consumption is capped by the budget, and a partition buffers totals
//! that reach the peer exactly once the link heals.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use sluice_core::{Algorithm, Params};
use sluice_store::StoreExt;
use sluice_store::{
    Check, ClusterStore, ClusterStoreConfig, PeerBackend, RedisStore, RedisStoreConfig,
    ReplicatedStore, ReplicatedStoreConfig, Replication, SharedBackend, keys,
};
use sluice_testkit::{LatencyProxy, Partition, RedisCluster, RedisServer};

const T0: u64 = 1_800_000_000_000;
const WINDOW: u64 = 10_000;

fn backend(url: String, timeout_ms: u64) -> SharedBackend {
    SharedBackend::from(
        RedisStore::new(RedisStoreConfig {
            url,
            prefix: "rl".into(),
            timeout: Duration::from_millis(timeout_ms),
            connect_timeout: Duration::from_millis(200),
            ..RedisStoreConfig::default()
        })
        .unwrap(),
    )
}

/// Region `name` on `local`, shipping to `peer` (name, url).
fn region(name: &str, local: &RedisServer, peer: (&str, String), budget: f64) -> ReplicatedStore {
    let store = ReplicatedStore::new(ReplicatedStoreConfig {
        region: name.into(),
        local: backend(local.url(), 2000),
        peers: vec![PeerBackend {
            name: peer.0.into(),
            backend: backend(peer.1, 300),
        }],
        max_pending: 1000,
    });
    let replication = Replication {
        sync_interval: Duration::from_millis(100),
        overshoot_budget: budget,
    };
    store.set_policies(HashMap::from([
        ("p".into(), replication),
        ("s".into(), replication),
    ]));
    store
}

fn check(policy: &str, key: &'static str, limit: u64, cost: u64) -> Check<'static> {
    let algorithm = if policy == "s" {
        Algorithm::SlidingWindowCounter
    } else {
        Algorithm::FixedWindow
    };
    Check::new(
        if policy == "s" { "s" } else { "p" },
        key,
        Params {
            algorithm,
            limit,
            window_ms: WINDOW,
            burst: limit,
            counting: sluice_core::Counting::Admitted,
            calendar: None,
        },
        cost,
    )
}

async fn admit(store: &ReplicatedStore, c: &Check<'_>, times: usize, now: u64) -> usize {
    let mut n = 0;
    for _ in 0..times {
        n += usize::from(store.check(c, now).await.unwrap().allowed);
    }
    n
}

fn field(server: &RedisServer, key: &str, field: &str) -> String {
    let hash = keys::window_key("rl", "p", key, Algorithm::FixedWindow, WINDOW, T0 / WINDOW);
    server.cli(&["HGET", &hash, field])
}

#[tokio::test]
async fn peers_totals_count_and_late_or_duplicate_deliveries_change_nothing() {
    let (ra, rb) = (RedisServer::start(), RedisServer::start());
    let a1 = region("a", &ra, ("b", rb.url()), 1.0);
    let a2 = region("a", &ra, ("b", rb.url()), 1.0);
    let b = region("b", &rb, ("a", ra.url()), 1.0);
    let now = T0 + 10;
    let clock = move || now;
    let c = check("p", "k", 10, 1);
    // Two daemons of region a: totals 2 then 5 in the region's one field.
    assert_eq!(admit(&a1, &c, 2, now).await, 2);
    assert_eq!(admit(&a2, &c, 3, now).await, 3);
    // The newer total first, then the stale one, late: max keeps 5.
    assert_eq!(a2.flush_all(0, &clock).await.delivered, 1);
    assert_eq!(field(&rb, "k", "r:a"), "5");
    assert_eq!(a1.flush_all(0, &clock).await.delivered, 1);
    assert_eq!(field(&rb, "k", "r:a"), "5");
    // Region b decides on its own 0 plus a's 5: five more pass, the sixth does not.
    assert_eq!(admit(&b, &c, 6, now).await, 5);
    // A duplicate delivery (the same total again, as after a lost acknowledgement).
    b.flush_all(0, &clock).await;
    assert_eq!(field(&ra, "k", "r:b"), "5");
    b.flush_all(0, &clock).await;
    assert_eq!(field(&ra, "k", "r:b"), "5");
    assert_eq!(field(&ra, "k", "r:a"), "5");
    // Acknowledgements are kept beside the totals.
    assert_eq!(field(&ra, "k", "a:b"), "5");
    assert_eq!(a1.pending()[0].1, 0);
}

#[tokio::test]
async fn unacknowledged_consumption_is_capped_by_the_budget() {
    let (ra, rb) = (RedisServer::start(), RedisServer::start());
    // limit 100, budget 0.05, one peer: at most 5 unacknowledged.
    let a = region("a", &ra, ("b", rb.url()), 0.05);
    let now = T0 + 20;
    let clock = move || now;
    let c = check("p", "cap", 100, 1);
    assert_eq!(admit(&a, &c, 8, now).await, 5);
    // Denied by the cap, not the limit: what is left of the limit, and the wait for an
    // acknowledgement (one sync interval), not the window's end.
    let denied = a.check(&c, now).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.remaining, 95);
    assert_eq!(denied.retry_after_ms, 100);
    a.flush(0, &clock).await; // not due yet: nothing shipped
    assert_eq!(a.pending()[0].1, 1);
    let later = now + 100;
    a.flush(0, &move || later).await;
    assert_eq!(field(&ra, "cap", "a:b"), "5");
    assert_eq!(admit(&a, &c, 8, later).await, 5);
    // A check costing more than the cap passes only with nothing unacknowledged.
    let big = check("p", "big", 100, 8);
    assert!(a.check(&big, later).await.unwrap().allowed);
    assert!(!a.check(&big, later).await.unwrap().allowed);
    a.flush(0, &move || later + 100).await;
    assert!(a.check(&big, later + 100).await.unwrap().allowed);
    // A sliding window counter counts the previous window's unacknowledged part too.
    let s = check("s", "cap", 100, 1);
    assert_eq!(admit(&a, &s, 6, now).await, 5);
    let next_window = T0 + WINDOW + 10;
    assert_eq!(admit(&a, &s, 1, next_window).await, 0);
}

#[tokio::test]
async fn remaining_is_the_limit_minus_what_every_region_used_and_the_cap_still_gates() {
    let (ra, rb) = (RedisServer::start(), RedisServer::start());
    // limit 100 000, budget 0.05, two regions: a cap of 5 000 unacknowledged per region.
    let a = region("a", &ra, ("b", rb.url()), 0.05);
    let b = region("b", &rb, ("a", ra.url()), 0.05);
    let now = T0 + 60;
    let clock = move || now;
    let c = check("p", "seventy", 100_000, 1);
    assert_eq!(admit(&a, &c, 40, now).await, 40);
    assert_eq!(admit(&b, &c, 30, now).await, 30);
    // Before any delivery each region knows its own use only.
    let peek = check("p", "seventy", 100_000, 0);
    assert_eq!(a.check(&peek, now).await.unwrap().remaining, 100_000 - 40);
    assert_eq!(a.flush_all(0, &clock).await.delivered, 1);
    assert_eq!(b.flush_all(0, &clock).await.delivered, 1);
    // 70 used in all: 99 930 left, on either side, after a check as on a peek.
    assert_eq!(a.check(&peek, now).await.unwrap().remaining, 99_930);
    let next = a.check(&c, now).await.unwrap();
    assert!(next.allowed);
    assert_eq!(next.remaining, 99_929);
    assert_eq!(b.check(&peek, now).await.unwrap().remaining, 99_930);
    // The cap still gates: a region alone admits at most 5 000 unacknowledged, and the
    // denial says to come back after a sync interval.
    let big = check("p", "seventy", 100_000, 4_000);
    assert!(b.check(&big, now).await.unwrap().allowed);
    let over_cap = b.check(&big, now).await.unwrap();
    assert!(!over_cap.allowed);
    // (b has not yet heard of a's 71st.)
    assert_eq!(over_cap.remaining, 100_000 - 70 - 4_000);
    assert_eq!(over_cap.retry_after_ms, 100);
    // Once the limit itself is spent (a small one here), the wait is the window's end and
    // nothing is left.
    let small = check("p", "small", 10, 1);
    let b1 = region("b", &rb, ("a", ra.url()), 1.0);
    assert_eq!(admit(&b1, &small, 12, now).await, 10);
    let spent = b1.check(&small, now).await.unwrap();
    assert_eq!((spent.allowed, spent.remaining), (false, 0));
    assert_eq!(spent.retry_after_ms, WINDOW - now % WINDOW);
}

#[tokio::test]
async fn a_partition_buffers_totals_and_the_heal_delivers_them_exactly() {
    let (ra, rb) = (RedisServer::start(), RedisServer::start());
    let proxy = LatencyProxy::start(
        format!("127.0.0.1:{}", rb.port()).parse().unwrap(),
        Duration::from_millis(20),
    );
    let a = region("a", &ra, ("b", proxy.redis_url()), 0.05);
    let mut now = T0 + 30;
    let c = check("p", "part", 1000, 1);
    assert_eq!(admit(&a, &c, 10, now).await, 10);
    assert!(a.flush_all(0, &move || now).await.delivered == 1);
    assert_eq!(field(&rb, "part", "r:a"), "10");

    proxy.partition(Partition::Refuse);
    now += 200;
    // Checks never wait on the peer. Partitioned, the cap is still the budget's (50) until a
    // delivery fails...
    assert_eq!(admit(&a, &c, 60, now).await, 50);
    let report = a.flush_all(0, &move || now).await;
    assert!(report.failed);
    assert_eq!(a.pending()[0].1, 1);
    // ...then the region's fair share (500 of 1000) beyond what b acknowledged.
    assert_eq!(admit(&a, &c, 500, now).await, 500 - 50);
    assert_eq!(field(&rb, "part", "r:a"), "10");

    proxy.heal();
    now += 200;
    let mut delivered = false;
    for _ in 0..20 {
        if a.flush_all(0, &move || now).await.delivered == 1 {
            delivered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(delivered, "the heal delivers the buffered total");
    // Exactly what was admitted, no more, no less; delivering again changes nothing.
    assert_eq!(field(&ra, "part", "r:a"), "510");
    assert_eq!(field(&rb, "part", "r:a"), "510");
    assert_eq!(a.pending()[0].1, 0);
    // Back under the budget's cap once b acknowledged.
    assert_eq!(admit(&a, &c, 60, now).await, 50);
}

#[tokio::test]
async fn a_batch_is_all_or_nothing() {
    let (ra, rb) = (RedisServer::start(), RedisServer::start());
    let a = region("a", &ra, ("b", rb.url()), 1.0);
    let now = T0 + 40;
    let x = check("p", "bx", 3, 2);
    let y = check("p", "by", 3, 4);
    let denied = a.check_all(&[x, y], now).await.unwrap_err();
    assert!(denied.to_string().contains("cost"), "{denied}");
    let y = check("p", "by", 3, 1);
    let both = a.check_all(&[x, y], now).await.unwrap();
    assert!(both.iter().all(|d| d.allowed));
    let again = a.check_all(&[x, y], now).await.unwrap();
    assert!(!again[0].allowed && again[1].allowed);
    assert_eq!(again[1].remaining, 2, "nothing consumed by a denied batch");
}

#[tokio::test]
async fn a_region_on_a_cluster_replicates_to_a_single_server_and_back() {
    let cluster = RedisCluster::start();
    let rb = RedisServer::start();
    let local = ClusterStore::new(ClusterStoreConfig {
        nodes: cluster.urls(),
        prefix: "rl".into(),
        timeout: Duration::from_secs(2),
        ..ClusterStoreConfig::default()
    })
    .unwrap();
    local.wait_connected(Duration::from_secs(10)).await.unwrap();
    let a = ReplicatedStore::new(ReplicatedStoreConfig {
        region: "a".into(),
        local: SharedBackend::from(local.clone()),
        peers: vec![PeerBackend {
            name: "b".into(),
            backend: backend(rb.url(), 1000),
        }],
        max_pending: 1000,
    });
    let replication = Replication {
        sync_interval: Duration::from_millis(100),
        overshoot_budget: 1.0,
    };
    a.set_policies(HashMap::from([("p".into(), replication)]));
    let cluster_backend = SharedBackend::from(local);
    let b = ReplicatedStore::new(ReplicatedStoreConfig {
        region: "b".into(),
        local: backend(rb.url(), 2000),
        peers: vec![PeerBackend {
            name: "a".into(),
            backend: cluster_backend,
        }],
        max_pending: 1000,
    });
    b.set_policies(HashMap::from([("p".into(), replication)]));
    let now = T0 + 50;
    let clock = move || now;
    // Keys on many slots: each delivery groups its merges by slot.
    let keys: [&'static str; 8] = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"];
    for key in keys {
        assert_eq!(admit(&a, &check("p", key, 10, 1), 3, now).await, 3);
        assert_eq!(admit(&b, &check("p", key, 10, 1), 4, now).await, 4);
    }
    assert_eq!(a.flush_all(0, &clock).await.delivered, 8);
    assert_eq!(b.flush_all(0, &clock).await.delivered, 8);
    for key in keys {
        assert_eq!(field(&rb, key, "r:a"), "3");
        // 3 of a's + 4 of b's seen on both sides: 3 more pass in each region.
        assert_eq!(admit(&a, &check("p", key, 10, 1), 5, now).await, 3, "{key}");
    }
    // A batch across slots on a cluster is refused rather than split.
    let err = a
        .check_all(&[check("p", "k0", 10, 1), check("p", "k1", 10, 1)], now)
        .await;
    assert!(
        keys::slot("p", "k0") == keys::slot("p", "k1") || err.is_err(),
        "{err:?}"
    );
}
