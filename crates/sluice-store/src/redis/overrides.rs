//! Run-time settings in Redis (limit overrides and candidate limits), written once over
//! [`ScriptRunner`] for both backends and both kinds: here the [`ScriptStore`] becomes an
//! [`OverrideStore`].
//!
//! Each setting is the hash `{prefix}:<word>:{policy}:{tier}` of its fields, `<word>` naming
//! its kind (`config` for a limit override, fields `limit`, `burst`; `candidate` for a
//! candidate, fields `limit`, `burst`, `window`, `algorithm`), the documented key layout.
//! Beside them, the set `{prefix}:<word>-index` lists the settings of a kind (`policy:tier`
//! members, so a listing needs no SCAN of the keyspace) and the one counter
//! `{prefix}:config-version` is bumped by every change of either kind, so daemons poll one
//! small key to learn that something changed. A change writes the hash first and bumps the
//! version last: a reader that sees the new version also sees the new hash.
//!
//! Those keys lie on different slots of a cluster, so each step is a script call on one key
//! (the same on one server): a hash is replaced whole in one step, the index names it only
//! once it is complete, and the version moves last. A reader can meet a member whose hash a
//! concurrent delete removed; it skips it.

use async_trait::async_trait;

use super::runner::ScriptRunner;
use super::script_store::ScriptStore;
use super::scripts::ScriptId;
use crate::error::StoreError;
use crate::settings::{SettingKey, SettingKind, StoredSetting};
use crate::store::OverrideStore;

#[async_trait]
impl<C: ScriptRunner + ?Sized> OverrideStore for ScriptStore<C> {
    async fn put_setting(&self, setting: &StoredSetting) -> Result<(), StoreError> {
        put(self, setting).await
    }

    async fn delete_setting(&self, key: SettingKey<'_>) -> Result<bool, StoreError> {
        delete(self, key).await
    }

    async fn list_settings(&self, kind: SettingKind) -> Result<Vec<StoredSetting>, StoreError> {
        list(self, kind).await
    }

    async fn version(&self) -> Result<u64, StoreError> {
        version(self).await
    }
}

pub(crate) fn hash_key(prefix: &str, kind: SettingKind, policy: &str, tier: &str) -> String {
    format!("{prefix}:{}:{policy}:{tier}", kind.key_word())
}

pub(crate) fn index_key(prefix: &str, kind: SettingKind) -> String {
    format!("{prefix}:{}-index", kind.key_word())
}

pub(crate) fn version_key(prefix: &str) -> String {
    format!("{prefix}:config-version")
}

/// The index member of (policy, tier). Policy and tier names never contain `:`.
pub(crate) fn member(policy: &str, tier: &str) -> String {
    format!("{policy}:{tier}")
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

/// Stores `setting`, replacing the one of its kind, policy and tier, and bumps the version.
async fn put<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    setting: &StoredSetting,
) -> Result<(), StoreError> {
    let prefix = &store.layout().prefix;
    let pairs = setting
        .fields
        .iter()
        .flat_map(|(field, value)| [field.clone(), value.clone()])
        .collect();
    let hash = hash_key(prefix, setting.kind, &setting.policy, &setting.tier);
    store.admin(ScriptId::ReplaceHash, hash, pairs).await?;
    let member = member(&setting.policy, &setting.tier);
    command(store, "SADD", index_key(prefix, setting.kind), [member]).await?;
    bump(store).await
}

/// Removes the setting of `kind` of (policy, tier); whether there was one. Bumps the version.
async fn delete<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    SettingKey { kind, policy, tier }: SettingKey<'_>,
) -> Result<bool, StoreError> {
    let prefix = &store.layout().prefix;
    let deleted = command(store, "DEL", hash_key(prefix, kind, policy, tier), []).await?;
    command(
        store,
        "SREM",
        index_key(prefix, kind),
        [member(policy, tier)],
    )
    .await?;
    bump(store).await?;
    Ok(deleted.first().is_some_and(|n| n != "0"))
}

/// Every stored setting of `kind` whose hash is there.
async fn list<C: ScriptRunner + ?Sized>(
    store: &ScriptStore<C>,
    kind: SettingKind,
) -> Result<Vec<StoredSetting>, StoreError> {
    let prefix = &store.layout().prefix;
    let members = command(store, "SMEMBERS", index_key(prefix, kind), []).await?;
    let mut all = Vec::with_capacity(members.len());
    for member in members {
        let Some((policy, tier)) = member.split_once(':') else {
            continue;
        };
        let flat = command(store, "HGETALL", hash_key(prefix, kind, policy, tier), []).await?;
        if flat.is_empty() {
            continue; // deleted since the index was read
        }
        all.push(StoredSetting {
            kind,
            policy: policy.to_owned(),
            tier: tier.to_owned(),
            fields: flat
                .chunks_exact(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect(),
        });
    }
    Ok(all)
}

/// The version the settings are at (0 before the first change).
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
    fn the_keys_follow_the_documented_layout() {
        assert_eq!(
            hash_key("rl", SettingKind::Limit, "public", "pro"),
            "rl:config:public:pro"
        );
        assert_eq!(
            hash_key("rl", SettingKind::Candidate, "public", "none"),
            "rl:candidate:public:none"
        );
        assert_eq!(index_key("rl", SettingKind::Limit), "rl:config-index");
        assert_eq!(
            index_key("rl", SettingKind::Candidate),
            "rl:candidate-index"
        );
        assert_eq!(version_key("rl"), "rl:config-version");
    }
}
