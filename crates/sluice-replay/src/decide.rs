//! One line decided on a key's states exactly as the daemon decides the check it stands for:
//! one limit as `sluice_core::decide` answers it; stacked limits (`limits = [...]`) each on
//! its own state, allowed only when every one allows, all or none consuming (decided on
//! copies, committed when all allowed, as the stores' one script call or one locked batch
//! does); and a usage policy's line as a check that asks (cost 0: allowed while every limit
//! has at least 1 left) followed, when allowed, by a charge of the line's cost, which goes
//! into debt when it must. `sluice_core` handles calendar windows itself.

use sluice_core::{Mode, State, decide_with};

use crate::input::LimitSpec;

/// What a line's check answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub allowed: bool,
    /// Bit `i` set: limit `i` of the stack denied (a cost beyond its capacity included).
    pub denied: u8,
}

/// Decides a check of `cost` at `at_ms` against `limits` (1 to
/// [`crate::input::MAX_STACKED`], the first's state
/// `first`, the others' `rest`, grown to fit). `scratch` holds the copies between lines.
pub(crate) fn decide_line(
    limits: &[LimitSpec],
    usage: bool,
    states: (&mut State, &mut Vec<State>),
    scratch: &mut Vec<State>,
    at_ms: u64,
    cost: u64,
) -> Outcome {
    let (first, rest) = states;
    // A usage policy's check asks with a cost of 0; what the request used is charged after.
    let (check_mode, check_cost) = if usage {
        (Mode::Ask, 0)
    } else {
        (Mode::Consume, cost)
    };
    let outcome = match limits {
        [only] => {
            let allowed = allowed(only, first, at_ms, check_cost, check_mode);
            Outcome {
                allowed,
                denied: u8::from(!allowed),
            }
        }
        _ => {
            if rest.len() + 1 < limits.len() {
                rest.resize_with(limits.len() - 1, State::default);
            }
            scratch.clear();
            scratch.push(first.clone());
            scratch.extend(rest.iter().take(limits.len() - 1).cloned());
            let mut denied = 0u8;
            for (i, (limit, copy)) in limits.iter().zip(scratch.iter_mut()).enumerate() {
                if !allowed(limit, copy, at_ms, check_cost, check_mode) {
                    denied |= 1 << i;
                }
            }
            if denied == 0 {
                let mut copies = scratch.drain(..);
                if let Some(copy) = copies.next() {
                    *first = copy;
                }
                for (state, copy) in rest.iter_mut().zip(copies) {
                    *state = copy;
                }
            }
            Outcome {
                allowed: denied == 0,
                denied,
            }
        }
    };
    if usage && outcome.allowed && cost > 0 {
        // The charge debits every limit whatever its room; it cannot be refused for an
        // algorithm that carries a debt, which the replay's checks require of usage policies.
        let states = std::iter::once(first).chain(rest.iter_mut());
        for (limit, state) in limits.iter().zip(states) {
            let _ = decide_with(limit, state, at_ms, cost, Mode::Charge);
        }
    }
    outcome
}

/// Whether one limit allows; a check the core refuses (a cost beyond the capacity) does not.
fn allowed(limit: &LimitSpec, state: &mut State, at_ms: u64, cost: u64, mode: Mode) -> bool {
    decide_with(limit, state, at_ms, cost, mode).is_ok_and(|d| d.allowed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use sluice_core::{Algorithm, Params};

    use super::*;

    fn fixed(limit: u64, window_ms: u64) -> Params {
        Params::new(Algorithm::FixedWindow, limit, window_ms, limit).unwrap()
    }

    #[test]
    fn stacked_limits_consume_all_or_nothing() {
        // 2 a second and 3 a minute: the third request of second 0 is denied by the first
        // limit alone and consumes nothing from the second, so second 1 still has 1 of the
        // minute's 3 left after its first request, and the next is denied by the minute.
        let limits = [fixed(2, 1000), fixed(3, 60_000)];
        let (mut first, mut rest, mut scratch) = (State::default(), Vec::new(), Vec::new());
        let mut run = |at_ms| {
            decide_line(
                &limits,
                false,
                (&mut first, &mut rest),
                &mut scratch,
                at_ms,
                1,
            )
        };
        let answers: Vec<Outcome> = [0, 10, 20, 1000, 1010].into_iter().map(&mut run).collect();
        let allowed: Vec<bool> = answers.iter().map(|o| o.allowed).collect();
        assert_eq!(allowed, [true, true, false, true, false]);
        assert_eq!(answers[2].denied, 0b01);
        assert_eq!(answers[4].denied, 0b10);
    }

    #[test]
    fn a_usage_line_asks_then_charges_into_debt() {
        let limits = [Params::new(Algorithm::FixedWindow, 100, 60_000, 100).unwrap()];
        let (mut first, mut rest, mut scratch) = (State::default(), Vec::new(), Vec::new());
        let mut run = |at_ms, cost| {
            decide_line(
                &limits,
                true,
                (&mut first, &mut rest),
                &mut scratch,
                at_ms,
                cost,
            )
            .allowed
        };
        // 40 tokens each: the third is allowed (40 left) and charged into a debt of 20, so
        // the fourth is denied; a cost above the limit is charged, not refused.
        assert!(run(0, 40) && run(1, 40) && run(2, 40));
        assert!(!run(3, 40));
        assert!(run(60_000, 500));
        assert!(!run(60_001, 1));
    }
}
