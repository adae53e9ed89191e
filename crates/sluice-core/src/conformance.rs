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

use crate::{Algorithm, Calendar, CalendarUnit, Decision, Mode, Params, SplitMix, State};

/// Start time of every case: aligned to 10 s so window edges fall on round offsets.
pub const BASE_MS: u64 = 1_700_000_000_000;

/// One check of a case and the decision it must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub at_ms: u64,
    pub cost: u64,
    pub mode: Mode,
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
        calendar: None,
    };
    let steps = rows
        .iter()
        .map(
            |&(at, cost, allowed, remaining, reset, retry, delay)| Step {
                at_ms: BASE_MS + at,
                cost,
                mode: Mode::Consume,
                expect: Decision {
                    allowed,
                    limit,
                    remaining,
                    debt: 0,
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

/// `(offset, mode, cost, allowed, remaining, debt, reset offset, retry_after_ms)`
type UsageRow = (u64, Mode, u64, bool, u64, u64, u64, u64);

fn usage_case(name: &str, params: Params, rows: &[UsageRow]) -> Case {
    let steps = rows
        .iter()
        .map(
            |&(at, mode, cost, allowed, remaining, debt, reset, retry)| Step {
                at_ms: BASE_MS + at,
                cost,
                mode,
                expect: Decision {
                    allowed,
                    limit: params.limit,
                    remaining,
                    debt,
                    reset_ms: BASE_MS + reset,
                    retry_after_ms: retry,
                    delay_ms: 0,
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

/// The hand-checked usage cases: asks, charges into debt and refunds, one per algorithm
/// that carries a debt (the worked examples of docs/src/concepts/usage-budgets.md).
pub fn usage_cases() -> Vec<Case> {
    use Algorithm::*;
    use Mode::*;
    let params = |algorithm, limit, window_ms, burst| Params {
        algorithm,
        limit,
        window_ms,
        burst,
        counting: crate::Counting::Admitted,
        calendar: None,
    };
    const HOUR: u64 = 3_600_000;
    // The end of the hour BASE_MS falls in, as an offset from it.
    const END: u64 = HOUR - BASE_MS % HOUR;
    // 10 a second, a bucket of 10: a charge of 25 owes 15, and asks wait until 16 tokens
    // have refilled (the 15 owed and the 1 asked for): 1600 ms.
    let bucket: &[UsageRow] = &[
        (0, Ask, 0, true, 10, 0, 0, 0),
        (0, Charge, 25, false, 0, 15, 2500, 1600),
        (1000, Ask, 0, false, 0, 5, 2500, 600),
        (1599, Ask, 0, false, 0, 0, 2500, 1),
        (1600, Ask, 0, true, 1, 0, 2500, 0),
        (1600, Refund, 5, true, 6, 0, 2000, 0),
        (1600, Refund, 100, true, 10, 0, 1600, 0),
        (1600, Ask, 3, true, 7, 0, 1900, 0),
    ];
    vec![
        usage_case(
            "fixed_window usage: 100 an hour, 40 a response: the 4th ask is denied until the window ends",
            params(FixedWindow, 100, HOUR, 100),
            &[
                (0, Ask, 0, true, 100, 0, 0, 0),
                (10, Charge, 40, true, 60, 0, END, 0),
                (20, Ask, 0, true, 60, 0, END, 0),
                (30, Charge, 40, true, 20, 0, END, 0),
                (40, Ask, 0, true, 20, 0, END, 0),
                (50, Charge, 40, false, 0, 20, END, END - 50),
                (60, Ask, 0, false, 0, 20, END, END - 60),
                (70, Refund, 30, true, 10, 0, END, 0),
                (80, Charge, 10, false, 0, 0, END, END - 80),
                (END, Ask, 0, true, 100, 0, END, 0),
            ],
        ),
        usage_case(
            "sliding_window_counter usage: a debt counts in its window, then weighted in the next",
            params(SlidingWindowCounter, 10, 1000, 10),
            &[
                (0, Charge, 25, false, 0, 15, 1961, 1601),
                (1600, Ask, 0, false, 0, 0, 1961, 1),
                (1601, Ask, 0, true, 1, 0, 1961, 0),
                (1601, Ask, 1, true, 0, 0, 2001, 0),
            ],
        ),
        usage_case(
            "token_bucket usage: a debt is repaid by the refill",
            params(TokenBucket, 10, 1000, 10),
            bucket,
        ),
        usage_case(
            "gcra usage: a debt is repaid as time catches up",
            params(Gcra, 10, 1000, 10),
            bucket,
        ),
    ]
}

/// `case` counting every hit (envoyproxy/ratelimit's rule).
fn every_hit(mut case: Case) -> Case {
    case.params.counting = crate::Counting::EveryHit;
    case
}

/// Every hand-checked case: at least one per algorithm, and the calendar windows.
pub fn cases() -> Vec<Case> {
    let mut all = algorithm_cases();
    all.extend(calendar_cases());
    all
}

/// `(UTC time, cost, allowed, remaining, reset as a UTC time, retry_after_ms)`
type CalendarRow = (&'static str, u64, bool, u64, &'static str, u64);

/// Unix milliseconds of an RFC 3339 time written in this table.
fn utc_ms(rfc3339: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
        .unwrap_or_default()
}

fn calendar_case(name: &str, limit: u64, calendar: Calendar, rows: &[CalendarRow]) -> Case {
    let params = Params {
        algorithm: Algorithm::FixedWindow,
        limit,
        window_ms: calendar.unit.longest_ms(),
        burst: limit,
        counting: crate::Counting::Admitted,
        calendar: Some(calendar),
    };
    let steps = rows
        .iter()
        .map(|&(at, cost, allowed, remaining, reset, retry)| Step {
            at_ms: utc_ms(at),
            cost,
            mode: Mode::Consume,
            expect: Decision {
                allowed,
                limit,
                remaining,
                debt: 0,
                reset_ms: utc_ms(reset),
                retry_after_ms: retry,
                delay_ms: 0,
            },
        })
        .collect();
    Case {
        name: name.to_owned(),
        params,
        steps,
    }
}

/// Calendar windows worked out from the zones' rules: a Tokyo month ends at 15:00 UTC on its
/// last day; a New York day is 23 hours when the clocks go forward and 25 when they go back.
fn calendar_cases() -> Vec<Case> {
    let zone = |name: &str| name.parse().unwrap_or(chrono_tz::UTC);
    let month = Calendar {
        unit: CalendarUnit::Month,
        zone: zone("Asia/Tokyo"),
    };
    let day = Calendar {
        unit: CalendarUnit::Day,
        zone: zone("America/New_York"),
    };
    let week = Calendar {
        unit: CalendarUnit::Week,
        zone: zone("Europe/Berlin"),
    };
    const FEB_END: &str = "2026-02-28T15:00:00Z";
    vec![
        calendar_case(
            "fixed_window 1mo in Asia/Tokyo: February ends at 15:00 UTC on the 28th",
            3,
            month,
            &[
                ("2026-02-28T14:59:59Z", 1, true, 2, FEB_END, 0),
                ("2026-02-28T14:59:59Z", 2, true, 0, FEB_END, 0),
                ("2026-02-28T14:59:59.500Z", 1, false, 0, FEB_END, 500),
                (
                    "2026-02-28T15:00:00Z",
                    1,
                    true,
                    2,
                    "2026-03-31T15:00:00Z",
                    0,
                ),
            ],
        ),
        calendar_case(
            "fixed_window 1d in America/New_York: 23 hours in March, 25 in November",
            2,
            day,
            &[
                (
                    "2026-03-08T05:00:00Z",
                    2,
                    true,
                    0,
                    "2026-03-09T04:00:00Z",
                    0,
                ),
                (
                    "2026-03-09T03:59:59.999Z",
                    1,
                    false,
                    0,
                    "2026-03-09T04:00:00Z",
                    1,
                ),
                (
                    "2026-03-09T04:00:00Z",
                    1,
                    true,
                    1,
                    "2026-03-10T04:00:00Z",
                    0,
                ),
                (
                    "2026-11-01T04:00:00Z",
                    1,
                    true,
                    1,
                    "2026-11-02T05:00:00Z",
                    0,
                ),
                (
                    "2026-11-02T04:30:00Z",
                    2,
                    false,
                    1,
                    "2026-11-02T05:00:00Z",
                    1_800_000,
                ),
                (
                    "2026-11-02T05:00:00Z",
                    2,
                    true,
                    0,
                    "2026-11-03T05:00:00Z",
                    0,
                ),
            ],
        ),
        calendar_case(
            "fixed_window 1w in Europe/Berlin: weeks from Monday midnight",
            1,
            week,
            &[
                (
                    "2026-12-06T22:59:59Z",
                    1,
                    true,
                    0,
                    "2026-12-06T23:00:00Z",
                    0,
                ),
                (
                    "2026-12-06T23:00:00Z",
                    1,
                    true,
                    0,
                    "2026-12-13T23:00:00Z",
                    0,
                ),
                (
                    "2026-12-13T22:00:00Z",
                    1,
                    false,
                    0,
                    "2026-12-13T23:00:00Z",
                    3_600_000,
                ),
            ],
        ),
    ]
}

/// The hand-checked cases of each algorithm over windows aligned to unix time.
fn algorithm_cases() -> Vec<Case> {
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
    generated(seed, steps_per_case, false)
}

/// [`generated_cases`] mixing asks, charges and refunds (where the algorithm carries a debt)
/// among the consuming checks: every backend held to the core's debt arithmetic.
pub fn generated_usage_cases(seed: u64, steps_per_case: usize) -> Vec<Case> {
    generated(seed, steps_per_case, true)
}

fn generated(seed: u64, steps_per_case: usize, usage: bool) -> Vec<Case> {
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
                calendar: None,
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
                let mut cost = rng.below(params.capacity().min(4) + 1);
                // Mostly consuming checks; asks on every algorithm, and charges (up to three
                // capacities: into debt) and refunds where the algorithm carries a debt.
                let mode = match if usage { rng.below(10) } else { 0 } {
                    0..=5 => Mode::Consume,
                    6 => Mode::Ask,
                    7 | 8 if algorithm.carries_debt() => {
                        cost = rng.below(3 * params.capacity() + 1);
                        Mode::Charge
                    }
                    9 if algorithm.carries_debt() => Mode::Refund,
                    _ => Mode::Ask,
                };
                let Ok(expect) = crate::decide_with(&params, &mut state, now, cost, mode) else {
                    continue;
                };
                steps.push(Step {
                    at_ms: now,
                    cost,
                    mode,
                    expect,
                });
            }
            out.push(Case {
                name: format!(
                    "generated {}{algorithm} {counting:?} #{i} (seed {seed})",
                    if usage { "usage " } else { "" }
                ),
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
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::decide_with;

    #[test]
    fn the_core_answers_every_hand_checked_case() {
        for case in cases().into_iter().chain(usage_cases()) {
            let mut state = State::Fresh;
            for (i, step) in case.steps.iter().enumerate() {
                let got = decide_with(&case.params, &mut state, step.at_ms, step.cost, step.mode)
                    .unwrap();
                assert_eq!(got, step.expect, "{}: step {i} ({step:?})", case.name);
            }
        }
    }

    #[test]
    fn generated_cases_are_deterministic_and_cover_every_algorithm() {
        let a = generated_cases(7, 50);
        let b = generated_cases(7, 50);
        assert_eq!(a, b);
        for algorithm in crate::Algorithm::ALL {
            assert!(a.iter().any(|c| c.params.algorithm == algorithm));
        }
        assert!(a.iter().all(|c| c.steps.len() == 50));
        assert!(a.iter().any(|c| c.steps.iter().any(|s| !s.expect.allowed)));
    }

    #[test]
    fn generated_usage_cases_charge_into_debt_on_every_algorithm_that_carries_one() {
        let cases = generated_usage_cases(7, 200);
        for algorithm in crate::Algorithm::ALL {
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
            crate::Algorithm::SlidingWindowLog,
            crate::Algorithm::LeakyBucket,
        ] {
            let params = crate::Params::new(algorithm, 10, 1000, 10).unwrap();
            let got = decide_with(&params, &mut State::Fresh, 0, 5, Mode::Charge);
            assert!(
                matches!(got, Err(crate::CheckError::NoDebt { .. })),
                "{got:?}"
            );
        }
    }
}
