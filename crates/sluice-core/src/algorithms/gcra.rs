//! gcra and leaky_bucket: the generic cell rate algorithm keeps one "theoretical arrival time"
//! per key. As a meter (gcra) it is a token bucket in one number; as a queue (leaky_bucket) it
//! also tells each admitted request how long to wait so the outflow is uniform at
//! `limit / window`, with at most `burst` requests queued.
//!
//! Times are `tat_ms + tat_rem / limit` milliseconds: one request advances the arrival time by
//! `window_ms / limit` ms, which is `window_ms` units of `1 / limit` ms, so nothing is rounded.

use crate::{Algorithm, Decision, Params};

pub(super) fn decide(
    p: &Params,
    tat_ms: &mut u64,
    tat_rem: &mut u64,
    now: u64,
    cost: u64,
) -> Decision {
    let cap = p.burst * p.window_ms;
    // A lowered limit (config reload) leaves a remainder past the new unit: keep it in range.
    *tat_rem = (*tat_rem).min(p.limit - 1);
    // The queue ahead of `now`, in units of 1/limit ms. A clock behind the last check sees a
    // longer queue, never a shorter one.
    let debt = if *tat_ms < now {
        0
    } else {
        (*tat_ms - now)
            .saturating_mul(p.limit)
            .saturating_add(*tat_rem)
    };
    let new_debt = debt.saturating_add(cost * p.window_ms);
    let allowed = new_debt <= cap;
    if allowed && cost > 0 {
        *tat_ms = now.saturating_add(new_debt / p.limit);
        *tat_rem = new_debt % p.limit;
    }
    let after = if allowed { new_debt } else { debt };
    Decision {
        allowed,
        limit: p.limit,
        remaining: cap.saturating_sub(after) / p.window_ms,
        reset_ms: now.saturating_add(after.div_ceil(p.limit)),
        retry_after_ms: if allowed {
            0
        } else {
            (new_debt - cap).div_ceil(p.limit)
        },
        delay_ms: if allowed && p.algorithm == Algorithm::LeakyBucket {
            debt.div_ceil(p.limit)
        } else {
            0
        },
    }
}
