//! `MemoryStore`: state in process memory, for a single daemon.
//!
//! Keys are spread over mutex-guarded shards so concurrent checks of different keys rarely
//! contend. Memory is bounded by `max_keys`: a full shard forgets one key per new one, chosen
//! as Redis approximates LRU: of a few keys sampled at random, the one whose loss gives away
//! least. A key back to fresh gives away nothing, then the more of its limit a key has left the
//! less; a key that has used up its limit would get all of it back, so it goes last. Sampling
//! keeps an eviction at a fixed cost whatever the shard's size.
//!
//! Here: the store, its config and one check under one shard's lock (with a candidate limit,
//! both under that lock: the candidate's state lives in its check's shard, as a key of the
//! policy `<policy>#candidate`, tracked and bounded like any other). Beside it:
//! - `keys.rs`: the key table of one policy in one shard (packed slots, hash index, expiry);
//! - `shard.rs`: a shard, the key tables of its policies;
//! - `eviction.rs`: which key a full shard forgets;
//! - `batch.rs`: an all-or-nothing batch over several shards;
//! - `overrides.rs`: the run-time settings (limit overrides and candidates).

mod batch;
mod eviction;
mod keys;
mod overrides;
mod shard;
#[cfg(test)]
mod testing;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use ahash::RandomState;
use async_trait::async_trait;
use parking_lot::Mutex;
use sluice_core::{Counting, Decision, Mode, Params, SplitMix, State, candidate_decision};

use self::keys::{Expiry, hash_of};
use self::overrides::Overrides;
use self::shard::Shard;
use sluice_config::backend::MemoryStoreConfig;

use crate::error::StoreError;
use crate::settings::{SettingKey, SettingKind, StoredSetting};
use crate::store::{
    Capabilities, Check, Decided, KeyTable, OverrideStore, Store, StoreKind, Unspent,
    candidate_check, candidate_policy,
};

/// In-process store with sharded locking and bounded memory.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    shard_capacity: u64,
    /// [`MemoryStoreConfig::grace`] in ms: keys are forgotten as of this long ago.
    grace_ms: u64,
    hasher: RandomState,
    keys: AtomicU64,
    /// Run-time settings and their version (one daemon: nobody else to tell).
    overrides: Mutex<Overrides>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(MemoryStoreConfig::default())
    }
}

impl MemoryStore {
    pub fn new(config: MemoryStoreConfig) -> Self {
        let max_keys = config.max_keys.max(1);
        // No more shards than keys, and each shard's share rounded down, so the shards
        // together never hold more than `max_keys`.
        let most_shards = 1usize
            << (usize::BITS
                - 1
                - usize::try_from(max_keys)
                    .unwrap_or(usize::MAX)
                    .leading_zeros());
        let shards = config.shards.max(1).next_power_of_two().min(most_shards);
        MemoryStore {
            shards: (0..shards)
                .map(|at| {
                    Mutex::new(Shard {
                        sampler: SplitMix(at as u64),
                        ..Shard::default()
                    })
                })
                .collect(),
            shard_capacity: max_keys / shards as u64,
            grace_ms: u64::try_from(config.grace.as_millis()).unwrap_or(u64::MAX),
            hasher: RandomState::new(),
            keys: AtomicU64::new(0),
            overrides: Mutex::new(Overrides::default()),
        }
    }

    /// The hash of a check's key and the shard it lives in.
    fn locate(&self, policy: &str, key: &str) -> (u64, usize) {
        let hash = hash_of(&self.hasher, policy, key.as_bytes());
        (hash, ((hash >> 32) as usize) & (self.shards.len() - 1))
    }

