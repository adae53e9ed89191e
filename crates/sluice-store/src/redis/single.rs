//! `RedisStore`: state in one Redis server, through the `redis` crate.
//!
//! One `ConnectionManager` (a multiplexed connection that reconnects by itself) carries every
//! call; concurrent calls are pipelined on it. Each check is one EVALSHA of its algorithm's
//! script; a batch is one EVALSHA of the batch script (a single server has one slot, so every
//! batch is atomic in one call). A script missing from the server (restart, `SCRIPT FLUSH`)
//! is loaded on NOSCRIPT and the call retried once (`redis::Script` does both).

use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{FromRedisValue, RedisError};
use async_trait::async_trait;

use super::bounds::Bounds;
use super::group::Grouped;
use super::group::Groups;
use super::keys::Layout;
use super::runner::{Lane, ScriptRunner};
use super::script_store::script_store;
use super::scripts::ScriptId;
use crate::config::{ConfigError, RedisStoreConfig};
use crate::{StoreError, StoreKind};

/// Rate-limit state in a single Redis server.
#[derive(Debug, Clone)]
pub struct RedisStore {
    pub(crate) client: Arc<SingleClient>,
}

script_store!(RedisStore);

/// One Redis server, running sluice's scripts.
pub(crate) struct SingleClient {
    manager: ConnectionManager,
    /// Indexed by [`ScriptId::index`].
    scripts: Vec<::redis::Script>,
    layout: Layout,
    bounds: Bounds,
    groups: Groups,
}

impl std::fmt::Debug for SingleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.layout.prefix)
            .field("timeout", &self.bounds.timeout())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store on `config.url`. Connects lazily (the first call, or [`ping`](crate::Store::ping)),
    /// so the daemon starts while Redis is down and serves its fail mode until it is up.
    /// Must be called within a Tokio runtime.
    pub fn new(config: RedisStoreConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let invalid = |e: RedisError| ConfigError::InvalidUrl {
            url: crate::config::redact_url(&config.url),
            reason: e.to_string(),
        };
        let info = ::redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
            .map_err(invalid)?;
        let tcp = ::redis::io::tcp::TcpSettings::default().set_nodelay(config.tcp_nodelay);
        let client = ::redis::Client::open(info.set_tcp_settings(tcp)).map_err(invalid)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.timeout))
            .set_connection_timeout(Some(config.connect_timeout))
            // A failed connection attempt is retried once quickly; the next call starts a new
            // attempt, so a restarted server is found again within a few calls.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200))
            .set_pipeline_buffer_size(config.max_in_flight.max(50));
        let manager = ConnectionManager::new_lazy_with_config(client, manager_config)
            .map_err(|e| ConfigError::Client(e.to_string()))?;
        let scripts = ScriptId::ALL
            .iter()
            .map(|id| ::redis::Script::new(id.source()))
            .collect();
        Ok(RedisStore {
            client: Arc::new(SingleClient {
                manager,
                scripts,
                layout: Layout::new(config.prefix, config.timeout, config.ttl_grace),
                groups: Groups::default(),
                bounds: Bounds::new(config.timeout, config.max_in_flight),
            }),
        })
    }
}

/// Maps a client error to the store's error kinds.
pub(crate) fn map_error(e: &RedisError) -> StoreError {
    if e.is_timeout() {
        StoreError::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Backend(e.to_string())
    }
}

impl SingleClient {
    async fn invoke<T: FromRedisValue, K: ::redis::ToRedisArgs, A: ::redis::ToRedisArgs>(
        &self,
        script: ScriptId,
        keys: &[K],
        args: &[A],
    ) -> Result<T, StoreError> {
        let script = self
            .scripts
            .get(script.index())
            .ok_or_else(|| StoreError::Backend("unknown script".into()))?;
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        let mut conn = self.manager.clone();
        invocation
            .invoke_async::<T>(&mut conn)
            .await
            .map_err(|e| map_error(&e))
    }
}

impl Grouped for SingleClient {
    fn groups(&self) -> &Groups {
        &self.groups
    }
}

#[async_trait]
impl ScriptRunner for SingleClient {
    fn kind(&self) -> StoreKind {
        StoreKind::Redis
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    async fn eval(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        self.invoke(script, &keys, &args).await
    }

    async fn eval_text(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        self.invoke(script, &keys, &args).await
    }

    async fn eval_group(
        &self,
        _lane: Lane,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.invoke(ScriptId::Group, keys, args).await.map(Some)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.manager.clone();
        let pong = self
            .bounds
            .ping(async {
                ::redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .map_err(|e| map_error(&e))
            })
            .await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(StoreError::Backend(format!("PING answered {pong:?}")))
        }
    }
}
