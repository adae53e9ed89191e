//! The three renderings of a report: the `--json` document's exact shape, the text summary,
//! and the HTML page (two inline SVG charts per tier, nothing fetched from outside).

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use sluice_replay::{Report, render_html, render_text};

/// Policy `api` (limit 10 per minute, tier pro 100, candidate 20) and `admin` (limit 3):
/// key a sends 25 in one minute, key b 5, and b 2 more under tier pro.
fn sample() -> Report {
    let logs = Logs::new();
    let at = |ms: u64| secs(T0 + ms);
    let mut content = csv("a", (0..25).map(|i| T0 + i * 1000));
    content.push_str(&csv("b", (0..5).map(|i| T0 + 30_000 + i)));
    content.push_str(&format!(
        "{},b,api,pro\n{},b,api,pro\n",
        at(40_000),
        at(41_000)
    ));
    content.push_str("garbage\n");
    let file = logs.write("sample.csv", content);
    let mut api = policy("api", fixed(10, 60_000));
    api.tiers.insert("pro".to_owned(), fixed(100, 60_000));
    api.candidates.insert("none".to_owned(), fixed(20, 60_000));
    let admin = policy("admin", fixed(3, 60_000));
    let mut options = csv_options();
    options.candidate = true;
    run(&[api, admin], &[file], &options)
}

#[test]
fn the_json_document_has_exactly_the_spec_shape() {
    let document = serde_json::to_value(sample()).unwrap();
    let expected = json!({
        "lines": 33,
        "unparsed": 1,
        "policies": [
            {
                "policy": "api", "tier": "none",
                "requests": 30, "rejected": 15, "keys": 2, "keys_limited": 1,
                "peak_rate": {"p50": 5, "p90": 25, "p99": 25, "max": 25},
                "suggested_limit": 25,
                "top": [{"key": "a", "rejected": 15}],
                "candidate": {
                    "requests": 30, "rejected": 5, "keys": 2, "keys_limited": 1,
                    "top": [{"key": "a", "rejected": 5}]
                }
            },
            {
                "policy": "api", "tier": "pro",
                "requests": 2, "rejected": 0, "keys": 1, "keys_limited": 0,
                "peak_rate": {"p50": 2, "p90": 2, "p99": 2, "max": 2},
                "suggested_limit": 2,
                "top": [],
                "candidate": null
            },
            {
                // b's two `pro` lines name policy api: admin sees b's other 5 only.
                "policy": "admin", "tier": "none",
                "requests": 30, "rejected": 24, "keys": 2, "keys_limited": 2,
                "peak_rate": {"p50": 5, "p90": 25, "p99": 25, "max": 25},
                "suggested_limit": 25,
                "top": [{"key": "a", "rejected": 22}, {"key": "b", "rejected": 2}],
                "candidate": null
            }
        ]
    });
    assert_eq!(document, expected);
}

#[test]
fn the_text_summary_has_a_table_per_policy() {
    let text = render_text(&sample());
    assert!(
        text.starts_with("replayed 33 lines from 1 file, 1 unparsed, 2 keys"),
        "{text}"
    );
    assert!(text.contains("\npolicy api\n"), "{text}");
    assert!(text.contains("\npolicy admin\n"), "{text}");
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("tier"))
        .unwrap();
    for column in [
        "limit",
        "requests",
        "rejected",
        "keys",
        "limited",
        "suggested",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let none_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("none ") && l.contains("fixed_window 10/1m"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(none_row.contains("50.00"), "{none_row}");
    assert!(
        text.contains("none candidate  fixed_window 20/1m"),
        "{text}"
    );
    assert!(text.contains("most rejected (none): a (15)"), "{text}");
}

#[test]
fn the_html_page_is_self_contained_with_two_charts_per_tier() {
    let report = sample();
    let page = render_html(&report).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Two charts per (policy, tier): three tiers over two policies.
    assert_eq!(page.matches("<svg").count(), 2 * report.policies.len());
    for policy in ["api", "admin"] {
        let card_start = page.find(&format!("<h2>policy {policy} ")).unwrap();
        let card_end = card_start + page[card_start..].find("</section>").unwrap();
        assert!(
            page[card_start..card_end].matches("<svg").count() >= 2,
            "{policy}"
        );
    }
    // Nothing points outside the document.
    for forbidden in ["src=", "href=", "<script", "<link", "@import", "url("] {
        assert!(!page.contains(forbidden), "{forbidden} in the page");
    }
    // Totals, legend and the unparsed line are on the page.
    assert!(
        page.contains(">33</div><div class=\"k\">lines</div>"),
        "totals"
    );
    assert!(page.contains("class=\"legend\""));
    assert!(page.contains("candidate 20"));
    assert!(page.contains("sample.csv:33"), "the unparsed line's place");
}

#[test]
fn keys_are_escaped_in_the_page() {
    let logs = Logs::new();
    let file = logs.write(
        "evil.csv",
        csv("<script>alert(1)</script>", (0..3).map(|i| T0 + i)),
    );
    let report = run(&[policy("api", fixed(1, 60_000))], &[file], &csv_options());
    let page = render_html(&report).unwrap();
    assert!(!page.contains("<script>"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn a_policy_without_traffic_still_renders() {
    let logs = Logs::new();
    let file = logs.write("one.csv", format!("{},k,busy\n", secs(T0)));
    let report = run(
        &[
            policy("busy", fixed(1, 60_000)),
            policy("quiet", fixed(1, 60_000)),
        ],
        &[file],
        &csv_options(),
    );
    let quiet = row(&report, "quiet", "none");
    assert_eq!((quiet.requests, quiet.suggested_limit), (0, None));
    let page = render_html(&report).unwrap();
    assert_eq!(page.matches("<svg").count(), 4);
    assert!(render_text(&report).contains("\npolicy quiet\n"));
}
