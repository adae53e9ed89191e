//! `MemoryStore`: state in process memory, for a single daemon.
//!
//! Keys are spread over mutex-guarded shards so concurrent checks of different keys rarely
//! contend. Memory is bounded by `max_keys`: a full shard first forgets keys whose state has
//! expired (is back to fresh) and then the soonest-expiring ones, a sixteenth of the shard at a
//! time so the sweep is paid once per many inserts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use ahash::RandomState;
use async_trait::async_trait;
use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};
use sluice_core::{Decision, State};

use crate::{Check, LimitOverride, OverrideStore, Store, StoreError, StoreKind};

/// Sizing of a [`MemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStoreConfig {
    /// Most keys tracked at once (`backend.max_keys`).
    pub max_keys: u64,
    /// Number of independently locked shards; rounded up to a power of two.
    pub shards: usize,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        MemoryStoreConfig {
            max_keys: 1_000_000,
            shards: 64,
        }
    }
}

#[derive(Debug)]
struct Entry {
    state: State,
    expires_at: u64,
}

/// A tracked key and its state: 64 bytes, one cache line, for keys of up to 22 bytes.
#[derive(Debug)]
struct Slot {
    key: KeyText,
    entry: Entry,
}

/// Longest key kept inside its slot.
const INLINE_KEY: usize = 22;

/// A key's bytes, inside the slot when short (`user:123`, `ip:203.0.113.7`: most keys), so a
/// look-up reads no second allocation and a key costs no allocator overhead.
#[derive(Debug)]
enum KeyText {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl KeyText {
    fn new(key: &str) -> KeyText {
        let text = key.as_bytes();
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..text.len()].copy_from_slice(text);
                KeyText::Inline { len, bytes }
            }
            _ => KeyText::Heap(text.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            KeyText::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KeyText::Heap(text) => text,
        }
    }
}

/// The keys of one policy in one shard: the slots packed in a vector, and a hash index of
/// 4-byte positions into it, probed with the hash of `(policy, key)` that also picked the
/// shard (one hash per check). Packed so that memory follows the number of keys: a hash table
/// of whole slots is between half and seven eighths full, a vector grown by a quarter at a
/// time at least four fifths, and the index costs 5 bytes a bucket.
#[derive(Debug, Default)]
struct Keys {
    index: HashTable<u32>,
    slots: Vec<Slot>,
}

impl Keys {
    fn position(&self, hash: u64, key: &str) -> Option<usize> {
        self.index
            .find(hash, |&at| {
                self.slots
                    .get(at as usize)
                    .is_some_and(|slot| slot.key.as_bytes() == key.as_bytes())
            })
            .map(|&at| at as usize)
    }

    fn get(&self, hash: u64, key: &str) -> Option<&Entry> {
        self.position(hash, key).map(|at| &self.slots[at].entry)
    }

    fn get_mut(&mut self, hash: u64, key: &str) -> Option<&mut Entry> {
        self.position(hash, key).map(|at| &mut self.slots[at].entry)
    }

    /// Adds a key known to be absent. `policy` rehashes the index when it grows.
    fn insert(&mut self, hash: u64, policy: &str, slot: Slot, hasher: &RandomState) {
        let Keys { index, slots } = self;
        if slots.len() == slots.capacity() {
            slots.reserve_exact((slots.len() / 4).max(16));
        }
        // A shard holds at most `max_keys` keys, far below u32::MAX.
        let at = u32::try_from(slots.len()).unwrap_or(u32::MAX);
        slots.push(slot);
        index.insert_unique(hash, at, |&i| {
            hash_of(hasher, policy, slots[i as usize].key.as_bytes())
        });
    }

    /// Forgets the keys `keep` refuses; how many.
    fn retain(&mut self, policy: &str, hasher: &RandomState, keep: impl Fn(&Entry) -> bool) -> u64 {
        let mut removed = 0;
        let mut at = 0;
        while at < self.slots.len() {
            if keep(&self.slots[at].entry) {
                at += 1;
            } else {
                self.swap_remove(at, policy, hasher);
                removed += 1;
            }
        }
        if self.slots.len() < self.slots.capacity() / 2 {
            self.slots
                .shrink_to(self.slots.len() + self.slots.len() / 4);
            self.index
                .shrink_to_fit(|&i| hash_of(hasher, policy, self.slots[i as usize].key.as_bytes()));
        }
        removed
    }

