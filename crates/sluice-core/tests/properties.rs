//! Property tests of what each algorithm promises, over random sequences of (time, cost).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use proptest::prelude::*;
use sluice_core::{Algorithm, Decision, Params, State, decide, remaining};

const T0: u64 = 1_700_000_000_000;

/// A random schedule: (gap since the previous check in ms, cost).
fn schedule(max_gap: u64, max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0..=max_gap, 0..=max_cost), 1..200)
}

fn params(algorithm: Algorithm, limit: u64, window_ms: u64, burst: u64) -> Params {
    Params::new(algorithm, limit, window_ms, burst).unwrap()
}

/// Runs a schedule from T0, returning (time, cost, decision) for every check.
fn run(p: &Params, steps: &[(u64, u64)]) -> Vec<(u64, u64, Decision)> {
    let mut state = State::Fresh;
    let mut now = T0;
    let mut out = Vec::with_capacity(steps.len());
    for &(gap, cost) in steps {
        now += gap;
        let cost = cost.min(p.capacity());
        out.push((now, cost, decide(p, &mut state, now, cost).unwrap()));
    }
    out
}

fn admitted(trace: &[(u64, u64, Decision)]) -> Vec<(u64, u64)> {
    trace
        .iter()
        .filter(|(_, cost, d)| d.allowed && *cost > 0)
        .map(|&(t, c, _)| (t, c))
        .collect()
}

