//! `[backend]` (and the backends of `[region]`) as typed settings: which store to build, with
//! the store's own configuration, checked by the store's own rules without connecting.

use std::time::Duration;

use sluice_store::{ClusterStoreConfig, MemoryStoreConfig, RedisStoreConfig};
use sluice_store::{ConfigError as StoreConfigError, redact_url};

use super::error::FieldError;

/// `backend.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Memory,
    Redis,
    Cluster,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Redis => "redis",
            BackendKind::Cluster => "cluster",
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
}

impl BackendSettings {
    pub fn kind(&self) -> BackendKind {
        match self {
            BackendSettings::Memory(_) => BackendKind::Memory,
            BackendSettings::Redis(_) => BackendKind::Redis,
            BackendSettings::Cluster(_) => BackendKind::Cluster,
        }
    }

    /// The bound on each call; `None` for process memory, which cannot hang.
    pub fn timeout(&self) -> Option<Duration> {
        match self {
            BackendSettings::Memory(_) => None,
            BackendSettings::Redis(config) => Some(config.timeout),
            BackendSettings::Cluster(config) => Some(config.timeout),
        }
    }

    /// How long the daemon waits for this backend before it serves; `None` for process
    /// memory, which needs no connection.
    pub fn connect_timeout(&self) -> Option<Duration> {
        match self {
            BackendSettings::Memory(_) => None,
            BackendSettings::Redis(config) => Some(config.connect_timeout),
            BackendSettings::Cluster(config) => Some(config.connect_timeout),
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
        }
    }
}

/// Runs the store's own checks of `settings` (URL and node syntax) without connecting,
/// naming `section`'s field of the problem.
pub(crate) fn check_store(settings: &BackendSettings, section: &str, errors: &mut Vec<FieldError>) {
    let checked = match settings {
        BackendSettings::Memory(_) => Ok(()),
        BackendSettings::Redis(config) => config.validate(),
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
            _ => section.to_owned(),
        };
        errors.push(FieldError::new(field, err.to_string()));
    }
}