    /// Removes the slot at `at`; the last slot moves into its place.
    fn swap_remove(&mut self, at: usize, policy: &str, hasher: &RandomState) {
        let Keys { index, slots } = self;
        let position = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        let hash = hash_of(hasher, policy, slots[at].key.as_bytes());
        if let Ok(entry) = index.find_entry(hash, |&i| i == position(at)) {
            entry.remove();
        }
        let last = slots.len() - 1;
        if at != last {
            let hash = hash_of(hasher, policy, slots[last].key.as_bytes());
            if let Some(moved) = index.find_mut(hash, |&i| i == position(last)) {
                *moved = position(at);
            }
        }
        slots.swap_remove(at);
    }

    fn len(&self) -> usize {
        self.slots.len()
    }
}

/// The overrides version and the overrides by (policy, tier).
type Overrides = (u64, BTreeMap<(String, String), LimitOverride>);

/// One shard: per policy (few, scanned linearly), the keys of that policy. Two levels so a
/// lookup needs no allocated `policy:key` string.
#[derive(Debug, Default)]
struct Shard {
    policies: Vec<(Box<str>, Keys)>,
    len: u64,
}

impl Shard {
    fn keys(&self, policy: &str) -> Option<&Keys> {
        self.policies
            .iter()
            .find(|(name, _)| &**name == policy)
            .map(|(_, keys)| keys)
    }

    fn get(&self, hash: u64, policy: &str, key: &str) -> Option<&Entry> {
        self.keys(policy).and_then(|keys| keys.get(hash, key))
    }

    fn get_mut(&mut self, hash: u64, policy: &str, key: &str) -> Option<&mut Entry> {
        self.policies
            .iter_mut()
            .find(|(name, _)| &**name == policy)
            .and_then(|(_, keys)| keys.get_mut(hash, key))
    }

    /// Adds a key known to be absent.
    fn insert(&mut self, hash: u64, policy: &str, key: &str, entry: Entry, hasher: &RandomState) {
        let at = match self.policies.iter().position(|(name, _)| &**name == policy) {
            Some(at) => at,
            None => {
                self.policies.push((policy.into(), Keys::default()));
                self.policies.len() - 1
            }
        };
        let (name, keys) = &mut self.policies[at];
        let slot = Slot {
            key: KeyText::new(key),
            entry,
        };
        keys.insert(hash, name, slot, hasher);
        self.len += 1;
    }

    /// Forgets expired keys; if that frees fewer than `target`, also the soonest-expiring.
    /// Returns how many keys were forgotten.
    fn evict(&mut self, now_ms: u64, target: u64, hasher: &RandomState) -> u64 {
        let expiries = || {
            self.policies
                .iter()
                .flat_map(|(_, keys)| keys.slots.iter().map(|slot| slot.entry.expires_at))
        };
        let expired = expiries().filter(|&at| at <= now_ms).count() as u64;
        let threshold = if expired >= target {
            now_ms
        } else {
            let mut expiries: Vec<u64> = expiries().collect();
            let nth = (target.saturating_sub(1) as usize).min(expiries.len().saturating_sub(1));
            if expiries.is_empty() {
                return 0;
            }
            *expiries.select_nth_unstable(nth).1
        };
        self.retain(hasher, |entry| entry.expires_at > threshold)
    }

    fn retain(&mut self, hasher: &RandomState, keep: impl Fn(&Entry) -> bool) -> u64 {
        let before = self.len;
        for (name, keys) in &mut self.policies {
            keys.retain(name, hasher, &keep);
        }
        self.policies.retain(|(_, keys)| keys.len() > 0);
        self.len = self
            .policies
            .iter()
            .map(|(_, keys)| keys.len() as u64)
            .sum();
        before - self.len
    }
}

/// The one hash of a tracked key. Shards take bits 32 and up, the shard's table the low bits
/// and its control bytes the top 7, so the shard choice does not crowd a table's buckets.
fn hash_of(hasher: &RandomState, policy: &str, key: &[u8]) -> u64 {
    hasher.hash_one((policy, key))
}

