//! Edge cases of every algorithm: capacity errors, peeks, far-future times, huge limits,
//! parameter validation and algorithm changes.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use sluice_core::{
    Algorithm, CheckError, MAX_EXACT, Params, ParamsError, State, decide, expires_at, remaining,
};

const T0: u64 = 1_700_000_000_000;

#[test]
fn cost_above_capacity_is_an_error_and_consumes_nothing() {
    for algorithm in Algorithm::ALL {
        let p = Params::new(algorithm, 10, 1000, 5).unwrap();
        let mut state = State::Fresh;
        let err = decide(&p, &mut state, T0, p.capacity() + 1).unwrap_err();
        assert_eq!(
            err,
            CheckError::CostExceedsCapacity {
                cost: p.capacity() + 1,
                capacity: p.capacity()
            }
        );
        assert_eq!(state, State::Fresh, "{algorithm}");
        let full = decide(&p, &mut state, T0, p.capacity()).unwrap();
        assert!(
            full.allowed,
            "{algorithm}: a cost equal to capacity passes on a fresh key"
        );
        assert_eq!(full.remaining, 0);
    }
}

#[test]
fn capacity_is_the_burst_for_buckets_and_the_limit_for_windows() {
    for algorithm in Algorithm::ALL {
        let p = Params::new(algorithm, 10, 1000, 4).unwrap();
        let expected = if algorithm.uses_burst() { 4 } else { 10 };
        assert_eq!(p.capacity(), expected, "{algorithm}");
    }
}

#[test]
fn a_peek_consumes_nothing() {
    for algorithm in Algorithm::ALL {
        let p = Params::new(algorithm, 3, 1000, 3).unwrap();
        let mut state = State::Fresh;
        decide(&p, &mut state, T0, 1).unwrap();
        let before = state.clone();
        for _ in 0..10 {
            let peek = decide(&p, &mut state, T0, 0).unwrap();
            assert!(peek.allowed);
            assert_eq!(peek.remaining, 2, "{algorithm}");
        }
        assert_eq!(state, before, "{algorithm}");
    }
}

#[test]
fn far_future_times_and_huge_limits_do_not_overflow() {
    let window_ms = 1000;
    let limit = (MAX_EXACT - 1) / window_ms;
    for algorithm in Algorithm::ALL {
        let limit = if algorithm == Algorithm::SlidingWindowLog {
            sluice_core::MAX_LOG_LIMIT
        } else {
            limit
        };
        let p = Params::new(algorithm, limit, window_ms, limit).unwrap();
        let mut state = State::Fresh;
        for now in [u64::MAX - 1, u64::MAX, u64::MAX - 5000, 0, u64::MAX] {
            let d = decide(&p, &mut state, now, limit).unwrap();
            assert!(d.remaining <= limit, "{algorithm}");
            let _ = expires_at(&p, &state);
        }
    }
}

#[test]
fn parameters_that_break_exact_arithmetic_are_refused() {
    assert_eq!(
        Params::new(Algorithm::TokenBucket, 0, 1000, 1),
        Err(ParamsError::ZeroLimit)
    );
    assert_eq!(
        Params::new(Algorithm::TokenBucket, 1, 0, 1),
        Err(ParamsError::WindowTooShort)
    );
    assert_eq!(
        Params::new(Algorithm::TokenBucket, 1, 1000, 0),
        Err(ParamsError::ZeroBurst)
    );
    assert!(matches!(
        Params::new(Algorithm::Gcra, 10, 1000, MAX_EXACT / 1000 + 1),
        Err(ParamsError::TooLarge { .. })
    ));
    assert!(matches!(
        Params::new(Algorithm::FixedWindow, u64::MAX, u64::MAX, 1),
        Err(ParamsError::TooLarge { .. })
    ));
    assert_eq!(
        Params::new(
            Algorithm::SlidingWindowLog,
            sluice_core::MAX_LOG_LIMIT + 1,
            1000,
            1
        ),
        Err(ParamsError::LogTooLong)
    );
    // A day-long window still allows a hundred million requests.
    assert!(Params::new(Algorithm::TokenBucket, 100_000_000, 86_400_000, 100_000_000).is_ok());
}

