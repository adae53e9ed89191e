//! [`Single`], the client of one Redis server through the `redis` crate, and `RedisStore`,
//! the [`ScriptStore`] over it.
//!
//! One `ConnectionManager` (a multiplexed connection that reconnects by itself) carries every
//! call; concurrent calls are pipelined on it. Each check is one EVALSHA of its algorithm's
//! script; a batch is one EVALSHA of the batch script (a single server has one slot, so every
//! batch is atomic in one call). A script missing from the server (restart, `SCRIPT FLUSH`)
//! is loaded on NOSCRIPT and the call sent again, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{ErrorKind, FromRedisValue, RedisError, ServerErrorKind, ToRedisArgs};
use async_trait::async_trait;

use super::plain_probe::PlainProbe;
use super::runner::{GroupCall, ScriptCall, ScriptRunner};
use super::script_store::ScriptStore;
use super::scripts::Script;
use sluice_config::backend::{RedisStoreConfig, StoreConfigError as ConfigError, redact_url};

use crate::error::StoreError;
use crate::store::StoreKind;

/// Rate-limit state in a single Redis server.
pub type RedisStore = ScriptStore<Single>;

/// The client of one Redis server: one auto-reconnecting multiplexed connection.
pub struct Single {
    manager: ConnectionManager,
    /// The server's address (redacted) and whether TLS is on, for errors naming them.
    address: String,
    tls: bool,
    /// Over TLS: tells a plain port from a slow server when a call waits (see
    /// [`plain_probe`](super::plain_probe)).
    probe: Option<Arc<PlainProbe>>,
    /// The last call failed (or none ran yet): the next races the probe.
    suspect: AtomicBool,
}

impl std::fmt::Debug for Single {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Single").finish_non_exhaustive()
    }
}

/// Whether the `redis` client parses `url`, with its reason when not: the URL check the config
/// compile hands to [`RedisStoreConfig::validate`], so what `--check-config` accepts this store
/// accepts.
pub fn parse_redis_url(url: &str) -> Result<(), String> {
    ::redis::IntoConnectionInfo::into_connection_info(url)
        .map(drop)
        .map_err(|e| e.to_string())
}

impl RedisStore {
    /// A store on `config.url`. Connects lazily (the first call, or [`ping`](crate::Store::ping)),
    /// so the daemon starts while Redis is down and serves its fail mode until it is up.
    /// Must be called within a Tokio runtime.
    pub fn new(config: RedisStoreConfig) -> Result<Self, ConfigError> {
        config.validate(Some(parse_redis_url))?;
        let invalid = |e: RedisError| ConfigError::InvalidUrl {
            url: redact_url(&config.url),
            reason: e.to_string(),
        };
        let info = ::redis::IntoConnectionInfo::into_connection_info(config.client_url().as_str())
            .map_err(invalid)?;
        let tcp = ::redis::io::tcp::TcpSettings::default().set_nodelay(config.tcp_nodelay);
        let info = info.set_tcp_settings(tcp);
        let probe = PlainProbe::of(&info, config.timeout, config.connect_timeout);
        let tls = config.effective_tls();
        let client = open_client(info, tls.as_ref()).map_err(|e| match e {
            ClientError::Tls(e) => ConfigError::from(e),
            ClientError::Redis(e) => invalid(e),
        })?;
        let manager = ConnectionManager::new_lazy_with_config(
            client,
            manager_config(config.timeout, config.connect_timeout, config.max_in_flight),
        )
        .map_err(|e| ConfigError::Client(e.to_string()))?;
        Ok(ScriptStore::with_client(
            Single::over(manager, redact_url(&config.url), tls.is_some(), probe),
            config.prefix,
            config.timeout,
            config.ttl_grace,
            config.max_in_flight,
        ))
    }
}

/// Why a `redis` client could not be built: a TLS file, or what the client refused.
#[derive(Debug)]
pub(crate) enum ClientError {
    Tls(sluice_tls::PemError),
    Redis(RedisError),
}

