//! The alert rules pass `promtool check rules` and their `promtool test rules` cases, the
//! generated SLO rules are what alerts/slos.toml gives, every dashboard query is valid PromQL
//! (checked by promtool as a recording rule), and every runbook link of the alerts and the
//! dashboard names a section of docs/src/guides/operating.md. promtool and python3 are requirements of the
//! test suite: without them these tests fail, they never skip.

use std::path::Path;
use std::process::{Command, Output};

use crate::assets;
use crate::docs::github_anchor;

/// Where the runbooks live: docs/src/guides/operating.md on the repository's main branch.
const RUNBOOKS: &str = "https://github.com/sluice-rs/sluice/blob/main/docs/src/guides/operating.md";

const INSTALL: &str = "promtool not found: install the Debian package `prometheus` \
    (apt-get install -y --no-install-recommends prometheus); the alert tests never skip";

fn promtool(args: &[&str], dir: &Path) -> Output {
    match Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => out,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL}"),
        Err(err) => panic!("cannot run promtool: {err}"),
    }
}

const PYTHON: &str = "python3 not found: install the Debian package `python3` (3.11 or later, \
    for tomllib); scripts/gen-slo-rules needs it and the SLO tests never skip";

/// `scripts/gen-slo-rules` with `args`, run from the repository root.
fn gen_slo_rules(args: &[&str]) -> Output {
    let root = assets::root();
    match Command::new("python3")
        .arg(root.join("scripts/gen-slo-rules"))
        .args(args)
        .current_dir(&root)
        .output()
    {
        Ok(out) => out,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => panic!("{PYTHON}"),
        Err(err) => panic!("cannot run scripts/gen-slo-rules: {err}"),
    }
}

fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn names(paths: &[std::path::PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn promtool_checks_the_rule_files() {
    let alerts = assets::root().join("alerts");
    let files = names(&assets::rule_files());
    assert!(!files.is_empty(), "no rule files in alerts/");
    let mut args = vec!["check", "rules"];
    args.extend(files.iter().map(String::as_str));
    assert_success(&promtool(&args, &alerts), "promtool check rules");
}

#[test]
fn promtool_rule_tests_pass_and_cover_every_alert() {
    let alerts = assets::root().join("alerts");
    let tests = names(&assets::files("alerts", ".test.yml"));
    assert!(!tests.is_empty(), "no *.test.yml in alerts/");
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    assert_success(&promtool(&args, &alerts), "promtool test rules");

    // Every alert has a case where it fires and one where it stays silent.
    let rules: String = assets::rule_files()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let cases: String = assets::files("alerts", ".test.yml")
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let alert_names: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(str::trim)
        .collect();
    for name in [
        "RateLimit429RateHigh",
        "RateLimitRedisP99High",
        "RateLimitFailOpenBurst",
        "SluicedDown",
        "RateLimitKeysEvicted",
    ] {
        assert!(
            alert_names.contains(&name),
            "the documented alert {name} is missing"
        );
    }
    for name in alert_names {
        let (mut fires, mut silent) = (0, 0);
        let mut lines = cases.lines().skip_while(|_| false).peekable();
        while let Some(line) = lines.next() {
            if line.trim() != format!("alertname: {name}") {
                continue;
            }
            match lines.peek().map(|l| l.trim()) {
                Some("exp_alerts: []") => silent += 1,
                Some("exp_alerts:") => fires += 1,
                other => panic!("unexpected line after alertname {name}: {other:?}"),
            }
        }
        assert!(
            fires >= 1 && silent >= 1,
            "{name}: {fires} firing and {silent} silent promtool cases, want at least one of each"
        );
    }
}

/// The SLO block of alerts/sluice.rules.yml is committed generated output: a changed objective
/// that was not regenerated (or a hand edit of the block) fails here, with the diff.
#[test]
fn the_committed_slo_rules_are_what_the_objectives_give() {
    let out = gen_slo_rules(&["--check"]);
    assert_success(&out, "scripts/gen-slo-rules --check");
    let rules = std::fs::read_to_string(assets::root().join("alerts/sluice.rules.yml")).unwrap();
    for name in [
        "sluice:check_availability:ratio_rate5m",
        "sluice:check_latency:ratio_rate1h",
        "sluice:check_rejected:ratio_rate3d",
        "alert: SluiceAvailabilityBudgetBurn",
        "alert: SluiceLatencyBudgetBurn",
    ] {
        assert!(
            rules.contains(name),
            "{name} is not in alerts/sluice.rules.yml"
        );
    }
}

/// A latency threshold between two bucket bounds has no count to read: the generator refuses
/// it, naming the field and the bounds it may pick, and writes nothing.
#[test]
fn the_slo_generator_refuses_a_threshold_that_is_no_bucket_bound() {
    let spec = std::fs::read_to_string(assets::root().join("alerts/slos.toml")).unwrap();
    assert!(spec.contains("threshold = 0.005"), "{spec}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slos.toml");
    std::fs::write(
        &path,
        spec.replace("threshold = 0.005", "threshold = 0.003"),
    )
    .unwrap();
    let out = gen_slo_rules(&["--check", "--spec", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("slos.check_latency.threshold: 0.003 s is not a bucket bound")
            && stderr.contains("0.0025, 0.005, 0.01"),
        "{stderr}"
    );
}

#[test]
fn every_dashboard_query_is_valid_promql() {
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard_queries\n    rules:\n");
    let exprs = assets::dashboard_exprs();
    assert!(!exprs.is_empty());
    for (i, expr) in exprs.iter().enumerate() {
        // Grafana's variables as Prometheus would see them after interpolation.
        let promql = substitute_variables(&expr.promql);
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            serde_json::to_string(&promql).unwrap()
        ));
    }
    let path = dir.path().join("dashboard-queries.yml");
    std::fs::write(&path, rules).unwrap();
    assert_success(
        &promtool(&["check", "rules", "dashboard-queries.yml"], dir.path()),
        "promtool check rules on the dashboard queries",
    );
}

/// `$__rate_interval`-like built-ins become a duration, template variables a regex.
fn substitute_variables(promql: &str) -> String {
    let mut out = String::with_capacity(promql.len());
    let mut rest = promql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => {
                let end = braced.find('}').unwrap();
                (&braced[..end], &braced[end + 1..])
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        out.push_str(if name.starts_with("__") { "5m" } else { ".*" });
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The anchors of docs/src/guides/operating.md's headings.
fn runbook_anchors() -> Vec<String> {
    let text =
        std::fs::read_to_string(assets::root().join("docs/src/guides/operating.md")).unwrap();
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| github_anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_alert_links_its_own_runbook_section() {
    let anchors = runbook_anchors();
    let mut alerts = 0;
    for path in assets::rule_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        // The rules of the file, each from its `- alert:` line to the next rule.
        let mut rules: Vec<(String, Vec<&str>)> = Vec::new();
        for line in text.lines() {
            let item = line.trim_start();
            if let Some(name) = item.strip_prefix("- alert:") {
                rules.push((name.trim().to_owned(), Vec::new()));
            } else if item.starts_with("- record:") || item.starts_with("- name:") {
                rules.push((String::new(), Vec::new()));
            } else if let Some((_, body)) = rules.last_mut() {
                body.push(item);
            }
        }
        for (name, body) in rules.iter().filter(|(name, _)| !name.is_empty()) {
            alerts += 1;
            assert!(
                !body.iter().any(|l| l.starts_with("runbook:")),
                "{name}: a `runbook` annotation; the link goes in `runbook_url`"
            );
            let url = body
                .iter()
                .find_map(|l| l.strip_prefix("runbook_url:"))
                .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\''))
                .unwrap_or_else(|| panic!("{name}: no runbook_url annotation"));
            let want = format!("{RUNBOOKS}#{}", github_anchor(name));
            assert_eq!(url, want, "{name}: runbook_url");
            assert!(
                anchors.contains(&github_anchor(name)),
                "{name}: no heading `{name}` in docs/src/guides/operating.md"
            );
        }
    }
    assert!(alerts >= 10, "{alerts} alerts");
}

#[test]
fn every_dashboard_link_to_the_runbooks_names_a_section() {
    fn links<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("url", serde_json::Value::String(url)) => out.push(url),
                        _ => links(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| links(v, out)),
            _ => {}
        }
    }
    let anchors = runbook_anchors();
    for (name, dashboard) in assets::dashboards() {
        let top: Vec<&str> = dashboard["links"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["url"].as_str())
            .collect();
        assert!(
            top.contains(&RUNBOOKS) && top.contains(&format!("{RUNBOOKS}#alerts").as_str()),
            "{name}: the dashboard links {top:?}, want the guide and its alert runbooks"
        );
        let mut urls = Vec::new();
        links(&dashboard, &mut urls);
        for url in urls {
            if let Some(anchor) = url.strip_prefix(RUNBOOKS).and_then(|r| r.strip_prefix('#')) {
                assert!(
                    anchors.iter().any(|a| a == anchor),
                    "{name}: link {url} names no section of docs/src/guides/operating.md"
                );
            }
        }
    }
}