/// In-process store with sharded locking and bounded memory.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    shard_capacity: u64,
    hasher: RandomState,
    keys: AtomicU64,
    /// Run-time overrides and their version (one daemon: nobody else to tell).
    overrides: Mutex<Overrides>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(MemoryStoreConfig::default())
    }
}

impl MemoryStore {
    pub fn new(config: MemoryStoreConfig) -> Self {
        let shards = config.shards.max(1).next_power_of_two();
        let max_keys = config.max_keys.max(1);
        MemoryStore {
            shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
            shard_capacity: max_keys.div_ceil(shards as u64),
            hasher: RandomState::new(),
            keys: AtomicU64::new(0),
            overrides: Mutex::new((0, BTreeMap::new())),
        }
    }

    /// The hash of a check's key and the shard it lives in.
    fn locate(&self, policy: &str, key: &str) -> (u64, usize) {
        let hash = hash_of(&self.hasher, policy, key.as_bytes());
        (hash, ((hash >> 32) as usize) & (self.shards.len() - 1))
    }

    /// Stores `state` for a key, making room first when the shard is full.
    fn put(&self, shard: &mut Shard, hash: u64, check: &Check<'_>, state: State, now_ms: u64) {
        let expires_at = sluice_core::expires_at(&check.params, &state);
        if let Some(entry) = shard.get_mut(hash, check.policy, check.key) {
            entry.state = state;
            entry.expires_at = expires_at;
            return;
        }
        if shard.len >= self.shard_capacity {
            let freed = shard.evict(now_ms, (self.shard_capacity / 16).max(1), &self.hasher);
            self.keys.fetch_sub(freed, Ordering::Relaxed);
        }
        shard.insert(
            hash,
            check.policy,
            check.key,
            Entry { state, expires_at },
            &self.hasher,
        );
        self.keys.fetch_add(1, Ordering::Relaxed);
    }

    /// Decides one check under its shard's lock.
    fn decide(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        let (hash, at) = self.locate(check.policy, check.key);
        let mut shard = self.shards[at].lock();
        if let Some(entry) = shard.get_mut(hash, check.policy, check.key) {
            let decision =
                sluice_core::decide(&check.params, &mut entry.state, now_ms, check.cost)?;
            entry.expires_at = sluice_core::expires_at(&check.params, &entry.state);
            return Ok(decision);
        }
        let mut state = State::Fresh;
        let decision = sluice_core::decide(&check.params, &mut state, now_ms, check.cost)?;
        // A peek at an unknown key, or a denial of one, leaves nothing worth remembering.
        if check.cost > 0 && decision.allowed {
            self.put(&mut shard, hash, check, state, now_ms);
        }
        Ok(decision)
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Memory
    }

    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        self.decide(check, now_ms)
    }

    fn check_now(&self, check: &Check<'_>, now_ms: u64) -> Option<Result<Decision, StoreError>> {
        Some(self.decide(check, now_ms))
    }

    async fn check_all(
        &self,
        checks: &[Check<'_>],
        now_ms: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        let located: Vec<(u64, usize)> = checks
            .iter()
            .map(|c| self.locate(c.policy, c.key))
            .collect();
        let mut order: Vec<usize> = located.iter().map(|&(_, shard)| shard).collect();
        order.sort_unstable();
        order.dedup();
        // Lock every shard involved, in index order so two batches cannot deadlock.
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> =
            order.iter().map(|&i| (i, self.shards[i].lock())).collect();
        let guard_of = |slot: usize| order.binary_search(&slot).unwrap_or(0);

        // Decide on copies: a key checked twice in one batch sees its own earlier consumption.
        let mut originals: Vec<State> = Vec::with_capacity(checks.len());
        let mut working: Vec<State> = Vec::with_capacity(checks.len());
        let mut decisions = Vec::with_capacity(checks.len());
        for (i, check) in checks.iter().enumerate() {
            let earlier = (0..i)
                .rev()
                .find(|&j| checks[j].policy == check.policy && checks[j].key == check.key);
            let original = match earlier {
                Some(j) => working[j].clone(),
                None => guards[guard_of(located[i].1)]
                    .1
                    .get(located[i].0, check.policy, check.key)
                    .map_or(State::Fresh, |e| e.state.clone()),
            };
            let mut state = original.clone();
            decisions.push(sluice_core::decide(
                &check.params,
                &mut state,
                now_ms,
                check.cost,
            )?);
            originals.push(original);
            working.push(state);
        }

        if decisions.iter().all(|d| d.allowed) {
            for (i, check) in checks.iter().enumerate() {
                let later = checks[i + 1..]
                    .iter()
                    .any(|c| c.policy == check.policy && c.key == check.key);
                let peek_of_unknown = check.cost == 0 && originals[i] == State::Fresh;
                if !later && !peek_of_unknown {
                    let state = std::mem::take(&mut working[i]);
                    let (hash, shard) = located[i];
                    self.put(&mut guards[guard_of(shard)].1, hash, check, state, now_ms);
                }
            }
        } else {
            for (i, check) in checks.iter().enumerate() {
                let mut state = std::mem::take(&mut originals[i]);
                let unchanged = sluice_core::decide(&check.params, &mut state, now_ms, 0)?;
                decisions[i].remaining = unchanged.remaining;
                decisions[i].reset_ms = unchanged.reset_ms;
                decisions[i].delay_ms = 0;
            }
        }
        Ok(decisions)
    }

    fn tracked_keys(&self) -> Option<u64> {
        Some(self.keys.load(Ordering::Relaxed))
    }

    fn housekeep(&self, now_ms: u64) {
        for shard in self.shards.iter() {
            let freed = shard
                .lock()
                .retain(&self.hasher, |entry| entry.expires_at > now_ms);
            self.keys.fetch_sub(freed, Ordering::Relaxed);
        }
    }
}

