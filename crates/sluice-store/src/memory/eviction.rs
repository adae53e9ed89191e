//! Which key a full shard forgets, as Redis approximates LRU: of [`EVICTION_SAMPLES`] keys
//! drawn at random, the one whose loss gives away least ([`Loss`]). A key back to fresh gives
//! away nothing, then the more of its limit a key has left the less; a key that has used up
//! its limit would get all of it back, so it goes last. Sampling keeps an eviction at a fixed
//! cost whatever the shard's size. Apart from the key table so the ranking reads as one
//! policy.

use ahash::RandomState;

use super::keys::Keys;
use super::shard::Shard;

/// How many keys one eviction compares (Redis' `maxmemory-samples` is 5; more samples make an
/// exhausted key's eviction unlikely even when a shard holds many).
const EVICTION_SAMPLES: usize = 16;

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

impl Keys {
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
}

impl Shard {
    /// A position among the shard's keys, drawn uniformly: `(policy, slot)`.
    fn sample(&mut self) -> Option<(usize, usize)> {
        let mut at = self.sampler.below(self.len.max(1));
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
    pub(super) fn evict_one(&mut self, now_ms: u64, hasher: &RandomState) -> bool {
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
}

#[cfg(test)]
mod tests {
    use sluice_core::{Algorithm, Params};

    use super::super::testing::{GRACE_MS, T0, check, fixed, one};
    use super::super::{MemoryStore, MemoryStoreConfig};
    use super::*;
    use crate::store::{Check, KeyTable, StoreExt};

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
            assert!(store.tracked() <= 64);
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
                    assert!(store.tracked() <= 6400);
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
        let full = EVICTION_SAMPLES as u64;
        assert_eq!(store.tracked(), full);
        // A second and the grace later the short keys are fresh again, and no check stamped
        // before they were can still arrive: new keys replace them one by one.
        let later = T0 + 1000 + GRACE_MS;
        for i in 0..half {
            store
                .check(&check(&format!("new-{i}"), long, 1), later)
                .await
                .unwrap();
            assert_eq!(store.tracked(), full, "one key forgotten per new key");
        }
        assert!(store.evicted().is_empty(), "{:?}", store.evicted());
        assert_all_kept(&store, half, long, later).await;
        // Now every key is live: a new one costs one of the keys with most left (new-*).
        store.check(&check("newest", long, 1), later).await.unwrap();
        assert_eq!(store.evicted(), vec![("p".to_owned(), 1)]);
        assert_all_kept(&store, half, long, later).await;
    }

    /// Asserts that `long-0` … `long-{half - 1}`, each used up, are still known at `later`.
    async fn assert_all_kept(store: &MemoryStore, half: usize, long: Params, later: u64) {
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
        assert_eq!(store.evicted(), vec![("p".to_owned(), 137)]);
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
                assert!(store.tracked() <= max_keys, "max_keys {max_keys}");
            }
        }
    }
}
