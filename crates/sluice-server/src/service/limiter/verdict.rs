//! A decision made the answer a caller gets: shadow mode applied, the limit shown as what can
//! be spent at once, the utilization, request and latency metrics and the top keys recorded;
//! and a store failure made the policies' fail mode.

use std::sync::Arc;

use sluice_core::{CheckError, Decision, Mode};
use sluice_store::StoreError;

use super::{LimitError, Limiter, Resolved, Started, Verdict};
use crate::events::{BackendFailed, FailModeApplied, ShadowRejected, UsageCounted};
use crate::metrics::{PolicyTierLabels, RequestLabels};
use sluice_config::policy::FailMode;

impl Limiter {
    /// The verdict of `decision` for the check `r`, and `judged`, what its candidate decided
    /// (if it has one), recorded.
    pub(super) fn verdict(
        &self,
        r: Resolved<'_>,
        decision: Decision,
        judged: Option<&Decision>,
        now_ms: u64,
        started: Started,
    ) -> Verdict {
        // A charge or refund is no request: it is counted as usage (below), not here.
        if !r.check.mode.adjusts() {
            match judged {
                Some(judged) => self.record_judged(&r, &decision, judged, now_ms),
                // Shadow denials count as rejections here: they are who the policy would limit.
                None => self.top.record_cached(
                    r.policy.meters.top(),
                    &r.policy.name,
                    r.check.key,
                    !decision.allowed,
                    now_ms,
                ),
            }
        }
        let shadow = r.policy.shadow;
        let allowed = decision.allowed || shadow;
        if shadow && !decision.allowed {
            // A detailed limit counts it under the label of the values it counted.
            let policy = match r.detail {
                Some(detail) => r
                    .policy
                    .meters
                    .detailed(&r.policy.name)
                    .series(detail.0)
                    .label(),
                None => &r.policy.name,
            };
            self.metrics.emit(ShadowRejected { policy });
        }
        let mut decision = decision;
        if shadow {
            decision.retry_after_ms = 0;
        }
        // A client is shown as its limit what it can spend at once: the bucket for bucket
        // algorithms (`burst` may exceed `limit`), so `remaining` never exceeds the limit it
        // is shown and utilization is the share of that bucket consumed.
        // Of a stacked policy, the limit that bound (its decision's limit is that one's).
        let params = match r.limit.answering(decision.limit) {
            Some(stacked) => &stacked.params,
            None => &r.limit.params,
        };
        decision.limit = params.capacity();
        decision.remaining = decision.remaining.min(decision.limit);
        if decision.limit > 0 {
            let used = decision.limit.saturating_sub(decision.remaining);
            #[allow(clippy::cast_precision_loss)]
            let share = used as f64 / decision.limit as f64;
            r.policy
                .meters
                .observe_utilization(&self.metrics, r.tier_slot, share, || PolicyTierLabels {
                    policy: r.policy.name.clone(),
                    plan_tier: r.policy.tier_label(r.tier_slot, &self.other, &self.none),
                });
        }
        match r.check.mode {
            // What a request used, charged after it: usage, not a request decided.
            Mode::Charge => self.metrics.emit(UsageCounted {
                policy: &r.policy.name,
                plan_tier: r.policy.tier_label(r.tier_slot, &self.other, &self.none),
                units: r.check.cost,
            }),
            Mode::Refund => {}
            Mode::Consume | Mode::Ask => {
                if r.policy.usage && decision.allowed {
                    // A usage check's estimate, consumed when allowed, is usage too.
                    self.metrics.emit(UsageCounted {
                        policy: &r.policy.name,
                        plan_tier: r.policy.tier_label(r.tier_slot, &self.other, &self.none),
                        units: r.check.cost,
                    });
                }
                self.record(&r, allowed, started);
            }
        }
        Verdict {
            allowed,
            decision: Decision {
                allowed,
                ..decision
            },
            limit: r.limit,
            degraded: false,
            shadow,
            now_ms,
            policy: r.policy,
        }
    }

    fn record(&self, r: &Resolved<'_>, allowed: bool, started: Started) {
        let policy = &r.policy;
        let labels = |label: &Arc<str>| RequestLabels {
            status: if allowed { "allowed" } else { "rejected" },
            policy: label.clone(),
            endpoint: policy.endpoint_label(r.endpoint_slot, &self.other, &self.none),
            plan_tier: policy.tier_label(r.tier_slot, &self.other, &self.none),
        };
        match r.detail {
            Some(detail) => {
                let series = policy.meters.detailed(&policy.name).series(detail.0);
                series.count_request(&self.metrics, allowed, || labels(series.label()));
            }
            None => policy.meters.count_request(
                &self.metrics,
                allowed,
                r.tier_slot,
                r.endpoint_slot,
                || labels(&policy.name),
            ),
        }
        policy.meters.observe_check_duration(
            &self.metrics,
            started.at.elapsed().as_secs_f64(),
            &policy.name,
            started.trace,
        );
    }

    /// The answer of the policies' fail modes to a store error for `resolved` (one check, or
    /// a batch): allowed degraded only if every policy fails open.
    pub(super) fn failed(
        &self,
        resolved: Vec<Resolved<'_>>,
        err: &StoreError,
        now_ms: u64,
        started: Started,
    ) -> Result<Vec<Verdict>, LimitError> {
        if let StoreError::Check(CheckError::CostExceedsCapacity { cost, capacity }) = err {
            let (policy, field) = match resolved.as_slice() {
                [one] => (one.policy.name.to_string(), "cost"),
                _ => (String::new(), "checks"),
            };
            return Err(LimitError::CostExceedsCapacity {
                policy,
                cost: *cost,
                capacity: *capacity,
                field: field.to_owned(),
            });
        }
        self.metrics.emit(BackendFailed {
            backend: self.store.kind().as_str(),
            kind: err.kind(),
        });
        let closed = resolved.iter().any(|r| r.policy.fail == FailMode::Closed);
        for r in &resolved {
            self.metrics.emit(FailModeApplied {
                policy: &r.policy.name,
                reason: err.kind(),
                open: !closed,
            });
        }
        if closed {
            return Err(LimitError::BackendUnavailable);
        }
        Ok(resolved
            .into_iter()
            .map(|r| {
                self.record(&r, true, started);
                degraded(r, now_ms)
            })
            .collect())
    }
}

/// Allowed without counting: nothing is known of the key, so it is reported full.
fn degraded(r: Resolved<'_>, now_ms: u64) -> Verdict {
    let params = r.limit.params;
    Verdict {
        allowed: true,
        decision: Decision {
            allowed: true,
            limit: params.capacity(),
            remaining: params.capacity().saturating_sub(r.check.cost),
            reset_ms: now_ms,
            retry_after_ms: 0,
            delay_ms: 0,
            debt: 0,
        },
        limit: r.limit,
        degraded: true,
        shadow: r.policy.shadow,
        now_ms,
        policy: r.policy,
    }
}
