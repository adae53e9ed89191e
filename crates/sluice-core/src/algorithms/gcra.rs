//! gcra and leaky_bucket: the generic cell rate algorithm keeps one "theoretical arrival time"
//! per key. As a meter (gcra) it is a token bucket in one number; as a queue (leaky_bucket) it
//! also tells each admitted request how long to wait so the outflow is uniform at
//! `limit / window`, with at most `burst` requests queued.
//!
//! Times are `tat_ms + tat_rem / limit` milliseconds: one request advances the arrival time by
//! `window_ms / limit` ms, which is `window_ms` units of `1 / limit` ms, so nothing is rounded.

use crate::mode::{MAX_BALANCE, Plan, remaining_and_debt};
use crate::{Algorithm, Decision, Params};

pub(super) fn decide(
    p: &Params,
    tat_ms: &mut u64,
    tat_rem: &mut u64,
    now: u64,
    plan: Plan,
) -> Decision {
    let cap = p.burst * p.window_ms;
    // A lowered limit (config reload) leaves a remainder past the new unit: keep it in range.
    *tat_rem = (*tat_rem).min(p.limit - 1);
    // The queue ahead of `now`, in units of 1/limit ms. A clock behind the last check sees a
    // longer queue, never a shorter one.
    let held = if *tat_ms < now {
        0
    } else {
        (*tat_ms - now)
            .saturating_mul(p.limit)
            .saturating_add(*tat_rem)
    };
    // A charge pushes the arrival time past the burst: the debt is carried forward, repaid
    // as time catches up with it.
    let adjusted = plan.adjust(held, p.window_ms, MAX_BALANCE);
    if plan.add > 0 || plan.sub > 0 {
        set(p, tat_ms, tat_rem, now, adjusted);
    }
    // `need <= cap` (checked by `decide`): no intermediate exceeds the balance.
    let room = cap.saturating_sub(plan.need * p.window_ms);
    let allowed = adjusted <= room;
    let after = if allowed {
        adjusted + plan.take * p.window_ms
    } else {
        adjusted
    };
    if allowed && plan.take > 0 {
        set(p, tat_ms, tat_rem, now, after);
    }
    let (remaining, debt) = remaining_and_debt(cap, after, p.window_ms);
    Decision {
        allowed,
        limit: p.limit,
        remaining,
        debt,
        reset_ms: now.saturating_add(after.div_ceil(p.limit)),
        retry_after_ms: if allowed {
            0
        } else {
            (adjusted - room).div_ceil(p.limit)
        },
        // Each admitted request waits out the queue ahead of it.
        delay_ms: if allowed && p.algorithm == Algorithm::LeakyBucket {
            adjusted.div_ceil(p.limit)
        } else {
            0
        },
    }
}

/// Sets the arrival time `ahead` units of 1/limit ms after `now`.
fn set(p: &Params, tat_ms: &mut u64, tat_rem: &mut u64, now: u64, ahead: u64) {
    *tat_ms = now.saturating_add(ahead / p.limit);
    *tat_rem = ahead % p.limit;
}
