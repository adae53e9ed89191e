//! The key table of one policy in one shard ([`Keys`]): the tracked keys packed in a vector,
//! each with its state and when it is fresh again ([`Expiry`]), short keys stored inside
//! their slot ([`KeyText`]), and a hash index into the vector. Apart from the shard and the
//! store so that the memory layout (a slot is one cache line) is read and tested in one
//! place. The steps every check takes here are `#[inline]`: the split into files costs the
//! hot path no call.

use ahash::RandomState;
use hashbrown::HashTable;
use sluice_core::{Params, State};

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) state: State,
    pub(super) expiry: Expiry,
}

/// When a key's state is fresh again (unix ms) and which of its policy's limits it was last
/// checked with (a position in [`Keys::limits`]), in one word so that a slot stays one cache
/// line. 56 bits of milliseconds reach two million years past 1970, beyond every expiry valid
/// parameters give; a later one is kept as that bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Expiry(u64);

impl Expiry {
    const AT_BITS: u32 = 56;
    const LATEST: u64 = (1 << Self::AT_BITS) - 1;

    #[inline]
    pub(super) fn new(at_ms: u64, limits: u8) -> Expiry {
        Expiry(at_ms.min(Self::LATEST) | (u64::from(limits) << Self::AT_BITS))
    }

    #[inline]
    pub(super) fn at_ms(self) -> u64 {
        self.0 & Self::LATEST
    }

    #[inline]
    pub(super) fn limits(self) -> u8 {
        u8::try_from(self.0 >> Self::AT_BITS).unwrap_or(UNKNOWN_LIMITS)
    }
}

/// Most distinct limits remembered per policy and shard (the policy's own and its tiers',
/// across reloads and overrides); a key checked with yet another is ranked as exhausted.
pub(super) const MAX_LIMITS: usize = 64;

/// The [`Expiry::limits`] of a key whose limits are not remembered.
pub(super) const UNKNOWN_LIMITS: u8 = u8::MAX;

/// A tracked key and its state: 64 bytes, one cache line, for keys of up to 22 bytes.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) key: KeyText,
    pub(super) entry: Entry,
}

/// Longest key kept inside its slot.
pub(super) const INLINE_KEY: usize = 22;

/// A key's bytes, inside the slot when short (`user:123`, `ip:203.0.113.7`: most keys), so a
/// look-up reads no second allocation and a key costs no allocator overhead.
#[derive(Debug)]
pub(super) enum KeyText {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl KeyText {
    pub(super) fn new(key: &str) -> KeyText {
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

    #[inline]
    pub(super) fn as_bytes(&self) -> &[u8] {
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
pub(super) struct Keys {
    index: HashTable<u32>,
    pub(super) slots: Vec<Slot>,
    /// The distinct limits the keys were last checked with, which eviction reads a key's
    /// remaining quota against; at most [`MAX_LIMITS`].
    pub(super) limits: Vec<Params>,
}

impl Keys {
    /// The position of `params` in `limits`, added when new; `hint` (the key's last) is tried
    /// first, so a check with the same limit as before costs one comparison.
    #[inline]
    pub(super) fn limits_of(&mut self, params: &Params, hint: u8) -> u8 {
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

    #[inline]
    pub(super) fn position(&self, hash: u64, key: &str) -> Option<usize> {
        self.index
            .find(hash, |&at| {
                self.slots
                    .get(at as usize)
                    .is_some_and(|slot| slot.key.as_bytes() == key.as_bytes())
            })
            .map(|&at| at as usize)
    }

    pub(super) fn get(&self, hash: u64, key: &str) -> Option<&Entry> {
        self.position(hash, key).map(|at| &self.slots[at].entry)
    }

    /// Adds a key known to be absent. `policy` rehashes the index when it grows.
    pub(super) fn insert(&mut self, hash: u64, policy: &str, slot: Slot, hasher: &RandomState) {
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
    pub(super) fn retain(
        &mut self,
        policy: &str,
        hasher: &RandomState,
        keep: impl Fn(&Entry) -> bool,
    ) -> u64 {
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
    pub(super) fn swap_remove(&mut self, at: usize, policy: &str, hasher: &RandomState) {
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

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }
}

/// The one hash of a tracked key. Shards take bits 32 and up, the shard's table the low bits
/// and its control bytes the top 7, so the shard choice does not crowd a table's buckets.
#[inline]
pub(super) fn hash_of(hasher: &RandomState, policy: &str, key: &[u8]) -> u64 {
    hasher.hash_one((policy, key))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{T0, fixed};
    use super::*;

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
}
