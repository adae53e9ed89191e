//! The `--report FILE.html` page: one self-contained file (inline CSS and inline SVG, no
//! script, nothing fetched), meant to be looked at rather than read. A header with the
//! totals, one card per policy with its table of tiers, and per tier the 429 rate over time
//! (limit and candidate) and the distribution of per-key peak rates with the limit and the
//! suggestion marked, then the most rejected keys; unparsed lines last.

use std::fmt::Write as _;

use super::charts;
use super::format::{limit_text, rule_text, stacked_limit_text, thousands, window_text};
use super::model::{PolicyReport, Report};
use crate::error::Error;
use crate::time::format_utc_seconds;

const STYLE: &str = r#"
:root { --bg:#f4f5f7; --card:#fff; --ink:#1d2330; --muted:#667085; --line:#e4e7ec;
  --limit:#d6453d; --candidate:#e08e0b; --suggested:#1f9d55; --bars:#4a78c2; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background: #1d2330; color: #fff; padding: 28px 40px 26px; }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 650; letter-spacing: -.01em; }
header .sub { color: #b8c0cc; margin: 0 0 18px; font-size: 14px; }
.totals { display: flex; flex-wrap: wrap; gap: 12px; }
.tile { background: rgba(255,255,255,.08); border-radius: 10px; padding: 10px 16px; min-width: 150px; }
.tile .v { font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; }
.tile .k { font-size: 12px; text-transform: uppercase; letter-spacing: .06em; color: #b8c0cc; }
main { max-width: 1400px; margin: 0 auto; padding: 26px 40px 30px; }
.card { background: var(--card); border-radius: 14px; padding: 22px 26px; margin-bottom: 26px;
  box-shadow: 0 1px 3px rgba(16,24,40,.08), 0 1px 2px rgba(16,24,40,.04); }
.card h2 { margin: 0 0 14px; font-size: 20px; display: flex; align-items: center; gap: 10px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: 6px 10px; border-bottom: 1px solid var(--line); }
td { white-space: nowrap; }
th.l, td.l { text-align: left; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); font-weight: 600; }
tr.candidate td { color: var(--muted); background: #fcfbf7; }
.tier { margin-top: 24px; border-top: 1px solid var(--line); padding-top: 18px; }
.tier h3 { margin: 0 0 4px; font-size: 16px; }
.tier .note { color: var(--muted); margin: 0 0 8px; font-size: 14px; }
.legend { display: flex; gap: 18px; flex-wrap: wrap; font-size: 13px; color: var(--muted); margin: 0 0 12px; }
.sw { display: inline-block; width: 16px; height: 4px; border-radius: 2px; vertical-align: middle; margin-right: 6px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 18px; }
figure { margin: 0; }
figure svg { width: 100%; height: auto; display: block; border: 1px solid var(--line); border-radius: 8px; }
figcaption { font-size: 13px; color: var(--muted); margin-top: 6px; }
.pill { display: inline-block; padding: 2px 10px; border-radius: 999px; font-size: 12px; font-weight: 600; }
.ok { background: #e7f6ec; color: #1f7a44; } .warn { background: #fdf0e1; color: #9a5b00; }
.bad { background: #fde8e7; color: #b42318; }
details { margin-top: 12px; } summary { cursor: pointer; color: var(--muted); font-size: 14px; }
.mono, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
footer { text-align: center; color: var(--muted); font-size: 12px; padding: 10px 20px 30px; }
"#;

/// The page of `report`.
pub fn render_html(report: &Report) -> Result<String, Error> {
    let mut page = String::with_capacity(64 << 10);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(
        page,
        "<title>sluice replay: {} lines</title>",
        thousands(report.lines)
    );
    let _ = writeln!(page, "<style>{STYLE}</style>\n</head>\n<body>");
    header(&mut page, report);
    page.push_str("<main>\n");
    for (policy, rows) in report.by_policy() {
        policy_card(&mut page, policy, &rows, report.max_reject)?;
    }
    unparsed_card(&mut page, report);
    page.push_str("</main>\n<footer>sluice replay · every line replayed through sluice-core at its own time</footer>\n</body>\n</html>\n");
    Ok(page)
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn header(page: &mut String, report: &Report) {
    let details = &report.details;
    page.push_str("<header>\n<h1>sluice replay</h1>\n<p class=\"sub\">");
    let files: Vec<String> = details
        .files
        .iter()
        .map(|f| escape(&f.display().to_string()))
        .collect();
    let _ = write!(page, "{}", files.join(", "));
    if let (Some(first), Some(last)) = (details.first_ms, details.last_ms) {
        let _ = write!(
            page,
            " · {} to {} UTC",
            format_utc_seconds(first),
            format_utc_seconds(last)
        );
    }
    page.push_str("</p>\n<div class=\"totals\">\n");
    let unparsed_share = if report.lines == 0 {
        0.0
    } else {
        report.unparsed as f64 * 100.0 / report.lines as f64
    };
    let span = match (details.first_ms, details.last_ms) {
        (Some(first), Some(last)) => duration_text(last - first),
        _ => "-".to_owned(),
    };
    let tiles = [
        ("lines", thousands(report.lines)),
        (
            "unparsed",
            format!("{} ({unparsed_share:.2} %)", thousands(report.unparsed)),
        ),
        ("keys", thousands(details.keys)),
        ("time span", span),
        ("files", details.files.len().to_string()),
        (
            "max reject",
            report
                .max_reject
                .map_or_else(|| "keys rule".to_owned(), |s| format!("{} %", s * 100.0)),
        ),
    ];
    for (name, value) in tiles {
        let _ = writeln!(
            page,
            "<div class=\"tile\"><div class=\"v\">{}</div><div class=\"k\">{name}</div></div>",
            escape(&value)
        );
    }
    page.push_str("</div>\n</header>\n");
}

/// `2h 5m`, `42s`, `350ms`.
fn duration_text(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0 => format!("{ms}ms"),
        1..60 => format!("{secs}s"),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
    }
}

/// The pill of a reject share: green under 1 %, amber under 5 %, red above.
fn share_pill(percent: f64) -> String {
    let class = if percent < 1.0 {
        "ok"
    } else if percent < 5.0 {
        "warn"
    } else {
        "bad"
    };
    format!("<span class=\"pill {class}\">{percent:.2} % rejected</span>")
}

fn policy_card(
    page: &mut String,
    policy: &str,
    rows: &[&PolicyReport],
    max_reject: Option<f64>,
) -> Result<(), Error> {
    let requests: u64 = rows.iter().map(|r| r.requests).sum();
    let rejected: u64 = rows.iter().map(|r| r.rejected).sum();
    let share = if requests == 0 {
        0.0
    } else {
        rejected as f64 * 100.0 / requests as f64
    };
    let _ = writeln!(
        page,
        "<section class=\"card\">\n<h2>policy {} {}</h2>",
        escape(policy),
        share_pill(share)
    );
    tier_table(page, rows);
    for row in rows {
        tier_section(page, row, max_reject)?;
    }
    page.push_str("</section>\n");
    Ok(())
}

fn tier_table(page: &mut String, rows: &[&PolicyReport]) {
    page.push_str("<div class=\"scroll\"><table>\n<tr><th class=\"l\">tier</th><th class=\"l\">limit</th><th>requests</th><th>rejected</th><th>%</th><th>keys</th><th>keys limited</th><th>peak p50 / p90 / p99 / max</th><th>suggested</th></tr>\n");
    for row in rows {
        let peak = &row.peak_rate;
        let _ = writeln!(
            page,
            "<tr><td class=\"l\"><b>{}</b></td><td class=\"l mono\">{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{} / {} / {} / {}</td><td><b>{}</b></td></tr>",
            escape(&row.tier),
            escape(&stacked_limit_text(row)),
            thousands(row.requests),
            thousands(row.rejected),
            row.rejected_percent(),
            thousands(row.keys),
            thousands(row.keys_limited),
            peak.p50,
            peak.p90,
            peak.p99,
            peak.max,
            row.suggested_limit
                .map_or_else(|| "-".to_owned(), thousands),
        );
        if let Some(candidate) = &row.candidate {
            let _ = writeln!(
                page,
                "<tr class=\"candidate\"><td class=\"l\">{} candidate</td><td class=\"l mono\">{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td></td><td></td></tr>",
                escape(&row.tier),
                escape(&limit_text(&candidate.limit)),
                thousands(candidate.requests),
                thousands(candidate.rejected),
                candidate.rejected_percent(),
                thousands(candidate.keys),
                thousands(candidate.keys_limited),
            );
        }
    }
    page.push_str("</table></div>\n");
}

/// A stacked tier's limits: each one's rejections, peak rates and suggestion in its own
/// windows, the one that bound most named.
fn stack_table(page: &mut String, row: &PolicyReport) {
    let _ = writeln!(
        page,
        "<p class=\"note\">Stacked limits{} (a request two limits denied counts under both):</p>",
        row.bound_most().map_or_else(String::new, |m| format!(
            "; <b>{}</b> bound most",
            escape(&m.limit)
        ))
    );
    page.push_str("<div class=\"scroll\"><table>\n<tr><th class=\"l\">limit</th><th class=\"l\"></th><th>rejected</th><th>peak p50 / p90 / p99 / max</th><th>suggested</th></tr>\n");
    for limit in &row.limits {
        let peak = &limit.peak_rate;
        let _ = writeln!(
            page,
            "<tr><td class=\"l\"><b>{}</b></td><td class=\"l mono\">{}</td><td>{}</td><td>{} / {} / {} / {}</td><td><b>{}</b></td></tr>",
            escape(&limit.limit),
            escape(&limit_text(&limit.params)),
            thousands(limit.rejected),
            peak.p50,
            peak.p90,
            peak.p99,
            peak.max,
            limit
                .suggested_limit
                .map_or_else(|| "-".to_owned(), thousands),
        );
    }
    page.push_str("</table></div>\n");
}

fn swatch(color: &str, label: &str) -> String {
    format!(
        "<span><span class=\"sw\" style=\"background:var(--{color})\"></span>{}</span>",
        escape(label)
    )
}

fn tier_section(
    page: &mut String,
    row: &PolicyReport,
    max_reject: Option<f64>,
) -> Result<(), Error> {
    let _ = writeln!(
        page,
        "<div class=\"tier\">\n<h3>tier {} · <span class=\"mono\">{}</span></h3>",
        escape(&row.tier),
        escape(&stacked_limit_text(row))
    );
    if let Some(suggested) = row.suggested_limit {
        let _ = writeln!(
            page,
            "<p class=\"note\">This traffic suggests a limit of <b>{}</b> per {} (now {}): {}.</p>",
            thousands(suggested),
            window_text(row.limit.window_ms),
            thousands(row.limit.limit),
            escape(&rule_text(max_reject))
        );
    }
    if !row.limits.is_empty() {
        stack_table(page, row);
    }
    page.push_str("<div class=\"legend\">");
    page.push_str(&swatch("limit", &format!("limit {}", row.limit.limit)));
    if let Some(candidate) = &row.candidate {
        page.push_str(&swatch(
            "candidate",
            &format!("candidate {}", candidate.limit.limit),
        ));
    }
    if let Some(suggested) = row.suggested_limit {
        page.push_str(&swatch("suggested", &format!("suggested {suggested}")));
    }
    page.push_str(&swatch("bars", "keys by peak rate"));
    page.push_str("</div>\n<div class=\"charts\">\n");
    let _ = writeln!(
        page,
        "<figure>{}<figcaption>Share of requests answered 429 over time, by the limit{}.</figcaption></figure>",
        charts::rejections_over_time(row)?,
        if row.candidate.is_some() {
            " and by the candidate"
        } else {
            ""
        }
    );
    let _ = writeln!(
        page,
        "<figure>{}<figcaption>Keys by their highest request count in one aligned {} window.</figcaption></figure>",
        charts::peak_distribution(row)?,
        window_text(row.limit.window_ms)
    );
    page.push_str("</div>\n");
    if !row.top.is_empty() {
        let _ = writeln!(
            page,
            "<details><summary>{} most rejected keys</summary><table>\n<tr><th class=\"l\">key</th><th>rejected</th></tr>",
            row.top.len()
        );
        for top in &row.top {
            let _ = writeln!(
                page,
                "<tr><td class=\"l mono\">{}</td><td>{}</td></tr>",
                escape(&top.key),
                thousands(top.rejected)
            );
        }
        page.push_str("</table></details>\n");
    }
    page.push_str("</div>\n");
    Ok(())
}

fn unparsed_card(page: &mut String, report: &Report) {
    let examples = &report.details.unparsed_examples;
    if examples.is_empty() {
        return;
    }
    let _ = writeln!(
        page,
        "<section class=\"card\">\n<h2>unparsed lines <span class=\"pill warn\">{}</span></h2>\n<div class=\"scroll\"><table>\n<tr><th class=\"l\">where</th><th class=\"l\">why</th><th class=\"l\">line</th></tr>",
        thousands(report.unparsed)
    );
    for example in examples {
        let _ = writeln!(
            page,
            "<tr><td class=\"l mono\">{}:{}</td><td class=\"l\">{}</td><td class=\"l mono\">{}</td></tr>",
            escape(&example.file.display().to_string()),
            example.line,
            escape(&example.reason),
            escape(&example.text)
        );
    }
    page.push_str("</table></div>\n</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_durations() {
        assert_eq!(
            escape("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
        assert_eq!(duration_text(350), "350ms");
        assert_eq!(duration_text(42_000), "42s");
        assert_eq!(duration_text(125_000), "2m 5s");
        assert_eq!(duration_text(7_500_000), "2h 5m");
    }
}
