//! The result of a replay. Serialized, it is exactly the `--json` document of the SPEC:
//! `{"lines", "unparsed", "policies": [{"policy", "tier", "requests", "rejected", "keys",
//! "keys_limited", "peak_rate": {"p50", "p90", "p99", "max"}, "suggested_limit", "top":
//! [{"key", "rejected"}], "candidate", "limits"}], "max_reject"}` (`limits` only for
//! stacked limits, `max_reject` only when given). What only the text and HTML renderers show (the
//! limits, the timeline, every key's peak, the unparsed examples) is kept beside it, skipped
//! by serde.

use std::path::PathBuf;

use serde::Serialize;

use crate::input::LimitSpec;
use crate::stats::Timeline;

/// The whole replay.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Lines read (blank lines and a CSV header excluded), parsed or not.
    pub lines: u64,
    /// Lines that could not be replayed.
    pub unparsed: u64,
    /// One entry per (policy, tier) that saw traffic, and per policy that saw none (its
    /// `none` tier, all zero).
    pub policies: Vec<PolicyReport>,
    /// `--max-reject`, which the suggested limits answer; absent: the keys rule alone (so the
    /// default document is exactly the SPEC's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_reject: Option<f64>,
    #[serde(skip)]
    pub details: ReportDetails,
}

impl Report {
    /// The entries grouped by policy, in report order.
    pub fn by_policy(&self) -> Vec<(&str, Vec<&PolicyReport>)> {
        let mut groups: Vec<(&str, Vec<&PolicyReport>)> = Vec::new();
        for row in &self.policies {
            match groups.last_mut() {
                Some((policy, rows)) if *policy == row.policy => rows.push(row),
                _ => groups.push((row.policy.as_str(), vec![row])),
            }
        }
        groups
    }
}

/// What the renderers show beyond the JSON document.
#[derive(Debug, Clone, Default)]
pub struct ReportDetails {
    /// The files replayed, in the order given.
    pub files: Vec<PathBuf>,
    /// The first few unparsed lines, in file order.
    pub unparsed_examples: Vec<UnparsedLine>,
    /// The time of the earliest and of the latest line replayed, unix ms.
    pub first_ms: Option<u64>,
    pub last_ms: Option<u64>,
    /// Distinct keys over all policies.
    pub keys: u64,
}

/// A line that could not be replayed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnparsedLine {
    pub file: PathBuf,
    /// 1-based line number in its file.
    pub line: u64,
    pub reason: String,
    /// The line's start (at most [`UNPARSED_TEXT_CHARS`] characters), lossily decoded.
    pub text: String,
}

/// Characters of an unparsed line kept to show it.
pub const UNPARSED_TEXT_CHARS: usize = 160;

/// One (policy, tier).
#[derive(Debug, Clone, Serialize)]
pub struct PolicyReport {
    pub policy: String,
    /// A tier name, `none` (no tier) or `other` (a tier the policy does not have).
    pub tier: String,
    pub requests: u64,
    /// Requests the limit would have rejected (429).
    pub rejected: u64,
    /// Distinct keys seen.
    pub keys: u64,
    /// Keys rejected at least once.
    pub keys_limited: u64,
    /// Per-key peak requests per aligned window of the limit's window, over keys.
    pub peak_rate: PeakRate,
    /// `Lk`, or `max(Lk, Lr)` with `--max-reject` (see the crate doc); `null` without traffic.
    pub suggested_limit: Option<u64>,
    /// The keys with most rejections, at most [`TOP_KEYS`], most first.
    pub top: Vec<TopKey>,
    /// The candidate limit's counts, with `--candidate` and a candidate for this tier.
    pub candidate: Option<CandidateReport>,
    /// Of stacked limits, each limit in the config's order: the requests it denied (a
    /// request two limits denied counts under both), and the peak rates and suggestion in its
    /// own windows; absent for one limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<StackedReport>,
    /// The limit replayed (the first of stacked limits: peak rates and the suggestion are
    /// counted in its windows).
    #[serde(skip)]
    pub limit: LimitSpec,
    /// Requests and rejections over time.
    #[serde(skip)]
    pub timeline: Timeline,
    /// Every key's peak per window, ascending.
    #[serde(skip)]
    pub peaks: Vec<u64>,
}

impl PolicyReport {
    /// Rejected share of requests, in percent.
    pub fn rejected_percent(&self) -> f64 {
        percent(self.rejected, self.requests)
    }
}

/// One stacked limit of a (policy, tier).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StackedReport {
    /// Its label, `<policy>.<window>`.
    pub limit: String,
    /// Requests it denied.
    pub rejected: u64,
    /// Per-key peaks per aligned window of this limit's window.
    pub peak_rate: PeakRate,
    /// The suggestion for this limit, by the same rule as the row's.
    pub suggested_limit: Option<u64>,
    #[serde(skip)]
    pub params: LimitSpec,
}

impl PolicyReport {
    /// The stacked limit that denied most (the first of equals); `None` for one limit or
    /// when none denied.
    pub fn bound_most(&self) -> Option<&StackedReport> {
        let mut most: Option<&StackedReport> = None;
        for limit in self.limits.iter().filter(|l| l.rejected > 0) {
            if most.is_none_or(|m| limit.rejected > m.rejected) {
                most = Some(limit);
            }
        }
        most
    }
}

/// Keys listed in a [`PolicyReport::top`].
pub const TOP_KEYS: usize = 20;

/// Percentiles of per-key peak rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PeakRate {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

/// A key and how many of its requests were rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopKey {
    pub key: String,
    pub rejected: u64,
}

/// The candidate limit, replayed beside the limit on a state of its own.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateReport {
    pub requests: u64,
    pub rejected: u64,
    pub keys: u64,
    pub keys_limited: u64,
    pub top: Vec<TopKey>,
    #[serde(skip)]
    pub limit: LimitSpec,
}

impl CandidateReport {
    /// Rejected share of requests, in percent.
    pub fn rejected_percent(&self) -> f64 {
        percent(self.rejected, self.requests)
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
