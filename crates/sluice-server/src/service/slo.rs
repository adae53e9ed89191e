//! The last hour of every policy, as `GET /v1/status` and `sluice status` show it: checks,
//! 429 ratio, fail-open and fail-closed counts, p99 check latency, the most limited keys and
//! the burn rates of the two SLOs (availability 99.9 %, latency 99 % within 5 ms).
//!
//! Nothing here is on the check path. Once a minute (from the daemon's housekeeping) the
//! window copies each policy's running totals out of the metrics ([`PolicyTotals`]) into a
//! ring of [`SNAPSHOTS`]; a report is what the totals grew by since the oldest snapshot less
//! than an hour old, as Prometheus' `increase()` over `[1h]` would say. Memory: one snapshot
//! per minute, each a few hundred bytes per policy, and the policies are those of the config.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_api::{BurnRates, LimitedKey, PolicyStatus, StatusResponse};

use crate::metrics::totals::PolicyTotals;
use crate::service::compiled::Policy;
use crate::service::limiter::Limiter;
use crate::top::{By, Period};
use sluice_config::policy::{NO_TIER, OTHER};

/// A check answered within this many seconds is fast (a bucket bound of the check histogram,
/// the `le` the latency recording rules read).
pub const LATENCY_THRESHOLD_SECS: f64 = 0.005;
/// Share of checks that must get a real decision (not fail-open, not fail-closed).
pub const AVAILABILITY_OBJECTIVE: f64 = 0.999;
/// Share of checks that must be answered within [`LATENCY_THRESHOLD_SECS`].
pub const LATENCY_OBJECTIVE: f64 = 0.99;

const MINUTE_MS: u64 = 60_000;
const WINDOW_MS: u64 = 60 * MINUTE_MS;
/// One snapshot a minute over the window, and the one taken as it began.
const SNAPSHOTS: usize = 61;
/// Keys listed under `top_limited`.
const TOP_LIMITED: usize = 3;

/// Every policy's totals at one moment.
#[derive(Debug)]
struct Snapshot {
    at_ms: u64,
    totals: HashMap<Arc<str>, PolicyTotals>,
}

/// The recent history of the metrics, one snapshot a minute.
#[derive(Debug)]
pub struct StatusWindow {
    ring: Mutex<VecDeque<Snapshot>>,
}

impl StatusWindow {
    /// A window whose history starts now (the daemon's counters are all zero at start).
    pub fn new(limiter: &Limiter, now_ms: u64) -> Self {
        let mut ring = VecDeque::with_capacity(SNAPSHOTS);
        ring.push_back(snapshot(limiter, now_ms));
        StatusWindow {
            ring: Mutex::new(ring),
        }
    }

    /// Takes a snapshot if a new minute has begun since the last one (called every second).
    pub fn tick(&self, limiter: &Limiter, now_ms: u64) {
        let mut ring = self.ring.lock();
        let due = ring
            .back()
            .is_none_or(|last| now_ms / MINUTE_MS > last.at_ms / MINUTE_MS);
        if !due {
            return;
        }
        if ring.len() >= SNAPSHOTS {
            ring.pop_front();
        }
        ring.push_back(snapshot(limiter, now_ms));
    }

    /// The last hour of every policy in force, by name.
    pub fn report(&self, limiter: &Limiter, now_ms: u64) -> StatusResponse {
        let live = snapshot(limiter, now_ms);
        let ring = self.ring.lock();
        let start = ring
            .iter()
            .position(|s| s.at_ms + WINDOW_MS >= now_ms)
            .unwrap_or(ring.len());
        let history: Vec<&Snapshot> = ring.range(start..).chain([&live]).collect();
        let mut names: Vec<&Arc<str>> = live.totals.keys().collect();
        names.sort_unstable();
        let policies = names
            .into_iter()
            .map(|name| {
                let grown = growth(&history, name, limiter.metrics().check_buckets().len());
                status(
                    name,
                    &grown,
                    limiter.metrics().check_buckets(),
                    top_limited(limiter, name, now_ms),
                )
            })
            .collect();
        StatusResponse { policies }
    }
}

/// The totals of every policy in force, now.
fn snapshot(limiter: &Limiter, now_ms: u64) -> Snapshot {
    let (none, other): (Arc<str>, Arc<str>) = (NO_TIER.into(), OTHER.into());
    let totals = limiter
        .snapshot()
        .policies
        .iter()
        .map(|policy| {
            let (tiers, endpoints) = labels(policy, &none, &other);
            let totals = limiter
                .metrics()
                .policy_totals(&policy.name, &tiers, &endpoints);
            (policy.name.clone(), totals)
        })
        .collect();
    Snapshot {
        at_ms: now_ms,
        totals,
    }
}

