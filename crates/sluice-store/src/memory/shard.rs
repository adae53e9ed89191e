//! One shard of the memory store ([`Shard`]): per policy, the [`Keys`] of that policy, and
//! what the shard has forgotten to make room. A shard is what one mutex guards; how it picks
//! a key to forget is in `eviction.rs`.

use ahash::RandomState;
use sluice_core::{SplitMix, State};

use super::keys::{Entry, Expiry, KeyText, Keys, Slot};
use crate::store::Check;

/// One shard: per policy (few, scanned linearly), the keys of that policy. Two levels so a
/// lookup needs no allocated `policy:key` string.
#[derive(Debug, Default)]
pub(super) struct Shard {
    pub(super) policies: Vec<(Box<str>, Keys)>,
    pub(super) len: u64,
    /// Keys forgotten to make room while their state was not yet fresh, by policy.
    pub(super) evicted: Vec<(Box<str>, u64)>,
    /// The generator that picks eviction samples.
    pub(super) sampler: SplitMix,
}

impl Shard {
    fn keys(&self, policy: &str) -> Option<&Keys> {
        self.policies
            .iter()
            .find(|(name, _)| &**name == policy)
            .map(|(_, keys)| keys)
    }

    pub(super) fn get(&self, hash: u64, policy: &str, key: &str) -> Option<&Entry> {
        self.keys(policy).and_then(|keys| keys.get(hash, key))
    }

    pub(super) fn keys_mut(&mut self, policy: &str) -> Option<&mut Keys> {
        self.policies
            .iter_mut()
            .find(|(name, _)| &**name == policy)
            .map(|(_, keys)| keys)
    }

    /// Stores the state of a key checked with `params`, which expires at `expires_at`; whether
    /// the key is new.
    pub(super) fn store(
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

    pub(super) fn retain(&mut self, hasher: &RandomState, keep: impl Fn(&Entry) -> bool) -> u64 {
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
