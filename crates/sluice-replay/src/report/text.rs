//! The plain-text summary `sluice replay` prints by default: totals, then a table per policy
//! with a row per tier (its limit, requests, would-reject count and share, keys, keys ever
//! limited, peak-rate percentiles, the suggested limit), the candidates' rows beside them,
//! and each tier's most rejected keys.

use std::fmt::Write as _;

use super::format::{limit_text, rule_text, stacked_limit_text, thousands};
use super::model::{PolicyReport, Report};
use crate::time::format_utc_seconds;

/// Keys of a tier's top list shown in text (the JSON document and the HTML report list all).
const TEXT_TOP_KEYS: usize = 5;

/// The summary of `report`, ending in a newline.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    let details = &report.details;
    let _ = write!(
        out,
        "replayed {} lines from {} file{}",
        thousands(report.lines),
        details.files.len(),
        if details.files.len() == 1 { "" } else { "s" }
    );
    let _ = write!(out, ", {} unparsed", thousands(report.unparsed));
    let _ = write!(out, ", {} keys", thousands(details.keys));
    if let (Some(first), Some(last)) = (details.first_ms, details.last_ms) {
        let _ = write!(
            out,
            ", {} to {} UTC",
            format_utc_seconds(first),
            format_utc_seconds(last)
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "each suggested limit: {}",
        rule_text(report.max_reject)
    );

    for (policy, rows) in report.by_policy() {
        render_policy(&mut out, policy, &rows);
    }
    out
}

fn render_policy(out: &mut String, policy: &str, rows: &[&PolicyReport]) {
    let _ = writeln!(out, "\npolicy {policy}");
    let mut table = vec![[
        "tier".to_owned(),
        "limit".to_owned(),
        "requests".to_owned(),
        "rejected".to_owned(),
        "%".to_owned(),
        "keys".to_owned(),
        "limited".to_owned(),
        "peak p50/p90/p99/max".to_owned(),
        "suggested".to_owned(),
    ]];
    for row in rows {
        let peak = &row.peak_rate;
        table.push([
            row.tier.clone(),
            stacked_limit_text(row),
            thousands(row.requests),
            thousands(row.rejected),
            format!("{:.2}", row.rejected_percent()),
            thousands(row.keys),
            thousands(row.keys_limited),
            format!("{}/{}/{}/{}", peak.p50, peak.p90, peak.p99, peak.max),
            row.suggested_limit
                .map_or_else(|| "-".to_owned(), thousands),
        ]);
        if let Some(candidate) = &row.candidate {
            table.push([
                format!("{} candidate", row.tier),
                limit_text(&candidate.limit),
                thousands(candidate.requests),
                thousands(candidate.rejected),
                format!("{:.2}", candidate.rejected_percent()),
                thousands(candidate.keys),
                thousands(candidate.keys_limited),
                String::new(),
                String::new(),
            ]);
        }
    }
    write_table(out, &table);
    for row in rows.iter().filter(|row| !row.limits.is_empty()) {
        render_stack(out, row);
    }
    for row in rows {
        if row.top.is_empty() {
            continue;
        }
        let shown: Vec<String> = row
            .top
            .iter()
            .take(TEXT_TOP_KEYS)
            .map(|top| format!("{} ({})", top.key, thousands(top.rejected)))
            .collect();
        let more = row.top.len().saturating_sub(TEXT_TOP_KEYS);
        let _ = write!(out, "  most rejected ({}): {}", row.tier, shown.join(", "));
        if more > 0 {
            let _ = write!(out, ", … {more} more in --json");
        }
        out.push('\n');
    }
}

/// A stacked row's limits: each one's rejections, peak rates and suggestion in its own
/// windows, and the one that bound most.
fn render_stack(out: &mut String, row: &PolicyReport) {
    let _ = write!(out, "  stacked limits ({})", row.tier);
    if let Some(most) = row.bound_most() {
        let _ = write!(out, ", bound most: {}", most.limit);
    }
    out.push_str(" (a request two limits denied counts under both)\n");
    let mut table = vec![[
        "  limit".to_owned(),
        String::new(),
        "rejected".to_owned(),
        "peak p50/p90/p99/max".to_owned(),
        "suggested".to_owned(),
    ]];
    for limit in &row.limits {
        let peak = &limit.peak_rate;
        table.push([
            format!("  {}", limit.limit),
            limit_text(&limit.params),
            thousands(limit.rejected),
            format!("{}/{}/{}/{}", peak.p50, peak.p90, peak.p99, peak.max),
            limit
                .suggested_limit
                .map_or_else(|| "-".to_owned(), thousands),
        ]);
    }
    write_table(out, &table);
}

/// Columns padded to their widest cell: text left-aligned, figures right-aligned.
fn write_table<const N: usize>(out: &mut String, rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in rows {
        out.push_str("  ");
        for (column, (cell, width)) in row.iter().zip(widths).enumerate() {
            let pad = width - cell.chars().count();
            let left_aligned = column < 2 || column == 7;
            if column > 0 {
                out.push_str("  ");
            }
            if left_aligned {
                out.push_str(cell);
                if column + 1 < N {
                    out.push_str(&" ".repeat(pad));
                }
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            }
        }
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out.push('\n');
    }
}
