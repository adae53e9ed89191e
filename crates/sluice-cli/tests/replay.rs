//! `sluice replay` as a user runs it: the real binary over a config file and log files in a
//! temp dir, answers counted by hand. Every input format, the table, the `--json` document,
//! `--candidate`, `--report`, unparsed lines on stderr, and exit code 2 for a bad config, an
//! unreadable log or a flag that does not fit.

// Test code: a failed run should panic the test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// 2026-12-06T10:00:00Z, aligned to the minute.
const T0_SECS: u64 = 1_796_551_200;

const CONFIG: &str = r#"
[policies.api]
algorithm = "fixed_window"
limit = 10
window = "60s"
tiers = { pro = { limit = 100 } }

[policies.api.candidate]
limit = 20

[policies.admin]
algorithm = "fixed_window"
limit = 3
window = "60s"
"#;

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Dir(tempfile::tempdir().unwrap())
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    fn config(&self) -> PathBuf {
        self.write("sluice.toml", CONFIG)
    }
}

/// `sluice replay --config CONFIG ARGS…`.
fn replay(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("replay")
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `--json` document of a run that must succeed.
fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The entry of (policy, tier) in a document.
fn entry<'a>(document: &'a Value, policy: &str, tier: &str) -> &'a Value {
    document["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == policy && p["tier"] == tier)
        .unwrap_or_else(|| panic!("no ({policy}, {tier}) in {document}"))
}

/// (requests, rejected) of (policy, tier) in a document.
fn counts(document: &Value, policy: &str, tier: &str) -> (u64, u64) {
    let entry = entry(document, policy, tier);
    (
        entry["requests"].as_u64().unwrap(),
        entry["rejected"].as_u64().unwrap(),
    )
}

/// nginx `combined` lines: 25 requests of 10.0.0.1 and 5 of 10.0.0.2 within the minute.
fn combined_log() -> String {
    let line = |address: &str, second: u64| {
        format!(
            "{address} - - [06/Dec/2026:10:00:{second:02} +0000] \"GET /v1/items HTTP/1.1\" 200 12 \"-\" \"curl/8.5\"\n"
        )
    };
    let mut log: String = (0..25).map(|s| line("10.0.0.1", s)).collect();
    log.extend((0..5).map(|s| line("10.0.0.2", 30 + s)));
    log
}

