//! sliding_window_log: every admitted request is remembered for one window, so no span of
//! `window` ever admits more than `limit`. Exact, at the price of memory per request.

use std::collections::VecDeque;

use crate::mode::Plan;
use crate::{Decision, LogEntry, Params};

/// What [`decide`] answers as `remaining` for a peek at `now`, reading the log in place: the
/// entries that have left the window no longer count.
pub(super) fn remaining(p: &Params, log: &VecDeque<LogEntry>, used: u64, now: u64) -> u64 {
    let now = now.max(log.back().map_or(0, |entry| entry.at_ms));
    let left: u64 = log
        .iter()
        .take_while(|entry| entry.at_ms.saturating_add(p.window_ms) <= now)
        .map(|entry| entry.cost)
        .sum();
    p.limit.saturating_sub(used.saturating_sub(left))
}

pub(super) fn decide(
    p: &Params,
    log: &mut VecDeque<LogEntry>,
    used: &mut u64,
    now: u64,
    plan: Plan,
) -> Decision {
    // A log carries no debt (`decide` refuses a charge on it): only `need` and `take` apply.
    let (need, cost) = (plan.need, plan.take);
    let w = p.window_ms;
    // A clock behind the newest entry is read as that entry's time: no entry expires early.
    let now = now.max(log.back().map_or(0, |entry| entry.at_ms));
    while let Some(oldest) = log.front() {
        if oldest.at_ms.saturating_add(w) > now {
            break;
        }
        *used = used.saturating_sub(oldest.cost);
        log.pop_front();
    }
    let allowed = used.saturating_add(need) <= p.limit;
    if allowed && cost > 0 {
        *used += cost;
        match log.back_mut() {
            Some(newest) if newest.at_ms == now => newest.cost += cost,
            _ => log.push_back(LogEntry { at_ms: now, cost }),
        }
    }
    let retry_after_ms = if allowed {
        0
    } else {
        // Wait for the oldest entries to leave the window until this cost fits.
        let needed = *used + need - p.limit;
        let mut freed = 0;
        let mut at = now;
        for entry in log.iter() {
            freed += entry.cost;
            at = entry.at_ms.saturating_add(w);
            if freed >= needed {
                break;
            }
        }
        at.saturating_sub(now)
    };
    Decision {
        allowed,
        limit: p.limit,
        remaining: p.limit.saturating_sub(*used),
        debt: 0,
        reset_ms: log
            .back()
            .map_or(now, |entry| entry.at_ms.saturating_add(w)),
        retry_after_ms,
        delay_ms: 0,
    }
}
