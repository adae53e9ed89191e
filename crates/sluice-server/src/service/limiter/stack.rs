//! Checks of stacked policies (`limits = [...]`): each check becomes one store check per
//! limit (the first the policy's own state, the others apart: `Check::stack`), all decided in
//! the same all-or-nothing store call (one script call on Redis and Cluster, where the
//! limits share the key's hash tag; one batch under the shard locks in memory), and folded
//! back into one decision per check: allowed when every limit allowed, answered as the limit
//! with the least remaining (ties: the later reset), waiting until every limit has room.

use sluice_core::Decision;
use sluice_store::{Check, Decided, StoreError};
use tracing::Span;

use super::Limiter;
use sluice_config::policy::{Scope, Stacked};

impl Limiter {
    /// `checks` decided in one all-or-nothing store call, each check with its limit's
    /// `stacks` (empty: a single limit), one [`Decided`] per check.
    pub(super) async fn call_store_stacked(
        &self,
        checks: &[Check<'_>],
        stacks: &[&[Stacked]],
        scope: Scope,
        now_ms: u64,
        span: &Span,
    ) -> Result<Vec<Decided>, StoreError> {
        if stacks.iter().all(|stack| stack.is_empty()) {
            return self.call_store_all(checks, scope, now_ms, span).await;
        }
        let (flat, counts) = expand(checks, stacks);
        let decided = self.call_store_all(&flat, scope, now_ms, span).await?;
        fold(decided, &counts)
    }
}

/// One store check per limit of each check, and how many each check became.
fn expand<'a>(checks: &[Check<'a>], stacks: &[&[Stacked]]) -> (Vec<Check<'a>>, Vec<usize>) {
    let mut flat = Vec::with_capacity(checks.len() * 2);
    let mut counts = Vec::with_capacity(checks.len());
    for (check, stack) in checks.iter().zip(stacks) {
        flat.push(*check);
        // The first limit is the check itself (its parameters as the policy set has them).
        for (i, limit) in stack.iter().enumerate().skip(1) {
            flat.push(Check {
                params: limit.params,
                stack: u8::try_from(i).unwrap_or(u8::MAX),
                candidate: None,
                ..*check
            });
        }
        counts.push(stack.len().max(1));
    }
    (flat, counts)
}

/// Each check's limits' decisions folded into one (module doc); its candidate's is the
/// first limit's.
fn fold(decided: Vec<Decided>, counts: &[usize]) -> Result<Vec<Decided>, StoreError> {
    if decided.len() != counts.iter().sum::<usize>() {
        return Err(StoreError::Backend(format!(
            "the store answered {} decisions for {} limits",
            decided.len(),
            counts.iter().sum::<usize>()
        )));
    }
    let mut rest = decided.into_iter();
    let mut out = Vec::with_capacity(counts.len());
    for &count in counts {
        let group: Vec<Decided> = rest.by_ref().take(count).collect();
        let candidate = group.first().and_then(|d| d.candidate);
        let decisions: Vec<Decision> = group.iter().map(|d| d.decision).collect();
        let Some(decision) = bind(&decisions) else {
            return Err(StoreError::Backend(
                "a stacked check got no decision".into(),
            ));
        };
        out.push(Decided {
            decision,
            candidate,
        });
    }
    Ok(out)
}

/// The decision of a check from its limits' (module doc).
fn bind(decisions: &[Decision]) -> Option<Decision> {
    let bound = decisions.iter().min_by(|a, b| {
        a.remaining
            .cmp(&b.remaining)
            .then(b.reset_ms.cmp(&a.reset_ms))
    })?;
    let allowed = decisions.iter().all(|d| d.allowed);
    Some(Decision {
        allowed,
        retry_after_ms: if allowed {
            0
        } else {
            decisions
                .iter()
                .map(|d| d.retry_after_ms)
                .max()
                .unwrap_or(0)
        },
        debt: decisions.iter().map(|d| d.debt).max().unwrap_or(0),
        // Queueing delays are leaky_bucket's, whose every limit queues: the longest.
        delay_ms: decisions.iter().map(|d| d.delay_ms).max().unwrap_or(0),
        ..*bound
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, remaining: u64, reset_ms: u64, retry_after_ms: u64) -> Decision {
        Decision {
            allowed,
            limit: 10,
            remaining,
            debt: 0,
            reset_ms,
            retry_after_ms,
            delay_ms: 0,
        }
    }

    #[test]
    fn the_least_remaining_binds_and_the_longest_wait_is_waited() {
        let second = decision(true, 3, 1_000, 0);
        let minute = decision(false, 2, 60_000, 30_000);
        let bound = bind(&[second, minute]).unwrap();
        assert!(!bound.allowed);
        assert_eq!((bound.remaining, bound.reset_ms), (2, 60_000));
        assert_eq!(bound.retry_after_ms, 30_000);
        // A tie on remaining: the later reset.
        let tie = bind(&[decision(true, 0, 1_000, 0), decision(true, 0, 9_000, 0)]).unwrap();
        assert_eq!(tie.reset_ms, 9_000);
        assert!(tie.allowed);
        // Denied by the short limit, whose wait is then the longest.
        let short = bind(&[decision(false, 0, 1_000, 400), decision(true, 5, 60_000, 0)]).unwrap();
        assert_eq!((short.remaining, short.retry_after_ms), (0, 400));
    }
}
