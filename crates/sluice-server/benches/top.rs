//! The cost every check pays to the "who is being limited" history (`TopKeys::record`), on
//! 1 and 2 threads recording checks of one policy over 100k keys: what a policy's checks
//! pay when they run on several cores at once. Time per element is wall time divided by the
//! records of all threads, so elements/s is the combined throughput.
//!
//! `cargo bench -p sluice-server --bench top`

// A bench is not reachable from input: a failed set-up should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sluice_server::top::TopKeys;

mod threads;

const T0: u64 = 1_800_000_000_000;
const KEYS: usize = 100_000;

fn record(c: &mut Criterion) {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user:{i}")).collect();
    let mut group = c.benchmark_group("top_record");
    group.throughput(Throughput::Elements(1));
    for threads in [1usize, 2] {
        let top = TopKeys::new();
        top.retain_policies(["p"]);
        group.bench_function(BenchmarkId::from_parameter(format!("{threads}t")), |b| {
            b.iter_custom(|iters| {
                threads::on_threads(threads, iters, |t, n| {
                    let i = threads::key_index(t, n, KEYS);
                    top.record("p", black_box(&keys[i]), n % 4 == 0, T0 + n / 1000);
                })
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = threads::criterion();
    targets = record
}
criterion_main!(benches);
