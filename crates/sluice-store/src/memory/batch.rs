//! An all-or-nothing batch on the memory store: every shard involved locked at once (in
//! index order, so two batches cannot deadlock), every check decided on a copy of its state
//! (a key checked twice sees its own earlier consumption), and the states stored only when
//! every check passed. Apart from the single check, whose hot path takes one lock and no copy.

use parking_lot::MutexGuard;
use sluice_core::{Decision, State};

use super::MemoryStore;
use super::shard::Shard;
use crate::error::StoreError;
use crate::store::{Check, cancels_batch};

impl MemoryStore {
    /// Decides every check; stores the new states only if every one is allowed (see
    /// [`Store::decide`](crate::store::Store::decide)).
    pub(super) fn decide_all(
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
            decisions.push(sluice_core::decide_with(
                &check.params,
                &mut state,
                now_ms,
                check.cost,
                check.mode,
            )?);
            originals.push(original);
            working.push(state);
        }

        if !checks.iter().zip(&decisions).any(cancels_batch) {
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
}

#[cfg(test)]
mod tests {
    use super::super::testing::{T0, check, fixed};
    use crate::memory::MemoryStore;
    use crate::store::StoreExt;

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

    #[tokio::test]
    async fn checks_counting_every_hit_count_in_a_denied_batch() {
        let store = MemoryStore::default();
        let p = sluice_core::Params {
            counting: sluice_core::Counting::EveryHit,
            calendar: None,
            ..fixed(3, 1000)
        };
        store.check(&check("full", p, 3), T0).await.unwrap();
        let batch = [check("a", p, 2), check("full", p, 1), check("b", p, 5)];
        let results = store.check_all(&batch, T0).await.unwrap();
        assert!(results[0].allowed && !results[1].allowed && !results[2].allowed);
        for (key, left) in [("a", 1), ("full", 0), ("b", 0)] {
            let d = store.check(&check(key, p, 0), T0).await.unwrap();
            assert_eq!(d.remaining, left, "{key} counted its hits");
        }
        let one_more = store.check(&check("a", p, 1), T0).await.unwrap();
        assert!(one_more.allowed && one_more.remaining == 0);
    }
}
