//! Keyed decision throughput in process (`keyed`): sluice's `MemoryStore` against governor's
//! `DefaultKeyedRateLimiter` on the same workload: GCRA (governor's only algorithm), a limit
//! no key reaches (every check allowed and consumed), keys drawn uniformly from 1k or 1M,
//! on 1 and 2 threads. Time per element is wall time divided by checks of all threads, so
//! elements/s is the combined throughput.
//!
//! The algorithms' own decision cost (no store) is `crates/sluice-core/benches/decide.rs`.
//!
//! `candidate`: a check with and without a candidate limit beside it (same algorithm, another
//! limit, neither reached), side by side: the memory store on 1 thread (the daemon's at-once
//! path), and a real redis-server started by the testkit, one task at a time (a round trip
//! each) and 64 tasks at once (group commit: Redis's work per check is what bounds it).
//!
//! `CARGO_TARGET_DIR=/work/target-d cargo bench -p sluice-bench --bench store`
//! (`-- candidate` for that group alone)

// A bench is not reachable from input: a failed set-up should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use sluice_core::SplitMix;
use sluice_core::{Algorithm, Params};
use sluice_store::{
    Check, Decided, MemoryStore, MemoryStoreConfig, RedisStore, RedisStoreConfig, Store, StoreExt,
};

const LIMIT: u32 = 1_000_000_000;

/// Unix milliseconds from the TSC clock governor reads (`quanta`), anchored to the wall clock
/// once: both limiters pay the same clock per check, so the rows compare the stores. (Reading
/// `SystemTime` instead costs sluice ~25 ns a check, about what its store path costs.)
struct UnixClock {
    clock: quanta::Clock,
    start: quanta::Instant,
    start_ms: u64,
}

impl UnixClock {
    fn new() -> Self {
        let clock = quanta::Clock::new();
        let start = clock.now();
        let start_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        UnixClock {
            clock,
            start,
            start_ms,
        }
    }

    fn now_ms(&self) -> u64 {
        self.start_ms + self.clock.now().duration_since(self.start).as_millis() as u64
    }
}

/// The memory store never awaits: one poll finishes its future.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
    }
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("bench:{i:07}")).collect()
}

// governor's keyed limiter takes `&K`, here `&String`.
#[allow(clippy::ptr_arg)]
trait Keyed: Sync {
    fn check(&self, key: &String) -> bool;
}

struct Sluice {
    store: MemoryStore,
    params: Params,
    clock: UnixClock,
}

#[allow(clippy::ptr_arg)]
impl Keyed for Sluice {
    fn check(&self, key: &String) -> bool {
        let check = Check::new("bench", key, self.params, 1);
        // The daemon's path: the memory store answers without a future.
        let now_ms = self.clock.now_ms();
        match self.store.decide_now(&check, now_ms) {
            Some(decided) => decided.unwrap().decision.allowed,
            None => ready(self.store.check(&check, now_ms)).unwrap().allowed,
        }
    }
}

struct Governor(DefaultKeyedRateLimiter<String>);

#[allow(clippy::ptr_arg)]
impl Keyed for Governor {
    fn check(&self, key: &String) -> bool {
        self.0.check_key(key).is_ok()
    }
}

fn sluice(max_keys: u64) -> Sluice {
    Sluice {
        store: MemoryStore::new(MemoryStoreConfig {
            max_keys,
            ..MemoryStoreConfig::default()
        }),
        params: Params::new(Algorithm::Gcra, u64::from(LIMIT), 1000, u64::from(LIMIT)).unwrap(),
        clock: UnixClock::new(),
    }
}

fn governor() -> Governor {
    let quota = Quota::per_second(NonZeroU32::new(LIMIT).unwrap());
    Governor(RateLimiter::keyed(quota))
}

/// `iters` checks split over `threads`, wall time of the slowest.
fn run(limiter: &dyn Keyed, keys: &[String], threads: usize, iters: u64) -> Duration {
    let per_thread = iters.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let mut rng = SplitMix(t as u64 * 7919 + 1);
                for _ in 0..per_thread {
                    let key = &keys[rng.below(keys.len() as u64) as usize];
                    black_box(limiter.check(key));
                }
            });
        }
    });
    start.elapsed()
}

