//! The table `sluice status` prints from `GET /v1/status`: one line per policy, the most
//! limited keys under it; then, from `/metrics`, the units charged to each usage policy and
//! tier (`rate_limit_usage_units_total`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sluice_client::api::{PolicyStatus, StatusResponse};

use crate::metrics_text::samples;

/// The counter of units charged to usage policies.
const USAGE_UNITS: &str = "rate_limit_usage_units_total";

/// Burn rate above which a line is flagged: the fast-burn page threshold (14.4 spends 2 % of
/// a 30-day budget in an hour).
const PAGE_BURN: f64 = 14.4;

/// The status as a readable table.
pub fn table(status: &StatusResponse) -> String {
    let mut out = String::new();
    if status.policies.is_empty() {
        out.push_str("no policies\n");
        return out;
    }
    let width = status
        .policies
        .iter()
        .map(|p| p.policy.len())
        .max()
        .unwrap_or(6)
        .max(6);
    // Writing into a String cannot fail.
    let _ = writeln!(
        out,
        "last hour, this daemon (SLOs: availability 99.9 %, latency 99 % within 5 ms)\n\
         {:<width$}  {:>10}  {:>7}  {:>9}  {:>11}  {:>9}  {:>10}  {:>10}",
        "policy", "checks", "429", "fail-open", "fail-closed", "p99", "burn avail", "burn lat"
    );
    for p in &status.policies {
        let _ = writeln!(
            out,
            "{:<width$}  {:>10}  {:>6.2}%  {:>9}  {:>11}  {:>9}  {:>10}  {:>10}{}",
            p.policy,
            p.checks,
            p.rejected_ratio * 100.0,
            p.fail_open,
            p.fail_closed,
            p.p99_ms
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2}ms")),
            format!("{:.2}", p.burn_rate.availability_1h),
            format!("{:.2}", p.burn_rate.latency_1h),
            flag(p),
        );
        for key in &p.top_limited {
            let _ = writeln!(out, "  limited: {} ({} rejected)", key.key, key.rejected);
        }
    }
    out
}

/// The units charged to each usage policy and tier since the daemon started, from a scrape of
/// its `/metrics`: a line per policy (its total), a line per tier under it. Empty when no
/// usage policy was charged (the counter has no series until a first charge).
pub fn usage_table(metrics: &str) -> String {
    let mut units: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
    let found = samples(metrics, USAGE_UNITS);
    for sample in &found {
        let (Some(policy), Some(tier)) = (sample.label("policy"), sample.label("plan_tier")) else {
            continue;
        };
        *units.entry(policy).or_default().entry(tier).or_default() += sample.value;
    }
    let mut out = String::new();
    if units.is_empty() {
        return out;
    }
    let width = units.keys().map(|p| p.len()).max().unwrap_or(6).max(6);
    let _ = writeln!(
        out,
        "\nusage policies, since this daemon started (units charged: what requests used, and the estimates their checks consumed)\n\
         {:<width$}  {:>16}",
        "policy", "units charged"
    );
    for (policy, tiers) in &units {
        let total: f64 = tiers.values().sum();
        let _ = writeln!(out, "{policy:<width$}  {total:>16.0}");
        for (tier, value) in tiers {
            let _ = writeln!(out, "  tier {tier}: {value:.0}");
        }
    }
    out
}

/// `  ! burning` when a burn rate is at the paging threshold.
fn flag(p: &PolicyStatus) -> &'static str {
    if p.burn_rate.availability_1h >= PAGE_BURN || p.burn_rate.latency_1h >= PAGE_BURN {
        "  ! burning"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use sluice_client::api::{BurnRates, LimitedKey};

    use super::*;

    #[test]
    fn a_line_per_policy_and_its_limited_keys_below() {
        let status = StatusResponse {
            policies: vec![
                PolicyStatus {
                    policy: "public".into(),
                    checks: 1200,
                    rejected_ratio: 0.25,
                    fail_open: 0,
                    fail_closed: 3,
                    p99_ms: Some(0.4567),
                    top_limited: vec![LimitedKey {
                        key: "user:7".into(),
                        rejected: 290,
                    }],
                    burn_rate: BurnRates {
                        availability_1h: 2.49,
                        latency_1h: 20.0,
                    },
                },
                PolicyStatus {
                    policy: "idle".into(),
                    checks: 0,
                    rejected_ratio: 0.0,
                    fail_open: 0,
                    fail_closed: 0,
                    p99_ms: None,
                    top_limited: Vec::new(),
                    burn_rate: BurnRates {
                        availability_1h: 0.0,
                        latency_1h: 0.0,
                    },
                },
            ],
        };
        let text = table(&status);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[2].starts_with("public"), "{text}");
        for cell in [
            "1200",
            "25.00%",
            "3",
            "0.46ms",
            "2.49",
            "20.00",
            "! burning",
        ] {
            assert!(lines[2].contains(cell), "{cell} in {}", lines[2]);
        }
        assert_eq!(lines[3], "  limited: user:7 (290 rejected)");
        assert!(
            lines[4].starts_with("idle") && lines[4].contains(" - "),
            "{text}"
        );
        assert!(!lines[4].contains("burning"));
        assert_eq!(
            table(&StatusResponse {
                policies: Vec::new()
            }),
            "no policies\n"
        );
    }

    #[test]
    fn usage_units_per_policy_and_tier() {
        let metrics = "# TYPE rate_limit_usage_units counter\n\
            rate_limit_usage_units_total{policy=\"llm\",plan_tier=\"none\"} 120\n\
            rate_limit_usage_units_total{policy=\"llm\",plan_tier=\"pro\"} 3000\n\
            rate_limit_usage_units_total{policy=\"bytes\",plan_tier=\"none\"} 7\n\
            rate_limit_requests_total{status=\"allowed\",policy=\"llm\",endpoint=\"none\",plan_tier=\"none\"} 9\n";
        let text = usage_table(metrics);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8, "{text}");
        assert!(lines[1].starts_with("usage policies"), "{text}");
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["bytes", "7"]
        );
        assert_eq!(
            lines[5].split_whitespace().collect::<Vec<_>>(),
            ["llm", "3120"]
        );
        assert_eq!(lines[4], "  tier none: 7");
        assert_eq!(lines[7], "  tier pro: 3000");
        assert_eq!(usage_table("rate_limit_keys 3\n"), "");
    }
}
