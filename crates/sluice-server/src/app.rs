//! The state every listener shares: the limiter, the clock, the policies with their run-time
//! overrides and the rules that are swapped whole on reload.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::Clock;
use crate::config::{RegionSettings, Settings};
use crate::limiter::Limiter;
use crate::metrics::Metrics;
use crate::overrides::RuntimeLimits;
use crate::slo::StatusWindow;
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
    /// Where the overrides are stored (the backend's, shared by every daemon on it).
    pub overrides: Arc<dyn sluice_store::OverrideStore>,
    /// `admin.token`; `None` keeps the admin API off. Shared, as axum clones the app for
    /// every request.
    pub admin_token: Option<Arc<str>>,
    /// `[[rls.descriptors]]`, swapped whole on reload.
    pub rls: Arc<ArcSwap<crate::rls::Rules>>,
    /// `[forward_auth]`: how forward-auth finds the caller, swapped whole on reload.
    pub forward_auth: Arc<ArcSwap<crate::config::forward_auth::CallerRules>>,
    /// `[region]` as started: a reload cannot change it.
    pub region: Arc<RegionSettings>,
    /// The last hour of every policy (`GET /v1/status`).
    pub status: Arc<StatusWindow>,
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
        let status = StatusWindow::new(&limiter, clock.now_ms());
        App {
            limiter: Arc::new(limiter),
            clock,
            limits: Arc::new(limits),
            overrides: stores.overrides,
            admin_token: settings.admin_token,
            rls: Arc::new(ArcSwap::from_pointee(settings.rls)),
            forward_auth: Arc::new(ArcSwap::from_pointee(settings.forward_auth)),
            region: Arc::new(settings.region),
            status: Arc::new(status),
        }
    }
}
