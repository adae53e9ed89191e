//! What the replay tests share: limits, files in a temp dir, a replay that must succeed,
//! and finding a (policy, tier) in a report.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

use sluice_core::{Algorithm, Params};
use sluice_replay::{Format, PolicyReport, ReplayOptions, ReplayPolicy, Report, replay};

/// 2026-12-06T10:00:00Z: aligned to a minute and to an hour.
pub const T0: u64 = 1_796_551_200_000;

pub fn limit(algorithm: Algorithm, limit: u64, window_ms: u64, burst: u64) -> Params {
    Params::new(algorithm, limit, window_ms, burst).unwrap()
}

pub fn fixed(limit_per_window: u64, window_ms: u64) -> Params {
    limit(
        Algorithm::FixedWindow,
        limit_per_window,
        window_ms,
        limit_per_window,
    )
}

pub fn policy(name: &str, base: Params) -> ReplayPolicy {
    ReplayPolicy::new(name, base)
}

/// A temp dir holding the test's log files.
pub struct Logs {
    pub dir: tempfile::TempDir,
}

impl Logs {
    pub fn new() -> Self {
        Logs {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn write(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }
}

/// `at_ms` as CSV unix seconds with milliseconds.
pub fn secs(at_ms: u64) -> String {
    format!("{}.{:03}", at_ms / 1000, at_ms % 1000)
}

/// CSV lines `timestamp,key` for `key` at each of `times`.
pub fn csv(key: &str, times: impl IntoIterator<Item = u64>) -> String {
    times
        .into_iter()
        .map(|at| format!("{},{key}\n", secs(at)))
        .collect()
}

pub fn run(policies: &[ReplayPolicy], files: &[PathBuf], options: &ReplayOptions) -> Report {
    replay(policies, files, options).unwrap()
}

pub fn csv_options() -> ReplayOptions {
    ReplayOptions::new(Format::Csv)
}

/// The report of (policy, tier); panics naming what the report has instead.
pub fn row<'a>(report: &'a Report, policy: &str, tier: &str) -> &'a PolicyReport {
    report
        .policies
        .iter()
        .find(|r| r.policy == policy && r.tier == tier)
        .unwrap_or_else(|| {
            let have: Vec<(&str, &str)> = report
                .policies
                .iter()
                .map(|r| (r.policy.as_str(), r.tier.as_str()))
                .collect();
            panic!("no ({policy}, {tier}) in the report; it has {have:?}")
        })
}

/// (key, rejected) of a top list.
pub fn top(row: &PolicyReport) -> Vec<(String, u64)> {
    row.top
        .iter()
        .map(|t| (t.key.clone(), t.rejected))
        .collect()
}