    /// Stores `state` for a key, making room first when the shard is full and the key new.
    fn put(&self, shard: &mut Shard, hash: u64, check: &Check<'_>, state: State, now_ms: u64) {
        let expires_at = sluice_core::expires_at(&check.params, &state);
        let known = shard.get(hash, check.policy, check.key).is_some();
        while !known && shard.len >= self.shard_capacity {
            if !shard.evict_one(now_ms.saturating_sub(self.grace_ms), &self.hasher) {
                break;
            }
            self.keys.fetch_sub(1, Ordering::Relaxed);
        }
        if shard.store(hash, check, state, expires_at, &self.hasher) {
            self.keys.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Decides one check under its shard's lock and, when it carries a candidate limit, the
    /// candidate under the same lock: the candidate's state lives in its check's shard, as a
    /// key of the policy [`candidate_policy`]`(policy)` (so it is tracked, bounded by
    /// `max_keys`, evicted and forgotten like any other key, and counted under that name).
    fn decide_one(&self, check: &Check<'_>, now_ms: u64) -> Result<Decided, StoreError> {
        let (hash, at) = self.locate(check.policy, check.key);
        let mut shard = self.shards[at].lock();
        let decision = self.decide_in(&mut shard, hash, check, now_ms)?;
        let candidate = match &check.candidate {
            Some(candidate) => Some(self.judge(&mut shard, check, candidate, now_ms)?),
            None => None,
        };
        Ok(Decided {
            decision,
            candidate,
        })
    }

    /// An all-or-nothing batch ([`batch`]), then the candidates of its checks, each alone.
    fn decide_batch(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError> {
        let decisions = self.decide_all(checks, now_ms)?;
        decisions
            .into_iter()
            .zip(checks)
            .map(|(decision, check)| {
                let candidate = match &check.candidate {
                    Some(params) => Some(self.decide_candidate(check, params, now_ms)?),
                    None => None,
                };
                Ok(Decided {
                    decision,
                    candidate,
                })
            })
            .collect()
    }

    /// Decides the candidate limit `candidate` of `check` alone (a batch's candidates, after
    /// the batch), on the state [`decide_one`](Self::decide_one) keeps.
    fn decide_candidate(
        &self,
        check: &Check<'_>,
        candidate: &Params,
        now_ms: u64,
    ) -> Result<Decision, StoreError> {
        let (_, at) = self.locate(check.policy, check.key);
        let mut shard = self.shards[at].lock();
        self.judge(&mut shard, check, candidate, now_ms)
    }

    /// The candidate's decision of `check` in `shard`, the check's shard (locked).
    fn judge(
        &self,
        shard: &mut Shard,
        check: &Check<'_>,
        candidate: &Params,
        now_ms: u64,
    ) -> Result<Decision, StoreError> {
        // The name on the stack: this runs once per check with a candidate.
        let mut inline = [0u8; INLINE_NAME];
        let owned;
        let policy = match candidate_name(&mut inline, check.policy) {
            Some(name) => name,
            None => {
                owned = candidate_policy(check.policy);
                owned.as_str()
            }
        };
        let judged = candidate_check(check, policy, candidate);
        let hash = hash_of(&self.hasher, policy, check.key.as_bytes());
        let answered = self.decide_in(shard, hash, &judged, now_ms)?;
        Ok(candidate_decision(check.cost, candidate, answered))
    }

    /// Decides one check in `shard` (its shard, locked), `hash` its key's.
    fn decide_in(
        &self,
        shard: &mut Shard,
        hash: u64,
        check: &Check<'_>,
        now_ms: u64,
    ) -> Result<Decision, StoreError> {
        if let Some(keys) = shard.keys_mut(check.policy)
            && let Some(at) = keys.position(hash, check.key)
        {
            let entry = &mut keys.slots[at].entry;
            let decision = sluice_core::decide_with(
                &check.params,
                &mut entry.state,
                now_ms,
                check.cost,
                check.mode,
            )?;
            let expires_at = sluice_core::expires_at(&check.params, &entry.state);
            let hint = entry.expiry.limits();
            let limits = keys.limits_of(&check.params, hint);
            keys.slots[at].entry.expiry = Expiry::new(expires_at, limits);
            return Ok(decision);
        }
        let mut state = State::Fresh;
        let decision =
            sluice_core::decide_with(&check.params, &mut state, now_ms, check.cost, check.mode)?;
        // A peek at an unknown key, a denial of one or a refund to it leaves nothing worth
        // remembering (unless every hit counts: a denied one too); a charge always does.
        let every_hit = check.params.counting == Counting::EveryHit;
        let kept = match check.mode {
            Mode::Charge => check.cost > 0,
            Mode::Refund => false,
            Mode::Consume | Mode::Ask => check.cost > 0 && (decision.allowed || every_hit),
        };
        if kept {
            self.put(shard, hash, check, state, now_ms);
        }
        Ok(decision)
    }
}

/// The name the state of stacked limit `stack` (≥ 1) of `policy` is kept under: a policy
/// name no config can give (`#` is not allowed in one), as [`candidate_policy`]'s.
fn stacked_policy(policy: &str, stack: u8) -> String {
    format!("{policy}#s{stack}")
}

/// Longest [`candidate_policy`] name built on the stack.
const INLINE_NAME: usize = 64;

/// [`candidate_policy`]`(policy)` written into `buf`, when it fits.
fn candidate_name<'b>(buf: &'b mut [u8; INLINE_NAME], policy: &str) -> Option<&'b str> {
    const SUFFIX: &[u8] = b"#candidate";
    let len = policy.len() + SUFFIX.len();
    let name = buf.get_mut(..len)?;
    let (head, tail) = name.split_at_mut(policy.len());
    head.copy_from_slice(policy.as_bytes());
    tail.copy_from_slice(SUFFIX);
    std::str::from_utf8(name).ok()
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Memory
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            bounds_its_calls: false,
            keys: Some(self),
            groups: None,
            tls: None,
        }
    }

    async fn decide(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError> {
        if checks.iter().any(|c| c.stack > 0) {
            // A policy's other stacked limits are keys of a policy of their own name here.
            let names: Vec<Option<String>> = checks
                .iter()
                .map(|c| (c.stack > 0).then(|| stacked_policy(c.policy, c.stack)))
                .collect();
            let renamed: Vec<Check<'_>> = checks
                .iter()
                .zip(&names)
                .map(|(c, name)| match name {
                    Some(name) => Check { policy: name, ..*c },
                    None => *c,
                })
                .collect();
            return self.decide_batch(&renamed, now_ms);
        }
        match checks {
            [one] => Ok(vec![self.decide_one(one, now_ms)?]),
            _ => self.decide_batch(checks, now_ms),
        }
    }

    fn decide_now(&self, check: &Check<'_>, now_ms: u64) -> Option<Result<Decided, StoreError>> {
        // A stacked limit comes with its policy's others, as a batch: never alone.
        (check.stack == 0).then(|| self.decide_one(check, now_ms))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Nothing is leased from process memory: there is nothing to give back.
    async fn give_back(&self, _: &Unspent<'_>, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
}

impl KeyTable for MemoryStore {
    fn tracked(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }

    fn evicted(&self) -> Vec<(String, u64)> {
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        for shard in self.shards.iter() {
            for (policy, count) in &shard.lock().evicted {
                *totals.entry(policy.to_string()).or_default() += count;
            }
        }
        totals.into_iter().collect()
    }

    fn housekeep(&self, now_ms: u64) {
        let as_of = now_ms.saturating_sub(self.grace_ms);
        for shard in self.shards.iter() {
            let freed = shard
                .lock()
                .retain(&self.hasher, |entry| entry.expiry.at_ms() > as_of);
            self.keys.fetch_sub(freed, Ordering::Relaxed);
        }
    }
}

#[async_trait]
impl OverrideStore for MemoryStore {
    async fn put_setting(&self, setting: &StoredSetting) -> Result<(), StoreError> {
        self.overrides.lock().put(setting);
        Ok(())
    }

    async fn delete_setting(&self, key: SettingKey<'_>) -> Result<bool, StoreError> {
        Ok(self.overrides.lock().delete(key))
    }

    async fn list_settings(&self, kind: SettingKind) -> Result<Vec<StoredSetting>, StoreError> {
        Ok(self.overrides.lock().list(kind))
    }

    async fn version(&self) -> Result<u64, StoreError> {
        Ok(self.overrides.lock().version)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::{Algorithm, Params};

    use super::testing::{GRACE_MS, T0, check, fixed};
    use super::*;
    use crate::store::StoreExt;

    #[tokio::test]
    async fn housekeeping_forgets_expired_keys_only() {
        let store = MemoryStore::default();
        store
            .check(&check("a", fixed(5, 1000), 1), T0)
            .await
            .unwrap();
        store
            .check(&check("b", fixed(5, 60_000), 1), T0)
            .await
            .unwrap();
        assert_eq!(store.tracked(), 2);
        // Within the grace past its expiry, a key is kept for checks stamped before it.
        store.housekeep(T0 + 1000 + GRACE_MS - 1);
        assert_eq!(store.tracked(), 2);
        store.housekeep(T0 + 1000 + GRACE_MS);
        assert_eq!(store.tracked(), 1);
        let b = store
            .check(&check("b", fixed(5, 60_000), 0), T0 + 1000)
            .await
            .unwrap();
        assert_eq!(b.remaining, 4);
    }

    #[tokio::test]
    async fn peeks_and_denials_of_unknown_keys_store_nothing() {
        let store = MemoryStore::default();
        store
            .check(&check("a", fixed(5, 1000), 0), T0)
            .await
            .unwrap();
        assert_eq!(store.tracked(), 0);
    }

    #[test]
    fn candidate_names_are_built_on_the_stack_when_they_fit() {
        let mut buf = [0u8; INLINE_NAME];
        assert_eq!(candidate_name(&mut buf, "public"), Some("public#candidate"));
        let long = "p".repeat(INLINE_NAME);
        assert_eq!(candidate_name(&mut buf, &long), None);
        // A long name takes the allocated path, to the same state.
        let store = MemoryStore::default();
        let (limit, candidate) = (fixed(5, 60_000), fixed(1, 60_000));
        let check = Check {
            policy: &long,
            ..check("k", limit, 1)
        };
        let judged = |store: &MemoryStore| {
            store
                .decide_now(&check.judged_by(candidate), T0)
                .and_then(Result::ok)
                .and_then(|decided| decided.candidate)
                .map(|judged| judged.allowed)
        };
        assert_eq!(judged(&store), Some(true));
        assert_eq!(judged(&store), Some(false));
    }

    #[tokio::test]
    async fn candidate_states_are_keys_like_any_other() {
        let store = MemoryStore::new(MemoryStoreConfig {
            max_keys: 8,
            shards: 1,
            ..MemoryStoreConfig::default()
        });
        // A candidate far from its limit: its states give away least, so they go first.
        let (limit, candidate) = (fixed(5, 60_000), fixed(50, 1000));
        let keys: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
        for key in &keys[..4] {
            let check = check(key, limit, 1);
            store
                .check_with_candidate(&check, &candidate, T0)
                .await
                .unwrap();
        }
        // Four keys, each with its candidate's state: eight tracked.
        assert_eq!(store.tracked(), 8);
        // The candidates' states (a 1 s window) are swept as soon as they are fresh again.
        store.housekeep(T0 + 1000 + GRACE_MS);
        assert_eq!(store.tracked(), 4);
        // Past `max_keys`, a full table forgets keys of either kind; the count stays bounded.
        for key in &keys[4..] {
            let check = check(key, limit, 1);
            let (decision, judged) = store
                .check_with_candidate(&check, &candidate, T0 + 2000)
                .await
                .unwrap();
            assert!(decision.allowed && judged.allowed);
        }
        assert_eq!(store.tracked(), 8);
        let evicted: u64 = store.evicted().iter().map(|(_, n)| n).sum();
        // 4 + 2 × 8 stored, 8 kept, none of the forgotten fresh yet.
        assert_eq!(evicted, 12, "{:?}", store.evicted());
        assert!(
            store
                .evicted()
                .iter()
                .any(|(policy, _)| policy == "p#candidate"),
            "{:?}",
            store.evicted()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_checks_admit_exactly_the_limit() {
        let store = Arc::new(MemoryStore::default());
        let p = Params::new(Algorithm::SlidingWindowLog, 100, 60_000, 100).unwrap();
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let mut admitted = 0;
                    for _ in 0..40 {
                        let d = store.check(&check("hot", p, 1), T0).await.unwrap();
                        admitted += u32::from(d.allowed);
                    }
                    admitted
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.unwrap();
        }
        assert_eq!(total, 100);
    }
}
