//! A check or a batch resolved against the current policies and decided: one store call for
//! a lone check; for a batch, every check resolved, the batch kept to one scope (and to one
//! slot where one script must decide it), one all-or-nothing call, and a second call when
//! only shadow policies denied, so the enforced checks consume as they would alone. Checks
//! with a candidate limit go in the store's candidate form of the same one call
//! ([`candidate`](super::candidate)).

use sluice_api::{MAX_BATCH, MAX_KEY_BYTES};
use sluice_core::{CheckError, Counting, Decision, Mode};
use sluice_store::{Check, Decided, StoreError, StoreKind};
use tracing::Span;

use super::{CheckInput, LimitError, Limiter, Resolved, Shape, Started, Verdict};
use crate::service::compiled::{Policy, PolicySet};
use sluice_config::policy::{Scope, Stacked};

impl Limiter {
    /// Resolves one check (a single check, or a batch of one), decides it in one store call
    /// and turns the decision, or the store's failure, into its verdict. Nothing to mix or to
    /// decide again, so none of a batch's bookkeeping.
    pub(super) async fn decide_one(
        &self,
        input: &CheckInput<'_>,
        shape: Shape,
        now_ms: u64,
        span: &Span,
    ) -> Result<Verdict, LimitError> {
        let at = (shape == Shape::Batch).then_some(0);
        let one = self.resolve(&self.snapshot.load().policies, input, at)?;
        if shape == Shape::One && self.answers_locally(&one) {
            return self.decide_local(one, now_ms, span).await;
        }
        let started = Started::now(span);
        let scope = one.policy.scope;
        let stack = one.limit.stacked.as_slice();
        let decided = match shape {
            Shape::One if stack.is_empty() => {
                self.call_store_one(&one.check, scope, now_ms, span).await
            }
            _ => self
                .call_store_stacked(
                    std::slice::from_ref(&one.check),
                    &[stack],
                    scope,
                    now_ms,
                    span,
                )
                .await
                .and_then(|mut decided| {
                    decided
                        .pop()
                        .ok_or_else(|| StoreError::Backend("the store answered no decision".into()))
                }),
        };
        match decided.and_then(|decided| judged(&one.check, decided)) {
            Ok((decision, judged)) => {
                Ok(self.verdict(one, decision, judged.as_ref(), now_ms, started))
            }
            Err(err) => self
                .failed(vec![one], &err, now_ms, started)?
                .pop()
                .ok_or(LimitError::BackendUnavailable),
        }
    }

    /// Resolves a batch of `inputs`, decides them all-or-nothing in one store call (with the
    /// candidates of those that have one) and turns the decisions, or the store's failure,
    /// into verdicts.
    pub(super) async fn decide(
        &self,
        inputs: &[CheckInput<'_>],
        now_ms: u64,
        span: &Span,
    ) -> Result<Vec<Verdict>, LimitError> {
        let resolved = self.resolve_batch(inputs)?;
        let scope = one_scope(&resolved)?;
        if scope == Scope::Replicated && self.store.kind() == StoreKind::Cluster {
            one_slot(&resolved)?;
        }
        let started = Started::now(span);
        let checks: Vec<Check<'_>> = resolved.iter().map(|r| r.check).collect();
        let stacks: Vec<&[Stacked]> = resolved
            .iter()
            .map(|r| r.limit.stacked.as_slice())
            .collect();
        let decided = self
            .call_store_stacked(&checks, &stacks, scope, now_ms, span)
            .await
            .and_then(|decided| {
                checks
                    .iter()
                    .zip(decided)
                    .map(|(check, decided)| judged(check, decided))
                    .collect::<Result<Vec<_>, _>>()
            });
        let (decisions, judged): (Vec<Decision>, Vec<Option<Decision>>) = match decided {
            Ok(pairs) => pairs.into_iter().unzip(),
            Err(err) => return self.failed(resolved, &err, now_ms, started),
        };
        // The candidates were judged by the first call: a second one decides the enforced
        // checks alone.
        match self
            .without_shadow_denials(&resolved, decisions, scope, now_ms, span)
            .await
        {
            Ok(decisions) => Ok(resolved
                .into_iter()
                .zip(decisions)
                .zip(judged)
                .map(|((r, d), judged)| self.verdict(r, d, judged.as_ref(), now_ms, started))
                .collect()),
            Err(err) => self.failed(resolved, &err, now_ms, started),
        }
    }

    /// Every check of a batch of 1 to [`MAX_BATCH`] resolved against one version of the
    /// policies.
    fn resolve_batch<'a>(
        &self,
        inputs: &[CheckInput<'a>],
    ) -> Result<Vec<Resolved<'a>>, LimitError> {
        if inputs.is_empty() || inputs.len() > MAX_BATCH {
            return Err(LimitError::BadRequest {
                message: format!(
                    "a batch holds 1 to {MAX_BATCH} checks, this one {}",
                    inputs.len()
                ),
                field: Some("checks".to_owned()),
            });
        }
        // A guard, not a clone of the set's `Arc`: no reference count shared by every thread
        // is written. The resolved checks hold what they need.
        let snapshot = self.snapshot.load();
        inputs
            .iter()
            .enumerate()
            .map(|(i, input)| self.resolve(&snapshot.policies, input, Some(i)))
            .collect()
    }