#[async_trait]
impl OverrideStore for MemoryStore {
    async fn put(&self, change: &LimitOverride) -> Result<(), StoreError> {
        let mut overrides = self.overrides.lock();
        overrides.0 += 1;
        overrides
            .1
            .insert((change.policy.clone(), change.tier.clone()), change.clone());
        Ok(())
    }

    async fn delete(&self, policy: &str, tier: &str) -> Result<bool, StoreError> {
        let mut overrides = self.overrides.lock();
        overrides.0 += 1;
        Ok(overrides
            .1
            .remove(&(policy.to_owned(), tier.to_owned()))
            .is_some())
    }

    async fn list(&self) -> Result<(u64, Vec<LimitOverride>), StoreError> {
        let overrides = self.overrides.lock();
        Ok((overrides.0, overrides.1.values().cloned().collect()))
    }

    async fn version(&self) -> Result<u64, StoreError> {
        Ok(self.overrides.lock().0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::{Algorithm, Params};

    use super::*;

    const T0: u64 = 1_700_000_000_000;

    fn check<'a>(key: &'a str, params: Params, cost: u64) -> Check<'a> {
        Check {
            policy: "p",
            key,
            params,
            cost,
        }
    }

    fn fixed(limit: u64, window_ms: u64) -> Params {
        Params::new(Algorithm::FixedWindow, limit, window_ms, limit).unwrap()
    }

    #[test]
    fn keys_of_every_length_are_kept_apart_and_slots_fit_a_cache_line() {
        assert!(std::mem::size_of::<Slot>() <= 64);
        let hasher = RandomState::new();
        let mut keys = Keys::default();
        // Around the inline bound, and keys that are prefixes of each other.
        let texts: Vec<String> = (0..40).map(|n| "k".repeat(n + 1)).collect();
        for (at, text) in texts.iter().enumerate() {
            let slot = Slot {
                key: KeyText::new(text),
                entry: Entry {
                    state: State::Fresh,
                    expires_at: at as u64,
                },
            };
            keys.insert(hash_of(&hasher, "p", text.as_bytes()), "p", slot, &hasher);
        }
        for (at, text) in texts.iter().enumerate() {
            let found = keys.get(hash_of(&hasher, "p", text.as_bytes()), text);
            assert_eq!(
                found.map(|e| e.expires_at),
                Some(at as u64),
                "{}",
                text.len()
            );
        }
        assert!(matches!(
            KeyText::new(&"k".repeat(INLINE_KEY)),
            KeyText::Inline { .. }
        ));
        assert!(matches!(
            KeyText::new(&"k".repeat(INLINE_KEY + 1)),
            KeyText::Heap(_)
        ));
    }

