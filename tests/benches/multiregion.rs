//! Multi-region benchmark (not a test): for sync_interval 50/100/500 ms × one-way link latency
//! 10/50/150 ms, two regions (two in-process daemons, two redis-servers, links through the
//! testkit's latency proxy) are loaded at equal rates, 3× the limit in total, and it reports
//! the measured overshoot (most admitted in one window / limit) and the check latency seen
//! in region b of a `replicated` policy and of a `global` one (whose backend is in region a).
//! A last set of rows runs `overshoot_budget = 1.0`, which lifts the cap on unacknowledged
//! consumption: what plain async replication would admit.
//!
//! Run: `cargo bench -p sluice-tests --bench multiregion` (about 4 minutes). Prints a
//! Markdown table.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_tests::region::{World, now_ms, sleep_until};
use sluice_tests::{Daemon, req};

const LIMIT: u64 = 1_000;

/// The window of a policy syncing every `sync_ms`: the shortest whose rate a 0.05 budget can
/// keep (budget >= 2 · sync_interval / window), and at least 4 s.
fn window_ms(sync_ms: u64) -> u64 {
    (40 * sync_ms).max(4_000)
}

fn policies() -> String {
    let mut toml = String::new();
    for (name, sync, budget) in [
        ("s50", 50, 0.05),
        ("s100", 100, 0.05),
        ("s500", 500, 0.05),
        ("plain", 100, 1.0),
    ] {
        toml.push_str(&format!(
            "[policies.{name}]\nalgorithm = \"fixed_window\"\nlimit = {LIMIT}\nwindow = \"{}ms\"\n\
             scope = \"replicated\"\nsync_interval = \"{sync}ms\"\novershoot_budget = {budget}\n\
             fail = \"closed\"\n\n",
            window_ms(sync)
        ));
    }
    toml.push_str(
        "[policies.billing]\nalgorithm = \"fixed_window\"\nlimit = 1000000000\nwindow = \"1h\"\n\
         scope = \"global\"\nfail = \"closed\"\n",
    );
    toml
}

#[derive(Default)]
struct Seen {
    admitted: BTreeMap<u64, u64>,
    latencies: Vec<Duration>,
}

/// Paced checks of `policy`/`key` from `workers` clients at `rate`/s in total until `until`.
async fn load(
    d: &Daemon,
    policy: &'static str,
    key: String,
    window_ms: u64,
    rate: u64,
    workers: u64,
    until: u64,
) -> Seen {
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let client = Arc::new(d.unix());
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            let period = Duration::from_micros(1_000_000 * workers / rate.max(1));
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            while now_ms() < until {
                tick.tick().await;
                let started = Instant::now();
                let out = client.check(&req(policy, &key)).await.unwrap();
                seen.latencies.push(started.elapsed());
                if out.status == 200 {
                    let window = out.body.reset * 1000 / window_ms - 1;
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
        all.latencies.extend(seen.latencies);
    }
    all
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

struct Row {
    sync_ms: u64,
    latency_ms: u64,
    budget: f64,
    overshoot: f64,
    replicated: (f64, f64),
    global: (f64, f64),
}

async fn cell(
    world: &World,
    policy: &'static str,
    sync_ms: u64,
    budget: f64,
    latency_ms: u64,
) -> Row {
    world.ab.set_latency(Duration::from_millis(latency_ms));
    world.ba.set_latency(Duration::from_millis(latency_ms));
    let w = window_ms(sync_ms);
    let windows = if w > 4_000 { 1 } else { 2 };
    let first = now_ms() / w + 1;
    let until = (first + windows) * w;
    sleep_until(first * w).await;
    // Each region offers 1.5 × the limit per window: 3 × in total.
    let rate = (LIMIT * 1_500 / w).max(1);
    let key = format!("bench-{latency_ms}");
    let (a, b, global) = tokio::join!(
        load(&world.a, policy, key.clone(), w, rate, 6, until),
        load(&world.b, policy, key.clone(), w, rate, 6, until),
        load(&world.b, "billing", key.clone(), 3_600_000, 40, 4, until),
    );
    #[allow(clippy::cast_precision_loss)]
    let overshoot = (first..first + windows)
        .map(|i| {
            (a.admitted.get(&i).copied().unwrap_or(0) + b.admitted.get(&i).copied().unwrap_or(0))
                as f64
                / LIMIT as f64
        })
        .fold(0.0, f64::max);
    let mut replicated = b.latencies;
    replicated.sort_unstable();
    let mut global = global.latencies;
    global.sort_unstable();
    Row {
        sync_ms,
        latency_ms,
        budget,
        overshoot,
        replicated: (percentile(&replicated, 0.5), percentile(&replicated, 0.99)),
        global: (percentile(&global, 0.5), percentile(&global, 0.99)),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and a five-minute benchmark is no test.
    if !std::env::args().any(|arg| arg == "--bench") {
        eprintln!(
            "multiregion: a benchmark; run it with `cargo bench -p sluice-tests --bench multiregion`"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let world = World::start(&policies(), Duration::from_millis(10)).await;
        let mut rows = Vec::new();
        for (policy, sync_ms, budget) in [
            ("s50", 50, 0.05),
            ("s100", 100, 0.05),
            ("s500", 500, 0.05),
            ("plain", 100, 1.0),
        ] {
            for latency_ms in [10, 50, 150] {
                let row = cell(&world, policy, sync_ms, budget, latency_ms).await;
                eprintln!(
                    "sync {sync_ms}ms latency {latency_ms}ms budget {budget}: overshoot {:.3}",
                    row.overshoot
                );
                rows.push(row);
            }
        }
        println!(
            "| sync_interval | one-way latency | overshoot_budget | window | admitted / limit (worst window) | replicated check p50 / p99 (ms) | global check p50 / p99 (ms) |"
        );
        println!("|---|---|---|---|---|---|---|");
        for r in rows {
            println!(
                "| {} ms | {} ms | {} | {} s | {:.3} | {:.2} / {:.2} | {:.1} / {:.1} |",
                r.sync_ms,
                r.latency_ms,
                r.budget,
                window_ms(r.sync_ms) / 1000,
                r.overshoot,
                r.replicated.0,
                r.replicated.1,
                r.global.0,
                r.global.1
            );
        }
    });
}
