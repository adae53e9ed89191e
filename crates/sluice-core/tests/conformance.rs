//! The core itself must answer its own conformance table: the hand-checked expectations are
//! the independent statement of what each algorithm means.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use sluice_core::conformance::{cases, generated_cases, generated_usage_cases, usage_cases};
use sluice_core::{Mode, State, decide_with};

#[test]
fn the_core_answers_every_hand_checked_case() {
    for case in cases().into_iter().chain(usage_cases()) {
        let mut state = State::Fresh;
        for (i, step) in case.steps.iter().enumerate() {
            let got =
                decide_with(&case.params, &mut state, step.at_ms, step.cost, step.mode).unwrap();
            assert_eq!(got, step.expect, "{}: step {i} ({step:?})", case.name);
        }
    }
}

#[test]
fn generated_cases_are_deterministic_and_cover_every_algorithm() {
    let a = generated_cases(7, 50);
    let b = generated_cases(7, 50);
    assert_eq!(a, b);
    for algorithm in sluice_core::Algorithm::ALL {
        assert!(a.iter().any(|c| c.params.algorithm == algorithm));
    }
    assert!(a.iter().all(|c| c.steps.len() == 50));
    assert!(a.iter().any(|c| c.steps.iter().any(|s| !s.expect.allowed)));
}

#[test]
fn generated_usage_cases_charge_into_debt_on_every_algorithm_that_carries_one() {
    let cases = generated_usage_cases(7, 200);
    for algorithm in sluice_core::Algorithm::ALL {
        let steps = || {
            cases
                .iter()
                .filter(move |c| c.params.algorithm == algorithm)
                .flat_map(|c| &c.steps)
        };
        assert!(steps().any(|s| s.mode == Mode::Ask), "{algorithm}");
        if algorithm.carries_debt() {
            assert!(steps().any(|s| s.expect.debt > 0), "{algorithm}");
            assert!(steps().any(|s| s.mode == Mode::Refund), "{algorithm}");
        } else {
            assert!(steps().all(|s| !s.mode.adjusts()), "{algorithm}");
        }
    }
}

#[test]
fn a_charge_on_an_algorithm_without_debt_is_refused() {
    for algorithm in [
        sluice_core::Algorithm::SlidingWindowLog,
        sluice_core::Algorithm::LeakyBucket,
    ] {
        let params = sluice_core::Params::new(algorithm, 10, 1000, 10).unwrap();
        let got = decide_with(&params, &mut State::Fresh, 0, 5, Mode::Charge);
        assert!(
            matches!(got, Err(sluice_core::CheckError::NoDebt { .. })),
            "{got:?}"
        );
    }
}
