//! Lines per second of a replay, over a generated nginx `combined` log of 200 000 lines
//! (10 000 keys, Zipf-like): `scan` parses and merges only, `replay` also decides every line
//! through two policies (token_bucket and fixed_window, as the daemon would), and
//! `replay_candidate` judges a candidate beside each. The difference between `scan` and
//! `replay` is the replay's own share; `scripts/bench-replay` times the same over 1 000 000.

use std::hint::black_box;
use std::io::{BufWriter, Write};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_core::{Algorithm, Params};
use sluice_replay::generate::{LogFormat, LogSpec, write_log};
use sluice_replay::{Format, ReplayOptions, ReplayPolicy, replay, scan};

fn policies() -> Vec<ReplayPolicy> {
    let params = |algorithm, limit| {
        Params::new(algorithm, limit, 60_000, limit).expect("valid bench limits")
    };
    let mut public = ReplayPolicy::new("public", params(Algorithm::TokenBucket, 100));
    public
        .candidates
        .insert("none".to_owned(), params(Algorithm::TokenBucket, 150));
    let mut strict = ReplayPolicy::new("strict", params(Algorithm::FixedWindow, 30));
    strict
        .candidates
        .insert("none".to_owned(), params(Algorithm::FixedWindow, 60));
    vec![public, strict]
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("combined.log");
    let spec = LogSpec::new(LogFormat::NginxCombined, 10_000, 1000, 200);
    let mut file = BufWriter::new(std::fs::File::create(&path).expect("create the log"));
    let lines = write_log(&spec, &mut file).expect("write the log");
    file.flush().expect("flush the log");
    drop(file);
    let files = vec![path];
    let policies = policies();
    let options = ReplayOptions::new(Format::nginx_combined());
    let mut with_candidate = options.clone();
    with_candidate.candidate = true;

    let mut group = c.benchmark_group("combined_200k");
    group.sample_size(10);
    group.throughput(Throughput::Elements(lines));
    group.bench_function("scan", |b| {
        b.iter(|| black_box(scan(&policies, &files, &options).expect("scan")))
    });
    group.bench_function("replay", |b| {
        b.iter(|| black_box(replay(&policies, &files, &options).expect("replay")))
    });
    group.bench_function("replay_candidate", |b| {
        b.iter(|| black_box(replay(&policies, &files, &with_candidate).expect("replay")))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
