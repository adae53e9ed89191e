//! Every input: nginx `combined` and a custom `log_format`, Envoy's default format, JSON with
//! RFC 3339 and unix-seconds times, CSV with and without its optional columns, gzip, two
//! files merged in time order, malformed lines among good ones, an unknown CSV policy, and a
//! file that cannot be read.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;

use common::*;
use sluice_core::Algorithm;
use sluice_replay::{
    Error, Format, ReplayOptions, format_nginx_time, format_rfc3339_millis, replay,
};

fn combined_line(address: &str, at_ms: u64) -> String {
    format!(
        "{address} - - [{}] \"GET /v1/items HTTP/1.1\" 200 12 \"-\" \"curl/8.5\"\n",
        format_nginx_time(at_ms)
    )
}

#[test]
fn nginx_combined_keys_on_the_client_address() {
    let logs = Logs::new();
    // Limit 3 per minute: 10.0.0.1 sends 5 (2 rejected), 10.0.0.2 sends 2.
    let mut content = String::new();
    for i in 0..5 {
        content.push_str(&combined_line("10.0.0.1", T0 + i * 1000));
    }
    for i in 0..2 {
        content.push_str(&combined_line("10.0.0.2", T0 + 10_000 + i * 1000));
    }
    let file = logs.write("access.log", content);
    let report = run(
        &[policy("api", fixed(3, 60_000))],
        &[file],
        &ReplayOptions::new(Format::nginx_combined()),
    );
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected, api.keys), (7, 2, 2));
    assert_eq!(top(api), vec![("ip:10.0.0.1".to_owned(), 2)]);
    assert_eq!(report.details.first_ms, Some(T0));
    assert_eq!(report.details.last_ms, Some(T0 + 11_000));
}

#[test]
fn a_custom_log_format_with_a_key_and_a_tier_expression() {
    let logs = Logs::new();
    let format = r#"$remote_addr [$time_local] "$http_x_user_id" plan=$http_x_plan $status"#;
    let line = |user: &str, plan: &str, at: u64| {
        format!(
            "10.0.0.9 [{}] \"{user}\" plan={plan} 200\n",
            format_nginx_time(at)
        )
    };
    // Free (limit 1): u1 twice → 1 rejected. Pro (limit 5): u2 three times → none. An
    // unknown plan is tier `other` on the base limit (2): u3 three times → 1 rejected. No
    // plan (`-`) is tier `none` on the base limit: u4 once.
    let mut content = String::new();
    for i in 0..2 {
        content.push_str(&line("u1", "free", T0 + i));
    }
    for i in 0..3 {
        content.push_str(&line("u2", "pro", T0 + i));
    }
    for i in 0..3 {
        content.push_str(&line("u3", "gold", T0 + i));
    }
    content.push_str(&line("u4", "-", T0));
    // The user variable empty: the key cannot be made, so the line is unparsed.
    content.push_str(&line("-", "pro", T0));
    let file = logs.write("custom.log", content);
    let mut api = policy("api", fixed(2, 60_000));
    api.tiers.insert("free".to_owned(), fixed(1, 60_000));
    api.tiers.insert("pro".to_owned(), fixed(5, 60_000));
    let mut options = ReplayOptions::new(Format::Nginx {
        log_format: Some(format.to_owned()),
    });
    options.key = Some("user:${http_x_user_id}".to_owned());
    options.tier = Some("$http_x_plan".to_owned());
    let report = run(&[api], &[file], &options);
    assert_eq!((report.lines, report.unparsed), (10, 1));
    assert!(
        report.details.unparsed_examples[0]
            .reason
            .contains("$http_x_user_id is empty"),
        "{:?}",
        report.details.unparsed_examples
    );
    let tiers: Vec<&str> = report.policies.iter().map(|r| r.tier.as_str()).collect();
    assert_eq!(tiers, ["none", "free", "pro", "other"]);
    assert_eq!(row(&report, "api", "free").rejected, 1);
    assert_eq!(row(&report, "api", "pro").rejected, 0);
    assert_eq!(row(&report, "api", "other").rejected, 1);
    assert_eq!(row(&report, "api", "none").requests, 1);
    assert_eq!(
        top(row(&report, "api", "free")),
        vec![("user:u1".to_owned(), 1)]
    );
}

