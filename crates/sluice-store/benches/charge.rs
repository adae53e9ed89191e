//! What a charge costs against an ask on the memory store, on one thread with no scheduler
//! between calls: the throughput bench's 64-task rates swing with the machine's load (a 3-s
//! run does about 5 M or about 2.5 M checks a second, asks and charges alike), which hides a
//! difference of a few percent. Here each mode decides the same keys in turn, in the order
//! A B B A over several rounds, and the ratio is of the total times.
//!
//! `cargo bench -p sluice-store --bench charge`

use std::hint::black_box;
use std::time::Instant;

use sluice_core::{Algorithm, Mode, Params};
use sluice_store::{Check, MemoryStore, Store};

const KEYS: usize = 10_000;
const CALLS: usize = 2_000_000;
const ROUNDS: usize = 5;

/// Nanoseconds per call of `CALLS` decisions in `mode`, time moving 1 ms per 1 000 calls.
fn run(store: &MemoryStore, keys: &[String], params: Params, mode: Mode, now: &mut u64) -> f64 {
    let start = Instant::now();
    for i in 0..CALLS {
        if i % 1_000 == 0 {
            *now += 1;
        }
        let check = Check::new("bench", &keys[i % KEYS], params, 1).in_mode(mode);
        let decided = store.decide_now(&check, *now);
        assert!(black_box(decided).is_some_and(|d| d.is_ok()));
    }
    #[allow(clippy::cast_precision_loss)]
    let per_call = start.elapsed().as_nanos() as f64 / CALLS as f64;
    per_call
}

fn main() {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user:{i}")).collect();
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowCounter,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
    ] {
        let params = Params::new(algorithm, 100_000_000, 60_000, 100_000_000).expect("valid");
        let store = MemoryStore::default();
        let mut now = 1_800_000_000_000;
        // Every key known before the first timed call.
        run(&store, &keys, params, Mode::Ask, &mut now);
        let (mut asks, mut charges) = (0.0, 0.0);
        for _ in 0..ROUNDS {
            for mode in [Mode::Ask, Mode::Charge, Mode::Charge, Mode::Ask] {
                let ns = run(&store, &keys, params, mode, &mut now);
                match mode {
                    Mode::Charge => charges += ns,
                    _ => asks += ns,
                }
            }
        }
        let rounds = (2 * ROUNDS) as f64;
        println!(
            "memory {:24} ask {:6.1} ns  charge {:6.1} ns  charges/s ÷ asks/s = {:.3}",
            algorithm.as_str(),
            asks / rounds,
            charges / rounds,
            asks / charges
        );
    }
}
