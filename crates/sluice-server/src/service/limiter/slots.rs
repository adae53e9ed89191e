//! A bounded map keyed by (policy, tier, key), sharded so the check path of different keys
//! takes different locks: what the denied cache and the leases keep per key. Bounded in
//! entries and in bytes (a key is up to `MAX_KEY_BYTES`); when full, entries the owner calls
//! stale go first, then arbitrary ones (the map's own order), so an abusive flood of fresh
//! keys can never grow it.

use std::collections::HashMap;
use std::sync::Arc;

use ahash::RandomState;
use parking_lot::Mutex;

/// Shards: a power of two well above the worker threads of a small machine.
const SHARDS: usize = 16;

/// One (policy, tier, key): the tier is its slot in the policy (none and unknown tiers are
/// slots of their own, as in the metrics).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Slot {
    pub policy: Arc<str>,
    pub tier: usize,
    pub key: Box<str>,
}

impl Slot {
    pub(super) fn new(policy: &Arc<str>, tier: usize, key: &str) -> Slot {
        Slot {
            policy: policy.clone(),
            tier,
            key: key.into(),
        }
    }

    /// What an entry of this slot holds in memory, roughly: the key and the entry itself.
    fn bytes<V>(&self) -> usize {
        self.key.len() + std::mem::size_of::<(Slot, V)>() + 16
    }
}

#[derive(Debug)]
struct Shard<V> {
    map: HashMap<Slot, V, RandomState>,
    bytes: usize,
}

/// The map; `V` is what the owner keeps per slot.
#[derive(Debug)]
pub(super) struct Slots<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    hasher: RandomState,
    max_entries: usize,
    max_bytes: usize,
}

impl<V> Slots<V> {
    /// At most `entries` entries and `bytes` bytes in all.
    pub(super) fn new(entries: usize, bytes: usize) -> Slots<V> {
        Slots {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::with_hasher(RandomState::new()),
                        bytes: 0,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
            max_entries: (entries / SHARDS).max(1),
            max_bytes: (bytes / SHARDS).max(1),
        }
    }

    fn shard(&self, slot: &Slot) -> &Mutex<Shard<V>> {
        // The modulo keeps the index in bounds whatever the hash.
        let at = usize::try_from(self.hasher.hash_one(slot) % SHARDS as u64).unwrap_or(0);
        &self.shards[at]
    }

    /// `f` on the entry of `slot`, if there is one.
    pub(super) fn with<R>(&self, slot: &Slot, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        self.shard(slot).lock().map.get_mut(slot).map(f)
    }

    /// `f` on the entry of `slot`, made by `make` if missing. Making one in a full shard
    /// first forgets the entries `stale` says may go, then arbitrary ones (an eighth of the
    /// shard, so a flood does not rescan it per insert); `evicted` hears each one forgotten.
    pub(super) fn upsert<R>(
        &self,
        slot: &Slot,
        make: impl FnOnce() -> V,
        stale: impl Fn(&V) -> bool,
        mut evicted: impl FnMut(&Slot, V),
        f: impl FnOnce(&mut V) -> R,
    ) -> R {
        let mut shard = self.shard(slot).lock();
        if let Some(value) = shard.map.get_mut(slot) {
            return f(value);
        }
        let size = slot.bytes::<V>();
        if shard.map.len() >= self.max_entries || shard.bytes + size > self.max_bytes {
            let Shard { map, bytes } = &mut *shard;
            map.retain(|slot, value| {
                let keep = !stale(value);
                if !keep {
                    *bytes = bytes.saturating_sub(slot.bytes::<V>());
                }
                keep
            });
            if map.len() >= self.max_entries || *bytes + size > self.max_bytes {
                let victims: Vec<Slot> = map.keys().take(map.len() / 8 + 1).cloned().collect();
                for victim in victims {
                    if let Some(value) = map.remove(&victim) {
                        *bytes = bytes.saturating_sub(victim.bytes::<V>());
                        evicted(&victim, value);
                    }
                }
            }
        }
        shard.bytes += size;
        let value = shard.map.entry(slot.clone()).or_insert_with(make);
        f(value)
    }

    /// Forgets `slot`.
    pub(super) fn remove(&self, slot: &Slot) {
        let mut shard = self.shard(slot).lock();
        if shard.map.remove(slot).is_some() {
            shard.bytes = shard.bytes.saturating_sub(slot.bytes::<V>());
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&self) {
        for shard in &*self.shards {
            let mut shard = shard.lock();
            shard.map.clear();
            shard.bytes = 0;
        }
    }

    /// Visits every entry, one shard locked at a time; entries `f` answers false for go.
    pub(super) fn retain(&self, mut f: impl FnMut(&Slot, &mut V) -> bool) {
        for shard in &*self.shards {
            let mut shard = shard.lock();
            let Shard { map, bytes } = &mut *shard;
            map.retain(|slot, value| {
                let keep = f(slot, value);
                if !keep {
                    *bytes = bytes.saturating_sub(slot.bytes::<V>());
                }
                keep
            });
        }
    }

    /// Entries held, in all shards.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_map_forgets_stale_entries_then_arbitrary_ones() {
        let slots: Slots<u64> = Slots::new(SHARDS * 4, usize::MAX);
        let policy: Arc<str> = "p".into();
        let mut forgotten = 0;
        for i in 0..1000 {
            let slot = Slot::new(&policy, 0, &format!("k{i}"));
            slots.upsert(&slot, || i, |v| *v < 10, |_, _| forgotten += 1, |_| ());
        }
        assert!(slots.len() <= SHARDS * 4, "{}", slots.len());
        assert!(forgotten > 0);
    }

    #[test]
    fn the_byte_bound_holds_for_long_keys() {
        let slots: Slots<u64> = Slots::new(1_000_000, SHARDS * 10_000);
        let policy: Arc<str> = "p".into();
        for i in 0..1000 {
            let key = format!("{i:0>4096}");
            slots.upsert(
                &Slot::new(&policy, 0, &key),
                || 0,
                |_| false,
                |_, _| (),
                |_| (),
            );
        }
        // 10 000 bytes a shard: two 4 KiB keys each at most.
        assert!(slots.len() <= SHARDS * 2, "{}", slots.len());
    }
}
