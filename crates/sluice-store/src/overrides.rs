//! How run-time limit overrides are laid out in Redis, shared by both Redis backends.
//!
//! Each override is the hash `{prefix}:config:{policy}:{tier}` (fields `limit`, `burst`), as
//! the contract names it. Beside them, the set `{prefix}:config-index` lists the overrides
//! (`policy:tier` members, so a listing needs no SCAN of the keyspace) and the counter
//! `{prefix}:config-version` is bumped by every change, so daemons poll one small key to learn
//! that something changed. A change writes the hash first and bumps the version last: a
//! reader that sees the new version also sees the new hash.

use std::collections::HashMap;

use crate::LimitOverride;

pub(crate) fn hash_key(prefix: &str, policy: &str, tier: &str) -> String {
    format!("{prefix}:config:{policy}:{tier}")
}

pub(crate) fn index_key(prefix: &str) -> String {
    format!("{prefix}:config-index")
}

pub(crate) fn version_key(prefix: &str) -> String {
    format!("{prefix}:config-version")
}

/// The index member of (policy, tier). Policy and tier names never contain `:`.
pub(crate) fn member(policy: &str, tier: &str) -> String {
    format!("{policy}:{tier}")
}

/// The fields of an override's hash.
pub(crate) fn fields(change: &LimitOverride) -> Vec<(&'static str, String)> {
    let mut fields = vec![("limit", change.limit.to_string())];
    if let Some(burst) = change.burst {
        fields.push(("burst", burst.to_string()));
    }
    fields
}

/// An override read back from its index member and hash; `None` for a member whose hash is
/// gone or unreadable (a concurrent delete, or a hand-edited key).
pub(crate) fn parse(member: &str, fields: &HashMap<String, String>) -> Option<LimitOverride> {
    let (policy, tier) = member.split_once(':')?;
    let limit = fields.get("limit")?.parse().ok()?;
    let burst = match fields.get("burst") {
        Some(burst) => Some(burst.parse().ok()?),
        None => None,
    };
    Some(LimitOverride {
        policy: policy.to_owned(),
        tier: tier.to_owned(),
        limit,
        burst,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_round_trips_through_its_fields() {
        let change = LimitOverride {
            policy: "public".into(),
            tier: "pro".into(),
            limit: 200,
            burst: Some(400),
        };
        let stored: HashMap<String, String> = fields(&change)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(parse(&member("public", "pro"), &stored), Some(change));
        assert_eq!(hash_key("rl", "public", "pro"), "rl:config:public:pro");
        assert_eq!(parse("public:pro", &HashMap::new()), None);
    }
}