#[test]
fn envoy_default_format_keys_on_x_forwarded_for() {
    let logs = Logs::new();
    let line = |xff: &str, at: u64| {
        format!(
            "[{}] \"GET /v1/items HTTP/1.1\" 200 - 0 17 3 2 \"{xff}\" \"curl/8\" \"req-1\" \"api.example\" \"10.9.9.9:80\"\n",
            format_rfc3339_millis(at)
        )
    };
    // Limit 2 per second, sliding log: 3 at 100 ms apart → 1 rejected; then 1.1 s after the
    // first, the first has left: allowed.
    let mut content = String::new();
    for at in [T0, T0 + 100, T0 + 200, T0 + 1100] {
        content.push_str(&line("203.0.113.7", at));
    }
    content.push_str(&line("-", T0 + 300));
    let file = logs.write("envoy.log", content);
    let report = run(
        &[policy(
            "edge",
            limit(Algorithm::SlidingWindowLog, 2, 1000, 2),
        )],
        &[file],
        &ReplayOptions::new(Format::Envoy),
    );
    let edge = row(&report, "edge", "none");
    assert_eq!((edge.requests, edge.rejected), (4, 1));
    assert_eq!(top(edge), vec![("ip:203.0.113.7".to_owned(), 1)]);
    assert_eq!(report.unparsed, 1);
    assert_eq!(report.details.unparsed_examples[0].line, 5);
    assert_eq!(report.details.last_ms, Some(T0 + 1100));
}

#[test]
fn json_times_in_rfc3339_and_unix_seconds() {
    let logs = Logs::new();
    let unix = T0 / 1000;
    let content = format!(
        concat!(
            "{{\"time\":\"2026-12-06T10:00:00Z\",\"remote_addr\":\"10.0.0.1\"}}\n",
            "{{\"time\":\"2026-12-06T11:00:00.500+01:00\",\"remote_addr\":\"10.0.0.1\"}}\n",
            "{{\"timestamp\":{unix}.75,\"remote_addr\":\"10.0.0.1\"}}\n",
            "{{\"timestamp\":\"{unix}\",\"user\":{{\"id\":\"u9\"}},\"remote_addr\":\"10.0.0.2\"}}\n",
            "{{\"remote_addr\":\"10.0.0.3\"}}\n",
            "not json\n",
        ),
        unix = unix
    );
    let file = logs.write("access.json", content);
    // Limit 2 per minute: 10.0.0.1 sends 3 in the first second → 1 rejected.
    let report = run(
        &[policy("api", fixed(2, 60_000))],
        std::slice::from_ref(&file),
        &ReplayOptions::new(Format::Json { time_field: None }),
    );
    let api = row(&report, "api", "none");
    assert_eq!((report.lines, report.unparsed), (6, 2));
    assert_eq!((api.requests, api.rejected, api.keys), (4, 1, 2));
    assert_eq!(report.details.last_ms, Some(T0 + 750));
    let reasons: Vec<&str> = report
        .details
        .unparsed_examples
        .iter()
        .map(|e| e.reason.as_str())
        .collect();
    assert!(reasons[0].contains("no time field"), "{reasons:?}");
    assert!(reasons[1].contains("not a JSON object"), "{reasons:?}");

    // A nested field as the key, the time in a named field.
    let file = logs.write(
        "named.json",
        format!("{{\"ts\":{unix},\"user\":{{\"id\":\"u9\"}}}}\n"),
    );
    let mut options = ReplayOptions::new(Format::Json {
        time_field: Some("ts".to_owned()),
    });
    options.key = Some("user:${user.id}".to_owned());
    let report = run(&[policy("api", fixed(2, 60_000))], &[file], &options);
    assert_eq!(report.unparsed, 0);
    assert_eq!(row(&report, "api", "none").keys, 1);
    assert_eq!(report.details.first_ms, Some(T0));
}

#[test]
fn csv_without_and_with_its_optional_columns() {
    let logs = Logs::new();
    let at = secs(T0);
    let content = format!(
        concat!(
            "timestamp,key,policy,tier,cost\n",
            // No policy: every policy. No tier: none.
            "{at},k1\n",
            // Policy a only, tier pro, cost 2.
            "{at},k1,a,pro,2\n",
            // Policy b, a tier b does not have: other.
            "{at},k2,b,gold\n",
            // An empty policy value falls back to every policy.
            "{at},k3,,pro\n",
            "{at},k4,nope\n",
        ),
        at = at
    );
    let file = logs.write("mixed.csv", content);
    let mut a = policy("a", fixed(10, 60_000));
    a.tiers.insert("pro".to_owned(), fixed(100, 60_000));
    let b = policy("b", fixed(10, 60_000));
    let report = run(&[a, b], &[file], &csv_options());
    // The header is not a line; the unknown policy is unparsed.
    assert_eq!((report.lines, report.unparsed), (5, 1));
    assert_eq!(
        report.details.unparsed_examples[0].reason,
        "unknown policy \"nope\""
    );
    assert_eq!(report.details.unparsed_examples[0].line, 6);
    let labels: Vec<(&str, &str, u64)> = report
        .policies
        .iter()
        .map(|r| (r.policy.as_str(), r.tier.as_str(), r.requests))
        .collect();
    assert_eq!(
        labels,
        [
            ("a", "none", 1),
            ("a", "pro", 2),
            ("b", "none", 1),
            ("b", "other", 2)
        ]
    );
    // Cost 2 counts 2 in the window: k1 asked for 2 under pro.
    assert_eq!(row(&report, "a", "pro").peak_rate.max, 2);

    // --policy sends lines without a policy value to that policy only.
    let file = logs.write("plain.csv", csv("k1", [T0, T0 + 1]));
    let mut options = csv_options();
    options.policy = Some("b".to_owned());
    let report = run(
        &[policy("a", fixed(1, 60_000)), policy("b", fixed(1, 60_000))],
        &[file],
        &options,
    );
    assert_eq!(row(&report, "b", "none").rejected, 1);
    // A policy without traffic still shows, all zero, with no suggestion.
    let quiet = row(&report, "a", "none");
    assert_eq!((quiet.requests, quiet.suggested_limit), (0, None));
}

