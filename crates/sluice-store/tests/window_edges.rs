//! Window edges under load, on every backend: four stores (four daemons' worth of clients,
//! connections and group-commit queues) share one Redis (and one cluster), 32 tasks hammer
//! hot keys of every algorithm with 1 s windows for a dozen edges, and Redis is paused
//! (SIGSTOP) for 100 ms starting 40 ms before every edge, so the checks stamped just before
//! an edge queue behind the paused call and reach Redis after their window's state stopped
//! mattering. Every answer is then checked against the algorithm's invariant, by the time the
//! store decided it at:
//! - fixed_window: admitted ≤ limit in every aligned window (an admitted answer's `reset` is
//!   the end of the window it was counted in);
//! - sliding_window_counter: admitted ≤ limit in every aligned window (its `reset` lies within
//!   a window after the window it was counted in);
//! - sliding_window_log: admitted ≤ limit in every window-long span (an admitted answer's
//!   `reset` is its decision time plus the window);
//! - token_bucket, gcra: admitted ≤ burst + limit·Δt/window over any Δt, counted by the checks'
//!   own timestamps and widened by the longest answer latency (a check that queued is decided
//!   at most that much after its timestamp).
//!
//! Before keys outlived their state by the store's expiry grace, a check stamped just before
//! an edge found its window's key expired and started that window again from zero.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::{Algorithm, Params};
use sluice_store::StoreExt;
use sluice_store::{Check, MemoryStore, Store};

const WINDOW_MS: u64 = 1000;
const LIMIT: u64 = 20;
const BURST: u64 = 10;
const KEYS: usize = 3;
const TASKS: usize = 32;
const STORES: usize = 4;
const EDGES: u64 = 12;
/// Redis is paused from this long before an edge...
const PAUSE_BEFORE_EDGE: Duration = Duration::from_millis(40);
/// ...for this long: checks queue for most of it, well within the stores' timeout.
const PAUSE: Duration = Duration::from_millis(100);
/// The stores' `backend.timeout`: longer than a pause, so queued checks are answered.
const TIMEOUT: Duration = Duration::from_millis(400);

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::FixedWindow,
    Algorithm::SlidingWindowCounter,
    Algorithm::SlidingWindowLog,
    Algorithm::TokenBucket,
    Algorithm::Gcra,
];

const KEY_NAMES: [&str; KEYS] = ["hot-a", "hot-b", "hot-c"];

/// The key of hot key `key` of algorithm `algorithm`: each algorithm keeps its own state.
fn key_name(algorithm: usize, key: usize) -> String {
    format!("{}:{}", ALGORITHMS[algorithm].as_str(), KEY_NAMES[key])
}

fn params(algorithm: Algorithm) -> Params {
    let burst = if algorithm.uses_burst() { BURST } else { LIMIT };
    Params::new(algorithm, LIMIT, WINDOW_MS, burst).unwrap()
}

