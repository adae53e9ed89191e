//! [`Sentinel`], the client of the Redis master a set of sentinels monitors
//! (`backend.kind = "sentinel"`), and `SentinelStore`, the [`ScriptStore`] over it.
//!
//! The Sentinel part is only "where is the master now" ([`locate`]) kept up to date across
//! failovers ([`follow`]); the connection to the master is the single-server client's
//! ([`Single`]), and both are a [`OneServer`], so the scripts, group commit, leases and the
//! denied cache work as on one Redis server. Metrics call this backend `redis`: it is one
//! Redis server at a time.
//!
//! What a failover loses: Redis replicates asynchronously, so consumption the old master
//! acknowledged but had not yet sent to the replica that is promoted is gone. The follower
//! stops sending to the old master when the leading sentinel picks the replica
//! (`+selected-slave`, see [`events`]), so what is lost is what the replica had not received
//! at that instant (typically under a millisecond of traffic); when the old master was cut
//! off from its replica but not from sluiced, or its fence event was missed (no subscription
//! to the leading sentinel), up to the whole time until sluiced switches. A count the replica
//! had received survives exactly.

mod events;
mod follow;
mod locate;

use std::sync::Arc;

use ::redis::{ErrorKind, FromRedisValue, RedisError, ServerErrorKind, ToRedisArgs};
use async_trait::async_trait;
use sluice_config::backend::{SentinelStoreConfig, StoreConfigError as ConfigError};

use self::follow::{Follower, Shared};
use self::locate::Locator;
use super::script_store::ScriptStore;
use super::scripts::Script;
use super::single::{OneServer, Single, parse_redis_url};
use crate::error::StoreError;

/// Rate-limit state in the Redis master the sentinels name.
pub type SentinelStore = ScriptStore<Sentinel>;

/// The client of the master the sentinels name: the connection to it, swapped when they name
/// another.
pub struct Sentinel {
    shared: Arc<Shared>,
    _follower: Follower,
}

impl std::fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinel")
            .field("master", &self.shared.locator.master)
            .finish_non_exhaustive()
    }
}

impl SentinelStore {
    /// A store on the master `config.master` of `config.sentinels`. Asks the sentinels at once
    /// in the background, so the daemon starts while they or the master are down and serves
    /// its fail mode until a master is found. Must be called within a Tokio runtime.
    pub fn new(config: SentinelStoreConfig) -> Result<Self, ConfigError> {
        if let Some(problem) = config.problems(Some(parse_redis_url)).into_iter().next() {
            return Err(problem.error);
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ConfigError::Client("a Sentinel store is built within a Tokio runtime".into())
        })?;
        let shared = Arc::new(Shared::new(Locator::new(&config)?));
        let follower = Follower::start(&shared, &runtime);
        Ok(ScriptStore::with_client(
            Sentinel {
                shared,
                _follower: follower,
            },
            config.prefix,
            config.timeout,
            config.ttl_grace,
            config.max_in_flight,
        ))
    }

    /// The master's `host:port` in use, `None` while none was found.
    pub fn master_address(&self) -> Option<String> {
        self.client()
            .shared
            .current
            .read()
            .as_ref()
            .map(|(at, _)| at.clone())
    }
}

/// Whether `e` means the server is no longer (or not reachably) the master: the sentinels are
/// asked again.
fn master_moved(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
        // A script's write refused on a replica comes back as the script's error.
        || e.to_string().contains("READONLY")
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
}

impl Sentinel {
    /// The connection to the master, or why there is none (a lookup is asked for).
    fn master(&self) -> Result<Arc<Single>, StoreError> {
        if let Some((at, single)) = self.shared.current.read().as_ref() {
            if let Some(failover) = self.shared.fenced(at) {
                return Err(StoreError::Unavailable(format!(
                    "master {at} is being failed over to {}",
                    failover.to
                )));
            }
            return Ok(Arc::clone(single));
        }
        self.shared.ask.notify_one();
        let why = self.shared.last_failure.lock().clone();
        Err(StoreError::Unavailable(why.unwrap_or_else(|| {
            format!(
                "master {:?} not found through the sentinels yet",
                self.shared.locator.master
            )
        })))
    }

    /// `result` as the store's, the sentinels asked again when the master seems gone.
    fn judge<T>(&self, single: &Single, result: Result<T, RedisError>) -> Result<T, StoreError> {
        result.map_err(|e| {
            if master_moved(&e) {
                self.shared.ask.notify_one();
            }
            single.map_error(&e)
        })
    }
}

#[async_trait]
impl OneServer for Sentinel {
    async fn call<T, K, A>(&self, script: &Script, keys: &[K], args: &[A]) -> Result<T, StoreError>
    where
        T: FromRedisValue + Send,
        K: ToRedisArgs + Sync,
        A: ToRedisArgs + Sync,
    {
        let single = self.master()?;
        let result = single.query(script, keys, args).await;
        self.judge(&single, result)
    }

    async fn pong(&self) -> Result<String, StoreError> {
        let single = self.master()?;
        let pong = single.query_ping().await;
        self.judge(&single, pong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_config_the_store_cannot_use_is_refused_naming_the_problem() {
        let err = SentinelStore::new(SentinelStoreConfig {
            sentinels: vec!["redis://127.0.0.1:26379".into()],
            ..SentinelStoreConfig::default()
        })
        .unwrap_err();
        assert_eq!(err, ConfigError::NoMasterName);
    }
}
