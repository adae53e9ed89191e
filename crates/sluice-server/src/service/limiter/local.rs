//! Checks answered on this daemon without a backend call, for the policies that allow it
//! (`lease = "auto"`, `scope = "local"`, not shadow, no candidate, on the Redis backends):
//! first the denied cache ([`denied`](super::denied)), then for fixed_window the lease of a
//! hot key ([`leases`](super::leases)); the rest goes to the backend as before, and what it
//! answers feeds both. Batches never come here: every batch goes to the backend.

use sluice_core::{Algorithm, Decision, Mode};
use sluice_store::{Check, StoreError, Unspent};
use tracing::Span;

use super::denied::DeniedCache;
use super::leases::{self, Leases, Take};
use super::slots::Slot;
use super::{LimitError, Limiter, Resolved, Started, Verdict};
use crate::events::{AnsweredLocally, LeaseCalled, LeaseUnits};
use crate::metrics::lease::{Source, Units};
use sluice_config::policy::Scope;

/// The denied cache and the leases of one limiter.
#[derive(Debug, Default)]
pub(super) struct Local {
    pub denied: DeniedCache,
    leases: Leases,
}

impl Limiter {
    /// Whether `one` may be answered locally: not when its policy has a candidate, whose
    /// every check must reach the backend to be judged.
    pub(super) fn answers_locally(&self, one: &Resolved<'_>) -> bool {
        self.redis.is_some()
            && one.policy.lease
            && !one.policy.shadow
            && one.policy.scope == Scope::Local
            && !one.policy.has_candidate
            // A stacked check's limits are decided together on the backend.
            && one.limit.stacked.is_empty()
    }

    /// Decides `one` from the denied cache, from its key's lease, or on the backend.
    pub(super) async fn decide_local(
        &self,
        one: Resolved<'_>,
        now_ms: u64,
        span: &Span,
    ) -> Result<Verdict, LimitError> {
        let started = Started::now(span);
        let slot = Slot::new(&one.policy.name, one.tier_slot, one.check.key);
        let cost = one.check.cost;
        // A charge or refund always reaches the backend (it must debit or credit); an ask is
        // denied locally for what it needs to fit (max(cost, 1)), and a key a charge put in
        // debt is remembered denied until the moment an ask of 1 fits again.
        let mode = one.check.mode;
        let need = mode.need(cost);
        if !mode.adjusts()
            && let Some(decision) = self
                .local
                .denied
                .answer(&slot, &one.check.params, need, now_ms)
        {
            self.metrics.emit(AnsweredLocally {
                policy: &one.policy.name,
                source: Source::DeniedCache,
            });
            return Ok(self.verdict(one, decision, None, now_ms, started));
        }
        // Usage policies never lease: a lease would hand out what a charge must find.
        let leasable =
            !one.policy.usage && mode == Mode::Consume && leases::leased(&one.check.params);
        let mut grant = None;
        if leasable {
            let (take, expired) = self
                .local
                .leases
                .take(&slot, one.check.params, cost, now_ms);
            self.metrics.emit(LeaseUnits {
                policy: &one.policy.name,
                what: Units::Expired,
                units: expired,
            });
            match take {
                Take::Local {
                    remaining,
                    reset_ms,
                } => {
                    self.metrics.emit(LeaseUnits {
                        policy: &one.policy.name,
                        what: Units::Used,
                        units: cost,
                    });
                    self.metrics.emit(AnsweredLocally {
                        policy: &one.policy.name,
                        source: Source::Lease,
                    });
                    let decision = Decision {
                        allowed: true,
                        limit: one.check.params.limit,
                        remaining,
                        reset_ms,
                        retry_after_ms: 0,
                        delay_ms: 0,
                        debt: 0,
                    };
                    return Ok(self.verdict(one, decision, None, now_ms, started));
                }
                Take::Acquire(g) => grant = Some(g),
                Take::Backend => {}
            }
        }
        let decided = match grant {
            Some(g) => self.acquire(&one, &slot, g, now_ms, span).await,
            None => {
                let decided = self
                    .call_store_one(&one.check, Scope::Local, now_ms, span)
                    .await
                    .map(|decided| decided.decision);
                if leasable {
                    let remaining = decided.as_ref().ok().map(|d| d.remaining);
                    self.local.leases.observe(&slot, remaining, false);
                }
                decided
            }
        };
        match decided {
            Ok(decision) => {
                if mode == Mode::Refund {
                    self.local.denied.forget(&slot);
                } else {
                    self.local
                        .denied
                        .remember(&slot, &one.check.params, need, now_ms, &decision);
                }
                Ok(self.verdict(one, decision, None, now_ms, started))
            }
            Err(err) => self
                .failed(vec![one], &err, now_ms, started)?
                .pop()
                .ok_or(LimitError::BackendUnavailable),
        }
    }

