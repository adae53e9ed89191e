//! The stores the limiter decides on, built from compiled settings in one place: this
//! region's backend, and with `[region]` the global backend and the replicated store.
//! Building never fails for a value the config compile accepted; Redis stores connect lazily
//! (the daemon starts, and answers each policy's fail mode, while Redis is still down).

use std::sync::Arc;
use std::time::Duration;

use sluice_store::{
    ConfigError, MemoryStore, OverrideStore, PeerBackend, ReplicatedStore, ReplicatedStoreConfig,
    Store,
};

use crate::clock::Clock;
use crate::service::clients::{WithOverrides, shared, with_overrides};
use crate::service::health::Watched;
use sluice_config::{BackendSettings, RegionSettings};

/// Every store of the daemon.
#[derive(Debug, Clone)]
pub struct Stores {
    /// `scope = "local"` policies (the default).
    pub local: Arc<dyn Store>,
    /// The run-time limit overrides, on the same backend as `local`.
    pub overrides: Arc<dyn OverrideStore>,
    pub region: RegionStores,
}

/// The stores of the non-local scopes.
#[derive(Debug, Clone, Default)]
pub struct RegionStores {
    /// `scope = "global"`, with its call timeout.
    pub global: Option<(Arc<dyn Store>, Duration)>,
    /// `scope = "replicated"`.
    pub replicated: Option<ReplicatedStore>,
}

impl Stores {
    /// A single region deciding on `local`, its overrides in process memory (tests hand in
    /// stores of their own).
    pub fn local(local: Arc<dyn Store>) -> Stores {
        Stores {
            local,
            overrides: Arc::new(MemoryStore::default()),
            region: RegionStores::default(),
        }
    }

    /// Builds the stores `backend` and `region` describe and starts replication, reading time
    /// from `clock`. Must run inside a Tokio runtime.
    pub fn build(
        backend: &BackendSettings,
        region: &RegionSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<Stores, ConfigError> {
        let WithOverrides {
            store: local,
            overrides,
        } = watched(with_overrides(backend)?, backend);
        let mut stores = RegionStores::default();
        if let Some(global) = &region.global {
            let timeout = global.timeout().unwrap_or(Duration::from_secs(1));
            stores.global = Some((watched(with_overrides(global)?, global).store, timeout));
        }
        if let Some(local_shared) = &region.local {
            let peers = region
                .peers
                .iter()
                .map(|(name, peer)| {
                    Ok(PeerBackend {
                        name: name.clone(),
                        backend: shared(peer)?,
                    })
                })
                .collect::<Result<Vec<_>, ConfigError>>()?;
            let replicated = ReplicatedStore::new(ReplicatedStoreConfig {
                region: region.name.clone(),
                local: shared(local_shared)?,
                peers,
                max_pending: region.max_pending,
            });
            replicated.start(Arc::new(move || clock.now_ms()));
            stores.replicated = Some(replicated);
        }
        Ok(Stores {
            local,
            overrides,
            region: stores,
        })
    }
}

/// The client of `settings`, its health tracked and rebuilt when it fails every call for too
/// long (process memory needs neither): the store of the counters and the keeper of the
/// overrides, both on the current client.
fn watched(client: WithOverrides, settings: &BackendSettings) -> WithOverrides {
    match settings {
        BackendSettings::Memory(_) => client,
        _ => {
            let watched = Arc::new(Watched::new(client, settings.clone()));
            WithOverrides {
                store: watched.clone(),
                overrides: watched,
            }
        }
    }
}