/// The `redis` client of `info`, verifying with `tls` when on (`info` is then a `rediss://`
/// address).
pub(crate) fn open_client(
    info: ::redis::ConnectionInfo,
    tls: Option<&sluice_config::backend::RedisTls>,
) -> Result<::redis::Client, ClientError> {
    match tls {
        Some(tls) => {
            let certificates = crate::tls::redis_certificates(tls).map_err(ClientError::Tls)?;
            ::redis::Client::build_with_tls(info, certificates)
        }
        None => ::redis::Client::open(info),
    }
    .map_err(ClientError::Redis)
}

/// How every connection to one Redis server behaves: each response within `timeout`, each
/// connection attempt within `connect_timeout`, up to `max_in_flight` calls pipelined.
pub(crate) fn manager_config(
    timeout: Duration,
    connect_timeout: Duration,
    max_in_flight: usize,
) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(connect_timeout))
        // A failed connection attempt is retried once quickly; the next call starts a new
        // attempt, so a restarted server is found again within a few calls.
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(20))
        .set_max_delay(Duration::from_millis(200))
        .set_pipeline_buffer_size(max_in_flight.max(50))
}

/// Maps a client error to the store's error kinds.
pub(crate) fn map_error(e: &RedisError) -> StoreError {
    map_error_at(e, None)
}

/// As [`map_error`], a failed connection to `at` (its redacted address, and whether TLS is
/// on) explained when TLS tells why: the handshake's reason, or the wrong scheme for the port.
pub(crate) fn map_error_at(e: &RedisError, at: Option<(&str, bool)>) -> StoreError {
    if let Some((address, tls)) = at
        && (e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal())
        && !e.is_timeout()
        && let Some(why) = crate::tls::explain(e, address, tls)
    {
        return StoreError::Unavailable(why);
    }
    if e.is_timeout() {
        StoreError::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Backend(e.to_string())
    }
}

impl Single {
    /// The client over `manager`, a connection to `address` (redacted; `tls`: whether TLS is
    /// on), for errors naming it; `probe`: [`PlainProbe::of`] its address.
    pub(crate) fn over(
        manager: ConnectionManager,
        address: String,
        tls: bool,
        probe: Option<Arc<PlainProbe>>,
    ) -> Single {
        Single {
            manager,
            address,
            tls,
            probe,
            suspect: AtomicBool::new(true),
        }
    }

    /// EVALSHA of `script`, the store's error of a failure.
    async fn invoke<T: FromRedisValue, K: ToRedisArgs, A: ToRedisArgs>(
        &self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> Result<T, StoreError> {
        self.or_plain_port(async {
            self.query(script, keys, args)
                .await
                .map_err(|e| self.map_error(&e))
        })
        .await
    }

    /// `call`; over TLS, after a failed call, raced by the probe: a port that turns out to
    /// speak plain RESP ends it with the message that says so (the handshake would otherwise
    /// hang to a bare timeout).
    async fn or_plain_port<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let answer = match &self.probe {
            Some(probe) if self.suspect.load(Ordering::Relaxed) => {
                tokio::select! {
                    biased;
                    answer = call => answer,
                    () = probe.plain_port() => {
                        Err(StoreError::Unavailable(crate::tls::not_tls(&self.address)))
                    }
                }
            }
            _ => call.await,
        };
        if self.probe.is_some() && answer.is_err() != self.suspect.load(Ordering::Relaxed) {
            self.suspect.store(answer.is_err(), Ordering::Relaxed);
        }
        answer
    }

    /// EVALSHA of `script`; on NOSCRIPT (a restarted server, `SCRIPT FLUSH`) SCRIPT LOAD and
    /// EVALSHA again, once. The client's error, for a caller that reads it (a `READONLY`).
    pub(crate) async fn query<T: FromRedisValue, K: ToRedisArgs, A: ToRedisArgs>(
        &self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> Result<T, RedisError> {
        let mut evalsha = ::redis::Cmd::with_capacity(3 + keys.len() + args.len(), 0);
        evalsha.arg("EVALSHA").arg(script.sha1()).arg(keys.len());
        for key in keys {
            evalsha.arg(key);
        }
        for arg in args {
            evalsha.arg(arg);
        }
        let mut conn = self.manager.clone();
        match evalsha.query_async::<T>(&mut conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let mut load = ::redis::cmd("SCRIPT");
                load.arg("LOAD").arg(script.source());
                match load.query_async::<String>(&mut conn).await {
                    Ok(_) => evalsha.query_async::<T>(&mut conn).await,
                    Err(e) => Err(e),
                }
            }
            answer => answer,
        }
    }