    /// Takes a block of `g` units for `one` (its cost among them). A block the window no
    /// longer has is refused whole: the check then goes alone if the window still has its
    /// cost, else that refusal is its denial.
    async fn acquire(
        &self,
        one: &Resolved<'_>,
        slot: &Slot,
        g: u64,
        now_ms: u64,
        span: &Span,
    ) -> Result<Decision, StoreError> {
        let block = Check {
            cost: g,
            ..one.check
        };
        if let Some(backend) = self.redis {
            self.metrics.emit(LeaseCalled { backend });
        }
        let name = &one.policy.name;
        match self
            .call_store_one(&block, Scope::Local, now_ms, span)
            .await
            .map(|decided| decided.decision)
        {
            Ok(decision) if decision.allowed => {
                let (remaining, expired) =
                    self.local
                        .leases
                        .granted(slot, g, one.check.cost, &decision, now_ms);
                for (what, units) in [
                    (Units::Expired, expired),
                    (Units::Granted, g),
                    (Units::Used, one.check.cost),
                ] {
                    self.metrics.emit(LeaseUnits {
                        policy: name,
                        what,
                        units,
                    });
                }
                Ok(Decision {
                    remaining,
                    ..decision
                })
            }
            Ok(refused) => {
                self.local
                    .leases
                    .observe(slot, Some(refused.remaining), true);
                // fixed_window refuses any cost above what is left until the window ends: the
                // refusal is this check's denial. sliding_window_counter's retry depends on
                // the cost, so the check goes alone.
                let fixed = one.check.params.algorithm == Algorithm::FixedWindow;
                if fixed && refused.remaining < one.check.cost {
                    return Ok(refused);
                }
                let decided = self
                    .call_store_one(&one.check, Scope::Local, now_ms, span)
                    .await
                    .map(|decided| decided.decision);
                let remaining = decided.as_ref().ok().map(|d| d.remaining);
                self.local.leases.observe(slot, remaining, false);
                decided
            }
            Err(err) => {
                self.local.leases.observe(slot, None, true);
                Err(err)
            }
        }
    }

    /// Gives back the unspent units of keys idle for [`leases::IDLE_MS`] at `now_ms`, or of
    /// every key (`shutdown`). A return that fails leaves them to end with their window.
    pub async fn return_leases(&self, now_ms: u64, shutdown: bool) {
        let idle_ms = if shutdown { 0 } else { leases::IDLE_MS };
        let (back, expired) = self.local.leases.idle(now_ms, idle_ms);
        for unspent in back {
            let name = &unspent.slot.policy;
            let check = Check::new(name, &unspent.slot.key, unspent.params, unspent.units);
            let back = Unspent {
                check,
                token: unspent.token,
            };
            let outcome = match self.store.give_back(&back, now_ms).await {
                Ok(()) => Units::Returned,
                Err(err) => {
                    tracing::debug!(error = %err, "an unspent lease was not returned");
                    Units::Expired
                }
            };
            self.metrics.emit(LeaseUnits {
                policy: name,
                what: outcome,
                units: unspent.units,
            });
        }
        for (name, units) in expired {
            self.metrics.emit(LeaseUnits {
                policy: &name,
                what: Units::Expired,
                units,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::metrics::Metrics;
    use crate::service::compiled::PolicySet;
    use crate::service::limiter::{CheckInput, Limiter};
    use sluice_config::PolicyConfig;

    fn policies(lease: &str) -> Result<PolicySet, Vec<sluice_config::error::FieldError>> {
        let config = PolicyConfig {
            algorithm: Some("fixed_window".into()),
            limit: Some(1),
            window: Some("1h".into()),
            lease: lease.into(),
            ..PolicyConfig::default()
        };
        PolicySet::compile(&BTreeMap::from([("p".to_owned(), config)]))
    }

    #[test]
    fn lease_is_auto_or_off_and_anything_else_is_refused_by_name() {
        assert!(policies("auto").unwrap().get("p").unwrap().lease);
        assert!(!policies("off").unwrap().get("p").unwrap().lease);
        let errors = policies("sometimes").unwrap_err();
        assert_eq!(errors[0].field, "policies.p.lease");
        assert!(
            errors[0].message.contains("expected auto or off"),
            "{errors:?}"
        );
    }

    #[tokio::test]
    async fn the_memory_backend_answers_every_check_itself() {
        let store = Arc::new(sluice_store::MemoryStore::new(Default::default()));
        let limiter = Limiter::new(
            store,
            policies("auto").unwrap(),
            Arc::new(Metrics::new()),
            Duration::from_millis(10),
        );
        let input = CheckInput::new("p", "k");
        for _ in 0..3 {
            limiter.check(&input, 1_000).await.unwrap();
        }
        assert!(
            !limiter
                .metrics()
                .encode()
                .contains("source=\"denied_cache\"} ")
        );
    }
}
