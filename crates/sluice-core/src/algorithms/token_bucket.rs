//! token_bucket: a bucket of `burst` tokens refilled at `limit` per `window`. Allows bursts up
//! to the bucket size, then the refill rate; the usual choice for public APIs and SDK clients.
//!
//! The state is what has been taken out of the bucket (not what is left in it), so raising a
//! limit or a burst at run time gives the new room at once while keeping what was consumed.
//! It is kept in units of `1 / window_ms` token, so a millisecond refills exactly `limit`
//! units and no fraction is ever rounded.

use crate::{Decision, Params};

/// Unix ms at which a bucket missing `used` units as of `last_ms` is full again.
pub(super) fn full_at(p: &Params, used: u64, last_ms: u64) -> u64 {
    last_ms.saturating_add(used.div_ceil(p.limit))
}

pub(super) fn decide(
    p: &Params,
    used: &mut u64,
    last_ms: &mut u64,
    now: u64,
    cost: u64,
) -> Decision {
    let cap = p.burst * p.window_ms;
    // A clock behind the last check refills nothing.
    let now = now.max(*last_ms);
    let refill = (now - *last_ms).saturating_mul(p.limit);
    *used = used.saturating_sub(refill);
    *last_ms = now;
    let need = cost * p.window_ms;
    let allowed = used.saturating_add(need) <= cap;
    if allowed {
        *used += need;
    }
    Decision {
        allowed,
        limit: p.limit,
        remaining: cap.saturating_sub(*used) / p.window_ms,
        reset_ms: full_at(p, *used, now),
        retry_after_ms: if allowed {
            0
        } else {
            (*used + need - cap).div_ceil(p.limit)
        },
        delay_ms: 0,
    }
}
