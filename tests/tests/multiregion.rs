//! Two regions for real: two in-process `sluiced` (the library's `serve`, wall clock), each
//! with its own `redis-server`, every inter-region link through the testkit's latency proxy
//! (50 ms one way). Checked through the HTTP API:
//! - `scope = "replicated"`: both regions loaded at equal rates, well above the limit, for
//!   several windows: the total admitted per window stays within `(1 + 0.05) · limit` at
//!   `sync_interval = "100ms"`, and each region's counter in both Redis servers equals what
//!   that region admitted;
//! - a partition of one link mid-run: checks keep answering at local latency, and after the
//!   heal both Redis servers hold exactly what each region admitted (nothing lost, nothing
//!   counted twice);
//! - `scope = "global"`: exact across regions, paying the round trip;
//! - a replicated policy's headers: `X-RateLimit-Remaining` is the limit minus both regions'
//!   use, and a denial by the cap on unacknowledged consumption says `Retry-After: 1`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::Algorithm;
use sluice_store::keys;
use sluice_testkit::{Partition, RedisServer};
use sluice_tests::region::{World, now_ms, sleep_until};
use sluice_tests::{Daemon, req, req_cost};

const WINDOW_MS: u64 = 5_000;
const LIMIT: u64 = 1_000;
const BUDGET: f64 = 0.05;
const ONE_WAY: Duration = Duration::from_millis(50);

fn policies() -> String {
    format!(
        r#"
[policies.shared]
algorithm = "fixed_window"
limit = {LIMIT}
window = "{WINDOW_MS}ms"
scope = "replicated"
sync_interval = "100ms"
overshoot_budget = {BUDGET}
fail = "closed"

[policies.billing]
algorithm = "fixed_window"
limit = 200
window = "1h"
scope = "global"
fail = "closed"
"#
    )
}

async fn world() -> World {
    World::start(&policies(), ONE_WAY).await
}

/// What one region's load saw: admitted per window index, and the slowest check.
#[derive(Debug, Default)]
struct Seen {
    admitted: BTreeMap<u64, u64>,
    slowest: Duration,
    checks: u64,
}

/// Sends `policy`/`key` checks from `workers` paced clients at `rate` per second in total
/// until `until` (unix ms). An allowed answer's `reset` is its window's end (fixed window),
/// which names the window it was counted in.
async fn load(d: &Daemon, key: &'static str, rate: u64, workers: u64, until: u64) -> Seen {
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let client = Arc::new(d.unix());
        tasks.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 * workers / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            while now_ms() < until {
                tick.tick().await;
                let started = Instant::now();
                let out = match client.check(&req("shared", key)).await {
                    Ok(out) => out,
                    Err(err) => panic!(
                        "{err:?} after {:?}; the daemon's errors:\n{}",
                        started.elapsed(),
                        errors_of(&client).await
                    ),
                };
                seen.slowest = seen.slowest.max(started.elapsed());
                seen.checks += 1;
                assert!(out.status == 200 || out.status == 429, "{}", out.status);
                assert!(!out.body.degraded);
                if out.status == 200 {
                    let window = out.body.reset * 1000 / WINDOW_MS - 1;
                    *seen.admitted.entry(window).or_default() += 1;
                }
            }
            seen
        }));
    }
    let mut all = Seen::default();
    for task in tasks {
        let seen = task.await.unwrap();
        for (w, n) in seen.admitted {
            *all.admitted.entry(w).or_default() += n;
        }
        all.slowest = all.slowest.max(seen.slowest);
        all.checks += seen.checks;
    }
    all
}

/// The error and fail-mode series of a daemon's `/metrics`.
async fn errors_of(client: &sluice_client::Client) -> String {
    match client.send(http::Method::GET, "/metrics", &[], "").await {
        Ok(raw) => String::from_utf8_lossy(&raw.body)
            .lines()
            .filter(|l| l.contains("errors_total{") || l.contains("fail_closed_total{"))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(err) => format!("no metrics: {err:?}"),
    }
}

/// `HGET` of a window hash field, 0 when absent.
fn counter(server: &RedisServer, key: &str, window: u64, field: &str) -> u64 {
    let hash = keys::window_key(
        "rl",
        "shared",
        key,
        Algorithm::FixedWindow,
        WINDOW_MS,
        window,
    );
    server.cli(&["HGET", &hash, field]).parse().unwrap_or(0)
}

/// The per-region counters of `window` in both Redis servers: (a's in ra, a's in rb, b's in
/// rb, b's in ra).
fn counters(w: &World, key: &str, window: u64) -> [u64; 4] {
    [
        counter(&w.ra, key, window, "r:a"),
        counter(&w.rb, key, window, "r:a"),
        counter(&w.rb, key, window, "r:b"),
        counter(&w.ra, key, window, "r:b"),
    ]
}