/// One answer: which limit, when it was asked and answered, and what it said.
#[derive(Debug, Clone, Copy)]
struct Answer {
    algorithm: usize,
    key: usize,
    stamp_ms: u64,
    answered_ms: u64,
    allowed: bool,
    reset_ms: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_algorithm_admits_past_its_bound_across_window_edges_under_load() {
    let servers = common::Servers::start();
    servers.cluster.wait_healthy(Duration::from_secs(30));

    let memory: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let redis: Vec<Arc<dyn Store>> = (0..STORES)
        .map(|_| Arc::new(common::redis_store(&servers.redis, "edge", TIMEOUT)) as Arc<dyn Store>)
        .collect();
    let redis_tls: Vec<Arc<dyn Store>> = (0..STORES)
        .map(|_| {
            Arc::new(common::redis_tls_store_with(
                &servers,
                "edge",
                TIMEOUT,
                Duration::ZERO,
            )) as Arc<dyn Store>
        })
        .collect();
    let mut cluster: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..STORES {
        cluster.push(Arc::new(
            common::cluster_store(&servers.cluster, "edge", TIMEOUT).await,
        ));
    }

    let redis_pids = vec![pid_of(servers.redis.port())];
    let redis_tls_pids = vec![pid_in(&servers.redis_tls.cli(&["INFO", "server"]))];
    let cluster_pids: Vec<String> = servers.cluster.ports().into_iter().map(pid_of).collect();
    // Per backend: its four stores (one for memory: a daemon's own) and the processes to pause.
    type Run = (&'static str, Vec<Arc<dyn Store>>, Vec<String>);
    let runs: Vec<Run> = vec![
        ("memory", vec![memory], Vec::new()),
        ("redis", redis, redis_pids),
        ("redis-tls", redis_tls, redis_tls_pids),
        ("cluster", cluster, cluster_pids),
    ];

    let mut failures = Vec::new();
    for (name, stores, pids) in runs {
        let answers = run_load(stores, pids).await;
        let errors = answers.iter().filter(|a| a.is_none()).count();
        let answers: Vec<Answer> = answers.into_iter().flatten().collect();
        eprintln!(
            "{name}: {} answers ({} allowed), {errors} failed",
            answers.len(),
            answers.iter().filter(|a| a.allowed).count()
        );
        failures.extend(check_invariants(name, &answers));
    }
    assert!(
        failures.is_empty(),
        "{} invariant violations:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Drives the load over a dozen edges, pausing the backend around each, and returns every
/// answer (`None` for a check that failed, e.g. timed out).
async fn run_load(stores: Vec<Arc<dyn Store>>, pids: Vec<String>) -> Vec<Option<Answer>> {
    // Start just after an edge, so every pause lands on an edge inside the run.
    let first_edge = (common::now_ms() / WINDOW_MS + 1) * WINDOW_MS;
    wait_until(first_edge + 100).await;
    let end = first_edge + EDGES * WINDOW_MS + 100;

    let pauser = tokio::task::spawn_blocking(move || {
        for edge in 1..=EDGES {
            let at = first_edge + edge * WINDOW_MS - PAUSE_BEFORE_EDGE.as_millis() as u64;
            sleep_until_blocking(at);
            signal(&pids, "STOP");
            std::thread::sleep(PAUSE);
            signal(&pids, "CONT");
        }
    });

    let names: Arc<Vec<Vec<String>>> = Arc::new(
        (0..ALGORITHMS.len())
            .map(|algorithm| (0..KEYS).map(|key| key_name(algorithm, key)).collect())
            .collect(),
    );
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&stores[task % stores.len()]);
        let names = Arc::clone(&names);
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            let mut rng = 0x9e37_79b9_7f4a_7c15_u64 ^ (task as u64 + 1).wrapping_mul(0xff51);
            loop {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let algorithm = (rng % ALGORITHMS.len() as u64) as usize;
                let key = ((rng >> 8) % KEYS as u64) as usize;
                let stamp_ms = common::now_ms();
                if stamp_ms >= end {
                    return answers;
                }
                let check = Check::new(
                    "edge",
                    &names[algorithm][key],
                    params(ALGORITHMS[algorithm]),
                    1,
                );
                let result = store.check(&check, stamp_ms).await;
                let answered_ms = common::now_ms();
                answers.push(result.ok().map(|decision| Answer {
                    algorithm,
                    key,
                    stamp_ms,
                    answered_ms,
                    allowed: decision.allowed,
                    reset_ms: decision.reset_ms,
                }));
                // The memory store answers without yielding: let the other tasks run.
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.extend(task.await.unwrap());
    }
    pauser.await.unwrap();
    answers
}

/// Every violation of an algorithm's invariant among `answers`, and too little demand to
/// prove anything (a key of a window algorithm that rarely reached its limit).
fn check_invariants(backend: &str, answers: &[Answer]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut by_limit: HashMap<(usize, usize), Vec<&Answer>> = HashMap::new();
    for answer in answers {
        by_limit
            .entry((answer.algorithm, answer.key))
            .or_default()
            .push(answer);
    }
    let latency = answers
        .iter()
        .map(|a| a.answered_ms - a.stamp_ms)
        .max()
        .unwrap_or(0);
    for ((algorithm, key), answers) in by_limit {
        let what = format!("{backend} {}", key_name(algorithm, key));
        let algorithm = ALGORITHMS[algorithm];
        let allowed: Vec<&Answer> = answers.iter().copied().filter(|a| a.allowed).collect();
        match algorithm {
            Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => {
                let mut per_window: HashMap<u64, u64> = HashMap::new();
                for answer in &allowed {
                    let window = if algorithm == Algorithm::FixedWindow {
                        answer.reset_ms / WINDOW_MS - 1
                    } else {
                        (answer.reset_ms - WINDOW_MS - 1) / WINDOW_MS
                    };
                    *per_window.entry(window).or_default() += 1;
                }
                for (window, admitted) in &per_window {
                    if *admitted > LIMIT {
                        failures.push(format!(
                            "{what}: window {window} admitted {admitted} > {LIMIT}"
                        ));
                    }
                }
                let full = per_window.values().filter(|n| **n == LIMIT).count() as u64;
                if full < EDGES - 4 {
                    failures.push(format!(
                        "{what}: only {full} windows reached the limit: too little demand"
                    ));
                }
            }
            Algorithm::SlidingWindowLog => {
                let mut decided: Vec<u64> =
                    allowed.iter().map(|a| a.reset_ms - WINDOW_MS).collect();
                decided.sort_unstable();
                let mut first = 0;
                for (last, at) in decided.iter().enumerate() {
                    while decided[first] + WINDOW_MS <= *at {
                        first += 1;
                    }
                    let admitted = (last - first + 1) as u64;
                    if admitted > LIMIT {
                        failures.push(format!(
                            "{what}: {admitted} > {LIMIT} admitted in the window ending at {at}"
                        ));
                        break;
                    }
                }
            }
            _ => {
                // k admissions stamped within Δt, decided within Δt + latency: at most
                // burst + limit·(Δt + latency)/window. In units of 1/window: for every
                // i ≤ j, (j − i + 1)·W − limit·(s_j − s_i) ≤ burst·W + limit·latency.
                let mut stamps: Vec<u64> = allowed.iter().map(|a| a.stamp_ms).collect();
                stamps.sort_unstable();
                let bound = (BURST * WINDOW_MS + LIMIT * latency) as i128;
                let mut lowest: Option<i128> = None;
                let f = |k: usize, s: u64| (k as i128) * WINDOW_MS as i128 - (LIMIT * s) as i128;
                for (j, stamp) in stamps.iter().enumerate() {
                    // f(i) for the span starting at j (one admission before it).
                    let start = f(j, *stamp);
                    lowest = Some(lowest.map_or(start, |l| l.min(start)));
                    let span = f(j + 1, *stamp) - lowest.unwrap_or(start);
                    if span > bound {
                        failures.push(format!(
                            "{what}: more than burst + limit·(Δt + {latency} ms)/window \
                             admitted in a span ending at {stamp}"
                        ));
                        break;
                    }
                }
            }
        }
        if allowed.is_empty() {
            failures.push(format!("{what}: nothing admitted"));
        }
    }
    failures
}

/// The process id of the Redis server on `port`.
fn pid_of(port: u16) -> String {
    pid_in(&sluice_testkit::cli(port, &["INFO", "server"]))
}

/// The process id an `INFO server` answer names.
fn pid_in(info: &str) -> String {
    sluice_testkit::info_field(info, "process_id").expect("INFO server names process_id")
}

/// Sends `signal` (STOP or CONT) to every process of `pids` at once.
fn signal(pids: &[String], signal: &str) {
    if pids.is_empty() {
        return;
    }
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .args(pids)
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pids:?} failed");
}

async fn wait_until(at_ms: u64) {
    let now = common::now_ms();
    if at_ms > now {
        tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
    }
}

fn sleep_until_blocking(at_ms: u64) {
    let now = common::now_ms();
    if at_ms > now {
        std::thread::sleep(Duration::from_millis(at_ms - now));
    }
}
