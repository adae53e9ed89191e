//! sliding_window_counter: two aligned window counters, the previous one weighted by how much
//! of it still overlaps the sliding window. Constant memory, close to a sliding log, no 2x
//! boundary burst.

use crate::mode::{MAX_BALANCE, Plan, remaining_and_debt};
use crate::{Decision, Params};

pub(super) fn decide(
    p: &Params,
    window: &mut u64,
    current: &mut u64,
    previous: &mut u64,
    now: u64,
    plan: Plan,
) -> Decision {
    let w = p.window_ms;
    // A clock behind the stored window is read as the stored window's start, where the
    // previous window weighs most: no fresh quota.
    let now = now.max(window.saturating_mul(w));
    let index = now / w;
    if index == window.saturating_add(1) {
        *previous = *current;
        *current = 0;
    } else if index > *window {
        *previous = 0;
        *current = 0;
    }
    *window = index;
    let start = index * w;
    let elapsed = now - start;
    // A charge counts in the window it was charged in (and, weighted, in the next one); the
    // ceiling keeps `previous * w` exact in a Lua double.
    *current = plan.adjust(*current, 1, MAX_BALANCE / w);
    let mut used = weighted(*previous, elapsed, w).saturating_add(*current);
    let allowed = used <= p.limit.saturating_sub(plan.need);
    if allowed {
        *current += plan.take;
        used += plan.take;
    }
    let need = plan.need;

    let next_start = start.saturating_add(w);
    let reset_ms = if *current > 0 {
        next_start.saturating_add(decay_point(*current, 0, w))
    } else if *previous > 0 {
        start.saturating_add(decay_point(*previous, 0, w)).max(now)
    } else {
        now
    };
    let retry_after_ms = if allowed {
        0
    } else if *current <= p.limit - need {
        let room = p.limit - *current - need;
        start
            .saturating_add(decay_point(*previous, room, w))
            .saturating_sub(now)
    } else {
        next_start
            .saturating_add(decay_point(*current, p.limit - need, w))
            .saturating_sub(now)
    };
    let (remaining, debt) = remaining_and_debt(p.limit, used, 1);
    Decision {
        allowed,
        limit: p.limit,
        remaining,
        debt,
        reset_ms,
        retry_after_ms,
        delay_ms: 0,
    }
}

/// The previous window's count as seen `elapsed` ms into the current window.
fn weighted(previous: u64, elapsed: u64, w: u64) -> u64 {
    previous.saturating_mul(w - elapsed) / w
}

/// The first `elapsed` in `0..=w` at which `weighted(previous, elapsed, w) <= room`.
fn decay_point(previous: u64, room: u64, w: u64) -> u64 {
    if previous <= room {
        return 0;
    }
    // weighted <= room  <=>  previous * (w - e) <= (room + 1) * w - 1
    let span = (room + 1).saturating_mul(w) - 1;
    w - span / previous
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_point_is_the_first_instant_at_or_under_room() {
        for w in [1u64, 7, 1000] {
            for previous in 0..20u64 {
                for room in 0..20u64 {
                    let e = decay_point(previous, room, w);
                    assert!(e <= w);
                    assert!(weighted(previous, e.min(w), w) <= room || e == w);
                    if e > 0 && e <= w {
                        assert!(weighted(previous, e - 1, w) > room);
                    }
                }
            }
        }
    }
}