/// Every `plan_tier` and `endpoint` label a check of `policy` can carry.
fn labels(policy: &Policy, none: &Arc<str>, other: &Arc<str>) -> (Vec<Arc<str>>, Vec<Arc<str>>) {
    let mut tiers = vec![none.clone(), other.clone()];
    tiers.extend(policy.tiers.values().map(|limit| limit.tier_label.clone()));
    let mut endpoints = vec![none.clone(), other.clone()];
    endpoints.extend(policy.endpoints.values().map(|(label, _)| label.clone()));
    for list in [&mut tiers, &mut endpoints] {
        list.sort_unstable();
        list.dedup();
    }
    (tiers, endpoints)
}

/// What `name`'s totals grew by along `history` (oldest first, now last). Each step counts
/// what grew; a total that shrank lost a series (a tier removed by a reload) and counts zero.
/// A policy missing from a snapshot (added by a reload) starts from zero at the next one.
fn growth(history: &[&Snapshot], name: &Arc<str>, buckets: usize) -> PolicyTotals {
    let mut grown = PolicyTotals {
        latency: vec![0; buckets + 1],
        ..PolicyTotals::default()
    };
    let zero = PolicyTotals {
        latency: vec![0; buckets + 1],
        ..PolicyTotals::default()
    };
    for pair in history.windows(2) {
        let Some(after) = pair[1].totals.get(name) else {
            continue;
        };
        let before = pair[0].totals.get(name).unwrap_or(&zero);
        grown.checks += after.checks.saturating_sub(before.checks);
        grown.rejected += after.rejected.saturating_sub(before.rejected);
        grown.fail_open += after.fail_open.saturating_sub(before.fail_open);
        grown.fail_closed += after.fail_closed.saturating_sub(before.fail_closed);
        for (sum, (a, b)) in grown
            .latency
            .iter_mut()
            .zip(after.latency.iter().zip(&before.latency))
        {
            *sum += a.saturating_sub(*b);
        }
    }
    grown
}

