//! The wait for the backends before the daemon serves.
//!
//! A Redis client connects in the background, and a Cluster client must also learn the slot
//! map before it can route a command. A check answered before that is answered by the
//! policy's fail mode although Redis is healthy: an unmetered request when it fails open, a
//! refused good one when it fails closed. A sidecar restarted by every deploy would meet that
//! on every start, so the daemon first waits, up to `backend.connect_timeout`, until every
//! backend it decides on (this region's, and with `[region]` the global one and the one
//! replication writes to) answers a ping. Past the bound it serves anyway: `/readyz` answers
//! 503 and the fail modes apply until the backend answers, which the caller logs once.

use std::sync::Arc;
use std::time::Duration;

use sluice_store::Store;
use tokio::time::Instant;

use crate::service::stores::Stores;
use sluice_config::{BackendSettings, RegionSettings};

/// Between two pings of a backend that did not answer yet.
const RETRY_EVERY: Duration = Duration::from_millis(20);

/// A backend that did not answer within its connect timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreached {
    /// Its kind and address, credentials redacted.
    pub backend: String,
    /// The last failure (a store error never carries credentials).
    pub reason: String,
}

/// What the wait found: the backends still unreached, and the longest bound waited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connected {
    pub unreached: Vec<Unreached>,
    pub waited_at_most: Duration,
}

/// Waits until every networked backend of `stores` answers a ping, each within its own
/// `connect_timeout`, all at once. Process memory needs no wait.
pub async fn connect(
    stores: &Stores,
    backend: &BackendSettings,
    region: &RegionSettings,
) -> Connected {
    let mut waits: Vec<(Arc<dyn Store>, &BackendSettings)> = Vec::new();
    if backend.connect_timeout().is_some() {
        waits.push((Arc::clone(&stores.local), backend));
    }
    if let (Some((global, _)), Some(settings)) = (&stores.region.global, &region.global) {
        waits.push((Arc::clone(global), settings));
    }
    if let (Some(replicated), Some(settings)) = (&stores.region.replicated, &region.local) {
        waits.push((Arc::new(replicated.clone()), settings));
    }
    let waited_at_most = waits
        .iter()
        .filter_map(|(_, settings)| settings.connect_timeout())
        .max()
        .unwrap_or(Duration::ZERO);
    let unreached = futures::future::join_all(waits.into_iter().map(|(store, settings)| {
        let limit = settings.connect_timeout().unwrap_or(Duration::ZERO);
        async move {
            let reason = until_it_answers(store.as_ref(), limit).await?;
            Some(Unreached {
                backend: format!("{} {}", settings.kind(), settings.address()),
                reason,
            })
        }
    }))
    .await
    .into_iter()
    .flatten()
    .collect();
    Connected {
        unreached,
        waited_at_most,
    }
}

/// Pings `store` until it answers or `limit` passed; the last failure if it never answered.
async fn until_it_answers(store: &dyn Store, limit: Duration) -> Option<String> {
    let deadline = Instant::now() + limit;
    loop {
        let failure = match tokio::time::timeout_at(deadline, store.ping()).await {
            Ok(Ok(())) => return None,
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {limit:?}"),
        };
        if Instant::now() + RETRY_EVERY >= deadline {
            return Some(failure);
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use sluice_store::{MemoryStoreConfig, RedisStoreConfig};

    #[tokio::test]
    async fn process_memory_is_not_waited_for() {
        let backend = BackendSettings::Memory(MemoryStoreConfig::default());
        let region = RegionSettings::default();
        let stores = Stores::build(&backend, &region, Arc::new(ManualClock::new(1))).unwrap();
        assert_eq!(
            connect(&stores, &backend, &region).await,
            Connected::default()
        );
    }

    #[tokio::test]
    async fn a_backend_that_never_answers_is_reported_once_its_bound_passed() {
        // A port nothing listens on: refused at once, pinged again until the bound.
        let port = sluice_testkit::free_port();
        let backend = BackendSettings::Redis(RedisStoreConfig {
            url: format!("redis://user:hunter2@127.0.0.1:{port}"),
            connect_timeout: Duration::from_millis(150),
            ..RedisStoreConfig::default()
        });
        let region = RegionSettings::default();
        let stores = Stores::build(&backend, &region, Arc::new(ManualClock::new(1))).unwrap();
        let started = std::time::Instant::now();
        let connected = connect(&stores, &backend, &region).await;
        assert!(started.elapsed() >= Duration::from_millis(130));
        assert_eq!(connected.waited_at_most, Duration::from_millis(150));
        assert_eq!(connected.unreached.len(), 1, "{connected:?}");
        let unreached = &connected.unreached[0];
        assert!(
            unreached.backend.starts_with("redis redis://"),
            "{unreached:?}"
        );
        assert!(!format!("{unreached:?}").contains("hunter2"));
    }
}
