//! The denied cache: a check the backend denied is answered denied here, without a call,
//! until the exact millisecond a check of that cost could pass (`now + retry_after_ms` of the
//! backend's denial), for the same or a higher cost (a higher cost cannot pass sooner). An
//! abusive flood then costs the backend one call per key and retry period instead of one per
//! check. The whole cache is dropped when the policies are replaced (config reload, limit
//! override, override poll), so a raised limit lifts the denials at once.

use sluice_core::{Decision, Params};

use super::slots::{Slot, Slots};

/// Entries at most (about 100 bytes each with a short key).
const MAX_ENTRIES: usize = 100_000;
/// Bytes at most, keys included.
const MAX_BYTES: usize = 32 << 20;

/// One backend denial, remembered.
#[derive(Debug, Clone, Copy)]
struct Denial {
    /// The instant a check of `cost` could pass (unix ms).
    until_ms: u64,
    cost: u64,
    /// The limit it was made under: a check under another (a changed limit, decided before
    /// the cache was dropped) is not answered from it.
    params: Params,
    limit: u64,
    remaining: u64,
    reset_ms: u64,
    /// The debt at the denial (usage policies), answered as it was then.
    debt: u64,
}

#[derive(Debug)]
pub(super) struct DeniedCache {
    slots: Slots<Denial>,
}

impl Default for DeniedCache {
    fn default() -> Self {
        DeniedCache {
            slots: Slots::new(MAX_ENTRIES, MAX_BYTES),
        }
    }
}

impl DeniedCache {
    /// The denial of a check of `cost` on `slot` at `now_ms`, if one the backend made still
    /// holds: the backend's limit, remaining and reset, and the retry recomputed from the
    /// cached instant.
    pub(super) fn answer(
        &self,
        slot: &Slot,
        params: &Params,
        cost: u64,
        now_ms: u64,
    ) -> Option<Decision> {
        let denial = self.slots.with(slot, |d| *d)?;
        if now_ms >= denial.until_ms {
            self.slots.remove(slot);
            return None;
        }
        (cost >= denial.cost && denial.params == *params).then(|| Decision {
            allowed: false,
            limit: denial.limit,
            remaining: denial.remaining,
            reset_ms: denial.reset_ms,
            retry_after_ms: denial.until_ms - now_ms,
            delay_ms: 0,
            debt: denial.debt,
        })
    }

    /// Remembers the backend's `decision` denying a check of `cost` at `now_ms` (a denial of
    /// a slot replaces one ending no later). A usage policy's cached answer carries the debt
    /// as the backend last answered it.
    pub(super) fn remember(
        &self,
        slot: &Slot,
        params: &Params,
        cost: u64,
        now_ms: u64,
        decision: &Decision,
    ) {
        if decision.allowed || decision.retry_after_ms == 0 {
            return;
        }
        let denial = Denial {
            until_ms: now_ms.saturating_add(decision.retry_after_ms),
            cost,
            params: *params,
            limit: decision.limit,
            remaining: decision.remaining,
            reset_ms: decision.reset_ms,
            debt: decision.debt,
        };
        self.slots.upsert(
            slot,
            || denial,
            |d| d.until_ms <= now_ms,
            |_, _| (),
            // The denial that holds longer (or owes more) stays: concurrent calls remember in
            // any order, and for one key and limit that is the later state (charges only add).
            |d| {
                if d.params != denial.params
                    || (d.until_ms, d.debt) <= (denial.until_ms, denial.debt)
                {
                    *d = denial;
                }
            },
        );
    }

    /// Forgets the denial of `slot` (a refund gave it room before the denial's end).
    pub(super) fn forget(&self, slot: &Slot) {
        self.slots.remove(slot);
    }

    /// Forgets every denial (the limits changed).
    pub(super) fn clear(&self) {
        self.slots.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::Algorithm;

    use super::*;

    const P: Params = Params {
        algorithm: Algorithm::FixedWindow,
        limit: 10,
        window_ms: 1_000,
        burst: 10,
        counting: sluice_core::Counting::Admitted,
        calendar: None,
    };

    fn denied(retry_after_ms: u64) -> Decision {
        Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            reset_ms: 5_000,
            retry_after_ms,
            delay_ms: 0,
            debt: 0,
        }
    }

    #[test]
    fn a_denial_holds_to_the_millisecond_for_the_same_or_a_higher_cost() {
        let cache = DeniedCache::default();
        let slot = Slot::new(&Arc::from("p"), 0, "k");
        cache.remember(&slot, &P, 2, 1_000, &denied(1_500));
        let at = cache.answer(&slot, &P, 2, 1_200).unwrap();
        assert_eq!(
            (at.allowed, at.retry_after_ms, at.reset_ms),
            (false, 1_300, 5_000)
        );
        assert_eq!(cache.answer(&slot, &P, 3, 2_499).unwrap().retry_after_ms, 1);
        assert!(
            cache.answer(&slot, &P, 1, 1_200).is_none(),
            "a cheaper check may pass"
        );
        assert!(
            cache.answer(&slot, &P, 2, 2_500).is_none(),
            "passes at the instant"
        );
        cache.remember(&slot, &P, 2, 1_000, &denied(1_500));
        let raised = Params { limit: 20, ..P };
        assert!(
            cache.answer(&slot, &raised, 2, 1_200).is_none(),
            "another limit"
        );
        let other_tier = Slot::new(&Arc::from("p"), 2, "k");
        assert!(cache.answer(&other_tier, &P, 2, 1_200).is_none());
    }

    #[test]
    fn clearing_lifts_every_denial() {
        let cache = DeniedCache::default();
        let slot = Slot::new(&Arc::from("p"), 0, "k");
        cache.remember(&slot, &P, 1, 1_000, &denied(60_000));
        cache.clear();
        assert!(cache.answer(&slot, &P, 1, 1_001).is_none());
    }
}
