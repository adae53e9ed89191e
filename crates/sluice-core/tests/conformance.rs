//! The core itself must answer its own conformance table: the hand-checked expectations are
//! the independent statement of what each algorithm means.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use sluice_core::conformance::{cases, generated_cases};
use sluice_core::{State, decide};

#[test]
fn the_core_answers_every_hand_checked_case() {
    for case in cases() {
        let mut state = State::Fresh;
        for (i, step) in case.steps.iter().enumerate() {
            let got = decide(&case.params, &mut state, step.at_ms, step.cost).unwrap();
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
