//! `MemoryStore`: state in process memory, for a single daemon.
//!
//! Keys are spread over mutex-guarded shards so concurrent checks of different keys rarely
//! contend. Memory is bounded by `max_keys`: a full shard forgets one key per new one, chosen
//! as Redis approximates LRU: of a few keys sampled at random, the one whose loss gives away
//! least. A key back to fresh gives away nothing, then the more of its limit a key has left the
//! less; a key that has used up its limit would get all of it back, so it goes last. Sampling
//! keeps an eviction at a fixed cost whatever the shard's size.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use ahash::RandomState;
use async_trait::async_trait;
use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};
use sluice_core::{Decision, Params, State};

use crate::{Check, LimitOverride, OverrideStore, Store, StoreError, StoreKind};

/// Sizing of a [`MemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStoreConfig {
    /// Most keys tracked at once (`backend.max_keys`).
    pub max_keys: u64,
    /// Number of independently locked shards; rounded up to a power of two.
    pub shards: usize,
    /// How long a key is kept past its state's expiry, by housekeeping and by eviction alike,
    /// for a check stamped before that expiry that reaches its shard after it (see
    /// [`crate::expiry_grace`]). Default [`CLOCK_MARGIN`](crate::CLOCK_MARGIN).
    pub grace: std::time::Duration,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        MemoryStoreConfig {
            max_keys: 1_000_000,
            shards: 64,
            grace: crate::CLOCK_MARGIN,
        }
    }
}

#[derive(Debug)]
struct Entry {
    state: State,
    expiry: Expiry,
}

/// When a key's state is fresh again (unix ms) and which of its policy's limits it was last
/// checked with (a position in [`Keys::limits`]), in one word so that a slot stays one cache
/// line. 56 bits of milliseconds reach two million years past 1970, beyond every expiry valid
/// parameters give; a later one is kept as that bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expiry(u64);

impl Expiry {
    const AT_BITS: u32 = 56;
    const LATEST: u64 = (1 << Self::AT_BITS) - 1;

    fn new(at_ms: u64, limits: u8) -> Expiry {
        Expiry(at_ms.min(Self::LATEST) | (u64::from(limits) << Self::AT_BITS))
    }

    fn at_ms(self) -> u64 {
        self.0 & Self::LATEST
    }

    fn limits(self) -> u8 {
        u8::try_from(self.0 >> Self::AT_BITS).unwrap_or(UNKNOWN_LIMITS)
    }
}

/// Most distinct limits remembered per policy and shard (the policy's own and its tiers',
/// across reloads and overrides); a key checked with yet another is ranked as exhausted.
const MAX_LIMITS: usize = 64;

/// The [`Expiry::limits`] of a key whose limits are not remembered.
const UNKNOWN_LIMITS: u8 = u8::MAX;

/// How many keys one eviction compares (Redis' `maxmemory-samples` is 5; more samples make an
/// exhausted key's eviction unlikely even when a shard holds many).
const EVICTION_SAMPLES: usize = 16;

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
    /// The distinct limits the keys were last checked with, which eviction reads a key's
    /// remaining quota against; at most [`MAX_LIMITS`].
    limits: Vec<Params>,
}

impl Keys {
    /// The position of `params` in `limits`, added when new; `hint` (the key's last) is tried
    /// first, so a check with the same limit as before costs one comparison.
    fn limits_of(&mut self, params: &Params, hint: u8) -> u8 {
        if self.limits.get(usize::from(hint)) == Some(params) {
            return hint;
        }
        let at = match self.limits.iter().position(|known| known == params) {
            Some(at) => at,
            None if self.limits.len() < MAX_LIMITS => {
                self.limits.push(*params);
                self.limits.len() - 1
            }
            None => return UNKNOWN_LIMITS,
        };
        u8::try_from(at).unwrap_or(UNKNOWN_LIMITS)
    }

