//! Limits that change at run time without a deploy: the file's policies plus the settings
//! stored in the backend (set through the admin API by any daemon sharing it): limit overrides
//! and candidate limits.
//!
//! The effective policies are always compiled from both, by the one compile of the file (see
//! [`merge`](super::merge) for how each setting applies). Every daemon polls the backend's
//! settings version every 250 ms (one version for both kinds) and recompiles when it moved,
//! so a change made on one daemon is in force on every other within a second, and a daemon
//! that was down or partitioned catches up on its next poll (the version is durable: no
//! message can be missed). A reload of the file keeps the settings; counters are kept through
//! both. A stored setting that does not fit the file (its tier is gone, its values no longer
//! compile with the file's) is left out with a log line, not fatal, and applies again once it
//! fits.

use std::collections::BTreeMap;

use sluice_store::{CandidateOverride, LimitOverride, Settings};

use super::merge::merged;
use crate::service::compiled::PolicySet;
use sluice_config::policy::NO_TIER;
use sluice_config::{FieldError, PolicyConfig};

/// The sources of the effective policies: the file's policies and the backend's settings as
/// last read. A value: the one writer of the run-time settings
/// ([`writer`](super::writer)) derives the next from it and publishes both in one
/// [`Snapshot`](super::snapshot::Snapshot); readers validate admin changes against the one
/// they loaded.
#[derive(Debug, Clone)]
pub struct RuntimeLimits {
    file: BTreeMap<String, PolicyConfig>,
    /// Every setting the backend holds, as last read (`version` 0 and empty: never read).
    stored: Settings,
    /// The version `stored` was read at; `None`: never synced.
    version: Option<u64>,
    /// The settings of `stored` in force: those that fit the file.
    in_force: Settings,
}

impl RuntimeLimits {
    fn compile(&self) -> Result<PolicySet, Vec<FieldError>> {
        PolicySet::compile(&merged(
            &self.file,
            &self.in_force.limits,
            &self.in_force.candidates,
        ))
    }

    /// `self` with `stored` in force, as many of them as fit the file, and the policies they
    /// compile to; `Err` only when the file itself does not compile.
    fn fitted(mut self, stored: Settings) -> Result<(RuntimeLimits, PolicySet), Vec<FieldError>> {
        self.in_force = stored.clone();
        self.stored = stored;
        if let Ok(policies) = self.compile() {
            return Ok((self, policies));
        }
        let every = std::mem::take(&mut self.in_force);
        let mut policies = self.compile()?;
        let changes = every
            .limits
            .into_iter()
            .map(Change::Limit)
            .chain(every.candidates.into_iter().map(Change::Candidate));
        for change in changes {
            let mut trial = self.clone();
            change.clone().apply_to(&mut trial.in_force);
            match trial.compile() {
                Ok(fits) => (self, policies) = (trial, fits),
                Err(errors) => {
                    let (what, policy, tier) = change.names();
                    tracing::warn!(
                        policy,
                        tier,
                        "ignoring a stored {what} that does not fit the current config: {}",
                        joined(&errors)
                    );
                }
            }
        }
        Ok((self, policies))
    }
}

/// One stored setting of either kind.
#[derive(Debug, Clone)]
enum Change {
    Limit(LimitOverride),
    Candidate(CandidateOverride),
}

impl Change {
    /// Puts it among `settings`, replacing the one of its kind of the same (policy, tier).
    fn apply_to(self, settings: &mut Settings) {
        match self {
            Change::Limit(change) => {
                settings
                    .limits
                    .retain(|o| (&o.policy, &o.tier) != (&change.policy, &change.tier));
                settings.limits.push(change);
            }
            Change::Candidate(change) => {
                settings
                    .candidates
                    .retain(|c| (&c.policy, &c.tier) != (&change.policy, &change.tier));
                settings.candidates.push(change);
            }
        }
    }

    /// What it is, and its policy and tier, for log lines.
    fn names(&self) -> (&'static str, &str, &str) {
        match self {
            Change::Limit(o) => ("limit override", &o.policy, &o.tier),
            Change::Candidate(c) => ("candidate", &c.policy, &c.tier),
        }
    }
}

