//! The run-time settings of the memory store (limit overrides and candidates): one daemon, so
//! they live beside the counters with a version every change bumps, and nobody else to tell.

use std::collections::BTreeMap;

use crate::settings::{SettingKey, SettingKind, StoredSetting};

/// The settings and their version.
#[derive(Debug, Default)]
pub(super) struct Overrides {
    /// Bumped by every change (0 before the first).
    pub(super) version: u64,
    /// The settings by (kind, policy, tier).
    by_tier: BTreeMap<(SettingKind, String, String), StoredSetting>,
}

impl Overrides {
    /// Stores `setting`, replacing the one of its kind, policy and tier.
    pub(super) fn put(&mut self, setting: &StoredSetting) {
        self.version += 1;
        let at = (setting.kind, setting.policy.clone(), setting.tier.clone());
        self.by_tier.insert(at, setting.clone());
    }

    /// Removes the setting of `kind` of (policy, tier); whether there was one.
    pub(super) fn delete(&mut self, SettingKey { kind, policy, tier }: SettingKey<'_>) -> bool {
        self.version += 1;
        self.by_tier
            .remove(&(kind, policy.to_owned(), tier.to_owned()))
            .is_some()
    }

    /// Every setting of `kind`, sorted by (policy, tier).
    pub(super) fn list(&self, kind: SettingKind) -> Vec<StoredSetting> {
        self.by_tier
            .values()
            .filter(|s| s.kind == kind)
            .cloned()
            .collect()
    }
}
