//! The configs of the user docs work as written: every ```toml block of the concept pages is
//! a whole config file `sluiced --check-config` accepts (run by the real binary), and a usage
//! policy on an algorithm that cannot carry a debt is refused naming why.

// Helpers here are test code too: a failed set-up should panic the test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

mod common;

/// The concept pages whose TOML blocks are whole configs.
const PAGES: [&str; 1] = ["docs/src/concepts/usage-budgets.md"];

fn check_config(toml: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    common::check_config_text(dir.path(), toml)
}

/// The ```toml blocks of a Markdown page, in order.
fn toml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, fence) if fence.starts_with("```toml") => current = Some(String::new()),
            (Some(block), fence) if fence.starts_with("```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_toml_block_of_the_docs_is_a_valid_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for page in PAGES {
        let markdown = std::fs::read_to_string(root.join(page)).unwrap();
        let blocks = toml_blocks(&markdown);
        assert!(!blocks.is_empty(), "{page} has no toml block");
        for (i, block) in blocks.iter().enumerate() {
            let out = check_config(block);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{page}: toml block {i}:\n{block}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn a_usage_policy_without_a_debt_rule_is_refused_naming_why() {
    for (algorithm, why) in [
        ("sliding_window_log", "keeps one entry per request"),
        ("leaky_bucket", "queues requests"),
    ] {
        let out = check_config(&format!(
            "[policies.p]\nalgorithm = \"{algorithm}\"\nlimit = 10\nwindow = \"1m\"\nusage = true\n"
        ));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{algorithm}: {stderr}");
        assert!(
            stderr.contains("policies.p.usage") && stderr.contains(why),
            "{algorithm}: {stderr}"
        );
    }
}

#[test]
fn bad_calendar_windows_are_refused_naming_each_field_at_once() {
    let out = check_config(
        "[policies.zone]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1mo\"\ncalendar = \"Mars/Olympus\"\n\
         [policies.length]\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"5m\"\ncalendar = \"UTC\"\n\
         [policies.bucket]\nalgorithm = \"token_bucket\"\nlimit = 10\nwindow = \"1w\"\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for (field, why) in [
        (
            "policies.zone.calendar",
            "unknown time zone \"Mars/Olympus\"",
        ),
        (
            "policies.length.calendar",
            "a calendar window is 1d, 1w or 1mo",
        ),
        ("policies.bucket.window", "only for fixed_window"),
    ] {
        assert!(
            stderr.lines().any(|l| l.contains(field) && l.contains(why)),
            "{field}: {why}\n{stderr}"
        );
    }
    let good = check_config(
        "[policies.monthly]\nalgorithm = \"fixed_window\"\nlimit = 50000000\nwindow = \"1mo\"\ncalendar = \"Asia/Tokyo\"\nusage = true\n",
    );
    assert_eq!(
        good.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
}

#[test]
fn bad_stacked_limits_are_refused_naming_each_field_at_once() {
    let out = check_config(
        "[policies.both]\nalgorithm = \"token_bucket\"\nlimit = 5\nlimits = [ { limit = 10, window = \"1s\" }, { limit = 20, window = \"1m\" } ]\n\
         [policies.many]\nalgorithm = \"token_bucket\"\nlimits = [ { limit = 1, window = \"1s\" }, { limit = 2, window = \"2s\" }, { limit = 3, window = \"3s\" }, { limit = 4, window = \"4s\" }, { limit = 5, window = \"5s\" } ]\n\
         [policies.twice]\nalgorithm = \"fixed_window\"\nlimits = [ { limit = 10, window = \"1m\" }, { limit = 0, window = \"1m\" } ]\n\
         [policies.tier]\nalgorithm = \"fixed_window\"\nlimits = [ { limit = 10, window = \"1s\" }, { limit = 20, window = \"1m\" } ]\ntiers = { pro = { limit = 50 } }\n\
         [policies.judged]\nalgorithm = \"fixed_window\"\nlimits = [ { limit = 10, window = \"1s\" }, { limit = 20, window = \"1m\" } ]\ncandidate = { limit = 5 }\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for (field, why) in [
        (
            "policies.both.limit",
            "`limits` replaces limit, window and burst",
        ),
        ("policies.many.limits", "holds 1 to 4 limits, this one 5"),
        (
            "policies.twice.limits[1].window",
            "has the window \"1m\" too",
        ),
        ("policies.twice.limits[1].limit", "limit must be at least 1"),
        (
            "policies.tier.tiers.pro.limit",
            "a tier gives its own `limits`",
        ),
        (
            "policies.judged.candidate",
            "a candidate is judged against one limit",
        ),
    ] {
        assert!(
            stderr.lines().any(|l| l.contains(field) && l.contains(why)),
            "{field}: {why}\n{stderr}"
        );
    }
}
