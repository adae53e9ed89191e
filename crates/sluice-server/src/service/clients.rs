//! The client of one backend's settings (memory, Redis, Cluster or Sentinel), in one place for the
//! stores the daemon starts with and for the watchdog that rebuilds a failing client.

use std::sync::Arc;

use sluice_store::{
    ClusterStore, ConfigError, MemoryStore, OverrideStore, RedisStore, SentinelStore,
    SharedBackend, Store,
};

use sluice_config::BackendSettings;

/// One backend as the store of the counters and as the keeper of the overrides.
#[derive(Debug, Clone)]
pub struct WithOverrides {
    pub store: Arc<dyn Store>,
    pub overrides: Arc<dyn OverrideStore>,
}

/// The store of `settings`, and the same backend as the keeper of the overrides.
pub fn with_overrides(settings: &BackendSettings) -> Result<WithOverrides, ConfigError> {
    fn both<S: Store + OverrideStore>(store: S) -> WithOverrides {
        let store = Arc::new(store);
        WithOverrides {
            store: store.clone(),
            overrides: store,
        }
    }
    Ok(match settings {
        BackendSettings::Memory(config) => both(MemoryStore::new(*config)),
        BackendSettings::Redis(config) => both(RedisStore::new(config.clone())?),
        BackendSettings::Cluster(config) => both(ClusterStore::new(config.clone())?),
        BackendSettings::Sentinel(config) => both(SentinelStore::new(config.clone())?),
    })
}

/// A backend other regions write into (never process memory: the compile refuses it).
pub fn shared(settings: &BackendSettings) -> Result<SharedBackend, ConfigError> {
    match settings {
        BackendSettings::Redis(config) => Ok(RedisStore::new(config.clone())?.into()),
        BackendSettings::Cluster(config) => Ok(ClusterStore::new(config.clone())?.into()),
        BackendSettings::Sentinel(config) => Ok(SentinelStore::new(config.clone())?.into()),
        BackendSettings::Memory(_) => Err(ConfigError::Client(
            "process memory cannot be shared between regions".into(),
        )),
    }
}
