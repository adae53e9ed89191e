//! sluiced: the rate-limiter daemon (config, policies, HTTP API over UDS and TCP).
//!
//! The binary (`main.rs`) only parses arguments, binds, and handles signals; everything a test
//! needs to run a real daemon in process is here: [`App`], [`server::serve`], the clocks.

pub mod admin;
pub mod clock;
pub mod config;
pub mod forward_auth;
pub mod histogram;
pub mod http;
pub mod limiter;
pub mod metrics;
pub mod overrides;
pub mod policy;
pub mod rls;
pub mod server;
pub mod stores;
pub mod telemetry;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod top;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::Clock;
use crate::config::{RegionSettings, Settings};
use crate::limiter::Limiter;
use crate::metrics::Metrics;
use crate::overrides::RuntimeLimits;
use crate::stores::Stores;

/// The bound on store calls when the settings have none (process memory cannot hang; a test
/// store standing in for Redis still gets one).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

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
    pub region: Arc<RegionSettings>,
}

impl App {
    /// An app serving the compiled `settings` on `stores`, reading time from `clock`.
    pub fn new(settings: Settings, stores: Stores, clock: Arc<dyn Clock>) -> App {
        let timeout = settings.backend.timeout().unwrap_or(DEFAULT_TIMEOUT);
        let limits = RuntimeLimits::new(settings.policy_configs);
        let limiter = Limiter::new(
            stores.local,
            settings.policies,
            Arc::new(Metrics::new()),
            timeout,
        )
        .with_region(stores.region);
        App {
            limiter: Arc::new(limiter),
            clock,
            limits: Arc::new(limits),
            admin_token: settings.admin_token,
            rls: Arc::new(ArcSwap::from_pointee(settings.rls)),
            region: Arc::new(settings.region),
        }
    }
}
