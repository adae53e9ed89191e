//! Construction of the store from `[backend]`, in one function so wiring a new backend
//! touches one place.

use std::sync::Arc;

use sluice_store::{MemoryStore, MemoryStoreConfig, Store};

use crate::config::BackendConfig;

/// Why no store could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("backend kind {0} is not available in this build")]
    Unavailable(String),
    #[error("unknown backend kind {0:?}")]
    Unknown(String),
}

/// The store `[backend]` describes.
pub fn build_store(config: &BackendConfig) -> Result<Arc<dyn Store>, BackendError> {
    match config.kind.as_str() {
        "memory" => Ok(Arc::new(MemoryStore::new(MemoryStoreConfig {
            max_keys: config.max_keys,
            ..MemoryStoreConfig::default()
        }))),
        "redis" | "cluster" => Err(BackendError::Unavailable(config.kind.clone())),
        other => Err(BackendError::Unknown(other.to_owned())),
    }
}
