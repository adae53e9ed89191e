//! Limits that change at run time without a deploy: the file's policies plus the overrides
//! stored in the backend (set through the admin API by any daemon sharing it).
//!
//! The effective policies are always compiled from both: an override replaces one tier's
//! limit and burst (or adds the tier); the file's policy still decides the algorithm and the
//! window. Every daemon polls the backend's overrides version every 250 ms and recompiles when
//! it moved, so a change made on one daemon is in force on every other within a second, and
//! a daemon that was down or partitioned catches up on its next poll (the version is durable:
//! no message can be missed). A reload of the file keeps the overrides; counters are kept
//! through both.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_store::{LimitOverride, OverrideStore, StoreError};

use crate::config::{FieldError, PolicyConfig, TierConfig};
use crate::service::limiter::Limiter;
use crate::service::policy::PolicySet;

/// How often a daemon asks the backend whether the overrides changed.
pub const SYNC_EVERY: Duration = Duration::from_millis(250);

/// The sources of the effective policies.
#[derive(Debug)]
pub struct RuntimeLimits {
    state: Mutex<Sources>,
}

#[derive(Debug, Clone)]
struct Sources {
    file: BTreeMap<String, PolicyConfig>,
    /// Overrides in force and the backend version they came with (`None`: never synced).
    overrides: Vec<LimitOverride>,
    version: Option<u64>,
}

impl Sources {
    fn compile(&self) -> Result<PolicySet, Vec<FieldError>> {
        PolicySet::compile(&merged(&self.file, &self.overrides))
    }
}

/// The file's policies with each override applied to its tier. Overrides of policies the file
/// no longer has stay in the backend but apply to nothing.
fn merged(
    file: &BTreeMap<String, PolicyConfig>,
    overrides: &[LimitOverride],
) -> BTreeMap<String, PolicyConfig> {
    let mut policies = file.clone();
    for change in overrides {
        if let Some(policy) = policies.get_mut(&change.policy) {
            policy.tiers.insert(
                change.tier.clone(),
                TierConfig {
                    limit: Some(change.limit),
                    burst: change.burst,
                },
            );
        }
    }
    policies
}

/// Why an override was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("unknown policy {0:?}")]
    UnknownPolicy(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl RuntimeLimits {
    pub fn new(file: BTreeMap<String, PolicyConfig>) -> Self {
        RuntimeLimits {
            state: Mutex::new(Sources {
                file,
                overrides: Vec::new(),
                version: None,
            }),
        }
    }

    /// Replaces the file's policies (a reload), keeping the overrides. The caller swaps the
    /// returned set in.
    pub fn replace_file(
        &self,
        file: BTreeMap<String, PolicyConfig>,
    ) -> Result<PolicySet, Vec<FieldError>> {
        let mut state = self.state.lock();
        let next = Sources {
            file,
            ..state.clone()
        };
        let policies = next.compile()?;
        *state = next;
        Ok(policies)
    }

    /// Checks that `change` would compile, naming the bad field (`limit` or `burst`).
    pub fn validate(&self, change: &LimitOverride) -> Result<(), OverrideError> {
        let state = self.state.lock();
        if !state.file.contains_key(&change.policy) {
            return Err(OverrideError::UnknownPolicy(change.policy.clone()));
        }
        let mut overrides = state.overrides.clone();
        overrides.retain(|o| (&o.policy, &o.tier) != (&change.policy, &change.tier));
        overrides.push(change.clone());
        let candidate = Sources {
            overrides,
            ..state.clone()
        };
        candidate.compile().map(drop).map_err(|errors| {
            let first = errors.into_iter().next();
            let (path, message) = first.map_or_else(
                || (String::new(), "invalid".to_owned()),
                |e| (e.field, e.message),
            );
            let field = if path.ends_with(".burst") {
                "burst"
            } else {
                "limit"
            };
            OverrideError::Invalid {
                field: field.to_owned(),
                message,
            }
        })
    }

    /// Takes the backend's overrides at `version`; `Some` policies to swap in when anything
    /// changed. An override that no longer compiles (the file changed under it) is skipped
    /// with a log line rather than blocking every other one.
    fn adopt(&self, version: u64, overrides: Vec<LimitOverride>) -> Option<PolicySet> {
        let mut state = self.state.lock();
        if state.overrides == overrides {
            // The version moves on every write, a delete of nothing included: nothing to
            // compile, nothing to announce.
            state.version = Some(version);
            return None;
        }
        let mut accepted: Vec<LimitOverride> = Vec::with_capacity(overrides.len());
        for change in overrides {
            let mut trial = accepted.clone();
            trial.push(change.clone());
            let candidate = Sources {
                overrides: trial,
                ..state.clone()
            };
            match candidate.compile() {
                Ok(_) => accepted.push(change),
                Err(errors) => tracing::warn!(
                    policy = %change.policy,
                    tier = %change.tier,
                    "ignoring a stored override that does not fit the current config: {}",
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            }
        }
        let next = Sources {
            overrides: accepted,
            version: Some(version),
            ..state.clone()
        };
        let policies = next.compile().ok()?;
        *state = next;
        Some(policies)
    }
}

/// Brings `limits` and the policies of `limiter` up to the backend's overrides when their
/// version moved.
pub async fn sync(
    limits: &RuntimeLimits,
    store: &dyn OverrideStore,
    limiter: &Limiter,
) -> Result<(), StoreError> {
    let version = store.version().await?;
    if limits.state.lock().version == Some(version) {
        return Ok(());
    }
    let (version, overrides) = store.list().await?;
    if let Some(policies) = limits.adopt(version, overrides) {
        limiter.replace_policies(policies);
        tracing::info!(version, "limit overrides applied");
    }
    Ok(())
}

/// Polls the backend every [`SYNC_EVERY`] until `stop` resolves.
pub async fn sync_loop(
    limits: Arc<RuntimeLimits>,
    store: Arc<dyn OverrideStore>,
    limiter: Arc<Limiter>,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut ticks = tokio::time::interval(SYNC_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = ticks.tick() => {
                if let Err(err) = sync(&limits, &*store, &limiter).await {
                    tracing::debug!(error = %err, "could not read limit overrides");
                }
            }
        }
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

    fn limit_of(set: &PolicySet, tier: &str) -> (u64, u64) {
        let params = set.get("public").unwrap().limit_for(Some(tier)).params;
        (params.limit, params.burst)
    }

    #[test]
    fn an_override_replaces_or_adds_a_tier_and_survives_a_file_reload() {
        let limits = RuntimeLimits::new(file(100));
        let set = limits
            .adopt(1, vec![change("pro", 7, Some(9)), change("gold", 50, None)])
            .unwrap();
        assert_eq!(limit_of(&set, "pro"), (7, 9));
        assert_eq!(
            limit_of(&set, "gold"),
            (50, 50),
            "burst defaults to the tier's limit"
        );
        let same = vec![change("pro", 7, Some(9)), change("gold", 50, None)];
        assert!(
            limits.adopt(1, same).is_none(),
            "nothing changed, nothing to swap"
        );

        let reloaded = limits.replace_file(file(200)).unwrap();
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
    fn a_stored_override_that_no_longer_fits_is_skipped_not_fatal() {
        let limits = RuntimeLimits::new(file(100));
        let set = limits
            .adopt(3, vec![change("pro", 0, None), change("gold", 5, None)])
            .unwrap();
        assert_eq!(limit_of(&set, "pro"), (1000, 1000), "the file's tier stays");
        assert_eq!(limit_of(&set, "gold"), (5, 5));
    }
}
