//! sluiced: the rate-limiter daemon (config, policies, HTTP API over UDS and TCP).
//!
//! The binary (`main.rs`) only parses arguments, binds, and handles signals; everything a test
//! needs to run a real daemon in process is here: [`App`], [`server::serve`], the clocks.

pub mod admin;
pub mod backend;
pub mod clock;
pub mod config;
pub mod forward_auth;
pub mod histogram;
pub mod http;
pub mod limiter;
pub mod metrics;
pub mod overrides;
pub mod policy;
pub mod region;
pub mod rls;
pub mod server;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod top;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use sluice_store::Store;

use crate::clock::Clock;
use crate::config::{Config, FieldError};
use crate::limiter::Limiter;
use crate::metrics::Metrics;
use crate::overrides::RuntimeLimits;

/// Everything a request handler needs: cheap to clone.
#[derive(Debug, Clone)]
pub struct App {
    pub limiter: Arc<Limiter>,
    pub clock: Arc<dyn Clock>,
    /// The file's policies and the run-time overrides they are compiled with.
    pub limits: Arc<RuntimeLimits>,
    /// `admin.token`; `None` keeps the admin API off. Shared, as axum clones the app for
    /// every request.
    pub admin_token: Option<Arc<str>>,
    /// `[[rls.descriptors]]`, swapped whole on reload.
    pub rls: Arc<ArcSwap<rls::Rules>>,
    /// `[region]` as started: a reload cannot change it.
    pub region: Arc<region::RegionConfig>,
}

impl App {
    /// An app serving `config`'s policies on `store`, reading time from `clock`; with a
    /// `[region]`, also on the global and replicated stores it describes (replication starts
    /// here, so this must run inside a Tokio runtime).
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<App, Vec<FieldError>> {
        let limits = RuntimeLimits::new(config.policies.clone());
        let policies = limits.replace_file(config.policies.clone())?;
        let timeout = Duration::from_millis(config.backend.timeout_ms());
        let rls = rls::Rules::compile(&config.rls, &config.policies)?;
        let stores = region::build(&config.region, &config.backend, clock.clone())
            .map_err(|error| vec![error])?;
        let limiter =
            Limiter::new(store, policies, Arc::new(Metrics::new()), timeout).with_region(stores);
        Ok(App {
            limiter: Arc::new(limiter),
            clock,
            limits: Arc::new(limits),
            admin_token: (!config.admin.token.is_empty())
                .then(|| config.admin.token.as_str().into()),
            rls: Arc::new(ArcSwap::from_pointee(rls)),
            region: Arc::new(config.region.clone()),
        })
    }
}
