//! `RedisStore`: state in one Redis server, through the `redis` crate.
//!
//! One `ConnectionManager` (a multiplexed connection that reconnects by itself) carries every
//! call; concurrent calls are pipelined on it. Each check is one EVALSHA of its algorithm's
//! script; a batch is one EVALSHA of the batch script (a single server has no slots, so every
//! batch is atomic in one call). A script missing from the server (restart, `SCRIPT FLUSH`)
//! is loaded on NOSCRIPT and the call retried once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::bounds::Bounds;
use crate::config::{ConfigError, RedisStoreConfig};
use crate::scripts::{self, Layout, Runner, ScriptId};
use crate::{Check, LimitOverride, Store, StoreError, overrides};
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use sluice_core::Decision;

/// Rate-limit state in a single Redis server.
#[derive(Debug, Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    manager: ConnectionManager,
    scripts: Vec<redis::Script>,
    layout: Layout,
    bounds: Bounds,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.layout.prefix)
            .field("timeout", &self.bounds.timeout())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store on `config.url`. Connects lazily (the first call, or [`ping`](Store::ping)),
    /// so the daemon starts while Redis is down and serves its fail mode until it is up.
    /// Must be called within a Tokio runtime.
    pub fn new(config: RedisStoreConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let invalid = |e: redis::RedisError| ConfigError::InvalidUrl {
            url: crate::config::redact_url(&config.url),
            reason: e.to_string(),
        };
        let info = redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
            .map_err(invalid)?;
        let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(config.tcp_nodelay);
        let client = redis::Client::open(info.set_tcp_settings(tcp)).map_err(invalid)?;
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
        let scripts = scripts::sources()
            .iter()
            .map(|src| redis::Script::new(src))
            .collect();
        Ok(RedisStore {
            inner: Arc::new(Inner {
                manager,
                scripts,
                layout: Layout::new(config.prefix, config.ttl_grace),
                bounds: Bounds::new(config.timeout, config.max_in_flight),
            }),
        })
    }

    /// An admin command, bounded by time only.
    async fn admin<T>(
        &self,
        call: impl Future<Output = Result<T, redis::RedisError>>,
    ) -> Result<T, StoreError> {
        self.inner.bounds.admin(call, map_error).await
    }
}

/// Maps a client error to the store's error kinds.
pub(crate) fn map_error(e: &redis::RedisError) -> StoreError {
    if e.is_timeout() {
        StoreError::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Backend(e.to_string())
    }
}

impl RedisStore {
    /// Runs one script within the in-flight bound and the timeout (the replicated scope's
    /// scripts, which live beside the check scripts).
    pub(crate) async fn run_script(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        let inner: &Inner = &self.inner;
        self.inner.bounds.call(inner.run(script, keys, args)).await
    }

    /// The key prefix and TTL grace of this store.
    pub(crate) fn layout(&self) -> &Layout {
        &self.inner.layout
    }
}

#[async_trait]
impl Runner for Inner {
    async fn run(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
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
            .invoke_async::<Vec<i64>>(&mut conn)
            .await
            .map_err(|e| map_error(&e))
    }
}

#[async_trait]
impl Store for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        let inner: &Inner = &self.inner;
        self.inner
            .bounds
            .call(scripts::check(inner, &inner.layout, check, now_ms))
            .await
    }

    async fn check_all(
        &self,
        checks: &[Check<'_>],
        now_ms: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        let inner: &Inner = &self.inner;
        self.inner
            .bounds
            .call(scripts::check_all(
                inner,
                &inner.layout,
                checks,
                now_ms,
                false,
            ))
            .await
    }

    async fn put_override(&self, change: &LimitOverride) -> Result<(), StoreError> {
        let prefix = &self.inner.layout.prefix;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(overrides::hash_key(prefix, &change.policy, &change.tier))
            .ignore()
            .hset_multiple(
                overrides::hash_key(prefix, &change.policy, &change.tier),
                &overrides::fields(change),
            )
            .ignore()
            .sadd(
                overrides::index_key(prefix),
                overrides::member(&change.policy, &change.tier),
            )
            .ignore()
            .incr(overrides::version_key(prefix), 1)
            .ignore();
        self.admin(pipe.query_async::<()>(&mut self.inner.manager.clone()))
            .await
    }

    async fn delete_override(&self, policy: &str, tier: &str) -> Result<bool, StoreError> {
        let prefix = &self.inner.layout.prefix;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(overrides::hash_key(prefix, policy, tier))
            .srem(
                overrides::index_key(prefix),
                overrides::member(policy, tier),
            )
            .ignore()
            .incr(overrides::version_key(prefix), 1)
            .ignore();
        let (deleted,): (u64,) = self
            .admin(pipe.query_async(&mut self.inner.manager.clone()))
            .await?;
        Ok(deleted > 0)
    }

    async fn overrides(&self) -> Result<(u64, Vec<LimitOverride>), StoreError> {
        let prefix = &self.inner.layout.prefix;
        let mut conn = self.inner.manager.clone();
        let (version, members): (Option<u64>, Vec<String>) = self
            .admin(
                redis::pipe()
                    .get(overrides::version_key(prefix))
                    .smembers(overrides::index_key(prefix))
                    .query_async(&mut conn),
            )
            .await?;
        let mut all = Vec::with_capacity(members.len());
        for member in members {
            let Some((policy, tier)) = member.split_once(':') else {
                continue;
            };
            let fields: HashMap<String, String> = self
                .admin(
                    redis::cmd("HGETALL")
                        .arg(overrides::hash_key(prefix, policy, tier))
                        .query_async(&mut conn),
                )
                .await?;
            all.extend(overrides::parse(&member, &fields));
        }
        all.sort();
        Ok((version.unwrap_or(0), all))
    }

    async fn overrides_version(&self) -> Result<u64, StoreError> {
        let key = overrides::version_key(&self.inner.layout.prefix);
        let version: Option<u64> = self
            .admin(
                redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut self.inner.manager.clone()),
            )
            .await?;
        Ok(version.unwrap_or(0))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.inner.manager.clone();
        let pong = tokio::time::timeout(
            self.inner.bounds.timeout().max(Duration::from_millis(100)),
            redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await
        .map_err(|_| StoreError::Timeout)?
        .map_err(|e| map_error(&e))?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(StoreError::Backend(format!("PING answered {pong:?}")))
        }
    }
}
