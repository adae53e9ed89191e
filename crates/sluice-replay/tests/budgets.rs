//! Replays of what usage budgets add, counted by hand: stacked limits decided all or nothing
//! with the rejections each limit caused, a usage policy's lines asking and then charging
//! their cost (from `--cost` over JSON lines carrying `usage.total_tokens`), and calendar
//! windows counted per day of their zone.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use sluice_core::{Algorithm, Calendar, CalendarUnit, Params};
use sluice_replay::{Format, ReplayOptions, ReplayPolicy, StackedLimit, render_html, render_text};

fn stacked(policy: &str, limits: &[(Params, &str)]) -> ReplayPolicy {
    let mut replay = ReplayPolicy::new(policy, limits[0].0);
    replay.stacks.insert(
        "none".to_owned(),
        limits
            .iter()
            .map(|(params, window)| StackedLimit {
                label: format!("{policy}.{window}"),
                params: *params,
            })
            .collect(),
    );
    replay
}

#[test]
fn stacked_limits_are_decided_all_or_nothing_and_name_the_limit_that_bound() {
    let logs = Logs::new();
    // 10 a second and 25 a minute; one key sends 20 in each of seconds 0, 1 and 2.
    // Second 0: 10 allowed, 10 denied by the second (the minute has room, and nothing of a
    // denied request is consumed). Second 1: the same (the minute at 20). Second 2: 5
    // allowed (the minute full at 25), 15 denied by the minute alone. Had the denied ones
    // consumed the minute, second 1 would allow only 5.
    let content = csv(
        "a",
        (0..3).flat_map(|s| (0..20).map(move |i| T0 + s * 1000 + i * 10)),
    );
    let file = logs.write("stacked.csv", content);
    let policy = stacked("api", &[(fixed(10, 1000), "1s"), (fixed(25, 60_000), "1m")]);
    let report = run(&[policy], &[file], &csv_options());
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (60, 35));
    let limits: Vec<(&str, u64, u64, Option<u64>)> = api
        .limits
        .iter()
        .map(|l| {
            (
                l.limit.as_str(),
                l.rejected,
                l.peak_rate.max,
                l.suggested_limit,
            )
        })
        .collect();
    // Each limit's peaks in its own windows (20 a second, 60 a minute, in requests asked);
    // one key, so the keys rule suggests each peak.
    assert_eq!(
        limits,
        [("api.1s", 20, 20, Some(20)), ("api.1m", 15, 60, Some(60))]
    );
    assert_eq!(api.peak_rate.max, 20);
    assert_eq!(api.bound_most().unwrap().limit, "api.1s");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["policies"][0]["limits"][1]["rejected"], 15);
    assert_eq!(json["policies"][0]["limits"][1]["suggested_limit"], 60);
    assert!(json.get("max_reject").is_none());
    let text = render_text(&report);
    assert!(
        text.contains("stacked limits (none), bound most: api.1s"),
        "{text}"
    );
    let minute = text.lines().find(|l| l.contains("api.1m")).unwrap();
    assert_eq!(
        minute.split_whitespace().collect::<Vec<_>>(),
        ["api.1m", "fixed_window", "25/1m", "15", "60/60/60/60", "60"],
        "{text}"
    );
    assert!(text.contains("+1 stacked"), "{text}");
    assert!(render_html(&report).unwrap().contains("bound most"));
}

#[test]
fn a_stack_whose_first_limit_is_not_its_tiers_is_refused() {
    let logs = Logs::new();
    let file = logs.write("one.csv", csv("a", [T0]));
    let mut policy = stacked("api", &[(fixed(10, 1000), "1s"), (fixed(25, 60_000), "1m")]);
    policy.base = fixed(11, 1000);
    let error = sluice_replay::replay(&[policy], &[file], &csv_options()).unwrap_err();
    assert!(
        error.to_string().contains("not the tier's limit"),
        "{error}"
    );
}

/// JSON lines of one key, each with `usage.total_tokens` = `tokens` (`None`: no usage).
fn usage_lines(lines: &[(u64, &str)]) -> String {
    lines
        .iter()
        .map(|(at, usage)| {
            format!(
                "{{\"time\":{},\"remote_addr\":\"10.0.0.1\",\"usage\":{usage}}}\n",
                secs(*at)
            )
        })
        .collect()
}

