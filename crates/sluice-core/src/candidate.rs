//! A candidate limit judged beside the limit in force: the same check, on a state of its own,
//! consumed when the candidate alone would allow. A check is valid for the limit in force,
//! not necessarily for the candidate: a cost beyond the candidate's capacity is no error, the
//! candidate "would reject" it. Every store (memory, Redis, Redis Cluster) and the access-log
//! replay judge candidates by these rules, so a candidate means the same thing wherever it is
//! judged.

use crate::decision::Decision;
use crate::params::Params;
use crate::state::State;

/// The cost a candidate judges a check of `cost` at: the cost itself, or 0 (a peek of its
/// state) when the cost exceeds the largest the candidate takes ([`Params::max_cost`]: its
/// capacity, or any hit count when it counts every hit): the candidate then "would reject"
/// ([`candidate_decision`]), and the caller, whose check was valid for the limit in force,
/// gets no error for it.
pub fn candidate_cost(cost: u64, candidate: &Params) -> u64 {
    if cost > candidate.max_cost() { 0 } else { cost }
}

/// The candidate's decision from what its state answered for [`candidate_cost`]: for a cost
/// beyond its [`max_cost`](Params::max_cost), a rejection describing the state as the peek found it (it never
/// passes, so no `retry_after`).
pub fn candidate_decision(cost: u64, candidate: &Params, answered: Decision) -> Decision {
    if cost > candidate.max_cost() {
        Decision {
            allowed: false,
            retry_after_ms: 0,
            delay_ms: 0,
            ..answered
        }
    } else {
        answered
    }
}

/// Judges a check of `cost` at `now_ms` by `candidate` on its own `state`: [`decide`] at
/// [`candidate_cost`], answered as [`candidate_decision`] says. Never an error.
///
/// [`decide`]: crate::decide
pub fn judge(candidate: &Params, state: &mut State, now_ms: u64, cost: u64) -> Decision {
    let answered = crate::decide_valid(candidate, state, now_ms, candidate_cost(cost, candidate));
    candidate_decision(cost, candidate, answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Algorithm;

    #[test]
    fn a_cost_beyond_the_candidates_capacity_peeks_and_would_reject() {
        let candidate = Params {
            algorithm: Algorithm::FixedWindow,
            limit: 3,
            window_ms: 1000,
            burst: 3,
            counting: crate::Counting::Admitted,
            calendar: None,
        };
        let mut state = State::Fresh;
        let judged = judge(&candidate, &mut state, 0, 5);
        assert!(!judged.allowed);
        assert_eq!((judged.remaining, judged.retry_after_ms), (3, 0));
        // Nothing was consumed: the whole capacity is still there.
        assert!(judge(&candidate, &mut state, 0, 3).allowed);
        assert!(!judge(&candidate, &mut state, 0, 1).allowed);
    }
}