#[test]
fn gzip_is_read_directly() {
    let logs = Logs::new();
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder
        .write_all(csv("a", (0..25).map(|i| T0 + i)).as_bytes())
        .unwrap();
    let file = logs.write("access.log.gz", encoder.finish().unwrap());
    let report = run(&[policy("api", fixed(10, 60_000))], &[file], &csv_options());
    assert_eq!(row(&report, "api", "none").rejected, 15);
}

#[test]
fn two_files_are_merged_in_time_order() {
    let logs = Logs::new();
    // One token a second, bucket of 1. Merged, the key's requests come 1 s apart and all
    // pass. Read one file after the other, the second file's 1 s and 3 s would be held at
    // 4 s (the key's latest) and rejected.
    let first = logs.write("a.csv", csv("k", [0, 2000, 4000].map(|t| T0 + t)));
    let second = logs.write("b.csv", csv("k", [1000, 3000, 5000].map(|t| T0 + t)));
    let report = run(
        &[policy("api", limit(Algorithm::TokenBucket, 1, 1000, 1))],
        &[first, second],
        &csv_options(),
    );
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (6, 0));
    assert_eq!(report.details.files.len(), 2);
}

#[test]
fn malformed_lines_are_counted_shown_and_skipped() {
    let logs = Logs::new();
    let mut content = String::new();
    let mut bad_lines = Vec::new();
    for number in 1..=20u64 {
        if number % 3 == 2 {
            content.push_str("this is not an access log line\n");
            bad_lines.push(number);
        } else {
            content.push_str(&combined_line("10.0.0.1", T0 + number));
        }
    }
    let file = logs.write("mixed.log", content);
    let report = run(
        &[policy("api", fixed(5, 60_000))],
        std::slice::from_ref(&file),
        &ReplayOptions::new(Format::nginx_combined()),
    );
    // Lines 2, 5, 8, 11, 14, 17, 20 are bad: 7 unparsed, the first 5 shown; the other 13
    // lines are replayed (5 allowed, 8 rejected).
    assert_eq!((report.lines, report.unparsed), (20, 7));
    let shown: Vec<u64> = report
        .details
        .unparsed_examples
        .iter()
        .map(|e| e.line)
        .collect();
    assert_eq!(shown, bad_lines[..5]);
    let example = &report.details.unparsed_examples[0];
    assert_eq!(example.file, file);
    assert_eq!(example.text, "this is not an access log line");
    let api = row(&report, "api", "none");
    assert_eq!((api.requests, api.rejected), (13, 8));
}

#[test]
fn a_file_that_cannot_be_read_is_a_read_error() {
    let logs = Logs::new();
    let missing = logs.dir.path().join("missing.log");
    let error = replay(
        &[policy("api", fixed(5, 60_000))],
        &[missing],
        &ReplayOptions::new(Format::nginx_combined()),
    )
    .unwrap_err();
    assert!(error.is_read(), "{error}");
    assert!(error.to_string().contains("missing.log"), "{error}");

    // A corrupt gzip body fails as a read error of that file too.
    let broken = logs.write(
        "broken.gz",
        [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff],
    );
    let error = replay(
        &[policy("api", fixed(5, 60_000))],
        &[broken],
        &csv_options(),
    )
    .unwrap_err();
    assert!(matches!(error, Error::Read { .. }), "{error}");

    // Options are not read errors.
    let file = logs.write("ok.csv", csv("a", [T0]));
    let mut options = csv_options();
    options.key = Some("$nope".to_owned());
    let error = replay(&[policy("api", fixed(5, 60_000))], &[file], &options).unwrap_err();
    assert!(!error.is_read());
    assert!(error.to_string().starts_with("--key:"), "{error}");
}
