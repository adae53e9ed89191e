//! ns per decision of every algorithm on one hot key, time advancing 1 ms per check.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_core::{Algorithm, Params, State, decide};

fn decisions(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for algorithm in Algorithm::ALL {
        let params = Params::new(algorithm, 1000, 1000, 1000).expect("valid params");
        group.bench_function(algorithm.as_str(), |b| {
            let mut state = State::Fresh;
            let mut now = 1_700_000_000_000u64;
            b.iter(|| {
                now += 1;
                black_box(decide(&params, &mut state, black_box(now), 1))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
