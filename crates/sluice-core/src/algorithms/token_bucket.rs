//! token_bucket: a bucket of `burst` tokens refilled at `limit` per `window`. Allows bursts up
//! to the bucket size, then the refill rate; the usual choice for public APIs and SDK clients.
//!
//! The level is kept in units of `1 / window_ms` token, so a millisecond refills exactly
//! `limit` units and no fraction is ever rounded.

use crate::{Decision, Params};

pub(super) fn capacity_units(p: &Params) -> u64 {
    p.burst * p.window_ms
}

/// Unix ms at which a bucket at `level` as of `last_ms` is full again.
pub(super) fn full_at(p: &Params, level: u64, last_ms: u64) -> u64 {
    let missing = capacity_units(p).saturating_sub(level);
    last_ms.saturating_add(missing.div_ceil(p.limit))
}

pub(super) fn decide(p: &Params, level: &mut u64, last_ms: &mut u64, now: u64, cost: u64) -> Decision {
    let cap = capacity_units(p);
    // A clock behind the last check refills nothing.
    let now = now.max(*last_ms);
    let refill = (now - *last_ms).saturating_mul(p.limit);
    *level = level.saturating_add(refill).min(cap);
    *last_ms = now;
    let need = cost * p.window_ms;
    let allowed = *level >= need;
    if allowed {
        *level -= need;
    }
    Decision {
        allowed,
        limit: p.limit,
        remaining: *level / p.window_ms,
        reset_ms: full_at(p, *level, now),
        retry_after_ms: if allowed {
            0
        } else {
            (need - *level).div_ceil(p.limit)
        },
        delay_ms: 0,
    }
}
