//! The harness the multi-thread benches share: `iters` operations split over `threads`
//! threads, timed by the wall clock, so criterion's time per element is the combined
//! throughput of all threads.

use std::time::{Duration, Instant};

use criterion::Criterion;

/// Short runs: these benches compare builds side by side, several runs in a row.
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

/// The key thread `t` uses for its `n`th operation, out of `keys`: spread over all of them,
/// in a different order on each thread.
pub fn key_index(t: usize, n: u64, keys: usize) -> usize {
    (t * 7919 + n as usize * 104_729) % keys
}

/// Runs `op(thread, n)` for `n` in `0..iters / threads` on each of `threads` threads and
/// returns the wall time of the whole.
pub fn on_threads(threads: usize, iters: u64, op: impl Fn(usize, u64) + Sync) -> Duration {
    let per_thread = iters.div_ceil(threads as u64);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let op = &op;
            scope.spawn(move || {
                for n in 0..per_thread {
                    op(t, n);
                }
            });
        }
    });
    started.elapsed()
}
