//! Replays whose answer is counted by hand from each algorithm's rule, not by running the
//! engine twice: fixed window, sliding log, token bucket, a cost above capacity, lines out
//! of order within a file, and a candidate judged beside the limit on its own state.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use sluice_core::Algorithm;
use sluice_replay::PeakRate;

#[test]
fn fixed_window_25_requests_in_one_window_of_10_reject_15() {
    let logs = Logs::new();
    // 25 requests of key a one second apart, all inside the aligned minute starting at T0;
    // key b sends 5. Limit 10 per 60 s: a gets 10 through and 25 - 10 = 15 rejected.
    let mut content = csv("a", (0..25).map(|i| T0 + i * 1000));
    content.push_str(&csv("b", (0..5).map(|i| T0 + 30_000 + i * 1000)));
    let file = logs.write("fixed.csv", content);
    let report = run(&[policy("api", fixed(10, 60_000))], &[file], &csv_options());
    let api = row(&report, "api", "none");
    assert_eq!((report.lines, report.unparsed), (30, 0));
    assert_eq!((api.requests, api.rejected), (30, 15));
    assert_eq!((api.keys, api.keys_limited), (2, 1));
    assert_eq!(top(api), vec![("a".to_owned(), 15)]);
    // Peaks per window: a 25, b 5 → nearest rank p50 = 5, the rest 25.
    assert_eq!(
        api.peak_rate,
        PeakRate {
            p50: 5,
            p90: 25,
            p99: 25,
            max: 25
        }
    );
    assert!(api.candidate.is_none());
}

#[test]
fn a_new_aligned_window_starts_from_zero() {
    let logs = Logs::new();
    // 12 at the end of one minute, 12 at the start of the next: 2 rejected in each.
    let mut times: Vec<u64> = (0..12).map(|i| T0 + 48_000 + i * 1000).collect();
    times.extend((0..12).map(|i| T0 + 60_000 + i * 1000));
    let file = logs.write("edge.csv", csv("a", times));
    let report = run(&[policy("api", fixed(10, 60_000))], &[file], &csv_options());
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (24, 4));
    assert_eq!(api.peak_rate.max, 12);
}

#[test]
fn sliding_log_frees_an_entry_one_window_after_it() {
    let logs = Logs::new();
    // Limit 3 per 10 s. At 0, 1, 2 s: allowed (3 in the log); 3 s: rejected; 10 s: the entry
    // of 0 s has left (0 + 10 ≤ 10), allowed; 10.5 s: entries 1, 2, 10 → rejected; 11 s: the
    // entry of 1 s has left, allowed. 2 rejected of 7.
    let times = [0, 1000, 2000, 3000, 10_000, 10_500, 11_000].map(|t| T0 + t);
    let file = logs.write("log.csv", csv("a", times));
    let report = run(
        &[policy(
            "api",
            limit(Algorithm::SlidingWindowLog, 3, 10_000, 3),
        )],
        &[file],
        &csv_options(),
    );
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (7, 2));
}

#[test]
fn token_bucket_burst_then_refill() {
    let logs = Logs::new();
    // 60 per 60 s is one token a second, bucket of 5. Ten requests at T0: 5 pass, 5 rejected.
    // Two seconds later 2 tokens are back: of 3 requests, 2 pass and 1 is rejected.
    let mut times = vec![T0; 10];
    times.extend([T0 + 2000; 3]);
    let file = logs.write("bucket.csv", csv("a", times));
    let report = run(
        &[policy("api", limit(Algorithm::TokenBucket, 60, 60_000, 5))],
        &[file],
        &csv_options(),
    );
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (13, 6));
}

#[test]
fn a_cost_above_capacity_is_a_rejection() {
    let logs = Logs::new();
    let at = secs(T0);
    let file = logs.write(
        "cost.csv",
        format!("{at},a,,,11\n{at},a,,,10\n{at},a,,,1\n"),
    );
    let report = run(&[policy("api", fixed(10, 60_000))], &[file], &csv_options());
    let api = row(&report, "api", "none");
    // 11 > 10 is refused outright; 10 fills the window; the last 1 does not fit.
    assert_eq!((api.requests, api.rejected), (3, 2));
    // Counts are in cost units: 11 + 10 + 1 asked for in the window.
    assert_eq!(api.peak_rate.max, 22);
}