fn joined(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("unknown policy {0:?}")]
    UnknownPolicy(String),
    /// A candidate judges a tier the policy has (an override may add tiers).
    #[error("policy {policy:?} has no tier {tier:?}; its tiers are {}", tiers.join(", "))]
    UnknownTier {
        policy: String,
        tier: String,
        tiers: Vec<String>,
    },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

/// Where the candidate in force of a (policy, tier) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateSource {
    /// Set through the admin API.
    Admin,
    /// The config file's `[policies.NAME.candidate]`.
    File,
}

impl CandidateSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateSource::Admin => sluice_api::sources::ADMIN,
            CandidateSource::File => sluice_api::sources::FILE,
        }
    }
}

impl RuntimeLimits {
    /// The file's policies, no stored setting read yet.
    pub fn new(file: BTreeMap<String, PolicyConfig>) -> Self {
        RuntimeLimits {
            file,
            stored: Settings::default(),
            version: None,
            in_force: Settings::default(),
        }
    }

    /// The version of the settings last read; `None`: never read.
    pub fn version(&self) -> Option<u64> {
        self.version
    }

    /// With the file's policies replaced (a reload), keeping the stored settings (those that
    /// fit the new file are in force), and the policies they compile to.
    pub fn with_file(
        &self,
        file: BTreeMap<String, PolicyConfig>,
    ) -> Result<(RuntimeLimits, PolicySet), Vec<FieldError>> {
        let next = RuntimeLimits {
            file,
            ..self.clone()
        };
        let stored = next.stored.clone();
        next.fitted(stored)
    }

    /// Checks that `change` would compile with the file and the settings in force, naming
    /// the bad field (`limit` or `burst`).
    pub fn validate(&self, change: &LimitOverride) -> Result<(), OverrideError> {
        self.validate_change(Change::Limit(change.clone()))
    }

    /// Checks that `candidate` judges a tier its policy has (`none`, a tier of the file or
    /// one an override added) and would compile, naming the bad field (`limit`, `burst`,
    /// `window` or `algorithm`).
    pub fn validate_candidate(&self, candidate: &CandidateOverride) -> Result<(), OverrideError> {
        self.check_tier(&candidate.policy, &candidate.tier)?;
        self.validate_change(Change::Candidate(candidate.clone()))
    }

    /// Whether `policy` has `tier` (`none`, a tier of the file, or one an override added);
    /// else the error naming the tiers it has.
    pub fn check_tier(&self, policy: &str, tier: &str) -> Result<(), OverrideError> {
        let policies = merged(&self.file, &self.in_force.limits, &[]);
        let config = policies
            .get(policy)
            .ok_or_else(|| OverrideError::UnknownPolicy(policy.to_owned()))?;
        if tier == NO_TIER || config.tiers.contains_key(tier) {
            return Ok(());
        }
        Err(OverrideError::UnknownTier {
            policy: policy.to_owned(),
            tier: tier.to_owned(),
            tiers: std::iter::once(NO_TIER.to_owned())
                .chain(config.tiers.keys().cloned())
                .collect(),
        })
    }

    fn validate_change(&self, change: Change) -> Result<(), OverrideError> {
        let (_, policy, _) = change.names();
        if !self.file.contains_key(policy) {
            return Err(OverrideError::UnknownPolicy(policy.to_owned()));
        }
        let mut trial = self.clone();
        change.apply_to(&mut trial.in_force);
        // The settings in force compile with the file, so whatever fails is the change's.
        trial.compile().map(drop).map_err(|errors| {
            let first = errors.into_iter().next();
            let (path, message) = first.map_or_else(
                || (String::new(), "invalid".to_owned()),
                |e| (e.field, e.message),
            );
            OverrideError::Invalid {
                field: request_field(&path).to_owned(),
                message,
            }
        })
    }

    /// The run-time candidate of (policy, tier) in force, if any.
    pub fn admin_candidate(&self, policy: &str, tier: &str) -> Option<CandidateOverride> {
        self.in_force
            .candidates
            .iter()
            .find(|c| c.policy == policy && c.tier == tier)
            .cloned()
    }

