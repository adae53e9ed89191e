//! The run-time limit overrides of the memory store: one daemon, so they live beside the
//! counters with a version every change bumps, and nobody else to tell.

use std::collections::BTreeMap;

use crate::LimitOverride;

/// The overrides and their version.
#[derive(Debug, Default)]
pub(super) struct Overrides {
    /// Bumped by every change (0 before the first).
    pub(super) version: u64,
    /// The overrides by (policy, tier).
    by_tier: BTreeMap<(String, String), LimitOverride>,
}

impl Overrides {
    /// Stores `change`, replacing the override of its policy and tier.
    pub(super) fn put(&mut self, change: &LimitOverride) {
        self.version += 1;
        self.by_tier
            .insert((change.policy.clone(), change.tier.clone()), change.clone());
    }

    /// Removes the override of (policy, tier); whether there was one.
    pub(super) fn delete(&mut self, policy: &str, tier: &str) -> bool {
        self.version += 1;
        self.by_tier
            .remove(&(policy.to_owned(), tier.to_owned()))
            .is_some()
    }

    /// Every override, sorted by (policy, tier).
    pub(super) fn list(&self) -> Vec<LimitOverride> {
        self.by_tier.values().cloned().collect()
    }
}