#[test]
fn the_table_shows_every_policy_and_the_unparsed_lines() {
    let dir = Dir::new();
    let mut log = combined_log();
    log.push_str("not a log line\n");
    let log = dir.write("access.log", &log);
    let output = replay(&dir.config(), &[log.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("replayed 31 lines from 1 file, 1 unparsed, 2 keys"),
        "{text}"
    );
    // api: 10 per minute, 10.0.0.1 sends 25 → 15 rejected; admin: 3 per minute → 22 + 2.
    let row = |policy: &str| {
        let start = text.find(&format!("policy {policy}\n")).unwrap();
        text[start..]
            .lines()
            .find(|l| l.trim_start().starts_with("none "))
            .unwrap()
            .to_owned()
    };
    assert!(row("api").contains(" 15 "), "{text}");
    assert!(row("admin").contains(" 24 "), "{text}");
    assert!(
        text.contains("most rejected (none): ip:10.0.0.1 (15)"),
        "{text}"
    );
    // The unparsed line, with its place, on stderr.
    let errors = stderr(&output);
    assert!(
        errors.contains("1 of 31 lines could not be replayed"),
        "{errors}"
    );
    assert!(errors.contains("access.log:31: "), "{errors}");
}

#[test]
fn the_json_document_with_candidates_and_tiers_from_csv() {
    let dir = Dir::new();
    let mut csv = String::from("timestamp,key,policy,tier,cost\n");
    for i in 0..25 {
        csv.push_str(&format!("{}.{i:03},user:1,api\n", T0_SECS));
    }
    for i in 0..3 {
        csv.push_str(&format!("{},user:2,api,pro,2\n", T0_SECS + i));
    }
    let log = dir.write("requests.csv", &csv);
    let output = replay(
        &dir.config(),
        &[
            "--format",
            "csv",
            "--candidate",
            "--json",
            log.to_str().unwrap(),
        ],
    );
    let document = json_of(&output);
    assert_eq!(
        (document["lines"].as_u64(), document["unparsed"].as_u64()),
        (Some(28), Some(0))
    );
    assert_eq!(counts(&document, "api", "none"), (25, 15));
    assert_eq!(counts(&document, "api", "pro"), (3, 0));
    // admin saw none of it: every line names api. Its own tier still shows, all zero.
    assert_eq!(counts(&document, "admin", "none"), (0, 0));
    let api = entry(&document, "api", "none");
    assert_eq!(api["candidate"]["rejected"], 5, "{api}");
    assert_eq!(api["candidate"]["keys_limited"], 1);
    assert_eq!(api["top"][0]["key"], "user:1");
    assert_eq!(api["peak_rate"]["max"], 25);
    // [policies.api.candidate] names no tier: the pro tier has no candidate, as the daemon
    // compiles it.
    let pro = entry(&document, "api", "pro");
    assert!(pro["candidate"].is_null(), "{pro}");
    // user:2 asked for 3 × cost 2 = 6 in the minute.
    assert_eq!(pro["peak_rate"]["max"], 6);
}

#[test]
fn envoy_json_and_a_custom_nginx_format() {
    let dir = Dir::new();
    let config = dir.config();

    let envoy: String = (0..12)
        .map(|i| {
            format!(
                "[2026-12-06T10:00:{i:02}.000Z] \"GET /v1/items HTTP/1.1\" 200 - 0 17 3 2 \"203.0.113.7\" \"curl/8\" \"req-{i}\" \"api.example\" \"10.9.9.9:80\"\n"
            )
        })
        .collect();
    let log = dir.write("envoy.log", &envoy);
    let output = replay(
        &config,
        &[
            "--format",
            "envoy",
            "--policy",
            "api",
            "--json",
            log.to_str().unwrap(),
        ],
    );
    let document = json_of(&output);
    assert_eq!(counts(&document, "api", "none"), (12, 2));
    assert_eq!(counts(&document, "admin", "none"), (0, 0));

    let json: String = (0..4)
        .map(|i| format!("{{\"ts\":{},\"user\":\"u1\"}}\n", T0_SECS + i))
        .collect();
    let log = dir.write("access.json", &json);
    let output = replay(
        &config,
        &[
            "--format",
            "json",
            "--time-field",
            "ts",
            "--key",
            "user:$user",
            "--policy",
            "admin",
            "--json",
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(counts(&json_of(&output), "admin", "none"), (4, 1));

    let custom: String = (0..12)
        .map(|i| format!("{}.000 u7 pro\n", T0_SECS + i))
        .collect();
    let log = dir.write("custom.log", &custom);
    let output = replay(
        &config,
        &[
            "--log-format",
            "$msec $http_x_user $http_x_plan",
            "--key",
            "user:$http_x_user",
            "--tier",
            "$http_x_plan",
            "--policy",
            "api",
            "--json",
            log.to_str().unwrap(),
        ],
    );
    let document = json_of(&output);
    assert_eq!(counts(&document, "api", "pro"), (12, 0));
}

#[test]
fn the_report_is_one_self_contained_page() {
    let dir = Dir::new();
    let log = dir.write("access.log", &combined_log());
    let page_path = dir.0.path().join("report.html");
    let output = replay(
        &dir.config(),
        &[
            "--candidate",
            "--report",
            page_path.to_str().unwrap(),
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("report written to"));
    let page = std::fs::read_to_string(&page_path).unwrap();
    assert!(page.matches("<svg").count() >= 4, "two charts per policy");
    assert!(!page.contains("src=") && !page.contains("href=") && !page.contains("<script"));
}

#[test]
fn a_bad_config_an_unreadable_log_or_a_misfit_flag_exits_2() {
    let dir = Dir::new();
    let log = dir.write("access.log", &combined_log());
    let log = log.to_str().unwrap();

    let bad = dir.write(
        "bad.toml",
        "[policies.api]\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"60s\"\n",
    );
    let output = replay(&bad, &[log]);
    assert_eq!(output.status.code(), Some(2));
    let errors = stderr(&output);
    assert!(
        errors.contains("bad.toml") && errors.contains("limit"),
        "{errors}"
    );

    let missing = dir.0.path().join("missing.log");
    let output = replay(&dir.config(), &[missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot read"),
        "{}",
        stderr(&output)
    );

    for args in [
        vec!["--format", "csv", "--log-format", "$msec $x", log],
        vec!["--policy", "nope", log],
        vec!["--key", "user:$http_x_nope", log],
        vec!["--max-reject", "2", log],
    ] {
        let output = replay(&dir.config(), &args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stderr(&output).starts_with("sluice replay: "), "{args:?}");
    }
}

#[test]
fn a_config_with_envoyproxy_ratelimit_yaml_replays_its_limits() {
    let dir = Dir::new();
    std::fs::create_dir(dir.0.path().join("ratelimit")).unwrap();
    dir.write(
        "ratelimit/edge.yaml",
        "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {name: per_ip, unit: minute, requests_per_unit: 10}\n",
    );
    // A path relative to the config file's directory.
    let config = dir.write("sluice.toml", "[rls]\nenvoy_config = \"ratelimit\"\n");
    let mut csv = String::from("timestamp,key,policy\n");
    for i in 0..25 {
        csv.push_str(&format!(
            "{}.{i:03},remote_address=10.0.0.1,per_ip\n",
            T0_SECS
        ));
    }
    let log = dir.write("requests.csv", &csv);
    let output = replay(
        &config,
        &["--format", "csv", "--json", log.to_str().unwrap()],
    );
    let document = json_of(&output);
    // envoyproxy/ratelimit's counting: 10 a minute, the other 15 over the limit.
    assert_eq!(counts(&document, "per_ip", "none"), (25, 15));
}

#[test]
fn a_stacked_usage_policy_replays_its_token_budget_from_json_usage() {
    let dir = Dir::new();
    let config = dir.write(
        "llm.toml",
        r#"
[policies.llm]
algorithm = "fixed_window"
limits = [ { limit = 100, window = "1h" }, { limit = 150, window = "1d" } ]
usage = true
"#,
    );
    // Answers of 40 tokens for one user: four in hour 0, one whose usage is not a number, two
    // in hour 1. Each request asks (allowed while both limits have 1 left) and is charged 40
    // after. Hour 0: 1–3 pass (the hour at 120, the day at 120), the 4th is denied by the
    // hour alone. Hour 1: the 1st passes (the day 30 short of full, now 160), the 2nd is
    // denied by the day alone, in debt.
    let line = |at: u64, usage: &str| {
        format!("{{\"time\":{at},\"user\":\"u1\",\"usage\":{{\"total_tokens\":{usage}}}}}\n")
    };
    let mut log = String::new();
    for i in 0..4 {
        log.push_str(&line(T0_SECS + i, "40"));
    }
    log.push_str(&line(T0_SECS + 5, "\"n/a\""));
    for i in 0..2 {
        log.push_str(&line(T0_SECS + 3600 + i, "40"));
    }
    let log = dir.write("llm.json", &log);
    let log = log.to_str().unwrap();
    let args = [
        "--format",
        "json",
        "--key",
        "user:$user",
        "--cost",
        "$usage_total_tokens",
    ];

    let output = replay(&config, &[&args[..], &["--json", log]].concat());
    let document = json_of(&output);
    assert_eq!(document["unparsed"], 1);
    assert!(
        stderr(&output).contains("bad --cost"),
        "{}",
        stderr(&output)
    );
    assert_eq!(counts(&document, "llm", "none"), (6, 2));
    let llm = entry(&document, "llm", "none");
    let limits: Vec<(&str, u64, u64)> = llm["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["limit"].as_str().unwrap(),
                l["rejected"].as_u64().unwrap(),
                l["suggested_limit"].as_u64().unwrap(),
            )
        })
        .collect();
    // Each limit's suggestion in its own windows: 160 an hour, 240 a day.
    assert_eq!(limits, [("llm.1h", 1, 160), ("llm.1d", 1, 240)]);
    // Tokens asked per hour: 160, then 80; one key, so the keys rule suggests 160 an hour.
    assert_eq!(llm["peak_rate"]["max"], 160);
    assert_eq!(llm["suggested_limit"], 160);
    assert!(document.get("max_reject").is_none());

    let output = replay(&config, &[&args[..], &[log]].concat());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("(the keys rule;"), "{text}");
    assert!(
        text.contains("stacked limits (none), bound most: llm.1h"),
        "{text}"
    );
}

#[test]
fn max_reject_adds_the_requests_rule_only_when_given() {
    let dir = Dir::new();
    // 100 keys: one sends 30 in each of 10 minutes, 99 send 1. The keys rule lets 1 key
    // exceed: 1. At --max-reject 0.01 of 399 requests (budget 3), 10·(30 − L) ≤ 3 first
    // holds at L = 30.
    let mut csv = String::from("timestamp,key\n");
    for minute in 0..10 {
        for i in 0..30 {
            csv.push_str(&format!("{}.{i:03},heavy\n", T0_SECS + minute * 60));
        }
    }
    for key in 0..99 {
        csv.push_str(&format!("{},light{key}\n", T0_SECS + 700));
    }
    let log = dir.write("heavy.csv", &csv);
    let log = log.to_str().unwrap();
    let base = ["--format", "csv", "--policy", "admin", "--json", log];
    let document = json_of(&replay(&dir.config(), &base));
    assert_eq!(entry(&document, "admin", "none")["suggested_limit"], 1);
    let document = json_of(&replay(
        &dir.config(),
        &[&["--max-reject", "0.01"][..], &base].concat(),
    ));
    assert_eq!(entry(&document, "admin", "none")["suggested_limit"], 30);
    assert_eq!(document["max_reject"], 0.01);
    let output = replay(
        &dir.config(),
        &["--format", "csv", "--max-reject", "0.05", log],
    );
    assert!(
        stdout(&output).contains("it rejects at most 5 % of requests (--max-reject 0.05)"),
        "{}",
        stdout(&output)
    );
}