fn keyed(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyed");
    group.throughput(Throughput::Elements(1));
    for n in [1_000usize, 1_000_000] {
        let keys = keys(n);
        // Every key tracked before measuring, as on a daemon that has seen them all.
        let limiters: Vec<(&str, Box<dyn Keyed>)> = vec![
            ("sluice_memory", Box::new(sluice(1_000_000))),
            ("sluice_memory_max2M", Box::new(sluice(2_000_000))),
            ("governor", Box::new(governor())),
        ];
        for (name, limiter) in &limiters {
            if n == 1_000 && *name == "sluice_memory_max2M" {
                continue;
            }
            for key in &keys {
                limiter.check(key);
            }
            for threads in [1usize, 2] {
                let id = BenchmarkId::new(*name, format!("{n}keys/{threads}t"));
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| run(limiter.as_ref(), &keys, threads, iters));
                });
            }
        }
    }
    group.finish();
}

/// A check of `key` with or without the candidate.
struct Candidate {
    params: Params,
    candidate: Option<Params>,
}

impl Candidate {
    fn check<'a>(&self, key: &'a str) -> Check<'a> {
        Check {
            candidate: self.candidate,
            ..Check::new("bench", key, self.params, 1)
        }
    }

    /// Whether the check and its candidate (if any) were allowed.
    fn allowed(decided: Decided) -> bool {
        decided.decision.allowed && decided.candidate.is_none_or(|judged| judged.allowed)
    }

    /// The daemon's at-once path (memory).
    fn now(&self, store: &MemoryStore, key: &str, now_ms: u64) -> bool {
        Self::allowed(store.decide_now(&self.check(key), now_ms).unwrap().unwrap())
    }

    async fn awaited(&self, store: &dyn Store, key: &str, now_ms: u64) -> bool {
        Self::allowed(store.decide_one(&self.check(key), now_ms).await.unwrap())
    }
}

fn candidate(c: &mut Criterion) {
    let params = Params::new(Algorithm::TokenBucket, 1_000_000, 1000, 1_000_000).unwrap();
    let beside = Params::new(Algorithm::TokenBucket, 1_500_000, 1000, 1_500_000).unwrap();
    let rows = [
        (
            "check",
            Candidate {
                params,
                candidate: None,
            },
        ),
        (
            "with_candidate",
            Candidate {
                params,
                candidate: Some(beside),
            },
        ),
    ];
    let keys = keys(1_000);
    let clock = UnixClock::new();
    let mut group = c.benchmark_group("candidate");
    group.throughput(Throughput::Elements(1));

    let memory = MemoryStore::default();
    for (name, row) in &rows {
        for key in &keys {
            row.now(&memory, key, clock.now_ms());
        }
        group.bench_function(BenchmarkId::new("memory", name), |b| {
            let mut rng = SplitMix(7);
            b.iter(|| {
                let key = &keys[rng.below(keys.len() as u64) as usize];
                black_box(row.now(&memory, key, clock.now_ms()))
            });
        });
    }

    let server = sluice_testkit::RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis: Arc<dyn Store> = Arc::new(runtime.block_on(async {
        RedisStore::new(RedisStoreConfig {
            url: server.url(),
            timeout: Duration::from_secs(1),
            ..RedisStoreConfig::default()
        })
        .unwrap()
    }));
    let keys = Arc::new(keys);
    let clock = Arc::new(clock);
    let rows: Vec<(&str, Arc<Candidate>)> = rows
        .into_iter()
        .map(|(name, row)| (name, Arc::new(row)))
        .collect();
    for tasks in [1u64, 64] {
        for (name, row) in &rows {
            group.bench_function(BenchmarkId::new(format!("redis_{tasks}tasks"), name), |b| {
                b.to_async(&runtime).iter_custom(|iters| {
                    let (redis, keys, clock, row) = (
                        Arc::clone(&redis),
                        Arc::clone(&keys),
                        Arc::clone(&clock),
                        Arc::clone(row),
                    );
                    async move {
                        let per_task = iters.div_ceil(tasks);
                        let start = Instant::now();
                        let running: Vec<_> = (0..tasks)
                            .map(|t| {
                                let (redis, keys, clock, row) = (
                                    Arc::clone(&redis),
                                    Arc::clone(&keys),
                                    Arc::clone(&clock),
                                    Arc::clone(&row),
                                );
                                tokio::spawn(async move {
                                    let mut rng = SplitMix(t * 7919 + 1);
                                    for _ in 0..per_task {
                                        let key = &keys[rng.below(keys.len() as u64) as usize];
                                        black_box(
                                            row.awaited(redis.as_ref(), key, clock.now_ms()).await,
                                        );
                                    }
                                })
                            })
                            .collect();
                        for task in running {
                            task.await.unwrap();
                        }
                        start.elapsed()
                    }
                });
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = keyed, candidate
}
criterion_main!(benches);
