//! Candidate limits on the check path: a check of a (policy, tier) with a candidate carries
//! it to the store, so the candidate is judged on its own state in the same call (one script
//! call on Redis), consumed as if it were enforced; the caller's
//! answer is the enforced decision alone. What the candidate would have answered is counted
//! in `rate_limit_candidate_decisions_total` and, when it would have rejected, in the top keys
//! by `candidate_rejected`. A store failure judges nothing: the check meets its fail mode.

use std::sync::Arc;

use sluice_core::Decision;

use super::{Limiter, Resolved};
use crate::metrics::{CandidateLabels, Metrics};
use crate::service::compiled::PolicySet;
use sluice_config::policy::NO_TIER;

impl Limiter {
    /// Records `judged`, what the candidate of the check `r` decided beside `decision` (the
    /// caller's answer is `decision`'s alone): in the top keys and in
    /// `rate_limit_candidate_decisions_total`.
    pub(super) fn record_judged(
        &self,
        r: &Resolved<'_>,
        decision: &Decision,
        judged: &Decision,
        now_ms: u64,
    ) {
        self.top.record_with_candidate(
            &r.policy.name,
            r.check.key,
            !decision.allowed,
            !judged.allowed,
            now_ms,
        );
        let policy = &r.policy;
        policy
            .meters
            .count_candidate(&self.metrics, judged.allowed, r.tier_slot, || {
                CandidateLabels {
                    policy: policy.name.clone(),
                    plan_tier: policy.tier_label(r.tier_slot, &self.other, &self.none),
                    outcome: CandidateLabels::outcome(judged.allowed),
                }
            });
    }
}

/// Creates the zero series of `rate_limit_candidate_decisions_total` of every (policy, tier)
/// of `policies` with a candidate (tier `none`: the policy's own limit).
pub(super) fn prime(metrics: &Metrics, policies: &PolicySet) {
    let none: Arc<str> = NO_TIER.into();
    metrics.prime_candidates(policies.iter().flat_map(|policy| {
        let base = policy
            .base
            .candidate
            .map(|_| (policy.name.clone(), none.clone()));
        let tiers = policy
            .tiers
            .values()
            .filter(|limit| limit.candidate.is_some())
            .map(|limit| (policy.name.clone(), limit.tier_label.clone()));
        base.into_iter().chain(tiers)
    }));
}

#[cfg(test)]
mod tests {
    //! The limiter's side on the memory store and on a store that fails; every backend is
    //! driven end to end in `tests/tests/e2e/candidate.rs`.

    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::service::limiter::CheckInput;
    use crate::testing::Down;
    use sluice_config::PolicyConfig;
    use sluice_config::schema::CandidateConfig;

    fn limiter(store: Arc<dyn sluice_store::Store>) -> Limiter {
        let policy = |candidate: Option<u64>| PolicyConfig {
            algorithm: Some("fixed_window".into()),
            limit: Some(5),
            window: Some("60s".into()),
            fail: "open".into(),
            candidate: candidate.map(|limit| CandidateConfig {
                limit: Some(limit),
                ..CandidateConfig::default()
            }),
            ..PolicyConfig::default()
        };
        let configs = BTreeMap::from([
            ("plain".to_owned(), policy(None)),
            ("judged".to_owned(), policy(Some(8))),
        ]);
        Limiter::new(
            store,
            PolicySet::compile(&configs).unwrap(),
            Arc::new(Metrics::new()),
            Duration::from_millis(10),
        )
    }

    fn input(policy: &str) -> CheckInput<'_> {
        CheckInput::new(policy, "k")
    }

    fn series(l: &Limiter, outcome: &str) -> String {
        let text = l.metrics().encode();
        let name = format!(
            r#"rate_limit_candidate_decisions_total{{policy="judged",plan_tier="none",outcome="{outcome}"}} "#
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
            .to_owned()
    }

    #[tokio::test]
    async fn the_answer_is_the_enforced_limits_and_the_candidate_is_counted() {
        let l = limiter(Arc::new(sluice_store::MemoryStore::new(Default::default())));
        // Primed before the first check.
        assert_eq!(series(&l, "would_allow"), "0");
        for _ in 0..10 {
            let plain = l.check(&input("plain"), 1_000).await.unwrap();
            let judged = l.check(&input("judged"), 1_000).await.unwrap();
            assert_eq!(
                (plain.allowed, plain.decision),
                (judged.allowed, judged.decision)
            );
        }
        assert_eq!(series(&l, "would_allow"), "8");
        assert_eq!(series(&l, "would_reject"), "2");
    }

    #[tokio::test]
    async fn a_failed_backend_judges_nothing_and_the_fail_mode_answers() {
        let l = limiter(Arc::new(Down));
        let verdict = l.check(&input("judged"), 1_000).await.unwrap();
        assert!(verdict.allowed && verdict.degraded);
        let batch = l
            .check_batch(&[input("judged"), input("plain")], 1_000)
            .await
            .unwrap();
        assert!(batch.iter().all(|v| v.allowed && v.degraded));
        assert_eq!(series(&l, "would_allow"), "0");
        assert_eq!(series(&l, "would_reject"), "0");
    }

    #[test]
    fn a_policy_with_a_candidate_is_never_answered_locally() {
        let l = limiter(Arc::new(Down));
        let snapshot = l.snapshot();
        for (name, local) in [("plain", true), ("judged", false)] {
            let one = l.resolve(&snapshot.policies, &input(name), None).unwrap();
            assert_eq!(l.answers_locally(&one), local, "{name}");
        }
    }
}
