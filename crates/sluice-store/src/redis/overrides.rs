//! Run-time limit overrides in Redis, written once over [`ScriptRunner`] for both backends:
//! here the [`ScriptStore`] becomes an [`OverrideStore`].
//!
//! Each override is the hash `{prefix}:config:{policy}:{tier}` (fields `limit`, `burst`), the
//! documented key layout. Beside them, the set `{prefix}:config-index` lists the overrides
//! (`policy:tier` members, so a listing needs no SCAN of the keyspace) and the counter
//! `{prefix}:config-version` is bumped by every change, so daemons poll one small key to learn
//! that something changed. A change writes the hash first and bumps the version last: a
//! reader that sees the new version also sees the new hash.
//!
//! Those keys lie on different slots of a cluster, so each step is a script call on one key
//! (the same on one server): a hash is replaced whole in one step, the index names it only
//! once it is complete, and the version moves last. A reader can meet a member whose hash a
//! concurrent delete removed; it skips it.

use std::collections::HashMap;

use async_trait::async_trait;

use super::runner::ScriptRunner;
use super::script_store::ScriptStore;
use super::scripts::ScriptId;
use crate::{LimitOverride, OverrideStore, StoreError};

#[async_trait]
impl<C: ScriptRunner + ?Sized> OverrideStore for ScriptStore<C> {
    async fn put(&self, change: &LimitOverride) -> Result<(), StoreError> {
        put(self, change).await
    }

    async fn delete(&self, policy: &str, tier: &str) -> Result<bool, StoreError> {
        delete(self, policy, tier).await
    }

    async fn list(&self) -> Result<(u64, Vec<LimitOverride>), StoreError> {
        list(self).await
    }

    async fn version(&self) -> Result<u64, StoreError> {
        version(self).await
    }
}

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

/// One command on one key, answering its reply as strings.
async fn command<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    name: &str,
    key: String,
    args: impl IntoIterator<Item = String>,
) -> Result<Vec<String>, StoreError> {
    let args = std::iter::once(name.to_owned()).chain(args).collect();
    store.admin(ScriptId::KeyCommand, key, args).await
}

/// Bumps the version, last step of every change.
async fn bump<C: ScriptRunner + ?Sized>(store: &ScriptStore<C>) -> Result<(), StoreError> {
    let key = version_key(&store.layout().prefix);
    command(store, "INCR", key, []).await.map(|_| ())
}

/// Stores `change`, replacing the override of its policy and tier, and bumps the version.
async fn put<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    change: &LimitOverride,
) -> Result<(), StoreError> {
    let prefix = &store.layout().prefix;
    let pairs = fields(change)
        .into_iter()
        .flat_map(|(field, value)| [field.to_owned(), value])
        .collect();
    let hash = hash_key(prefix, &change.policy, &change.tier);
    store.admin(ScriptId::ReplaceHash, hash, pairs).await?;
    let member = member(&change.policy, &change.tier);
    command(store, "SADD", index_key(prefix), [member]).await?;
    bump(store).await
}

/// Removes the override of (policy, tier); whether there was one. Bumps the version.
async fn delete<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    policy: &str,
    tier: &str,
) -> Result<bool, StoreError> {
    let prefix = &store.layout().prefix;
    let deleted = command(store, "DEL", hash_key(prefix, policy, tier), []).await?;
    command(store, "SREM", index_key(prefix), [member(policy, tier)]).await?;
    bump(store).await?;
    Ok(deleted.first().is_some_and(|n| n != "0"))
}

/// The version and every stored override, sorted.
async fn list<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
) -> Result<(u64, Vec<LimitOverride>), StoreError> {
    let prefix = &store.layout().prefix;
    let version = version(store).await?;
    let members = command(store, "SMEMBERS", index_key(prefix), []).await?;
    let mut all = Vec::with_capacity(members.len());
    for member in members {
        let Some((policy, tier)) = member.split_once(':') else {
            continue;
        };
        let flat = command(store, "HGETALL", hash_key(prefix, policy, tier), []).await?;
        let fields: HashMap<String, String> = flat
            .chunks_exact(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect();
        all.extend(parse(&member, &fields));
    }
    all.sort();
    Ok((version, all))
}

/// The version the overrides are at (0 before the first change).
async fn version<C: ScriptRunner + ?Sized>(store: &ScriptStore<C>) -> Result<u64, StoreError> {
    let key = version_key(&store.layout().prefix);
    match command(store, "GET", key, []).await?.first() {
        None => Ok(0),
        Some(raw) => raw
            .parse()
            .map_err(|_| StoreError::Backend(format!("override version {raw:?} is no number"))),
    }
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