    /// The packed slots and their index agree through inserts and removals from anywhere
    /// (the last slot moves into a removed one's place): checked against a plain map.
    #[test]
    fn packed_keys_stay_findable_through_removals() {
        let hasher = RandomState::new();
        let mut keys = Keys::default();
        let mut model = std::collections::HashMap::new();
        let entry = |expires_at| Entry {
            state: State::Fresh,
            expires_at,
        };
        for round in 0..5u64 {
            for i in 0..2000u64 {
                let key = format!("k{round}-{i}");
                let slot = Slot {
                    key: KeyText::new(&key),
                    entry: entry(i),
                };
                keys.insert(hash_of(&hasher, "p", key.as_bytes()), "p", slot, &hasher);
                model.insert(key, i);
            }
            // Forget a scattered third: the first, the last and runs in between.
            let removed = keys.retain("p", &hasher, |e| e.expires_at % 3 != round % 3);
            let before = model.len();
            model.retain(|_, at| *at % 3 != round % 3);
            assert_eq!(removed as usize, before - model.len());
            assert_eq!(keys.len(), model.len());
            for (key, at) in &model {
                let found = keys.get(hash_of(&hasher, "p", key.as_bytes()), key);
                assert_eq!(found.map(|e| e.expires_at), Some(*at), "{key}");
            }
            for i in (0..2000u64).filter(|i| i % 3 == round % 3) {
                let key = format!("k{round}-{i}");
                assert!(
                    keys.get(hash_of(&hasher, "p", key.as_bytes()), &key)
                        .is_none(),
                    "{key}"
                );
            }
        }
        // Emptied, the storage shrinks back.
        keys.retain("p", &hasher, |_| false);
        assert_eq!(keys.len(), 0);
        assert!(keys.slots.capacity() < 100, "{}", keys.slots.capacity());
    }

    #[tokio::test]
    async fn tracked_keys_never_exceed_max_keys_and_the_soonest_expiring_go_first() {
        let store = MemoryStore::new(MemoryStoreConfig {
            max_keys: 64,
            shards: 1,
        });
        // One long-lived key, then many short-lived ones pushing the store past its bound.
        let long = fixed(5, 3_600_000);
        store.check(&check("long", long, 1), T0).await.unwrap();
        for i in 0..1000 {
            let key = format!("short-{i}");
            store
                .check(&check(&key, fixed(5, 1000), 1), T0)
                .await
                .unwrap();
            assert!(store.tracked_keys().unwrap() <= 64);
        }
        let survivor = store.check(&check("long", long, 0), T0).await.unwrap();
        assert_eq!(survivor.remaining, 4, "the long-lived key was not evicted");
    }

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
        assert_eq!(store.tracked_keys(), Some(2));
        store.housekeep(T0 + 1000);
        assert_eq!(store.tracked_keys(), Some(1));
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
        assert_eq!(store.tracked_keys(), Some(0));
    }

    #[tokio::test]
    async fn a_denied_batch_consumes_nothing() {
        let store = MemoryStore::default();
        let p = fixed(3, 1000);
        store.check(&check("full", p, 3), T0).await.unwrap();
        let batch = [check("a", p, 2), check("full", p, 1), check("b", p, 1)];
        let results = store.check_all(&batch, T0).await.unwrap();
        assert!(results[0].allowed && !results[1].allowed && results[2].allowed);
        assert_eq!(
            results[0].remaining, 3,
            "remaining describes the unchanged state"
        );
        for key in ["a", "b"] {
            let d = store.check(&check(key, p, 0), T0).await.unwrap();
            assert_eq!(d.remaining, 3, "{key} was not consumed");
        }
    }

    #[tokio::test]
    async fn an_allowed_batch_consumes_all_and_sees_repeated_keys() {
        let store = MemoryStore::default();
        let p = fixed(3, 1000);
        let batch = [check("a", p, 2), check("b", p, 1), check("a", p, 1)];
        let results = store.check_all(&batch, T0).await.unwrap();
        assert!(results.iter().all(|d| d.allowed));
        assert_eq!(
            results[2].remaining, 0,
            "the second check of `a` saw the first"
        );
        let over = [check("a", p, 1), check("b", p, 1)];
        let results = store.check_all(&over, T0).await.unwrap();
        assert!(!results[0].allowed);
        let b = store.check(&check("b", p, 0), T0).await.unwrap();
        assert_eq!(b.remaining, 2);
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