    /// Where the candidate in force of (policy, tier) comes from, given that it has one: the
    /// admin API's when one is in force, else the file's.
    pub fn candidate_source(&self, policy: &str, tier: &str) -> CandidateSource {
        match self.admin_candidate(policy, tier) {
            Some(_) => CandidateSource::Admin,
            None => CandidateSource::File,
        }
    }

    /// With the backend's settings `stored` taken, and the policies they compile to when
    /// anything but the version changed (`None`: nothing to publish).
    pub fn adopt(&self, stored: Settings) -> (RuntimeLimits, Option<PolicySet>) {
        let version = stored.version;
        let unchanged = Settings {
            version: self.stored.version,
            ..stored.clone()
        };
        let mut next = RuntimeLimits {
            version: Some(version),
            ..self.clone()
        };
        if self.stored == unchanged {
            // The version moves on every write, a delete of nothing included: nothing to
            // compile, nothing to announce.
            next.stored.version = version;
            return (next, None);
        }
        // The file compiled when it was taken, so this cannot fail; keep the policies if it
        // does.
        match next.fitted(stored) {
            Ok((next, policies)) => (next, Some(policies)),
            Err(_) => (self.clone(), None),
        }
    }
}

/// The field of a request body that a compile error at config `path` is about: its last
/// segment when that is one of a setting's fields, else `limit`.
fn request_field(path: &str) -> &str {
    match path.rsplit('.').next() {
        Some(field @ ("burst" | "window" | "algorithm")) => field,
        _ => "limit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(limit: u64) -> BTreeMap<String, PolicyConfig> {
        let toml = format!(
            "[policies.public]\nalgorithm = \"token_bucket\"\nlimit = {limit}\nwindow = \"60s\"\ntiers = {{ pro = {{ limit = 1000 }} }}\n"
        );
        crate::testing::settings(&toml).settings.policy_configs
    }

    fn change(tier: &str, limit: u64, burst: Option<u64>) -> LimitOverride {
        LimitOverride {
            policy: "public".into(),
            tier: tier.into(),
            limit,
            burst,
        }
    }

    fn candidate(tier: &str, limit: u64) -> CandidateOverride {
        CandidateOverride::new("public", tier, limit)
    }

    fn stored(
        version: u64,
        limits: Vec<LimitOverride>,
        candidates: Vec<CandidateOverride>,
    ) -> Settings {
        Settings {
            version,
            limits,
            candidates,
        }
    }

    fn limit_of(set: &PolicySet, tier: &str) -> (u64, u64) {
        let params = set.get("public").unwrap().limit_for(Some(tier)).params;
        (params.limit, params.burst)
    }

    #[test]
    fn an_override_replaces_or_adds_a_tier_and_survives_a_file_reload() {
        let limits = RuntimeLimits::new(file(100));
        let both = vec![change("pro", 7, Some(9)), change("gold", 50, None)];
        let (limits, set) = limits.adopt(stored(1, both.clone(), vec![]));
        let set = set.unwrap();
        assert_eq!(limit_of(&set, "pro"), (7, 9));
        assert_eq!(
            limit_of(&set, "gold"),
            (50, 50),
            "burst defaults to the tier's limit"
        );
        let (limits, set) = limits.adopt(stored(2, both, vec![]));
        assert!(set.is_none(), "nothing changed, nothing to swap");
        assert_eq!(limits.version(), Some(2));

        let (_, reloaded) = limits.with_file(file(200)).unwrap();
        assert_eq!(
            limit_of(&reloaded, "pro"),
            (7, 9),
            "a reload keeps the overrides"
        );
        assert_eq!(limit_of(&reloaded, "other"), (200, 200));
    }

    #[test]
    fn validation_names_the_field_and_refuses_unknown_policies() {
        let limits = RuntimeLimits::new(file(100));
        assert_eq!(limits.validate(&change("pro", 5, Some(8))), Ok(()));
        let err = limits.validate(&change("pro", 0, None)).unwrap_err();
        assert!(
            matches!(err, OverrideError::Invalid { ref field, .. } if field == "limit"),
            "{err:?}"
        );
        let err = limits.validate(&change("pro", 5, Some(0))).unwrap_err();
        assert!(
            matches!(err, OverrideError::Invalid { ref field, .. } if field == "burst"),
            "{err:?}"
        );
        let unknown = LimitOverride {
            policy: "nope".into(),
            ..change("pro", 5, None)
        };
        assert_eq!(
            limits.validate(&unknown),
            Err(OverrideError::UnknownPolicy("nope".into()))
        );
    }

    #[test]
    fn a_stored_setting_that_no_longer_fits_is_skipped_not_fatal() {
        let (limits, set) = RuntimeLimits::new(file(100)).adopt(stored(
            3,
            vec![change("pro", 0, None), change("gold", 5, None)],
            vec![candidate("pro", 0), candidate("none", 150)],
        ));
        let set = set.unwrap();
        assert_eq!(limit_of(&set, "pro"), (1000, 1000), "the file's tier stays");
        assert_eq!(limit_of(&set, "gold"), (5, 5));
        let public = set.get("public").unwrap();
        assert_eq!(public.limit_for(Some("pro")).candidate, None);
        assert_eq!(public.base.candidate.map(|c| c.limit), Some(150));
        assert_eq!(
            limits.candidate_source("public", "none"),
            CandidateSource::Admin
        );
        assert_eq!(
            limits.admin_candidate("public", "pro"),
            None,
            "a skipped candidate is not in force"
        );
    }

    #[test]
    fn candidates_judge_the_tiers_the_policy_has_and_name_their_bad_field() {
        let limits = RuntimeLimits::new(file(100));
        assert_eq!(limits.validate_candidate(&candidate("none", 150)), Ok(()));
        assert_eq!(limits.validate_candidate(&candidate("pro", 1500)), Ok(()));
        let err = limits
            .validate_candidate(&candidate("gold", 5))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "policy \"public\" has no tier \"gold\"; its tiers are none, pro"
        );
        // An override that adds the tier makes it one the candidate may judge.
        let (limits, _) = limits.adopt(stored(1, vec![change("gold", 50, None)], vec![]));
        assert_eq!(limits.validate_candidate(&candidate("gold", 60)), Ok(()));

        for (bad, field) in [
            (candidate("pro", 0), "limit"),
            (
                CandidateOverride {
                    burst: Some(0),
                    ..candidate("pro", 5)
                },
                "burst",
            ),
            (
                CandidateOverride {
                    window: Some("soon".into()),
                    ..candidate("none", 5)
                },
                "window",
            ),
            (
                CandidateOverride {
                    algorithm: Some("fixed".into()),
                    ..candidate("none", 5)
                },
                "algorithm",
            ),
        ] {
            let err = limits.validate_candidate(&bad).unwrap_err();
            assert!(
                matches!(err, OverrideError::Invalid { field: ref f, .. } if f == field),
                "{bad:?}: {err:?}"
            );
        }
    }

    #[test]
    fn a_reload_keeps_run_time_candidates_and_a_stored_one_applies_once_it_fits() {
        let (limits, set) = RuntimeLimits::new(file(100)).adopt(stored(
            1,
            vec![],
            vec![candidate("none", 150), candidate("gold", 60)],
        ));
        let set = set.unwrap();
        let public = set.get("public").unwrap();
        assert_eq!(public.base.candidate.unwrap().limit, 150);
        assert!(!public.tiers.contains_key("gold"), "no tier gold to judge");

        let mut with_gold = file(120);
        let gold = sluice_config::TierConfig {
            limit: Some(50),
            ..Default::default()
        };
        with_gold
            .get_mut("public")
            .unwrap()
            .tiers
            .insert("gold".into(), gold);
        let (_, reloaded) = limits.with_file(with_gold).unwrap();
        let public = reloaded.get("public").unwrap();
        assert_eq!(public.base.params.limit, 120);
        assert_eq!(public.base.candidate.unwrap().limit, 150, "kept");
        assert_eq!(
            public.limit_for(Some("gold")).candidate.map(|c| c.limit),
            Some(60),
            "the stored candidate applies once its tier is there"
        );
    }
}