    /// Forgets the limits no key refers to any more, once the table is full (reloads and
    /// overrides replaced them), renumbering the keys'.
    fn compact_limits(&mut self) {
        if self.limits.len() < MAX_LIMITS {
            return;
        }
        let mut used = [false; MAX_LIMITS];
        for slot in &self.slots {
            if let Some(flag) = used.get_mut(usize::from(slot.entry.expiry.limits())) {
                *flag = true;
            }
        }
        let mut renumbered = [UNKNOWN_LIMITS; MAX_LIMITS];
        let mut kept = Vec::with_capacity(MAX_LIMITS);
        for (at, params) in self.limits.iter().enumerate() {
            if used[at] {
                renumbered[at] = u8::try_from(kept.len()).unwrap_or(UNKNOWN_LIMITS);
                kept.push(*params);
            }
        }
        self.limits = kept;
        for slot in &mut self.slots {
            let expiry = slot.entry.expiry;
            let limits = renumbered
                .get(usize::from(expiry.limits()))
                .copied()
                .unwrap_or(UNKNOWN_LIMITS);
            slot.entry.expiry = Expiry::new(expiry.at_ms(), limits);
        }
    }

    /// What forgetting the key at `at` would give away at `now_ms`.
    fn loss(&self, at: usize, now_ms: u64) -> Loss {
        let entry = &self.slots[at].entry;
        let expires_at = entry.expiry.at_ms();
        let share = if expires_at <= now_ms {
            Share::NOTHING
        } else {
            match self.limits.get(usize::from(entry.expiry.limits())) {
                Some(params) => {
                    let capacity = params.capacity();
                    let remaining = sluice_core::remaining(params, &entry.state, now_ms);
                    Share {
                        used: capacity.saturating_sub(remaining),
                        of: capacity,
                    }
                }
                None => Share::ALL,
            }
        };
        Loss { share, expires_at }
    }

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

    /// Adds a key known to be absent. `policy` rehashes the index when it grows.
    fn insert(&mut self, hash: u64, policy: &str, slot: Slot, hasher: &RandomState) {
        let Keys { index, slots, .. } = self;
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
        self.compact_limits();
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
        let Keys { index, slots, .. } = self;
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
    /// Keys forgotten to make room while their state was not yet fresh, by policy.
    evicted: Vec<(Box<str>, u64)>,
    /// The state of the generator that picks eviction samples.
    sampler: u64,
}

/// The share of a key's capacity that forgetting it would give back: `used` of `of`.
#[derive(Debug, Clone, Copy)]
struct Share {
    used: u64,
    of: u64,
}

impl Share {
    const NOTHING: Share = Share { used: 0, of: 1 };
    const ALL: Share = Share { used: 1, of: 1 };
}

impl Ord for Share {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // used / of against other.used / other.of, without division.
        let mine = u128::from(self.used) * u128::from(other.of.max(1));
        let theirs = u128::from(other.used) * u128::from(self.of.max(1));
        mine.cmp(&theirs)
    }
}

impl PartialOrd for Share {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Share {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Share {}

/// What forgetting a key gives away, least first: the share of its limit it would get back,
/// then how long until it would be fresh anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Loss {
    share: Share,
    expires_at: u64,
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

    fn keys_mut(&mut self, policy: &str) -> Option<&mut Keys> {
        self.policies
            .iter_mut()
            .find(|(name, _)| &**name == policy)
            .map(|(_, keys)| keys)
    }

    /// Stores the state of a key checked with `params`, which expires at `expires_at`; whether
    /// the key is new.
    fn store(
        &mut self,
        hash: u64,
        check: &Check<'_>,
        state: State,
        expires_at: u64,
        hasher: &RandomState,
    ) -> bool {
        let at = match self
            .policies
            .iter()
            .position(|(name, _)| &**name == check.policy)
        {
            Some(at) => at,
            None => {
                self.policies.push((check.policy.into(), Keys::default()));
                self.policies.len() - 1
            }
        };
        let (name, keys) = &mut self.policies[at];
        if let Some(at) = keys.position(hash, check.key) {
            let entry = &mut keys.slots[at].entry;
            let hint = entry.expiry.limits();
            entry.state = state;
            let limits = keys.limits_of(&check.params, hint);
            keys.slots[at].entry.expiry = Expiry::new(expires_at, limits);
            return false;
        }
        let limits = keys.limits_of(&check.params, 0);
        let slot = Slot {
            key: KeyText::new(check.key),
            entry: Entry {
                state,
                expiry: Expiry::new(expires_at, limits),
            },
        };
        keys.insert(hash, name, slot, hasher);
        self.len += 1;
        true
    }

    /// A position among the shard's keys, drawn uniformly (splitmix64): `(policy, slot)`.
    fn sample(&mut self) -> Option<(usize, usize)> {
        self.sampler = self.sampler.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.sampler;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let mut at = (z ^ (z >> 31)) % self.len.max(1);
        for (policy, (_, keys)) in self.policies.iter().enumerate() {
            let len = keys.len() as u64;
            if at < len {
                return Some((policy, at as usize));
            }
            at -= len;
        }
        None
    }

