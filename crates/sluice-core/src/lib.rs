//! The rate-limit algorithms of sluice as pure code.
//!
//! Every algorithm is a function of `(params, state, now, cost)`: the caller owns the state and
//! the clock, so the same sequence of `(time, cost)` gives the same decisions whether the state
//! lives in process memory or in Redis (where the Lua scripts mirror this arithmetic exactly).
//!
//! Time is unix milliseconds (`u64`). All arithmetic is integer and stays below 2^53 for every
//! valid [`Params`], the largest integer a Lua (double) number holds exactly, so a Redis script
//! can reproduce it bit for bit.
//!
//! Beside the algorithms: [`candidate`], how a candidate limit is judged beside the limit in
//! force (by every store and by the access-log replay alike); [`SplitMix`], the one
//! pseudo-random generator of the workspace; and, with the feature `conformance`,
//! [`conformance`](mod@conformance), the table every backend must answer (test data, enabled
//! by the tests that replay it).

mod algorithms;
pub mod calendar;
pub mod candidate;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod decision;
mod mode;
mod params;
mod splitmix;
mod state;

pub use calendar::{Calendar, CalendarUnit};
pub use candidate::{candidate_cost, candidate_decision, judge};
pub use decision::{CheckError, Decision};
pub use mode::{MAX_BALANCE, Mode};
pub use params::{
    Algorithm, Counting, MAX_EVERY_HIT_COST, MAX_EXACT, MAX_LOG_LIMIT, Params, ParamsError,
};
pub use splitmix::SplitMix;
pub use state::{LogEntry, State};

/// Decides one check of `cost` at `now_ms` against `state`, consuming from it when allowed.
///
/// `cost == 0` peeks: it reports the state and consumes nothing. A state of another algorithm
/// than `params.algorithm` (the policy changed algorithm) is replaced by a fresh one.
/// Time that goes backwards is treated as the latest time the state has seen, so clock skew
/// between hosts neither panics nor grants extra quota.
pub fn decide(
    params: &Params,
    state: &mut State,
    now_ms: u64,
    cost: u64,
) -> Result<Decision, CheckError> {
    decide_with(params, state, now_ms, cost, Mode::Consume)
}

/// [`decide`] in any [`Mode`]: an ask (allowed while `max(cost, 1)` fits, consuming `cost`),
/// a charge (adds `cost` whatever the room, the balance going into debt when it must) or a
/// refund (gives `cost` back, never above full). A charge or refund answers as an ask of 0
/// would afterwards: allowed while the key has at least 1 left; `debt` says what it owes.
///
/// Only algorithms that can carry a debt ([`Algorithm::carries_debt`]) take a charge or a
/// refund.
pub fn decide_with(
    params: &Params,
    state: &mut State,
    now_ms: u64,
    cost: u64,
    mode: Mode,
) -> Result<Decision, CheckError> {
    validate_check(params, cost, mode)?;
    if !state.fits(params.algorithm) {
        *state = State::Fresh;
    }
    Ok(algorithms::decide(params, state, now_ms, mode.plan(cost)))
}

/// What [`decide_with`] refuses, asked without deciding: a cost that must fit beyond the
/// capacity (it never could), or a charge or refund on an algorithm that carries no debt. A
/// store that decides elsewhere (a Redis script) asks this before sending.
pub fn validate_check(params: &Params, cost: u64, mode: Mode) -> Result<(), CheckError> {
    // Counting every hit (envoyproxy/ratelimit's rule) has no notion of a debt either.
    if mode.adjusts() && (!params.algorithm.carries_debt() || params.counting == Counting::EveryHit)
    {
        return Err(CheckError::NoDebt {
            algorithm: params.algorithm,
        });
    }
    let capacity = params.max_cost();
    let need = mode.plan(cost).need;
    if need > capacity {
        return Err(CheckError::CostExceedsCapacity {
            cost: need,
            capacity,
        });
    }
    Ok(())
}

/// [`decide`] for a `cost` known to be within `params.capacity()`.
fn decide_valid(params: &Params, state: &mut State, now_ms: u64, cost: u64) -> Decision {
    if !state.fits(params.algorithm) {
        *state = State::Fresh;
    }
    algorithms::decide(params, state, now_ms, Mode::Consume.plan(cost))
}

/// Requests of cost 1 that would pass at `now_ms`: what a peek (`cost == 0`) of
/// [`decide`] answers as `remaining`, without touching the state. At most
/// [`Params::capacity`], which a fresh key (or one of another algorithm) has; 0 for a key that
/// has used up its limit. A store that must forget keys asks this to forget first the ones
/// whose loss gives away least.
pub fn remaining(params: &Params, state: &State, now_ms: u64) -> u64 {
    if !state.fits(params.algorithm) {
        return params.capacity();
    }
    algorithms::remaining(params, state, now_ms)
}

/// Unix milliseconds at which `state` is indistinguishable from a fresh one, so a store may
/// forget it (its TTL). Never more than `max(2 windows, time to refill a bucket)` after the
/// last check.
pub fn expires_at(params: &Params, state: &State) -> u64 {
    algorithms::expires_at(params, state)
}
