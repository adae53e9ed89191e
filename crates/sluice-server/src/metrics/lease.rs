//! The metrics of what the daemon decides without calling the backend: lease script calls,
//! the units of leases by outcome, and the checks answered locally (from a lease or from the
//! denied cache). Apart from `metrics.rs` so the one table stays readable.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::described::Described;

/// `backend` of `rate_limit_lease_calls_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LeaseBackendLabels {
    pub backend: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PolicyOutcomeLabels {
    pub policy: Arc<str>,
    pub outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PolicySourceLabels {
    pub policy: Arc<str>,
    pub source: &'static str,
}

/// What happened to leased units (`outcome` of `rate_limit_lease_units_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// Taken from the backend's window counter.
    Granted,
    /// Admitted from a block.
    Used,
    /// Given back to the backend unspent (idle key, shutdown).
    Returned,
    /// Left unspent when the window ended (or the block was forgotten).
    Expired,
}

impl Units {
    fn as_str(self) -> &'static str {
        match self {
            Units::Granted => "granted",
            Units::Used => "used",
            Units::Returned => "returned",
            Units::Expired => "expired",
        }
    }
}

/// Where a check decided without a backend call was answered from (`source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Lease,
    DeniedCache,
}

#[derive(Debug, Clone)]
pub struct LeaseMetrics {
    calls: Family<LeaseBackendLabels, Counter>,
    units: Family<PolicyOutcomeLabels, Counter>,
    local: Family<PolicySourceLabels, Counter>,
}

impl LeaseMetrics {
    pub(super) fn register(registry: &mut Registry) -> LeaseMetrics {
        let metrics = LeaseMetrics {
            calls: Family::default(),
            units: Family::default(),
            local: Family::default(),
        };
        registry.register(
            "rate_limit_lease_calls",
            "Script calls that took a lease from the backend's window counter",
            Described(metrics.calls.clone()),
        );
        registry.register(
            "rate_limit_lease_units",
            "Leased units, by what became of them",
            Described(metrics.units.clone()),
        );
        registry.register(
            "rate_limit_local_decisions",
            "Checks answered without a backend call, by source",
            Described(metrics.local.clone()),
        );
        metrics
    }

    /// One lease script call to `backend`.
    pub fn call(&self, backend: &'static str) {
        self.calls
            .get_or_create(&LeaseBackendLabels { backend })
            .inc();
    }

    /// `n` units of `policy` went `what`.
    pub fn units(&self, policy: &Arc<str>, what: Units, n: u64) {
        if n > 0 {
            self.units
                .get_or_create(&PolicyOutcomeLabels {
                    policy: policy.clone(),
                    outcome: what.as_str(),
                })
                .inc_by(n);
        }
    }

    /// A check of `policy` answered from `source`.
    pub fn local(&self, policy: &Arc<str>, source: Source) {
        let source = match source {
            Source::Lease => "lease",
            Source::DeniedCache => "denied_cache",
        };
        self.local
            .get_or_create(&PolicySourceLabels {
                policy: policy.clone(),
                source,
            })
            .inc();
    }
}
