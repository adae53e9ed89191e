//! Two regions on one machine, for the multi-region test and benchmark: regions `a` and `b`,
//! each an in-process daemon on the wall clock with its own `redis-server`, every link
//! between them through a latency proxy. The global backend lives in region a: a reaches it
//! directly, b over the link; each region ships to the other's Redis over the link.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_testkit::{LatencyProxy, RedisServer};

use crate::Daemon;

/// Regions a and b and the links between them.
#[derive(Debug)]
pub struct World {
    pub ra: RedisServer,
    pub rb: RedisServer,
    /// a → b: a's deliveries to b's Redis.
    pub ab: LatencyProxy,
    /// b → a: b's deliveries to a's Redis and b's global checks.
    pub ba: LatencyProxy,
    pub a: Daemon,
    pub b: Daemon,
}

/// The config of one region: Redis backend, `[region]` and `policies` (TOML). Timeouts are
/// generous for a loaded 2-core machine; a peer's (3 s) is longer than any check may take, so
/// a check that waited on a partitioned peer would show.
pub fn region_config(
    region: &str,
    local: &str,
    global: &str,
    peer: &str,
    peer_url: &str,
    policies: &str,
) -> String {
    format!(
        r#"
[backend]
kind = "redis"
url = "{local}"
timeout = "2s"

[region]
name = "{region}"
global = {{ kind = "redis", url = "{global}", timeout = "2s" }}
peers = [ {{ name = "{peer}", kind = "redis", url = "{peer_url}", timeout = "3s" }} ]

{policies}
"#
    )
}

impl World {
    /// Both regions serving `policies`, links at `one_way` latency.
    pub async fn start(policies: &str, one_way: Duration) -> World {
        let (ra, rb) = (RedisServer::start(), RedisServer::start());
        let addr = |s: &RedisServer| {
            format!("127.0.0.1:{}", s.port())
                .parse()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let ab = LatencyProxy::start(addr(&rb), one_way);
        let ba = LatencyProxy::start(addr(&ra), one_way);
        let a = Daemon::with_wall_clock(&region_config(
            "a",
            &ra.url(),
            &ra.url(),
            "b",
            &ab.redis_url(),
            policies,
        ))
        .await;
        let b = Daemon::with_wall_clock(&region_config(
            "b",
            &rb.url(),
            &ba.redis_url(),
            "a",
            &ba.redis_url(),
            policies,
        ))
        .await;
        World {
            ra,
            rb,
            ab,
            ba,
            a,
            b,
        }
    }
}

/// Unix milliseconds of the wall clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Sleeps until unix time `at_ms`.
pub async fn sleep_until(at_ms: u64) {
    let now = now_ms();
    if at_ms > now {
        tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
    }
}
