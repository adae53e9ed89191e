//! The run-time settings of one (policy, tier) the admin API writes: limit overrides and
//! candidate limits. The backends keep both the same way — a record of text fields per
//! (kind, policy, tier), one version every change of either kind bumps — so a backend stores
//! [`StoredSetting`]s and knows nothing of what their fields mean; the typed forms here
//! ([`LimitOverride`], [`CandidateOverride`]) are written to and read from those fields in one
//! place, whatever the backend.

use std::collections::BTreeMap;

/// What a stored setting of a (policy, tier) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SettingKind {
    /// A limit override: the tier's limit and burst, enforced.
    Limit,
    /// A candidate limit: judged beside the tier's limit, never enforced.
    Candidate,
}

impl SettingKind {
    /// The word naming this kind in Redis keys: `{prefix}:config:{policy}:{tier}` (the limit
    /// overrides' documented name) and `{prefix}:candidate:{policy}:{tier}`.
    pub fn key_word(self) -> &'static str {
        match self {
            SettingKind::Limit => "config",
            SettingKind::Candidate => "candidate",
        }
    }
}

/// Which setting: its kind, policy and tier (what a backend deletes by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingKey<'a> {
    pub kind: SettingKind,
    pub policy: &'a str,
    pub tier: &'a str,
}

/// One setting as a backend keeps it: the fields of its record, as text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StoredSetting {
    pub kind: SettingKind,
    pub policy: String,
    pub tier: String,
    pub fields: BTreeMap<String, String>,
}

/// A typed setting, written to and read from its [`StoredSetting`].
pub trait Setting: Sized {
    const KIND: SettingKind;

    /// Its record.
    fn stored(&self) -> StoredSetting;

    /// It, read back from `stored`; `None` when a field is missing or unreadable (a
    /// hand-edited key).
    fn from_stored(stored: &StoredSetting) -> Option<Self>;
}

/// A limit of one (policy, tier) changed at run time (the admin API). Stored in the backend, so
/// it survives daemon restarts and every daemon sharing the backend applies it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LimitOverride {
    pub policy: String,
    pub tier: String,
    pub limit: u64,
    /// `None`: the tier's burst defaults as in the config file.
    pub burst: Option<u64>,
}

/// A candidate limit of one (policy, tier) set at run time (the admin API), stored beside the
/// limit overrides. Unset fields take their defaults when the policies are compiled (burst:
/// the candidate's own limit; window and algorithm: the policy's), so they follow the file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CandidateOverride {
    pub policy: String,
    pub tier: String,
    pub limit: u64,
    pub burst: Option<u64>,
    /// A duration as the config file writes it (`"60s"`).
    pub window: Option<String>,
    pub algorithm: Option<String>,
}

impl CandidateOverride {
    /// A candidate of `limit`, every other field left to its default.
    pub fn new(policy: &str, tier: &str, limit: u64) -> Self {
        CandidateOverride {
            policy: policy.to_owned(),
            tier: tier.to_owned(),
            limit,
            burst: None,
            window: None,
            algorithm: None,
        }
    }
}

impl Setting for LimitOverride {
    const KIND: SettingKind = SettingKind::Limit;

    fn stored(&self) -> StoredSetting {
        let (policy, tier) = (&self.policy, &self.tier);
        record(Self::KIND, (policy, tier), (self.limit, self.burst), [])
    }

    fn from_stored(stored: &StoredSetting) -> Option<Self> {
        let (limit, burst) = limit_and_burst(stored)?;
        Some(LimitOverride {
            policy: stored.policy.clone(),
            tier: stored.tier.clone(),
            limit,
            burst,
        })
    }
}

impl Setting for CandidateOverride {
    const KIND: SettingKind = SettingKind::Candidate;

    fn stored(&self) -> StoredSetting {
        let (policy, tier) = (&self.policy, &self.tier);
        let rest = [
            ("window", self.window.clone()),
            ("algorithm", self.algorithm.clone()),
        ];
        record(Self::KIND, (policy, tier), (self.limit, self.burst), rest)
    }

    fn from_stored(stored: &StoredSetting) -> Option<Self> {
        let (limit, burst) = limit_and_burst(stored)?;
        Some(CandidateOverride {
            policy: stored.policy.clone(),
            tier: stored.tier.clone(),
            limit,
            burst,
            window: stored.fields.get("window").cloned(),
            algorithm: stored.fields.get("algorithm").cloned(),
        })
    }
}

/// The record of a setting of (policy, tier): its limit and burst, and the `rest` of its
/// fields that are set.
fn record<const N: usize>(
    kind: SettingKind,
    (policy, tier): (&str, &str),
    (limit, burst): (u64, Option<u64>),
    rest: [(&str, Option<String>); N],
) -> StoredSetting {
    let limits = [
        ("limit", Some(limit.to_string())),
        ("burst", burst.map(|b| b.to_string())),
    ];
    StoredSetting {
        kind,
        policy: policy.to_owned(),
        tier: tier.to_owned(),
        fields: limits
            .into_iter()
            .chain(rest)
            .filter_map(|(name, value)| Some((name.to_owned(), value?)))
            .collect(),
    }
}

/// The limit (required) and burst of a record; `None` when either is unreadable.
fn limit_and_burst(stored: &StoredSetting) -> Option<(u64, Option<u64>)> {
    Some((number(stored, "limit")??, number(stored, "burst")?))
}

/// Field `name` as a number: `Some(None)` when absent, `None` when unreadable.
fn number(stored: &StoredSetting, name: &str) -> Option<Option<u64>> {
    match stored.fields.get(name) {
        None => Some(None),
        Some(text) => text.parse().ok().map(Some),
    }
}

/// Every setting of `S`'s kind among `stored`, sorted; unreadable records are skipped.
pub(crate) fn typed<S: Setting + Ord>(stored: &[StoredSetting]) -> Vec<S> {
    let mut all: Vec<S> = stored
        .iter()
        .filter(|s| s.kind == S::KIND)
        .filter_map(S::from_stored)
        .collect();
    all.sort();
    all
}

/// Every run-time setting at one version: what a daemon compiles its policies with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The version the settings were read at (or before: a change made while they were read
    /// moves the version past it, so the next poll reads again).
    pub version: u64,
    pub limits: Vec<LimitOverride>,
    pub candidates: Vec<CandidateOverride>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_their_records() {
        let limit = LimitOverride {
            policy: "public".into(),
            tier: "pro".into(),
            limit: 200,
            burst: Some(400),
        };
        assert_eq!(LimitOverride::from_stored(&limit.stored()), Some(limit));
        let candidate = CandidateOverride {
            window: Some("30s".into()),
            ..CandidateOverride::new("public", "none", 150)
        };
        let stored = candidate.stored();
        assert_eq!(stored.fields.len(), 2, "unset fields are not stored");
        assert_eq!(CandidateOverride::from_stored(&stored), Some(candidate));
    }

    #[test]
    fn an_unreadable_record_reads_as_nothing() {
        let mut stored = LimitOverride {
            policy: "p".into(),
            tier: "t".into(),
            limit: 1,
            burst: None,
        }
        .stored();
        stored.fields.insert("burst".into(), "many".into());
        assert_eq!(LimitOverride::from_stored(&stored), None);
        stored.fields.clear();
        assert_eq!(LimitOverride::from_stored(&stored), None, "no limit");
    }
}