#[test]
fn changing_algorithm_starts_from_a_fresh_state() {
    let window = Params::new(Algorithm::FixedWindow, 2, 1000, 2).unwrap();
    let bucket = Params::new(Algorithm::TokenBucket, 2, 1000, 2).unwrap();
    let mut state = State::Fresh;
    decide(&window, &mut state, T0, 2).unwrap();
    assert!(!decide(&window, &mut state, T0, 1).unwrap().allowed);
    assert!(decide(&bucket, &mut state, T0, 2).unwrap().allowed);
}

#[test]
fn raising_a_limit_keeps_what_was_consumed() {
    for algorithm in Algorithm::ALL {
        let small = Params::new(algorithm, 4, 1000, 4).unwrap();
        let large = Params::new(algorithm, 8, 1000, 8).unwrap();
        let mut state = State::Fresh;
        decide(&small, &mut state, T0, 4).unwrap();
        let after = decide(&large, &mut state, T0, 0).unwrap();
        if matches!(algorithm, Algorithm::Gcra | Algorithm::LeakyBucket) {
            // Their state is a time (when the queue drains), and a queue already promised
            // keeps its schedule: nothing is reset, nothing freed until it drains.
            assert_eq!(after.reset_ms, T0 + 1000, "{algorithm}");
            assert!(after.remaining < 8, "{algorithm}");
        } else {
            assert_eq!(
                after.remaining, 4,
                "{algorithm}: consumption survives a limit change"
            );
        }
    }
}

#[test]
fn expiry_is_when_the_state_is_fresh_again_and_within_two_windows_for_windows() {
    for algorithm in Algorithm::ALL {
        let p = Params::new(algorithm, 5, 1000, 5).unwrap();
        let mut state = State::Fresh;
        decide(&p, &mut state, T0 + 10, 3).unwrap();
        let at = expires_at(&p, &state);
        assert!(
            at > T0 + 10 && at <= T0 + 10 + 2 * 1000,
            "{algorithm}: {at}"
        );
        let mut later = state.clone();
        let d = decide(&p, &mut later, at, 0).unwrap();
        assert_eq!(d.remaining, p.capacity(), "{algorithm}: full at expiry");
    }
}

#[test]
fn remaining_goes_from_capacity_to_zero_and_back_at_expiry() {
    for algorithm in Algorithm::ALL {
        let p = Params::new(algorithm, 3, 3_600_000, 3).unwrap();
        let mut state = State::Fresh;
        assert_eq!(remaining(&p, &state, T0), 3, "{algorithm}: a fresh key");
        decide(&p, &mut state, T0, 1).unwrap();
        assert_eq!(remaining(&p, &state, T0 + 1), 2, "{algorithm}: one used");
        decide(&p, &mut state, T0, 2).unwrap();
        assert_eq!(remaining(&p, &state, T0 + 1), 0, "{algorithm}: exhausted");
        let at = expires_at(&p, &state);
        assert_eq!(remaining(&p, &state, at), 3, "{algorithm}: full at expiry");
    }
}

#[test]
fn fixed_window_lets_twice_the_limit_through_at_a_boundary_and_the_log_does_not() {
    let fixed = Params::new(Algorithm::FixedWindow, 10, 1000, 10).unwrap();
    let log = Params::new(Algorithm::SlidingWindowLog, 10, 1000, 10).unwrap();
    let count = |p: &Params| {
        let mut state = State::Fresh;
        let mut admitted = 0;
        for t in [T0 + 990, T0 + 1010] {
            for _ in 0..10 {
                admitted += u32::from(decide(p, &mut state, t, 1).unwrap().allowed);
            }
        }
        admitted
    };
    assert_eq!(count(&fixed), 20, "20 requests within 20 ms");
    assert_eq!(count(&log), 10);
}
