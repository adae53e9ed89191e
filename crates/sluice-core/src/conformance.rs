//! The conformance table: sequences of `(time, cost)` with the decision each must get.
//!
//! Every backend (memory, Redis, Redis Cluster) replays these and must answer exactly the
//! expected decisions, so an algorithm means the same thing whichever store holds its state.
//! [`cases`] are worked out by hand; [`generated_cases`] are longer pseudo-random sequences
//! whose expectations come from this crate's own [`decide`](crate::decide), so a backend is
//! held to the reference implementation on inputs nobody chose.
//!
//! Test data, not the library: compiled with the feature `conformance`, which the crates
//! that replay the table (sluice-store's tests) enable as a dev-dependency.

use crate::{Algorithm, Decision, Params, SplitMix, State};

/// Start time of every case: aligned to 10 s so window edges fall on round offsets.
pub const BASE_MS: u64 = 1_700_000_000_000;

/// One check of a case and the decision it must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub at_ms: u64,
    pub cost: u64,
    pub expect: Decision,
}

/// A named sequence of checks on one fresh key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub params: Params,
    pub steps: Vec<Step>,
}

/// `(offset, cost, allowed, remaining, reset offset, retry_after_ms, delay_ms)`
type Row = (u64, u64, bool, u64, u64, u64, u64);

fn case(
    name: &str,
    algorithm: Algorithm,
    limit: u64,
    window_ms: u64,
    burst: u64,
    rows: &[Row],
) -> Case {
    let params = Params {
        algorithm,
        limit,
        window_ms,
        burst,
        counting: crate::Counting::Admitted,
    };
    let steps = rows
        .iter()
        .map(
            |&(at, cost, allowed, remaining, reset, retry, delay)| Step {
                at_ms: BASE_MS + at,
                cost,
                expect: Decision {
                    allowed,
                    limit,
                    remaining,
                    reset_ms: BASE_MS + reset,
                    retry_after_ms: retry,
                    delay_ms: delay,
                },
            },
        )
        .collect();
    Case {
        name: name.to_owned(),
        params,
        steps,
    }
}

/// `case` counting every hit (envoyproxy/ratelimit's rule).
fn every_hit(mut case: Case) -> Case {
    case.params.counting = crate::Counting::EveryHit;
    case
}