/// The `top_limited` keys of `name` over the last hour (the sketch's 60-minute period).
fn top_limited(limiter: &Limiter, name: &str, now_ms: u64) -> Vec<LimitedKey> {
    limiter
        .top()
        .top(name, Period::Hour, By::Rejected, TOP_LIMITED, now_ms)
        .map(|report| {
            report
                .entries
                .into_iter()
                .filter(|e| e.rejected > 0)
                .map(|e| LimitedKey {
                    key: e.key,
                    rejected: e.rejected,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One policy's status from what its totals grew by in the window.
fn status(name: &str, t: &PolicyTotals, bounds: &[f64], top: Vec<LimitedKey>) -> PolicyStatus {
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let ratio = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let fast: u64 = t
        .latency
        .iter()
        .zip(bounds)
        .filter(|(_, bound)| **bound <= LATENCY_THRESHOLD_SECS)
        .map(|(n, _)| *n)
        .sum();
    let failed = t.fail_open + t.fail_closed;
    let availability_bad = ratio(failed, t.checks + t.fail_closed);
    let latency_bad = if t.checks == 0 {
        0.0
    } else {
        1.0 - ratio(fast, t.checks)
    };
    PolicyStatus {
        policy: name.to_owned(),
        checks: t.checks,
        rejected_ratio: ratio(t.rejected, t.checks),
        fail_open: t.fail_open,
        fail_closed: t.fail_closed,
        p99_ms: quantile(0.99, &t.latency, bounds).map(|secs| secs * 1000.0),
        top_limited: top,
        burn_rate: BurnRates {
            availability_1h: availability_bad / (1.0 - AVAILABILITY_OBJECTIVE),
            latency_1h: latency_bad / (1.0 - LATENCY_OBJECTIVE),
        },
    }
}

/// The `q` quantile of a histogram as Prometheus' `histogram_quantile` estimates it: linear
/// within the bucket it falls in, the highest finite bound when it falls in `+Inf`. `counts`
/// are per bucket (`+Inf` last); `None` without observations.
fn quantile(q: f64, counts: &[u64], bounds: &[f64]) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let rank = q * total as f64;
    let mut below = 0_u64;
    for (i, count) in counts.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let reached = (below + count) as f64 >= rank;
        if reached && *count > 0 {
            let Some(upper) = bounds.get(i) else {
                return bounds.last().copied();
            };
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            #[allow(clippy::cast_precision_loss)]
            let within = (rank - below as f64) / *count as f64;
            return Some(lower + (upper - lower) * within);
        }
        below += count;
    }
    bounds.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [f64; 3] = [0.001, 0.005, 0.01];

    fn totals(checks: u64, rejected: u64, fail: (u64, u64), latency: [u64; 4]) -> PolicyTotals {
        PolicyTotals {
            checks,
            rejected,
            fail_open: fail.0,
            fail_closed: fail.1,
            latency: latency.to_vec(),
        }
    }

    fn snap(at_ms: u64, entries: &[(&str, PolicyTotals)]) -> Snapshot {
        Snapshot {
            at_ms,
            totals: entries
                .iter()
                .map(|(name, t)| (Arc::from(*name), t.clone()))
                .collect(),
        }
    }

    #[test]
    fn the_latency_threshold_is_a_bucket_bound_of_the_check_histogram() {
        let metrics = crate::metrics::Metrics::new();
        assert!(metrics.check_buckets().contains(&LATENCY_THRESHOLD_SECS));
    }

    #[test]
    fn the_quantile_interpolates_as_histogram_quantile_does() {
        assert_eq!(quantile(0.99, &[0, 0, 0, 0], &BOUNDS), None);
        // 100 checks, all in (1 ms, 5 ms]: the 99th is 99 % of the way through the bucket.
        let p99 = quantile(0.99, &[0, 100, 0, 0], &BOUNDS).unwrap();
        assert!((p99 - (0.001 + 0.004 * 0.99)).abs() < 1e-12, "{p99}");
        // Past every finite bound: the highest one.
        assert_eq!(quantile(0.99, &[1, 0, 0, 99], &BOUNDS), Some(0.01));
        assert_eq!(quantile(0.5, &[10, 0, 0, 0], &BOUNDS), Some(0.0005));
    }

    #[test]
    fn the_burn_rates_follow_the_spec_formulas() {
        // 1000 checks, 2 failed open, 1 failed closed: availability 1 - 3/1001.
        // 30 of the 1000 above 5 ms: latency 0.97.
        let t = totals(1000, 100, (2, 1), [500, 470, 20, 10]);
        let s = status("p", &t, &BOUNDS, Vec::new());
        assert_eq!(s.checks, 1000);
        assert!((s.rejected_ratio - 0.1).abs() < 1e-12);
        let availability = (3.0 / 1001.0) / (1.0 - 0.999);
        assert!((s.burn_rate.availability_1h - availability).abs() < 1e-9);
        assert!((s.burn_rate.latency_1h - 3.0).abs() < 1e-9, "{s:?}");
        let idle = status("q", &totals(0, 0, (0, 0), [0; 4]), &BOUNDS, Vec::new());
        assert_eq!(idle.p99_ms, None);
        assert_eq!(idle.burn_rate.availability_1h, 0.0);
        assert_eq!(idle.burn_rate.latency_1h, 0.0);
        // Only fail-closed checks: no decision at all, the whole budget burns.
        let down = status("r", &totals(0, 0, (0, 5), [0; 4]), &BOUNDS, Vec::new());
        assert!((down.burn_rate.availability_1h - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn growth_counts_the_window_only_and_survives_reloads() {
        let before = snap(0, &[("p", totals(50, 5, (0, 0), [50, 0, 0, 0]))]);
        let start = snap(60_000, &[("p", totals(100, 10, (1, 0), [90, 10, 0, 0]))]);
        // A reload dropped a tier whose 4 rejections leave the sum; `q` is new.
        let mid = snap(
            120_000,
            &[
                ("p", totals(150, 6, (1, 0), [130, 20, 0, 0])),
                ("q", totals(7, 0, (0, 0), [7, 0, 0, 0])),
            ],
        );
        let now = snap(
            180_000,
            &[
                ("p", totals(160, 9, (3, 2), [135, 20, 5, 0])),
                ("q", totals(9, 1, (0, 0), [9, 0, 0, 0])),
            ],
        );
        let history = [&start, &mid, &now];
        let p = growth(&history, &"p".into(), 3);
        assert_eq!(p.checks, 60);
        assert_eq!(p.rejected, 3, "the shrink counts zero, then 3 more");
        assert_eq!((p.fail_open, p.fail_closed), (2, 2));
        assert_eq!(p.latency, vec![45, 10, 5, 0]);
        let q = growth(&history, &"q".into(), 3);
        assert_eq!(q.checks, 9, "counted from zero where it appeared");
        // `before` is outside the window: not counted.
        let all = growth(&[&before, &start], &"p".into(), 3);
        assert_eq!(all.checks, 50);
    }
}
