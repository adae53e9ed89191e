//! The state every listener shares: the limiter, the clock, the policies with their run-time
//! overrides and the rules that are swapped whole on reload, and the reload itself.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::compiled::Compiled;
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::service::limiter::Limiter;
use crate::service::overrides::RuntimeLimits;
use crate::service::slo::StatusWindow;
use crate::service::stores::Stores;
use sluice_config::{ConfigSource, RegionSettings};

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
    pub rls: Arc<ArcSwap<sluice_config::rls_rules::Rules>>,
    /// `[forward_auth]`: how forward-auth finds the caller, swapped whole on reload.
    pub forward_auth: Arc<ArcSwap<sluice_config::forward_auth::CallerRules>>,
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
        let limits = RuntimeLimits::new(settings.policy_configs);
        let limiter = Limiter::new(stores.local, policies, Arc::new(Metrics::new()), timeout)
            .with_region(stores.region);
        let status = StatusWindow::new(&limiter, clock.now_ms());
        App {
            limiter: Arc::new(limiter),
            clock,
            limits: Arc::new(limits),
            overrides: stores.overrides,
            admin_token: settings.admin_token,
            rls: Arc::new(ArcSwap::from_pointee(rls)),
            forward_auth: Arc::new(ArcSwap::from_pointee(settings.forward_auth)),
            region: Arc::new(settings.region),
            status: Arc::new(status),
        }
    }

    /// Applies the configuration `source` holds now (SIGHUP, a changed file): the policies
    /// with the run-time overrides merged in, the RLS rules and the forward-auth rules, all
    /// swapped at once; a configuration that does not compile, or that changes `[region]`
    /// (read at start), keeps the running one. Counted in `rate_limit_config_reloads_total`.
    pub fn reload(&self, source: &ConfigSource) {
        let metrics = self.limiter.metrics();
        let swapped = super::compiled::load(source)
            .map_err(|err| err.to_string())
            .and_then(|compiled| {
                let settings = compiled.settings;
                if settings.region != *self.region {
                    return Err("[region] changed: it is read at start, restart to apply it".into());
                }
                let (rls, forward_auth) = (compiled.rls, settings.forward_auth);
                // No sync of the run-time settings swaps its set in between this compile of
                // the sources and this swap (it would be replaced by an older one).
                self.limits.publish(|| {
                    let policies =
                        self.limits
                            .replace_file(settings.policy_configs)
                            .map_err(|errors| {
                                errors
                                    .iter()
                                    .map(ToString::to_string)
                                    .collect::<Vec<_>>()
                                    .join("\n")
                            })?;
                    let count = policies.len();
                    self.limiter.replace_policies(policies);
                    Ok((count, rls, forward_auth))
                })
            });
        match swapped {
            Ok((count, rls, forward_auth)) => {
                self.rls.store(Arc::new(rls));
                self.forward_auth.store(Arc::new(forward_auth));
                metrics.reloaded(true);
                tracing::info!(policies = count, "config reloaded");
            }
            Err(why) => {
                metrics.reloaded(false);
                tracing::error!("config reload failed, keeping the running config:\n{why}");
            }
        }
    }
}