#[test]
fn cost_from_json_usage_on_a_usage_policy_and_on_an_ordinary_one() {
    let logs = Logs::new();
    // Six answers of 40 tokens in one hour, one whose usage is not a number and one without
    // usage (both unparsed), then one in the next hour.
    let mut lines: Vec<(u64, &str)> = (0..6)
        .map(|i| (T0 + i * 1000, r#"{"total_tokens":40}"#))
        .collect();
    lines.push((T0 + 7_000, r#"{"total_tokens":"n/a"}"#));
    lines.push((T0 + 8_000, "{}"));
    lines.push((T0 + 3_600_000, r#"{"total_tokens":40}"#));
    let file = logs.write("usage.json", usage_lines(&lines));

    let budget = fixed(100, 3_600_000);
    let mut llm = ReplayPolicy::new("llm", budget);
    llm.usage = true;
    let plain = ReplayPolicy::new("plain", budget);
    let mut options = ReplayOptions::new(Format::Json { time_field: None });
    options.cost = Some("$usage_total_tokens".into());
    let report = run(&[llm, plain], &[file], &options);
    assert_eq!((report.lines, report.unparsed), (9, 2));
    assert!(
        report.details.unparsed_examples[0]
            .reason
            .contains("bad --cost \"n/a\""),
        "{:?}",
        report.details.unparsed_examples
    );
    // Usage: each request asks (allowed while 1 is left) and is charged 40 after: 1–3 pass
    // (the third takes the budget to 120, a debt of 20), 4–6 are denied; the next hour passes.
    let llm = row(&report, "llm", "none");
    assert_eq!((llm.requests, llm.rejected), (7, 3));
    // Ordinary: each request must fit its 40: 1 and 2 pass (80), 3–6 do not.
    let plain = row(&report, "plain", "none");
    assert_eq!((plain.requests, plain.rejected), (7, 4));
    // Peaks in tokens per hour: 240 asked in the first hour; the keys rule suggests 240.
    assert_eq!(llm.peak_rate.max, 240);
    assert_eq!(llm.suggested_limit, Some(240));
}

#[test]
fn a_usage_policy_of_an_algorithm_without_debt_is_refused() {
    let logs = Logs::new();
    let file = logs.write("one.csv", csv("a", [T0]));
    let mut policy = ReplayPolicy::new("llm", limit(Algorithm::SlidingWindowLog, 10, 1000, 10));
    policy.usage = true;
    let error = sluice_replay::replay(&[policy], &[file], &csv_options()).unwrap_err();
    assert!(error.to_string().contains("carries a debt"), "{error}");
}

#[test]
fn calendar_windows_count_per_day_of_their_zone() {
    let logs = Logs::new();
    // Three requests at 14:00 UTC and three at 16:00 UTC of one UTC day: Tokyo's midnight
    // (15:00 UTC) lies between, so a Tokyo day of limit 5 allows all six and the key's peak is
    // 3; a UTC day of limit 5 rejects the sixth.
    let at = |hour: u64, i: u64| T0 - 10 * 3_600_000 + hour * 3_600_000 + i * 1000;
    let content = csv(
        "a",
        (0..3).map(|i| at(14, i)).chain((0..3).map(|i| at(16, i))),
    );
    let file = logs.write("days.csv", content);
    let mut tokyo = fixed(5, CalendarUnit::Day.longest_ms());
    tokyo.calendar = Some(Calendar {
        unit: CalendarUnit::Day,
        zone: "Asia/Tokyo".parse().unwrap(),
    });
    let utc = fixed(5, 86_400_000);
    let report = run(
        &[
            ReplayPolicy::new("tokyo", tokyo),
            ReplayPolicy::new("utc", utc),
        ],
        &[file],
        &csv_options(),
    );
    let tokyo = row(&report, "tokyo", "none");
    assert_eq!((tokyo.rejected, tokyo.peak_rate.max), (0, 3));
    let utc = row(&report, "utc", "none");
    assert_eq!((utc.rejected, utc.peak_rate.max), (1, 6));
    assert!(render_text(&report).contains("fixed_window 5/1d Asia/Tokyo"));
}
