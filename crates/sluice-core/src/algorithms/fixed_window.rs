//! fixed_window: a counter per aligned window. Cheap and loose: a client can pass `limit` at
//! the end of one window and `limit` again at the start of the next (2x at the boundary).
//!
//! With [`Counting::EveryHit`] (envoyproxy/ratelimit's rule) every hit is counted, the denied
//! ones too, and a check is denied when the count after it exceeds the limit.

use crate::mode::{MAX_BALANCE, Plan, remaining_and_debt};
use crate::{Counting, Decision, MAX_EXACT, Params};

pub(super) fn decide(
    p: &Params,
    window: &mut u64,
    count: &mut u64,
    now: u64,
    plan: Plan,
) -> Decision {
    let w = p.window_ms;
    // A clock behind the stored window keeps counting in the stored window: no fresh quota.
    let index = (now / w).max(*window);
    if index != *window {
        *window = index;
        *count = 0;
    }
    let allowed = match p.counting {
        // Counts stay exact in a Lua double: capped at 2^53, far above any limit.
        Counting::EveryHit if plan.take > 0 => {
            *count = count.saturating_add(plan.take).min(MAX_EXACT);
            *count <= p.limit
        }
        // With nothing to count, a question only: is anything left?
        Counting::EveryHit => *count < p.limit,
        Counting::Admitted => {
            // A charge counts in the window it was charged in, beyond the limit if need be.
            *count = plan.adjust(*count, 1, MAX_BALANCE);
            let allowed = *count <= p.limit.saturating_sub(plan.need);
            if allowed {
                *count += plan.take;
            }
            allowed
        }
    };
    let (remaining, debt) = match p.counting {
        Counting::Admitted => remaining_and_debt(p.limit, *count, 1),
        // Hits past the limit are counted, not owed.
        Counting::EveryHit => (p.limit.saturating_sub(*count), 0),
    };
    let window_end = index.saturating_add(1).saturating_mul(w);
    Decision {
        allowed,
        limit: p.limit,
        remaining,
        debt,
        reset_ms: if *count == 0 { now } else { window_end },
        retry_after_ms: if allowed {
            0
        } else {
            window_end.saturating_sub(now)
        },
        delay_ms: 0,
    }
}