/// The hand-checked cases, at least one per algorithm.
pub fn cases() -> Vec<Case> {
    use Algorithm::*;
    let bucket: &[Row] = &[
        (0, 1, true, 2, 500, 0, 0),
        (0, 2, true, 0, 1500, 0, 0),
        (100, 1, false, 0, 1500, 400, 0),
        (500, 1, true, 0, 2000, 0, 0),
        (600, 3, false, 0, 2000, 1400, 0),
        (5000, 0, true, 3, 5000, 0, 0),
    ];
    vec![
        case(
            "fixed_window: counts per aligned window, resets at the edge",
            FixedWindow,
            3,
            1000,
            3,
            &[
                (0, 1, true, 2, 1000, 0, 0),
                (100, 1, true, 1, 1000, 0, 0),
                (200, 1, true, 0, 1000, 0, 0),
                (300, 1, false, 0, 1000, 700, 0),
                (999, 0, true, 0, 1000, 0, 0),
                (1000, 2, true, 1, 2000, 0, 0),
                (1500, 2, false, 1, 2000, 500, 0),
                (5000, 0, true, 3, 5000, 0, 0),
            ],
        ),
        every_hit(case(
            "fixed_window counting every hit: denied hits count, a peek asks whether any is left",
            FixedWindow,
            3,
            1000,
            3,
            &[
                (0, 1, true, 2, 1000, 0, 0),
                (100, 2, true, 0, 1000, 0, 0),
                (200, 0, false, 0, 1000, 800, 0),
                (300, 1, false, 0, 1000, 700, 0),
                (400, 5, false, 0, 1000, 600, 0),
                (1000, 0, true, 3, 1000, 0, 0),
                (1000, 3, true, 0, 2000, 0, 0),
                (1500, 1, false, 0, 2000, 500, 0),
            ],
        )),
        case(
            "sliding_window_log: entries leave exactly one window after they came",
            SlidingWindowLog,
            3,
            1000,
            3,
            &[
                (0, 1, true, 2, 1000, 0, 0),
                (100, 2, true, 0, 1100, 0, 0),
                (500, 1, false, 0, 1100, 500, 0),
                (1000, 1, true, 0, 2000, 0, 0),
                (1099, 1, false, 0, 2000, 1, 0),
                (1100, 2, true, 0, 2100, 0, 0),
                (2100, 0, true, 3, 2100, 0, 0),
            ],
        ),
        case(
            "sliding_window_counter: the previous window weighs by its overlap",
            SlidingWindowCounter,
            10,
            1000,
            10,
            &[
                (0, 4, true, 6, 1751, 0, 0),
                (500, 6, true, 0, 1901, 0, 0),
                (900, 1, false, 0, 1901, 101, 0),
                (1250, 3, true, 0, 2667, 0, 0),
                (1300, 1, false, 0, 2667, 1, 0),
                (1301, 1, true, 0, 2751, 0, 0),
                (3500, 0, true, 10, 3500, 0, 0),
            ],
        ),
        case(
            "token_bucket: burst then refill rate",
            TokenBucket,
            2,
            1000,
            3,
            bucket,
        ),
        case(
            "gcra: decides as the token bucket does",
            Gcra,
            2,
            1000,
            3,
            bucket,
        ),
        case(
            "leaky_bucket: queued requests wait window/limit apart",
            LeakyBucket,
            2,
            1000,
            3,
            &[
                (0, 1, true, 2, 500, 0, 0),
                (0, 1, true, 1, 1000, 0, 500),
                (0, 1, true, 0, 1500, 0, 1000),
                (0, 1, false, 0, 1500, 500, 0),
                (250, 1, false, 0, 1500, 250, 0),
                (500, 1, true, 0, 2000, 0, 1000),
            ],
        ),
        case(
            "leaky_bucket: a fractional interval (1000/3 ms) is not rounded away",
            LeakyBucket,
            3,
            1000,
            2,
            &[
                (0, 1, true, 1, 334, 0, 0),
                (0, 1, true, 0, 667, 0, 334),
                (0, 1, false, 0, 667, 334, 0),
                (334, 1, true, 0, 1000, 0, 333),
            ],
        ),
    ]
}

/// Longer pseudo-random sequences (deterministic in `seed`), expectations from [`decide`].
///
/// [`decide`]: crate::decide
pub fn generated_cases(seed: u64, steps_per_case: usize) -> Vec<Case> {
    let mut rng = SplitMix(seed);
    let shapes: [(u64, u64, u64); 3] = [(5, 1000, 8), (7, 300, 3), (100, 60_000, 150)];
    let mut out = Vec::new();
    let every_hit = (Algorithm::FixedWindow, crate::Counting::EveryHit);
    let kinds = Algorithm::ALL
        .map(|algorithm| (algorithm, crate::Counting::Admitted))
        .into_iter()
        .chain([every_hit]);
    for (algorithm, counting) in kinds {
        for (i, &(limit, window_ms, burst)) in shapes.iter().enumerate() {
            let params = Params {
                algorithm,
                limit,
                window_ms,
                burst,
                counting,
            };
            let mut state = State::Fresh;
            let mut now = BASE_MS + rng.below(window_ms);
            let mut steps = Vec::with_capacity(steps_per_case);
            for _ in 0..steps_per_case {
                now += match rng.below(10) {
                    0..=4 => 0,
                    5..=7 => rng.below(window_ms / 4 + 1),
                    _ => rng.below(2 * window_ms),
                };
                let cost = rng.below(params.capacity().min(4) + 1);
                let Ok(expect) = crate::decide(&params, &mut state, now, cost) else {
                    continue;
                };
                steps.push(Step {
                    at_ms: now,
                    cost,
                    expect,
                });
            }
            out.push(Case {
                name: format!("generated {algorithm} {counting:?} #{i} (seed {seed})"),
                params,
                steps,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The core itself must answer its own conformance table: the hand-checked expectations
    //! are the independent statement of what each algorithm means.

    use super::*;
    use crate::decide;

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
        for algorithm in Algorithm::ALL {
            assert!(a.iter().any(|c| c.params.algorithm == algorithm));
        }
        assert!(a.iter().all(|c| c.steps.len() == 50));
        assert!(a.iter().any(|c| c.steps.iter().any(|s| !s.expect.allowed)));
    }
}