    /// PING, the client's error of a failure.
    pub(crate) async fn query_ping(&self) -> Result<String, RedisError> {
        let mut conn = self.manager.clone();
        ::redis::cmd("PING").query_async::<String>(&mut conn).await
    }

    pub(crate) fn map_error(&self, e: &RedisError) -> StoreError {
        map_error_at(e, Some((&self.address, self.tls)))
    }
}

/// A client of one Redis server at a time (a fixed address, or the master the sentinels
/// name): a call is one EVALSHA there, and every lane is its one slot. Its
/// [`ScriptRunner`] is written once, below.
#[async_trait]
pub(crate) trait OneServer: Send + Sync + 'static {
    /// EVALSHA of `script` on the server.
    async fn call<T, K, A>(&self, script: &Script, keys: &[K], args: &[A]) -> Result<T, StoreError>
    where
        T: FromRedisValue + Send,
        K: ToRedisArgs + Sync,
        A: ToRedisArgs + Sync;

    /// What the server answers to PING.
    async fn pong(&self) -> Result<String, StoreError>;
}

#[async_trait]
impl OneServer for Single {
    async fn call<T, K, A>(&self, script: &Script, keys: &[K], args: &[A]) -> Result<T, StoreError>
    where
        T: FromRedisValue + Send,
        K: ToRedisArgs + Sync,
        A: ToRedisArgs + Sync,
    {
        self.invoke(script, keys, args).await
    }

    async fn pong(&self) -> Result<String, StoreError> {
        self.or_plain_port(async { self.query_ping().await.map_err(|e| self.map_error(&e)) })
            .await
    }
}

#[async_trait]
impl<S: OneServer> ScriptRunner for S {
    /// One Redis server (at a time): the metrics' `backend` label is `redis`.
    fn kind(&self) -> StoreKind {
        StoreKind::Redis
    }

    async fn eval(&self, call: ScriptCall<'_>) -> Result<Vec<i64>, StoreError> {
        self.call(call.script, &call.keys, &call.args).await
    }

    async fn eval_text(&self, call: ScriptCall<'_>) -> Result<Vec<String>, StoreError> {
        self.call(call.script, &call.keys, &call.args).await
    }

    /// One server: every lane is its one slot.
    async fn eval_group(&self, call: GroupCall<'_>) -> Result<Option<Vec<u8>>, StoreError> {
        self.call(call.script, call.keys, call.args).await.map(Some)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        pong_or_error(&self.pong().await?)
    }
}

/// A PING's answer as the store's: `PONG`, or a backend error quoting what came instead.
fn pong_or_error(pong: &str) -> Result<(), StoreError> {
    if pong == "PONG" {
        Ok(())
    } else {
        Err(StoreError::Backend(format!("PING answered {pong:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_the_client_refuses_is_refused_without_its_password() {
        assert_eq!(parse_redis_url("redis://127.0.0.1:6379/0"), Ok(()));
        let err = RedisStoreConfig {
            url: "redis://:hunter22@host:notaport/0".into(),
            ..RedisStoreConfig::default()
        }
        .validate(Some(parse_redis_url))
        .unwrap_err();
        assert!(matches!(err, ConfigError::InvalidUrl { .. }), "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
        let scheme = RedisStoreConfig {
            url: "http://h:1".into(),
            ..RedisStoreConfig::default()
        };
        assert!(scheme.validate(Some(parse_redis_url)).is_err());
        assert!(RedisStore::new(scheme).is_err());
    }
}
