//! How the run-time settings stored in the backend apply to the file's policies, before the
//! one compile: a limit override replaces one tier's limit and burst (or adds the tier); a
//! run-time candidate replaces the file's candidate of its (policy, tier). Tier `none` is the
//! policy's own limit in both. Settings of policies the file no longer has apply to nothing.

use std::collections::BTreeMap;

use sluice_store::{CandidateOverride, LimitOverride};

use sluice_config::PolicyConfig;
use sluice_config::policy::NO_TIER;
use sluice_config::schema::{CandidateConfig, CandidateTierConfig, LimitConfig, TierConfig};

/// The file's policies with every override, then every candidate, applied (overrides first:
/// a candidate may be set on a tier an override added).
pub(super) fn merged(
    file: &BTreeMap<String, PolicyConfig>,
    limits: &[LimitOverride],
    candidates: &[CandidateOverride],
) -> BTreeMap<String, PolicyConfig> {
    let mut policies = file.clone();
    for change in limits {
        if let Some(policy) = policies.get_mut(&change.policy) {
            apply_limit(policy, change);
        }
    }
    for candidate in candidates {
        if let Some(policy) = policies.get_mut(&candidate.policy) {
            apply_candidate(policy, candidate);
        }
    }
    policies
}

/// An override of tier `none` changes the policy's own limit and burst only: the tiers that
/// took the policy's limit by default keep the file's, as the candidate of tier `none` it may
/// promote was judged on the policy's own limit only. Any other tier is replaced or added.
///
/// On a stacked policy (`limits = [...]`) an override replaces the first limit's `limit` and
/// `burst`: of the policy's own stack for tier `none`, else of a copy of it the tier takes
/// (the tier's own stack, when it has one).
fn apply_limit(policy: &mut PolicyConfig, change: &LimitOverride) {
    if let Some(stack) = policy.limits.clone() {
        let replace_first = |limits: &mut Vec<LimitConfig>| {
            if let Some(first) = limits.first_mut() {
                first.limit = change.limit;
                first.burst = change.burst;
            }
        };
        if change.tier == NO_TIER {
            if let Some(limits) = policy.limits.as_mut() {
                replace_first(limits);
            }
        } else {
            let tier = policy.tiers.entry(change.tier.clone()).or_default();
            let limits = tier.limits.get_or_insert(stack);
            replace_first(limits);
        }
        return;
    }
    if change.tier == NO_TIER {
        for tier in policy.tiers.values_mut() {
            if tier.limit.is_none() {
                tier.limit = policy.limit;
            }
        }
        policy.limit = Some(change.limit);
        policy.burst = change.burst;
    } else {
        policy.tiers.insert(
            change.tier.clone(),
            TierConfig {
                limit: Some(change.limit),
                burst: change.burst,
                limits: None,
            },
        );
    }
}

/// A run-time candidate replaces the file's candidate of its tier whole. Its unset window and
/// algorithm are the policy's (not the file candidate's); its unset burst is its own limit.
fn apply_candidate(policy: &mut PolicyConfig, candidate: &CandidateOverride) {
    let window = candidate.window.clone().or_else(|| policy.window.clone());
    let algorithm = candidate
        .algorithm
        .clone()
        .or_else(|| policy.algorithm.clone());
    let config = policy
        .candidate
        .get_or_insert_with(CandidateConfig::default);
    // The file's tier candidates default their window and algorithm to its candidate of tier
    // `none`: pin them, so replacing that one leaves them as the file says.
    for tier in config.tiers.values_mut() {
        if tier.window.is_none() {
            tier.window.clone_from(&config.window);
        }
        if tier.algorithm.is_none() {
            tier.algorithm.clone_from(&config.algorithm);
        }
    }
    if candidate.tier == NO_TIER {
        config.limit = Some(candidate.limit);
        config.burst = candidate.burst;
        config.window = window;
        config.algorithm = algorithm;
    } else {
        config.tiers.insert(
            candidate.tier.clone(),
            CandidateTierConfig {
                limit: Some(candidate.limit),
                burst: candidate.burst,
                window,
                algorithm,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::compiled::PolicySet;

    fn file(candidate: &str) -> BTreeMap<String, PolicyConfig> {
        let toml = format!(
            "[policies.public]\nalgorithm = \"token_bucket\"\nlimit = 100\nwindow = \"60s\"\n\
             tiers = {{ pro = {{ limit = 1000 }}, free = {{}} }}\n{candidate}"
        );
        crate::testing::settings(&toml).settings.policy_configs
    }

    fn candidate(tier: &str, limit: u64) -> CandidateOverride {
        CandidateOverride::new("public", tier, limit)
    }

    fn compiled(
        file: &BTreeMap<String, PolicyConfig>,
        limits: &[LimitOverride],
        candidates: &[CandidateOverride],
    ) -> PolicySet {
        PolicySet::compile(&merged(file, limits, candidates)).unwrap()
    }

    #[test]
    fn an_override_of_tier_none_changes_the_policys_own_limit_only() {
        let change = LimitOverride {
            policy: "public".into(),
            tier: NO_TIER.into(),
            limit: 150,
            burst: None,
        };
        let set = compiled(&file(""), &[change], &[]);
        let public = set.get("public").unwrap();
        assert_eq!(
            (public.base.params.limit, public.base.params.burst),
            (150, 150)
        );
        assert!(!public.tiers.contains_key(NO_TIER), "no tier named none");
        let free = public.limit_for(Some("free")).params;
        assert_eq!(
            free.limit, 100,
            "a tier defaulting to the policy's limit keeps it"
        );
    }

    #[test]
    fn a_run_time_candidate_replaces_the_files_of_its_tier_and_leaves_the_others() {
        let file = file(
            "[policies.public.candidate]\nlimit = 120\nwindow = \"30s\"\nburst = 500\n\
             tiers = { pro = { limit = 1200 } }\n",
        );
        let set = compiled(&file, &[], &[candidate(NO_TIER, 150)]);
        let public = set.get("public").unwrap();
        let base = public.base.candidate.unwrap();
        assert_eq!(
            (base.limit, base.burst, base.window_ms),
            (150, 150, 60_000),
            "burst its own limit, window the policy's: nothing of the file's candidate"
        );
        let pro = public.limit_for(Some("pro")).candidate.unwrap();
        assert_eq!(
            (pro.limit, pro.window_ms),
            (1200, 30_000),
            "the file's pro candidate keeps the window it took from the file's candidate"
        );

        let gcra = CandidateOverride {
            algorithm: Some("gcra".into()),
            window: Some("10s".into()),
            burst: Some(7),
            ..candidate("free", 5)
        };
        let set = compiled(&file, &[], &[gcra]);
        let free = set.get("public").unwrap().limit_for(Some("free")).candidate;
        let free = free.unwrap();
        assert_eq!(
            (
                free.algorithm.as_str(),
                free.limit,
                free.burst,
                free.window_ms
            ),
            ("gcra", 5, 7, 10_000)
        );
    }

    #[test]
    fn a_candidate_may_judge_a_tier_an_override_added() {
        let gold = LimitOverride {
            policy: "public".into(),
            tier: "gold".into(),
            limit: 5000,
            burst: None,
        };
        let set = compiled(&file(""), &[gold], &[candidate("gold", 6000)]);
        let public = set.get("public").unwrap();
        assert_eq!(
            public.limit_for(Some("gold")).candidate.map(|c| c.limit),
            Some(6000)
        );
        assert_eq!(public.base.candidate, None);
    }
}
