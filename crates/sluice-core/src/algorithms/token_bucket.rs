//! token_bucket: a bucket of `burst` tokens refilled at `limit` per `window`. Allows bursts up
//! to the bucket size, then the refill rate; the usual choice for public APIs and SDK clients.
//!
//! The state is what has been taken out of the bucket (not what is left in it), so raising a
//! limit or a burst at run time gives the new room at once while keeping what was consumed.
//! It is kept in units of `1 / window_ms` token, so a millisecond refills exactly `limit`
//! units and no fraction is ever rounded.

use crate::mode::{MAX_BALANCE, Plan, remaining_and_debt};
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
    plan: Plan,
) -> Decision {
    let cap = p.burst * p.window_ms;
    // A clock behind the last check refills nothing.
    let now = now.max(*last_ms);
    let refill = (now - *last_ms).saturating_mul(p.limit);
    *used = used.saturating_sub(refill);
    *last_ms = now;
    // A charge may take out more than the bucket holds: the debt is carried forward and the
    // refill repays it before the key is allowed again.
    *used = plan.adjust(*used, p.window_ms, MAX_BALANCE);
    // `need <= cap` (checked by `decide`): no intermediate exceeds the balance, so the
    // arithmetic is exact in a Lua double too.
    let room = cap.saturating_sub(plan.need * p.window_ms);
    let allowed = *used <= room;
    if allowed {
        *used += plan.take * p.window_ms;
    }
    let (remaining, debt) = remaining_and_debt(cap, *used, p.window_ms);
    Decision {
        allowed,
        limit: p.limit,
        remaining,
        debt,
        reset_ms: full_at(p, *used, now),
        retry_after_ms: if allowed {
            0
        } else {
            (*used - room).div_ceil(p.limit)
        },
        delay_ms: 0,
    }
}