    /// A denial only a shadow policy made must not cancel the others: the checks that were
    /// allowed are decided again without those checks, so the enforced ones consume as they
    /// would alone.
    async fn without_shadow_denials(
        &self,
        resolved: &[Resolved<'_>],
        mut decisions: Vec<Decision>,
        scope: Scope,
        now_ms: u64,
        span: &Span,
    ) -> Result<Vec<Decision>, StoreError> {
        // Only denials of checks counting what they admit cancel a batch (one counting every
        // hit, envoyproxy/ratelimit's rule, was counted whatever the others answered).
        let cancels = |(d, r): (&Decision, &Resolved<'_>)| {
            !d.allowed && r.check.params.counting == Counting::Admitted
        };
        let cancelling: Vec<&Resolved<'_>> = decisions
            .iter()
            .zip(resolved)
            .filter(|&pair| cancels(pair))
            .map(|(_, r)| r)
            .collect();
        if cancelling.is_empty() || !cancelling.iter().all(|r| r.policy.shadow) {
            return Ok(decisions);
        }
        let again: Vec<usize> = (0..resolved.len())
            .filter(|&i| decisions[i].allowed)
            .collect();
        if again.is_empty() {
            return Ok(decisions);
        }
        let checks: Vec<Check<'_>> = again
            .iter()
            .map(|&i| Check {
                candidate: None,
                ..resolved[i].check
            })
            .collect();
        let stacks: Vec<&[Stacked]> = again
            .iter()
            .map(|&i| resolved[i].limit.stacked.as_slice())
            .collect();
        let second = self
            .call_store_stacked(&checks, &stacks, scope, now_ms, span)
            .await?;
        for (slot, decided) in again.iter().zip(second) {
            decisions[*slot] = decided.decision;
        }
        Ok(decisions)
    }

    pub(super) fn resolve<'a>(
        &self,
        policies: &PolicySet,
        input: &CheckInput<'a>,
        at: Option<usize>,
    ) -> Result<Resolved<'a>, LimitError> {
        // Only an error names its field, so the name is built only then.
        let field = |name: &str| match at {
            None => name.to_owned(),
            Some(i) => format!("checks[{i}].{name}"),
        };
        if input.key.is_empty() || input.key.len() > MAX_KEY_BYTES {
            return Err(LimitError::BadRequest {
                message: format!(
                    "key must be 1 to {MAX_KEY_BYTES} bytes of UTF-8, this one is {}",
                    input.key.len()
                ),
                field: Some(field("key")),
            });
        }
        let Some(policy) = policies.get(input.policy) else {
            return Err(LimitError::UnknownPolicy {
                policy: input.policy.to_owned(),
                field: field("policy"),
            });
        };
        let (limit, tier_slot) = policy.tier(input.tier);
        let limit = limit.clone();
        let (cost, mode) = usage_mode(policy, input, &field)?;
        // Every stacked limit must be able to take the cost (the first is `limit.params`).
        let tightest = limit
            .stacked
            .iter()
            .map(|s| &s.params)
            .min_by_key(|p| p.max_cost())
            .unwrap_or(&limit.params);
        match sluice_core::validate_check(tightest, cost, mode) {
            Ok(()) => {}
            Err(CheckError::CostExceedsCapacity { cost, capacity }) => {
                return Err(LimitError::CostExceedsCapacity {
                    policy: input.policy.to_owned(),
                    cost,
                    capacity,
                    field: field("cost"),
                });
            }
            Err(e @ CheckError::NoDebt { .. }) => {
                return Err(LimitError::BadRequest {
                    message: format!("policy {:?}: {e}", input.policy),
                    field: Some(field("policy")),
                });
            }
        }
        Ok(Resolved {
            tier_slot,
            detail: input.detail,
            endpoint_slot: policy.endpoint_slot(input.endpoint),
            check: Check {
                candidate: limit.candidate,
                ..Check::new(input.policy, input.key, limit.params, cost).in_mode(mode)
            },
            limit,
            policy: policy.clone(),
        })
    }
}

