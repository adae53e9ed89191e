//! The limiter's whole check path in process (resolve the policy and tier, decide on the
//! memory store, metrics, top keys, the verdict the HTTP layer turns into headers), on 1 and
//! 2 threads over 100k keys: what the path costs and how it holds up when several cores run
//! checks of one policy at once. Time per element is wall time divided by the checks of all
//! threads, so elements/s is the combined throughput.
//!
//! `cargo bench -p sluice-server --bench check`

// A bench is not reachable from input: a failed set-up should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sluice_config::ConfigSource;
use sluice_server::App;
use sluice_server::clock::ManualClock;
use sluice_server::service::limiter::CheckInput;
use sluice_server::service::stores::Stores;

mod threads;

const T0: u64 = 1_800_000_000_000;
const KEYS: usize = 100_000;

const CONFIG: &str = r#"
[policies.bench]
algorithm = "sliding_window_counter"
limit = 1000000000
window = "1h"
"#;

/// The memory store never awaits: one poll finishes a check.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("a memory-store check waited"),
    }
}

fn check(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _inside = runtime.enter();
    let load = || {
        sluice_server::service::load(&ConfigSource::Text {
            name: "bench.toml".to_owned(),
            toml: CONFIG.to_owned(),
        })
        .unwrap()
    };
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user:{i}")).collect();
    let mut group = c.benchmark_group("limiter_check");
    group.throughput(Throughput::Elements(1));
    for threads in [1usize, 2] {
        let settings = load();
        let clock = Arc::new(ManualClock::new(T0));
        let stores = Stores::build(
            &settings.settings.backend,
            &settings.settings.region,
            clock.clone(),
        )
        .unwrap();
        let app = App::new(settings, stores, clock);
        group.bench_function(BenchmarkId::from_parameter(format!("{threads}t")), |b| {
            b.iter_custom(|iters| {
                threads::on_threads(threads, iters, |t, n| {
                    let i = threads::key_index(t, n, KEYS);
                    let input = CheckInput::new("bench", &keys[i]);
                    black_box(ready(app.limiter.check(&input, T0)).unwrap());
                })
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = threads::criterion();
    targets = check
}
criterion_main!(benches);
