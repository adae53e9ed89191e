//! A policy's running totals read back from the metric families, for the status window
//! ([`crate::service::slo`]). The window reads what the check path counts anyway, once a minute, so
//! `sluice status` costs a check nothing.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::{CHECK_BUCKETS, Metrics, PolicyLabels, PolicyReasonLabels, RequestLabels};

/// The `reason` values of `rate_limit_fail_open_total` and `rate_limit_fail_closed_total`:
/// every value `StoreError::kind` answers.
const REASONS: [&str; 4] = ["check", "timeout", "unavailable", "error"];

/// Counts since the daemon started (counters only grow; a series that disappears with a
/// reloaded tier makes a sum shrink, which the window reads as no change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyTotals {
    /// Checks decided (allowed, denied, allowed failing open): the check histogram's count.
    pub checks: u64,
    /// `rate_limit_requests_total{status="rejected"}` over every tier and endpoint.
    pub rejected: u64,
    pub fail_open: u64,
    pub fail_closed: u64,
    /// Checks per bucket of `rate_limit_check_duration_seconds` (not cumulative, `+Inf` last).
    pub latency: Vec<u64>,
}

impl Metrics {
    /// Upper bounds of the `rate_limit_check_duration_seconds` buckets.
    pub fn check_buckets(&self) -> &'static [f64] {
        &CHECK_BUCKETS
    }

    /// The totals of `policy`, whose requests carry the `plan_tier` labels `tiers` and the
    /// `endpoint` labels `endpoints`.
    pub fn policy_totals(
        &self,
        policy: &Arc<str>,
        tiers: &[Arc<str>],
        endpoints: &[Arc<str>],
    ) -> PolicyTotals {
        let (checks, latency) = self
            .check_duration
            .get(&PolicyLabels {
                policy: policy.clone(),
            })
            .map_or_else(|| (0, vec![0; CHECK_BUCKETS.len() + 1]), |h| h.counts());
        let mut rejected = 0;
        for plan_tier in tiers {
            for endpoint in endpoints {
                let labels = RequestLabels {
                    status: "rejected",
                    policy: policy.clone(),
                    endpoint: endpoint.clone(),
                    plan_tier: plan_tier.clone(),
                };
                rejected += self.requests.get(&labels).map_or(0, |c| c.get());
            }
        }
        let failures = |family: &Family<PolicyReasonLabels, Counter>| -> u64 {
            REASONS
                .iter()
                .filter_map(|reason| {
                    family
                        .get(&PolicyReasonLabels {
                            policy: policy.clone(),
                            reason,
                        })
                        .map(|c| c.get())
                })
                .sum()
        };
        PolicyTotals {
            checks,
            rejected,
            fail_open: failures(&self.fail_open),
            fail_closed: failures(&self.fail_closed),
            latency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_totals_sum_every_tier_endpoint_and_reason() {
        let metrics = Metrics::new();
        let p: Arc<str> = "p".into();
        let (none, pro, other): (Arc<str>, Arc<str>, Arc<str>) =
            ("none".into(), "pro".into(), "other".into());
        for (tier, endpoint) in [(&none, &none), (&pro, &other), (&pro, &other)] {
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    status: "rejected",
                    policy: p.clone(),
                    endpoint: endpoint.clone(),
                    plan_tier: tier.clone(),
                })
                .inc();
        }
        metrics.failed_open(&p, "timeout");
        metrics.failed_open(&p, "unavailable");
        metrics.failed_closed(&p, "error");
        let meters = super::super::policy_meters::PolicyMeters::new(1, 1);
        meters.observe_check_duration(&metrics, 0.003, &p, None);
        meters.observe_check_duration(&metrics, 0.2, &p, Some(7));
        let totals = metrics.policy_totals(
            &p,
            &[none.clone(), other.clone(), pro.clone()],
            &[none.clone(), other.clone()],
        );
        assert_eq!(totals.checks, 2);
        assert_eq!(totals.rejected, 3);
        assert_eq!((totals.fail_open, totals.fail_closed), (2, 1));
        assert_eq!(totals.latency.len(), CHECK_BUCKETS.len() + 1);
        assert_eq!(totals.latency[7], 1, "0.003 is in the 5 ms bucket");
        assert_eq!(totals.latency[CHECK_BUCKETS.len()], 1, "0.2 is in +Inf");
        let unknown = metrics.policy_totals(&"nope".into(), &[none], &[other]);
        assert_eq!(unknown.checks, 0);
        assert_eq!(unknown.latency.iter().sum::<u64>(), 0);
    }

    #[test]
    fn every_store_error_kind_is_a_reason() {
        use sluice_store::StoreError;
        for err in [
            StoreError::Timeout,
            StoreError::Unavailable(String::new()),
            StoreError::Backend(String::new()),
        ] {
            assert!(REASONS.contains(&err.kind()), "{}", err.kind());
        }
    }
}