/// The cost and mode of `input` under `policy`: a usage policy's check asks (its cost
/// defaults to 0, an estimate it consumes when every limit has room for max(cost, 1)); a
/// charge or refund needs a usage policy.
fn usage_mode(
    policy: &Policy,
    input: &CheckInput<'_>,
    field: &dyn Fn(&str) -> String,
) -> Result<(u64, Mode), LimitError> {
    match input.mode {
        Mode::Consume if policy.usage => Ok((input.cost.unwrap_or(0), Mode::Ask)),
        Mode::Consume => Ok((input.cost.unwrap_or(1), Mode::Consume)),
        Mode::Ask => Ok((input.cost.unwrap_or(0), Mode::Ask)),
        Mode::Charge | Mode::Refund if !policy.usage => Err(LimitError::BadRequest {
            message: format!(
                "policy {:?} is not a usage policy (usage = true): it takes checks, not charges",
                input.policy
            ),
            field: Some(field("policy")),
        }),
        Mode::Charge | Mode::Refund => Ok((input.cost.unwrap_or(0), input.mode)),
    }
}

/// The one scope of a batch: all-or-nothing does not span regions.
fn one_scope(resolved: &[Resolved<'_>]) -> Result<Scope, LimitError> {
    let scope = resolved[0].policy.scope;
    match resolved.iter().position(|r| r.policy.scope != scope) {
        None => Ok(scope),
        Some(i) => Err(LimitError::BadRequest {
            message: format!(
                "a batch cannot mix scopes ({} and {}): all-or-nothing does not span regions",
                scope.as_str(),
                resolved[i].policy.scope.as_str()
            ),
            field: Some(format!("checks[{i}].policy")),
        }),
    }
}

/// A batch of replicated policies on a Redis Cluster keeps to one slot: one script decides it.
fn one_slot(resolved: &[Resolved<'_>]) -> Result<(), LimitError> {
    let slot = |r: &Resolved<'_>| sluice_store::keys::slot(r.check.policy, r.check.key);
    let first = slot(&resolved[0]);
    match resolved.iter().position(|r| slot(r) != first) {
        None => Ok(()),
        Some(i) => Err(LimitError::BadRequest {
            message: "a batch of replicated policies on a Redis Cluster must keep to one slot \
                      (one script decides it); send these checks apart"
                .to_owned(),
            field: Some(format!("checks[{i}].key")),
        }),
    }
}

/// What the store decided for `check`: its decision, and its candidate's when it carries one
/// (a store that answers none for it failed).
fn judged(check: &Check<'_>, decided: Decided) -> Result<(Decision, Option<Decision>), StoreError> {
    match (check.candidate, decided.candidate) {
        (Some(_), None) => Err(StoreError::Backend(
            "the store answered no candidate decision".into(),
        )),
        (_, judged) => Ok((decided.decision, judged)),
    }
}