    /// Forgets one key: of [`EVICTION_SAMPLES`] drawn at random (every key of a shard that
    /// holds no more), the one whose loss gives away least. Counts it as evicted when its state
    /// was not yet fresh. Whether one was forgotten.
    fn evict_one(&mut self, now_ms: u64, hasher: &RandomState) -> bool {
        let mut victim: Option<(Loss, usize, usize)> = None;
        let mut consider = |loss: Loss, policy: usize, at: usize| {
            if victim.is_none_or(|(least, _, _)| loss < least) {
                victim = Some((loss, policy, at));
            }
        };
        if self.len <= EVICTION_SAMPLES as u64 {
            for (policy, (_, keys)) in self.policies.iter().enumerate() {
                for at in 0..keys.len() {
                    consider(keys.loss(at, now_ms), policy, at);
                }
            }
        } else {
            for _ in 0..EVICTION_SAMPLES {
                let Some((policy, at)) = self.sample() else {
                    break;
                };
                consider(self.policies[policy].1.loss(at, now_ms), policy, at);
            }
        }
        let Some((loss, policy, at)) = victim else {
            return false;
        };
        let (name, keys) = &mut self.policies[policy];
        keys.swap_remove(at, name, hasher);
        self.len -= 1;
        if loss.expires_at > now_ms {
            match self.evicted.iter_mut().find(|(evicted, _)| evicted == name) {
                Some((_, count)) => *count += 1,
                None => self.evicted.push((name.clone(), 1)),
            }
        }
        if keys.len() == 0 {
            self.policies.swap_remove(policy);
        }
        true
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
    /// [`MemoryStoreConfig::grace`] in ms: keys are forgotten as of this long ago.
    grace_ms: u64,
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
                        sampler: at as u64,
                        ..Shard::default()
                    })
                })
                .collect(),
            shard_capacity: max_keys / shards as u64,
            grace_ms: u64::try_from(config.grace.as_millis()).unwrap_or(u64::MAX),
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

    /// Decides one check under its shard's lock.
    fn decide(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        let (hash, at) = self.locate(check.policy, check.key);
        let mut shard = self.shards[at].lock();
        if let Some(keys) = shard.keys_mut(check.policy)
            && let Some(at) = keys.position(hash, check.key)
        {
            let entry = &mut keys.slots[at].entry;
            let decision =
                sluice_core::decide(&check.params, &mut entry.state, now_ms, check.cost)?;
            let expires_at = sluice_core::expires_at(&check.params, &entry.state);
            let hint = entry.expiry.limits();
            let limits = keys.limits_of(&check.params, hint);
            keys.slots[at].entry.expiry = Expiry::new(expires_at, limits);
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

    fn evicted_keys(&self) -> Vec<(String, u64)> {
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
    /// The default grace, in ms: keys are forgotten only this long after their expiry.
    const GRACE_MS: u64 = crate::CLOCK_MARGIN.as_millis() as u64;

    fn check<'a>(key: &'a str, params: Params, cost: u64) -> Check<'a> {
        Check {
            policy: "p",
            key,
            params,
            cost,
        }
    }

    /// A check of cost 1 of `key` under `policy`.
    fn one<'a>(policy: &'a str, key: &'a str, params: Params) -> Check<'a> {
        Check {
            policy,
            key,
            params,
            cost: 1,
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
                    expiry: Expiry::new(at as u64, 0),
                },
            };
            keys.insert(hash_of(&hasher, "p", text.as_bytes()), "p", slot, &hasher);
        }
        for (at, text) in texts.iter().enumerate() {
            let found = keys.get(hash_of(&hasher, "p", text.as_bytes()), text);
            assert_eq!(
                found.map(|e| e.expiry.at_ms()),
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
        let entry = |at| Entry {
            state: State::Fresh,
            expiry: Expiry::new(at, 0),
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
            let removed = keys.retain("p", &hasher, |e| e.expiry.at_ms() % 3 != round % 3);
            let before = model.len();
            model.retain(|_, at| *at % 3 != round % 3);
            assert_eq!(removed as usize, before - model.len());
            assert_eq!(keys.len(), model.len());
            for (key, at) in &model {
                let found = keys.get(hash_of(&hasher, "p", key.as_bytes()), key);
                assert_eq!(found.map(|e| e.expiry.at_ms()), Some(*at), "{key}");
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

    /// One shard of at most 64 keys: eviction on almost every new key.
    fn small_store() -> MemoryStore {
        MemoryStore::new(MemoryStoreConfig {
            max_keys: 64,
            shards: 1,
            ..MemoryStoreConfig::default()
        })
    }

    #[tokio::test]
    async fn tracked_keys_never_exceed_max_keys_and_the_soonest_expiring_go_first() {
        let store = small_store();
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

    /// A store at `max_keys` flooded with one-request keys keeps the keys that have used up
    /// their limit: forgetting one would hand its whole limit back. Every algorithm: 50
    /// exhausted keys (limit 3 per hour), then 7000 new keys into a store of 6400, once under
    /// the same policy (their state expires with the exhausted keys') and once under a policy
    /// of a day (theirs expires later).
    #[tokio::test]
    async fn a_flood_at_max_keys_gives_no_exhausted_key_its_quota_back() {
        let mut regained = Vec::new();
        for algorithm in Algorithm::ALL {
            for (flood_policy, flood_window) in [("hourly", 3_600_000), ("daily", 86_400_000)] {
                let store = MemoryStore::new(MemoryStoreConfig {
                    max_keys: 6400,
                    ..MemoryStoreConfig::default()
                });
                let hourly = Params::new(algorithm, 3, 3_600_000, 3).unwrap();
                let flood = Params::new(algorithm, 3, flood_window, 3).unwrap();
                let exhausted: Vec<String> = (0..50).map(|i| format!("exhausted-{i}")).collect();
                for key in &exhausted {
                    for _ in 0..3 {
                        let check = one("hourly", key, hourly);
                        assert!(store.check(&check, T0).await.unwrap().allowed);
                    }
                    let over = store.check(&one("hourly", key, hourly), T0).await.unwrap();
                    assert!(!over.allowed);
                }
                for i in 0..7000u64 {
                    let key = format!("flood-{i}");
                    let check = one(flood_policy, &key, flood);
                    assert!(store.check(&check, T0 + 1 + i).await.unwrap().allowed);
                    assert!(store.tracked_keys().unwrap() <= 6400);
                }
                let mut back = 0;
                for key in &exhausted {
                    let peek = Check {
                        cost: 0,
                        ..one("hourly", key, hourly)
                    };
                    let now = T0 + 10_000;
                    back += usize::from(store.check(&peek, now).await.unwrap().remaining > 0);
                }
                regained.push((algorithm.as_str(), flood_policy, back));
            }
        }
        println!("exhausted keys (of 50) back after a 7000-key flood: {regained:?}");
        assert!(
            regained.iter().all(|&(_, _, back)| back == 0),
            "exhausted keys (of 50) that got their quota back: {regained:?}"
        );
    }

    /// A full shard forgets one key per new key, expired ones first, and counts as evicted
    /// only the keys whose state was not yet fresh. (A shard this small is scanned whole; a
    /// larger one compares samples, which the flood test below exercises.)
    #[tokio::test]
    async fn a_full_shard_forgets_one_key_per_new_key_expired_first() {
        let store = MemoryStore::new(MemoryStoreConfig {
            max_keys: EVICTION_SAMPLES as u64,
            shards: 1,
            ..MemoryStoreConfig::default()
        });
        let short = fixed(5, 1000);
        let long = fixed(5, 3_600_000);
        let half = EVICTION_SAMPLES / 2;
        for i in 0..half {
            store
                .check(&check(&format!("short-{i}"), short, 1), T0)
                .await
                .unwrap();
            store
                .check(&check(&format!("long-{i}"), long, 5), T0)
                .await
                .unwrap();
        }
        let full = Some(EVICTION_SAMPLES as u64);
        assert_eq!(store.tracked_keys(), full);
        // A second and the grace later the short keys are fresh again, and no check stamped
        // before they were can still arrive: new keys replace them one by one.
        let later = T0 + 1000 + GRACE_MS;
        for i in 0..half {
            store
                .check(&check(&format!("new-{i}"), long, 1), later)
                .await
                .unwrap();
            assert_eq!(store.tracked_keys(), full, "one key forgotten per new key");
        }
        assert!(
            store.evicted_keys().is_empty(),
            "{:?}",
            store.evicted_keys()
        );
        for i in 0..half {
            let d = store
                .check(&check(&format!("long-{i}"), long, 0), later)
                .await
                .unwrap();
            assert_eq!(d.remaining, 0, "long-{i} was forgotten");
        }
        // Now every key is live: a new one costs one of the keys with most left (new-*).
        store.check(&check("newest", long, 1), later).await.unwrap();
        assert_eq!(store.evicted_keys(), vec![("p".to_owned(), 1)]);
        for i in 0..half {
            let d = store
                .check(&check(&format!("long-{i}"), long, 0), later)
                .await
                .unwrap();
            assert_eq!(d.remaining, 0, "long-{i} was forgotten");
        }
    }

    /// Within one policy, keys of different tiers are ranked against their own limit: a key of
    /// a small tier that used up its 3 goes after keys of a large tier that used 10 of 1000.
    #[tokio::test]
    async fn each_key_is_ranked_against_the_limit_it_was_checked_with() {
        let store = small_store();
        let small = fixed(3, 3_600_000);
        let large = fixed(1000, 3_600_000);
        store.check(&check("small", small, 3), T0).await.unwrap();
        for i in 0..200 {
            store
                .check(&check(&format!("large-{i}"), large, 10), T0)
                .await
                .unwrap();
        }
        let d = store.check(&check("small", small, 0), T0).await.unwrap();
        assert_eq!(
            d.remaining, 0,
            "the exhausted key of the small tier was forgotten"
        );
        assert_eq!(store.evicted_keys(), vec![("p".to_owned(), 137)]);
    }

    /// Limits no key refers to any more are forgotten once the table is full, so a policy
    /// whose limit changes again and again keeps ranking its keys right.
    #[test]
    fn the_limits_table_stays_bounded_and_keys_keep_their_limits() {
        let hasher = RandomState::new();
        let mut keys = Keys::default();
        let add = |keys: &mut Keys, key: &str, params: &Params| {
            let limits = keys.limits_of(params, UNKNOWN_LIMITS);
            let slot = Slot {
                key: KeyText::new(key),
                entry: Entry {
                    state: State::Fresh,
                    expiry: Expiry::new(T0, limits),
                },
            };
            keys.insert(hash_of(&hasher, "p", key.as_bytes()), "p", slot, &hasher);
        };
        for limit in 1..=200u64 {
            add(&mut keys, &format!("k{limit}"), &fixed(limit, 1000));
            // Every fourth key stays; the others are removed (the limit changed again).
            keys.retain("p", &hasher, |e| e.expiry.at_ms() != T0 + 1);
            if limit % 4 != 0 {
                let at = keys.len() - 1;
                keys.swap_remove(at, "p", &hasher);
            }
            assert!(keys.limits.len() <= MAX_LIMITS);
        }
        assert_eq!(keys.len(), 50);
        for slot in &keys.slots {
            let limit: u64 = std::str::from_utf8(&slot.key.as_bytes()[1..])
                .unwrap()
                .parse()
                .unwrap();
            let params = keys.limits.get(usize::from(slot.entry.expiry.limits()));
            assert_eq!(params.map(|p| p.limit), Some(limit), "{limit}");
        }
    }

    #[test]
    fn an_expiry_keeps_its_time_and_limits_apart() {
        for (at, limits) in [
            (0, 0),
            (T0, 7),
            (Expiry::LATEST, UNKNOWN_LIMITS),
            (u64::MAX, 3),
        ] {
            let expiry = Expiry::new(at, limits);
            assert_eq!(
                (expiry.at_ms(), expiry.limits()),
                (at.min(Expiry::LATEST), limits)
            );
        }
    }

    /// The bound holds for a `max_keys` below the shard count or not a multiple of it.
    #[tokio::test]
    async fn tracked_keys_never_exceed_max_keys_of_any_size() {
        for max_keys in [1, 3, 16, 100, 1000] {
            let store = MemoryStore::new(MemoryStoreConfig {
                max_keys,
                ..MemoryStoreConfig::default()
            });
            for i in 0..3 * max_keys {
                let key = format!("k{i}");
                store
                    .check(&check(&key, fixed(5, 60_000), 1), T0)
                    .await
                    .unwrap();
                assert!(
                    store.tracked_keys().unwrap() <= max_keys,
                    "max_keys {max_keys}"
                );
            }
        }
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
        // Within the grace past its expiry, a key is kept for checks stamped before it.
        store.housekeep(T0 + 1000 + GRACE_MS - 1);
        assert_eq!(store.tracked_keys(), Some(2));
        store.housekeep(T0 + 1000 + GRACE_MS);
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