/// Reads every window's counters once its deliveries have landed (1.5 s after the window;
/// for a window that saw the partition, 2 s after the heal), while its hash still lives (one
/// window past its end).
async fn watch_counters(
    w: &World,
    key: &str,
    windows: std::ops::Range<u64>,
    (cut, heal): (u64, u64),
) -> BTreeMap<u64, [u64; 4]> {
    let mut out = BTreeMap::new();
    for window in windows {
        let end = (window + 1) * WINDOW_MS;
        let settled = if end > cut { heal + 2_000 } else { 0 };
        sleep_until((end + 1_500).max(settled)).await;
        out.insert(window, counters(w, key, window));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_overshoot_stays_in_budget_and_a_partition_loses_nothing() {
    let w = world().await;
    // Each region offers 300/s: 1 500 per 5 s window each, three times the limit in total.
    let rate = 300;
    let first = now_ms() / WINDOW_MS + 1;
    let windows = 6;
    let until = (first + windows) * WINDOW_MS;
    // The partition: the a → b link is cut from 0.5 s to 4.5 s into the fourth window
    // (longer than the 3 s peer timeout, so a's deliveries fail during it).
    let cut = (first + 3) * WINDOW_MS + 500;
    let heal = cut + 4_000;
    sleep_until(first * WINDOW_MS).await;

    let partition = async {
        sleep_until(cut).await;
        w.ab.partition(Partition::Drop);
        sleep_until(heal).await;
        w.ab.heal();
    };
    let (seen_a, seen_b, (), watched) = tokio::join!(
        load(&w.a, "hot", rate, 6, until),
        load(&w.b, "hot", rate, 6, until),
        partition,
        watch_counters(&w, "hot", first..first + windows, (cut, heal)),
    );

    let limit = LIMIT as f64;
    let partition_window = cut / WINDOW_MS;
    let mut report = String::new();
    for window in first..first + windows {
        let a = seen_a.admitted.get(&window).copied().unwrap_or(0);
        let b = seen_b.admitted.get(&window).copied().unwrap_or(0);
        let total = (a + b) as f64;
        report.push_str(&format!(
            "window {window}: a {a} + b {b} = {total} ({:.3} of the limit), counters {:?}\n",
            total / limit,
            watched[&window]
        ));
    }
    eprintln!("{report}");
    for window in first..first + windows {
        let a = seen_a.admitted.get(&window).copied().unwrap_or(0);
        let b = seen_b.admitted.get(&window).copied().unwrap_or(0);
        let total = (a + b) as f64;
        if window == partition_window {
            // Partitioned, a falls back to its fair share beyond what b acknowledged: at most
            // (1 + 1/2) · limit with two regions.
            assert!(total <= 1.5 * limit, "{report}");
        } else {
            assert!(total <= (1.0 + BUDGET) * limit, "over budget:\n{report}");
            // Offered three times the limit, the regions together get most of it.
            assert!(total >= 0.6 * limit, "starved:\n{report}");
        }
        // Each region's counter, in its own Redis and in the peer's, is exactly what it
        // admitted: nothing lost in the partition, nothing counted twice after the heal.
        assert_eq!(watched[&window], [a, a, b, b], "window {window}:\n{report}");
    }
    // A check never waits on a peer, partitioned or not (the peer timeout is 3 s).
    assert!(
        seen_a.slowest < Duration::from_millis(1_000),
        "slowest check in a: {:?}\n{report}",
        seen_a.slowest
    );
    assert!(seen_a.checks > 0 && seen_b.checks > 0);
    // The metrics saw the deliveries, the partition and the lag.
    let metrics =
        w.a.tcp()
            .send(http::Method::GET, "/metrics", &[], "")
            .await
            .unwrap();
    let text = String::from_utf8(metrics.body.to_vec()).unwrap();
    assert!(
        text.contains(r#"rate_limit_replication_lag_seconds_count{peer="b"}"#),
        "{text}"
    );
    assert!(text.contains(r#"rate_limit_replication_pending{peer="b"} "#));
    let errors = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"rate_limit_replication_errors_total{peer="b"} "#))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap();
    assert!(errors >= 1, "the partition failed deliveries: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_scope_is_exact_across_regions_and_pays_the_round_trip() {
    let w = world().await;
    let mut tasks = Vec::new();
    for d in [&w.a, &w.b] {
        for _ in 0..8 {
            let client = Arc::new(d.unix());
            let remote = std::ptr::eq(d, &w.b);
            tasks.push(tokio::spawn(async move {
                let (mut admitted, mut fastest) = (0_u64, Duration::MAX);
                for _ in 0..40 {
                    let started = Instant::now();
                    let out = client.check(&req("billing", "acct:1")).await.unwrap();
                    fastest = fastest.min(started.elapsed());
                    assert!(out.status == 200 || out.status == 429, "{}", out.status);
                    admitted += u64::from(out.status == 200);
                }
                (remote, admitted, fastest)
            }));
        }
    }
    let mut total = 0;
    for task in tasks {
        let (remote, admitted, fastest) = task.await.unwrap();
        total += admitted;
        if remote {
            // Region b decides on the global backend in region a: a round trip at least.
            assert!(fastest >= 2 * ONE_WAY, "{fastest:?}");
        }
    }
    // 640 offered from two regions at once: exactly the limit admitted.
    assert_eq!(total, 200);
    // All-or-nothing cannot span regions: a batch mixing scopes is refused, not split.
    let mixed = sluice_api::BatchRequest {
        checks: vec![req("billing", "acct:2"), req("shared", "acct:2")],
    };
    let refused =
        w.a.unix()
            .send(
                http::Method::POST,
                "/v1/check",
                &[],
                serde_json::to_string(&mixed).unwrap(),
            )
            .await
            .unwrap();
    assert_eq!(refused.status, 400);
    let body = String::from_utf8(refused.body.to_vec()).unwrap();
    assert!(body.contains("cannot mix scopes"), "{body}");
}

/// A replicated policy's answers, through the HTTP API: `X-RateLimit-Remaining` is the limit
/// minus what both regions used (not the momentary cap of 5 000 unacknowledged), the cap still
/// denies, and that 429's `Retry-After` is the short wait for acknowledgements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_answers_report_every_regions_use_and_a_cap_denial_retries_soon() {
    const HOUR_MS: u64 = 3_600_000;
    let policies = r#"
[policies.paced]
algorithm = "fixed_window"
limit = 100000
window = "1h"
scope = "replicated"
sync_interval = "100ms"
overshoot_budget = 0.05
fail = "closed"
"#;
    // The whole test in one window: not within 30 s of an hour's end.
    if now_ms() % HOUR_MS > HOUR_MS - 30_000 {
        sleep_until(now_ms() / HOUR_MS * HOUR_MS + HOUR_MS + 10).await;
    }
    let w = World::start(policies, ONE_WAY).await;
    let (a, b) = (w.a.unix(), w.b.unix());
    let remaining = |out: &sluice_client::CheckOutcome| -> u64 {
        sluice_tests::header(&out.headers, "x-ratelimit-remaining")
            .parse()
            .unwrap()
    };
    let spent_a = a.check(&req_cost("paced", "k", 40)).await.unwrap();
    assert_eq!((spent_a.status, remaining(&spent_a)), (200, 100_000 - 40));
    let spent_b = b.check(&req_cost("paced", "k", 30)).await.unwrap();
    assert_eq!((spent_b.status, remaining(&spent_b)), (200, 100_000 - 30));

    // Both deliveries land and b acknowledges a's 40 (generous bound: the link is 50 ms).
    let window = keys::window_key(
        "rl",
        "paced",
        "k",
        Algorithm::FixedWindow,
        HOUR_MS,
        now_ms() / HOUR_MS,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let peek = a.check(&req_cost("paced", "k", 0)).await.unwrap();
        let acked = w.ra.cli(&["HGET", &window, "a:b"]);
        if remaining(&peek) == 100_000 - 70 && acked == "40" {
            break;
        }
        assert!(Instant::now() < deadline, "not delivered: {acked:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peek_b = b.check(&req_cost("paced", "k", 0)).await.unwrap();
    assert_eq!(remaining(&peek_b), 99_930);

    // No acknowledgement can come back now (the link drops everything, so a delivery waits
    // for its 3 s timeout): a may hold 5 000 unacknowledged.
    w.ab.partition(Partition::Drop);
    let within_cap = a.check(&req_cost("paced", "k", 4_960)).await.unwrap();
    assert_eq!(within_cap.status, 200);
    assert_eq!(remaining(&within_cap), 99_930 - 4_960);
    let over_cap = a.check(&req_cost("paced", "k", 100)).await.unwrap();
    assert_eq!(over_cap.status, 429);
    assert_eq!(remaining(&over_cap), 99_930 - 4_960);
    assert_eq!(sluice_tests::header(&over_cap.headers, "retry-after"), "1");
    assert_eq!(over_cap.body.remaining, 99_930 - 4_960);
    w.ab.heal();
}
