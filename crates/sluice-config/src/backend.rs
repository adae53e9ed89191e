//! `[backend]` (and the backends of `[region]`) as typed settings: which store to build, with
//! the store's own configuration, checked by the store's own rules without connecting.
//!
//! The stores' configurations are defined here, not in sluice-store, so the compile needs no
//! Redis client: [`stores`] (each backend's settings and their checks), [`grace`] (how long a
//! key outlives its state) and [`replication`] (the overshoot budget of a replicated policy).
//! sluice-store builds on them and re-exports them. The one check only a client can make,
//! whether it parses a Redis URL, is handed in as a [`UrlCheck`].

pub mod grace;
pub mod replication;
pub mod sentinel;
pub mod stores;

use std::time::Duration;

pub use self::grace::{CLOCK_MARGIN, expiry_grace};
pub use self::sentinel::SentinelStoreConfig;
pub use self::stores::{
    ClusterStoreConfig, ConfigError as StoreConfigError, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_TIMEOUT, MemoryStoreConfig, RedisStoreConfig, RedisTls,
    UrlCheck, redact_url,
};

use super::error::FieldError;

/// `backend.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Memory,
    Redis,
    Cluster,
    Sentinel,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Redis => "redis",
            BackendKind::Cluster => "cluster",
            BackendKind::Sentinel => "sentinel",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[backend]`, as the store to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendSettings {
    Memory(MemoryStoreConfig),
    Redis(RedisStoreConfig),
    Cluster(ClusterStoreConfig),
    Sentinel(SentinelStoreConfig),
}

impl BackendSettings {
    pub fn kind(&self) -> BackendKind {
        match self {
            BackendSettings::Memory(_) => BackendKind::Memory,
            BackendSettings::Redis(_) => BackendKind::Redis,
            BackendSettings::Cluster(_) => BackendKind::Cluster,
            BackendSettings::Sentinel(_) => BackendKind::Sentinel,
        }
    }

    /// The bound on each call; `None` for process memory, which cannot hang.
    pub fn timeout(&self) -> Option<Duration> {
        match self {
            BackendSettings::Memory(_) => None,
            BackendSettings::Redis(config) => Some(config.timeout),
            BackendSettings::Cluster(config) => Some(config.timeout),
            BackendSettings::Sentinel(config) => Some(config.timeout),
        }
    }

    /// How long the daemon waits for this backend before it serves; `None` for process
    /// memory, which needs no connection.
    pub fn connect_timeout(&self) -> Option<Duration> {
        match self {
            BackendSettings::Memory(_) => None,
            BackendSettings::Redis(config) => Some(config.connect_timeout),
            BackendSettings::Cluster(config) => Some(config.connect_timeout),
            BackendSettings::Sentinel(config) => Some(config.connect_timeout),
        }
    }

    /// The TLS of a Redis backend, when on.
    pub fn tls(&self) -> Option<RedisTls> {
        match self {
            BackendSettings::Memory(_) => None,
            BackendSettings::Redis(config) => config.effective_tls(),
            BackendSettings::Cluster(config) => config.effective_tls(),
            BackendSettings::Sentinel(config) => config.effective_tls(),
        }
    }

    /// Where the counters live, with any credentials redacted (for logs).
    pub fn address(&self) -> String {
        match self {
            BackendSettings::Memory(_) => "process memory".to_owned(),
            BackendSettings::Redis(config) => redact_url(&config.url),
            BackendSettings::Cluster(config) => config
                .nodes
                .iter()
                .map(|node| redact_url(node))
                .collect::<Vec<_>>()
                .join(","),
            BackendSettings::Sentinel(config) => format!(
                "master {:?} of sentinels {}",
                config.master,
                config.addresses().join(",")
            ),
        }
    }
}

/// Runs the store's own checks of `settings` (URL and node syntax) without connecting,
/// naming `section`'s field of the problem; `redis_url` is the client's parse of a Redis URL
/// (`None`: no client to ask, the URL is not checked).
pub(crate) fn check_store(
    settings: &BackendSettings,
    section: &str,
    redis_url: Option<UrlCheck>,
    errors: &mut Vec<FieldError>,
) {
    if let BackendSettings::Sentinel(config) = settings {
        for problem in config.problems(redis_url) {
            let field = match (&problem.error, problem.field.as_str()) {
                // Their messages name the field themselves.
                (StoreConfigError::Tls(_), _) => String::new(),
                (StoreConfigError::InvalidPrefix(_), _) => "backend.prefix".to_owned(),
                (StoreConfigError::ZeroTimeout, _) => format!("{section}.timeout"),
                (_, "") => section.to_owned(),
                (_, field) => format!("{section}.{field}"),
            };
            errors.push(FieldError::new(field, problem.error.to_string()));
        }
        return;
    }
    let checked = match settings {
        BackendSettings::Memory(_) | BackendSettings::Sentinel(_) => Ok(()),
        BackendSettings::Redis(config) => config.validate(redis_url),
        BackendSettings::Cluster(config) => config.validate(),
    };
    if let Err(err) = checked {
        let field = match (&err, settings) {
            (StoreConfigError::InvalidUrl { url, .. }, BackendSettings::Cluster(config)) => {
                let at = config
                    .nodes
                    .iter()
                    .position(|node| redact_url(node) == *url)
                    .unwrap_or(0);
                format!("{section}.nodes[{at}]")
            }
            (StoreConfigError::InvalidUrl { .. }, _) => format!("{section}.url"),
            (StoreConfigError::NoNodes, _) => format!("{section}.nodes"),
            (StoreConfigError::InvalidPrefix(_), _) => "backend.prefix".to_owned(),
            (StoreConfigError::ZeroTimeout, _) => format!("{section}.timeout"),
            // Its message names the field itself.
            (StoreConfigError::Tls(_), _) => String::new(),
            _ => section.to_owned(),
        };
        errors.push(FieldError::new(field, err.to_string()));
    }
}
