//! Construction of the store from `[backend]`, in one function so wiring a new backend
//! touches one place.

use std::sync::Arc;
use std::time::Duration;

use sluice_store::{
    ClusterStore, ClusterStoreConfig, ConfigError, MemoryStore, MemoryStoreConfig, RedisStore,
    RedisStoreConfig, Store,
};

use crate::config::BackendConfig;

/// Why no store could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("unknown backend kind {0:?}")]
    Unknown(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The store `[backend]` describes. Redis stores connect lazily (the daemon starts, and
/// answers with each policy's fail mode, while Redis is still down), so this must run inside
/// a Tokio runtime.
pub fn build_store(config: &BackendConfig) -> Result<Arc<dyn Store>, BackendError> {
    let timeout = Duration::from_millis(config.timeout_ms());
    match config.kind.as_str() {
        "memory" => Ok(Arc::new(MemoryStore::new(MemoryStoreConfig {
            max_keys: config.max_keys,
            ..MemoryStoreConfig::default()
        }))),
        "redis" => Ok(Arc::new(RedisStore::new(RedisStoreConfig {
            url: config.url.clone(),
            prefix: config.prefix.clone(),
            timeout,
            ..RedisStoreConfig::default()
        })?)),
        "cluster" => Ok(Arc::new(ClusterStore::new(ClusterStoreConfig {
            nodes: config.nodes.clone(),
            prefix: config.prefix.clone(),
            timeout,
            ..ClusterStoreConfig::default()
        })?)),
        other => Err(BackendError::Unknown(other.to_owned())),
    }
}