proptest! {
    #[test]
    fn sliding_log_never_admits_more_than_limit_in_any_window_span(
        limit in 1u64..20, window_ms in 1u64..2000, steps in schedule(300, 5),
    ) {
        let p = params(Algorithm::SlidingWindowLog, limit, window_ms, limit);
        let admitted = admitted(&run(&p, &steps));
        for &(t, _) in &admitted {
            let in_span: u64 = admitted
                .iter()
                .filter(|&&(u, _)| u <= t && u + window_ms > t)
                .map(|&(_, c)| c)
                .sum();
            prop_assert!(in_span <= limit, "{in_span} admitted in the window ending at {t}");
        }
    }

    #[test]
    fn fixed_window_never_admits_more_than_limit_per_aligned_window(
        limit in 1u64..20, window_ms in 1u64..2000, steps in schedule(300, 5),
    ) {
        let p = params(Algorithm::FixedWindow, limit, window_ms, limit);
        let mut per_window = std::collections::HashMap::<u64, u64>::new();
        for (t, c) in admitted(&run(&p, &steps)) {
            *per_window.entry(t / window_ms).or_default() += c;
        }
        prop_assert!(per_window.values().all(|&n| n <= limit));
    }

    #[test]
    fn token_bucket_never_admits_more_than_burst_plus_rate_times_interval(
        limit in 1u64..50, window_ms in 1u64..5000, burst in 1u64..50, steps in schedule(500, 5),
    ) {
        let p = params(Algorithm::TokenBucket, limit, window_ms, burst);
        let admitted = admitted(&run(&p, &steps));
        for (i, &(start, _)) in admitted.iter().enumerate() {
            let mut sum = 0;
            for &(end, cost) in &admitted[i..] {
                sum += cost;
                let bound = burst + limit * (end - start) / window_ms;
                prop_assert!(sum <= bound, "{sum} admitted in [{start}, {end}], bound {bound}");
            }
        }
    }

    #[test]
    fn gcra_and_token_bucket_agree(
        limit in 1u64..50, window_ms in 1u64..5000, burst in 1u64..50, steps in schedule(500, 5),
    ) {
        let bucket = run(&params(Algorithm::TokenBucket, limit, window_ms, burst), &steps);
        let gcra = run(&params(Algorithm::Gcra, limit, window_ms, burst), &steps);
        prop_assert_eq!(bucket, gcra);
    }

    #[test]
    fn leaky_bucket_delays_are_spaced_window_over_limit_apart(
        limit in 1u64..50, window_ms in 1u64..5000, burst in 1u64..20, gaps in prop::collection::vec(0u64..200, 1..200),
    ) {
        let p = params(Algorithm::LeakyBucket, limit, window_ms, burst);
        let steps: Vec<(u64, u64)> = gaps.iter().map(|&g| (g, 1)).collect();
        let trace = run(&p, &steps);
        let interval_floor = window_ms / limit;
        let interval_ceil = window_ms.div_ceil(limit);
        let mut previous_start: Option<u64> = None;
        for (t, _, d) in trace.iter().filter(|(_, _, d)| d.allowed) {
            let start = t + d.delay_ms;
            if let Some(prev) = previous_start {
                prop_assert!(start >= prev + interval_floor, "start {start} too close to {prev}");
                if d.delay_ms > 0 {
                    // Queued behind the previous one: it leaves exactly one interval later.
                    prop_assert!(start <= prev + interval_ceil, "start {start} too far from {prev}");
                }
            }
            previous_start = Some(start);
        }
    }

    #[test]
    fn every_answer_is_self_consistent(
        alg in 0usize..6, limit in 1u64..30, window_ms in 1u64..3000, burst in 1u64..30,
        steps in schedule(1000, 6),
    ) {
        let p = params(Algorithm::ALL[alg], limit, window_ms, burst);
        let mut state = State::Fresh;
        let mut now = T0;
        for &(gap, cost) in &steps {
            now += gap;
            let cost = cost.min(p.capacity());
            let d = decide(&p, &mut state, now, cost).unwrap();
            prop_assert_eq!(d.limit, limit);
            prop_assert!(d.remaining <= p.capacity());
            prop_assert!(d.reset_ms >= now);
            prop_assert_eq!(d.allowed, d.retry_after_ms == 0);
            if !d.allowed {
                // Waiting retry_after_ms (and no less) lets the same cost through.
                let mut later = state.clone();
                let retry = decide(&p, &mut later, now + d.retry_after_ms, cost).unwrap();
                prop_assert!(retry.allowed, "denied again after retry_after {d:?}");
                let mut sooner = state.clone();
                let early = decide(&p, &mut sooner, now + d.retry_after_ms - 1, cost).unwrap();
                prop_assert!(!early.allowed, "allowed before retry_after {d:?}");
            }
            // At `reset` the key is back to full.
            let mut at_reset = state.clone();
            let full = decide(&p, &mut at_reset, d.reset_ms, 0).unwrap();
            prop_assert_eq!(full.remaining, p.capacity(), "not full at reset {:?}", d);
        }
    }

    #[test]
    fn a_clock_going_backwards_never_grants_extra_quota(
        alg in 0usize..6, limit in 1u64..30, window_ms in 1u64..3000, burst in 1u64..30,
        moves in prop::collection::vec((-2000i64..2000, 0u64..6), 1..200),
    ) {
        // At every step, a check stamped earlier than the latest time the key has seen is
        // never more permissive than the same check stamped at that latest time.
        let p = params(Algorithm::ALL[alg], limit, window_ms, burst);
        let mut state = State::Fresh;
        let (mut now, mut latest) = (T0, T0);
        for &(jump, cost) in &moves {
            now = now.saturating_add_signed(jump);
            let cost = cost.min(p.capacity());
            let mut at_latest = state.clone();
            let reference = decide(&p, &mut at_latest, latest.max(now), cost).unwrap();
            let skewed = decide(&p, &mut state, now, cost).unwrap();
            if now < latest {
                prop_assert!(!skewed.allowed || reference.allowed, "{skewed:?} vs {reference:?}");
                if skewed.allowed == reference.allowed {
                    prop_assert!(skewed.remaining <= reference.remaining, "{skewed:?} vs {reference:?}");
                }
            }
            latest = latest.max(now);
        }
    }
    #[test]
    fn remaining_is_what_a_peek_answers_and_touches_nothing(
        alg in 0usize..6, limit in 1u64..30, window_ms in 1u64..3000, burst in 1u64..30,
        moves in prop::collection::vec((-1000i64..3000, 0u64..6), 1..200),
    ) {
        // Times go backwards too: the peek and `remaining` must read a skewed clock alike.
        let p = params(Algorithm::ALL[alg], limit, window_ms, burst);
        let other = params(Algorithm::ALL[(alg + 1) % 6], limit, window_ms, burst);
        let mut state = State::Fresh;
        let mut now = T0;
        prop_assert_eq!(remaining(&p, &state, now), p.capacity());
        for &(jump, cost) in &moves {
            now = now.saturating_add_signed(jump);
            decide(&p, &mut state, now, cost.min(p.capacity())).unwrap();
            // Just before and at the instant the newest entry leaves the window, among others.
            let edge = now + window_ms;
            for at in [now.saturating_sub(500), now, now + window_ms / 2, edge - 1, edge, edge + 1] {
                let before = state.clone();
                let read = remaining(&p, &state, at);
                prop_assert_eq!(&state, &before);
                let peek = decide(&p, &mut state.clone(), at, 0).unwrap();
                prop_assert_eq!(read, peek.remaining, "at {} of {:?}", at, state);
                prop_assert!(read <= p.capacity());
            }
            // A state of another algorithm is a fresh key to this one.
            if !state.fits(other.algorithm) {
                prop_assert_eq!(remaining(&other, &state, now), other.capacity());
            }
        }
    }
}
