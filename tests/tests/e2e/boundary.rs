//! The boundary burst: a fixed window admits up to 2×limit across its edge, a sliding log
//! never more than `limit` in any span of one window.

use std::collections::VecDeque;

use sluice_tests::{Daemon, T0, req};

/// Sends one request at each of `times` (ms since T0) and returns the admitted instants.
async fn run(d: &Daemon, policy: &str, times: &[u64]) -> Vec<u64> {
    let c = d.unix();
    let mut admitted = Vec::new();
    for &t in times {
        d.clock.set(T0 + t);
        if c.check(&req(policy, "edge")).await.unwrap().status == 200 {
            admitted.push(t);
        }
    }
    admitted
}

/// The most admissions inside any half-open span of `window` ms.
fn densest(admitted: &[u64], window: u64) -> usize {
    let mut span = VecDeque::new();
    let mut best = 0;
    for &t in admitted {
        span.push_back(t);
        while span.front().is_some_and(|&f| f + window <= t) {
            span.pop_front();
        }
        best = best.max(span.len());
    }
    best
}

/// Traffic hammering both sides of the edge at 10 s: 8 requests at 9.9 s, 8 at 10.0 s, then
/// a steady request every 500 ms until 25 s.
fn traffic() -> Vec<u64> {
    let mut times = vec![9_900; 8];
    times.extend(vec![10_000; 8]);
    times.extend((21..=50).map(|i| i * 500));
    times
}

#[tokio::test]
async fn a_fixed_window_admits_twice_its_limit_across_the_edge() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let admitted = run(&d, "fw", &traffic()).await;
    assert_eq!(admitted.iter().filter(|&&t| t < 10_100).count(), 10);
    assert_eq!(densest(&admitted, 10_000), 10);
}

#[tokio::test]
async fn a_sliding_log_never_exceeds_its_limit_in_any_window() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let admitted = run(&d, "log", &traffic()).await;
    assert_eq!(admitted.iter().filter(|&&t| t < 10_100).count(), 5);
    assert_eq!(densest(&admitted, 10_000), 5);
    // It does not starve either: once the window slides past, requests pass again.
    assert!(admitted.iter().any(|&t| t >= 19_900));
}