#[test]
fn a_line_earlier_than_its_key_latest_is_replayed_at_that_latest_time() {
    let logs = Logs::new();
    // Limit 2 per minute. 59 s (minute 0) allowed; 61 s (minute 1) allowed; 58 s arrives
    // after it and is replayed at 61 s: minute 1 again, its second, allowed; 62 s is minute
    // 1's third: rejected. Replayed at its own time, 58 s would have been minute 0's second
    // and 62 s allowed.
    let times = [59_000, 61_000, 58_000, 62_000].map(|t| T0 + t);
    let file = logs.write("late.csv", csv("a", times));
    let report = run(&[policy("api", fixed(2, 60_000))], &[file], &csv_options());
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (4, 1));
    assert_eq!(api.peak_rate.max, 3);
}

#[test]
fn the_candidate_is_judged_beside_the_limit_on_its_own_state() {
    let logs = Logs::new();
    // 25 in one minute: the limit (10) rejects 15, the candidate (20) rejects 5, each
    // counting on its own state (the candidate is consumed when it alone allows).
    let file = logs.write("candidate.csv", csv("a", (0..25).map(|i| T0 + i * 100)));
    let mut api = policy("api", fixed(10, 60_000));
    api.candidates.insert("none".to_owned(), fixed(20, 60_000));
    let mut options = csv_options();
    options.candidate = true;
    let report = run(
        std::slice::from_ref(&api),
        std::slice::from_ref(&file),
        &options,
    );
    let row_none = row(&report, "api", "none");
    assert_eq!(row_none.rejected, 15);
    let candidate = row_none.candidate.as_ref().unwrap();
    assert_eq!(
        (
            candidate.requests,
            candidate.rejected,
            candidate.keys,
            candidate.keys_limited
        ),
        (25, 5, 1, 1)
    );
    assert_eq!(candidate.top[0].rejected, 5);
    let buckets = &row_none.timeline.buckets;
    assert_eq!(buckets.iter().map(|b| b.candidate_rejected).sum::<u64>(), 5);
    // Without --candidate, no candidate is judged.
    let report = run(&[api], &[file], &csv_options());
    assert!(row(&report, "api", "none").candidate.is_none());
}

#[test]
fn suggested_limit_where_the_keys_bind() {
    let logs = Logs::new();
    // 200 keys, key i sending i requests in one minute. Lk: 1 % of 200 = 2 keys may exceed
    // it, so Lk is the third highest peak, 198. Lr at max_reject 0.5: 20 100 requests, budget
    // 10 050; (200 - L)(201 - L)/2 ≤ 10 050 first holds at L = 59 (141·142/2 = 10 011;
    // at 58, 142·143/2 = 10 153). max(198, 59) = 198.
    let mut content = String::new();
    for key in 1..=200u64 {
        content.push_str(&csv(&format!("k{key}"), (0..key).map(|i| T0 + i * 100)));
    }
    let file = logs.write("keys.csv", content);
    let mut options = csv_options();
    options.max_reject = Some(0.5);
    let report = run(&[policy("api", fixed(10, 60_000))], &[file], &options);
    assert_eq!(row(&report, "api", "none").suggested_limit, Some(198));
}

#[test]
fn suggested_limit_where_the_rejections_bind() {
    let logs = Logs::new();
    // One key sends 150 in each of 10 minutes; 99 keys send 1. Lk: 1 % of 100 keys = 1 may
    // exceed, so Lk is the second highest peak, 1. Lr at --max-reject 0.01: 1 599 requests,
    // budget 15; 10·(150 − L) ≤ 15 first holds at L = 149 (10 ≤ 15; at 148, 20 > 15).
    let mut content = String::new();
    for minute in 0..10u64 {
        content.push_str(&csv(
            "heavy",
            (0..150).map(|i| T0 + minute * 60_000 + i * 100),
        ));
    }
    for key in 0..99 {
        content.push_str(&csv(&format!("light{key}"), [T0 + 700_000]));
    }
    let file = logs.write("heavy.csv", content);
    let mut options = csv_options();
    options.max_reject = Some(0.01);
    let policies = [policy("api", fixed(100, 60_000))];
    let report = run(&policies, std::slice::from_ref(&file), &options);
    let api = row(&report, "api", "none");
    assert_eq!(api.suggested_limit, Some(149));
    assert_eq!(api.peak_rate.max, 150);
    assert_eq!(api.peak_rate.p99, 1);
    assert_eq!(report.max_reject, Some(0.01));
    assert_eq!(serde_json::to_value(&report).unwrap()["max_reject"], 0.01);
    // Without --max-reject, the keys rule alone: the one heavy key does not raise it.
    let report = run(&policies, &[file], &csv_options());
    assert_eq!(row(&report, "api", "none").suggested_limit, Some(1));
    assert_eq!(report.max_reject, None);
}
