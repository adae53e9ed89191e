//! fixed_window: a counter per aligned window. Cheap and loose: a client can pass `limit` at
//! the end of one window and `limit` again at the start of the next (2x at the boundary).
//!
//! With [`Counting::EveryHit`] (envoyproxy/ratelimit's rule) every hit is counted, the denied
//! ones too, and a check is denied when the count after it exceeds the limit.

use crate::{Counting, Decision, MAX_EXACT, Params};

pub(super) fn decide(
    p: &Params,
    window: &mut u64,
    count: &mut u64,
    now: u64,
    cost: u64,
) -> Decision {
    let w = p.window_ms;
    // A clock behind the stored window keeps counting in the stored window: no fresh quota.
    let index = (now / w).max(*window);
    if index != *window {
        *window = index;
        *count = 0;
    }
    let allowed = match p.counting {
        Counting::Admitted => {
            let allowed = count.saturating_add(cost) <= p.limit;
            if allowed {
                *count += cost;
            }
            allowed
        }
        // Counts stay exact in a Lua double: capped at 2^53, far above any limit.
        Counting::EveryHit if cost > 0 => {
            *count = count.saturating_add(cost).min(MAX_EXACT);
            *count <= p.limit
        }
        // A question only: is anything left?
        Counting::EveryHit => *count < p.limit,
    };
    let window_end = index.saturating_add(1).saturating_mul(w);
    Decision {
        allowed,
        limit: p.limit,
        remaining: p.limit.saturating_sub(*count),
        reset_ms: if *count == 0 { now } else { window_end },
        retry_after_ms: if allowed {
            0
        } else {
            window_end.saturating_sub(now)
        },
        delay_ms: 0,
    }
}
