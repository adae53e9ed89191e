//! The state every listener shares: the limiter (which holds the one snapshot of the
//! run-time settings), the clock, the writer of those settings, and the reload.

use std::sync::Arc;
use std::time::Duration;

use super::compiled::Compiled;
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::service::limiter::Limiter;
use crate::service::overrides::RuntimeLimits;
use crate::service::slo::StatusWindow;
use crate::service::snapshot::Snapshot;
use crate::service::stores::Stores;
use crate::service::writer::Writer;
use sluice_config::{ConfigSource, RegionSettings};

/// The bound on store calls when the settings have none (process memory cannot hang; a test
/// store standing in for Redis still gets one).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

/// Everything a request handler needs: cheap to clone.
#[derive(Debug, Clone)]
pub struct App {
    /// Decides checks on the snapshot in force ([`Limiter::snapshot`]).
    pub limiter: Arc<Limiter>,
    pub clock: Arc<dyn Clock>,
    /// The one writer of the run-time settings: reloads, the poll and admin changes.
    pub settings: Writer,
    /// Where the overrides are stored (the backend's, shared by every daemon on it).
    pub overrides: Arc<dyn sluice_store::OverrideStore>,
    /// `admin.token`; `None` keeps the admin API off. Shared, as axum clones the app for
    /// every request.
    pub admin_token: Option<Arc<str>>,
    /// `[region]` as started: a reload cannot change it.
    pub region: Arc<RegionSettings>,
    /// The last hour of every policy (`GET /v1/status`).
    pub status: Arc<StatusWindow>,
}

impl App {
    /// An app serving the `compiled` configuration on `stores`, reading time from `clock`.
    pub fn new(compiled: Compiled, stores: Stores, clock: Arc<dyn Clock>) -> App {
        let Compiled {
            settings,
            policies,
            rls,
        } = compiled;
        let timeout = settings.backend.timeout().unwrap_or(DEFAULT_TIMEOUT);
        let snapshot = Snapshot {
            policies,
            rls: Arc::new(rls),
            forward_auth: Arc::new(settings.forward_auth),
            limits: RuntimeLimits::new(settings.policy_configs),
        };
        let limiter = Limiter::new(stores.local, snapshot, Arc::new(Metrics::new()), timeout)
            .with_region(stores.region);
        let status = StatusWindow::new(&limiter, clock.now_ms());
        let limiter = Arc::new(limiter);
        let region = Arc::new(settings.region);
        App {
            settings: Writer::new(limiter.clone(), stores.overrides.clone(), region.clone()),
            limiter,
            clock,
            overrides: stores.overrides,
            admin_token: settings.admin_token,
            region,
            status: Arc::new(status),
        }
    }

    /// Applies the configuration `source` holds now (SIGHUP, a changed file), through the
    /// settings writer; returns once it is published (or refused: a configuration that does
    /// not compile, or that changes `[region]`, keeps the running one).
    pub async fn reload(&self, source: &ConfigSource) {
        self.settings.reload(source).await;
    }
}
