//! Dispatch from a policy's algorithm to its arithmetic. Each submodule holds one algorithm;
//! this module only turns a fresh state into that algorithm's initial state.

mod fixed_window;
mod gcra;
mod sliding_window_counter;
mod sliding_window_log;
mod token_bucket;

use std::collections::VecDeque;

use crate::mode::Plan;
use crate::{Algorithm, Decision, Mode, Params, State};

pub(crate) fn decide(params: &Params, state: &mut State, now: u64, plan: Plan) -> Decision {
    if let Some(calendar) = params.calendar {
        // The calendar window holding `now`, as window `index` of a uniform frame.
        let frame = calendar.frame(now);
        let uniform = Params {
            window_ms: frame.window_ms(),
            calendar: None,
            ..*params
        };
        let mut decision = decide(&uniform, state, frame.to_uniform(now), plan);
        decision.reset_ms = frame.to_real(decision.reset_ms);
        return decision;
    }
    if matches!(state, State::Fresh) {
        *state = initial(params, now);
    }
    match state {
        State::FixedWindow { window, count } => {
            fixed_window::decide(params, window, count, now, plan)
        }
        State::SlidingWindowCounter {
            window,
            current,
            previous,
        } => sliding_window_counter::decide(params, window, current, previous, now, plan),
        State::SlidingWindowLog { log, used } => {
            sliding_window_log::decide(params, log, used, now, plan)
        }
        State::TokenBucket { used, last_ms } => {
            token_bucket::decide(params, used, last_ms, now, plan)
        }
        State::Gcra { tat_ms, tat_rem } => gcra::decide(params, tat_ms, tat_rem, now, plan),
        // `initial` never returns Fresh; answering as an empty fixed window keeps this total.
        State::Fresh => fixed_window::decide(params, &mut 0, &mut 0, now, plan),
    }
}

/// What a peek at `now` answers as `remaining`, the state untouched. Every state but the log
/// is a few integers, so a peek on a copy is the arithmetic itself; the log would be copied
/// whole, so it is read in place.
pub(crate) fn remaining(params: &Params, state: &State, now: u64) -> u64 {
    match state {
        State::SlidingWindowLog { log, used } => {
            sliding_window_log::remaining(params, log, *used, now)
        }
        _ => decide(params, &mut state.clone(), now, Mode::Consume.plan(0)).remaining,
    }
}

pub(crate) fn expires_at(params: &Params, state: &State) -> u64 {
    let w = params.window_ms;
    match state {
        State::Fresh => 0,
        State::FixedWindow { window, count } => match (*count, params.calendar) {
            (0, _) => 0,
            (_, Some(calendar)) => calendar.frame_of(*window).end_ms,
            _ => window.saturating_add(1).saturating_mul(w),
        },
        State::SlidingWindowCounter {
            window,
            current,
            previous,
        } => {
            if *current > 0 {
                window.saturating_add(2).saturating_mul(w)
            } else if *previous > 0 {
                window.saturating_add(1).saturating_mul(w)
            } else {
                0
            }
        }
        State::SlidingWindowLog { log, .. } => {
            log.back().map_or(0, |entry| entry.at_ms.saturating_add(w))
        }
        State::TokenBucket { used, last_ms } => token_bucket::full_at(params, *used, *last_ms),
        State::Gcra { tat_ms, tat_rem } => tat_ms.saturating_add(u64::from(*tat_rem > 0)),
    }
}

fn initial(params: &Params, now: u64) -> State {
    let w = params.window_ms;
    match params.algorithm {
        Algorithm::FixedWindow => State::FixedWindow {
            window: now / w,
            count: 0,
        },
        Algorithm::SlidingWindowCounter => State::SlidingWindowCounter {
            window: now / w,
            current: 0,
            previous: 0,
        },
        Algorithm::SlidingWindowLog => State::SlidingWindowLog {
            log: Box::new(VecDeque::new()),
            used: 0,
        },
        Algorithm::TokenBucket => State::TokenBucket {
            used: 0,
            last_ms: now,
        },
        Algorithm::LeakyBucket | Algorithm::Gcra => State::Gcra {
            tat_ms: now,
            tat_rem: 0,
        },
    }
}
