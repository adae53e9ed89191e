//! The drift guard: every metric a dashboard panel or an alert rule queries is exported by a
//! running daemon (or is a `sluice:` recording rule of alerts/*.yml, itself built from exported
//! metrics), every histogram bucket a query reads by its `le` exists, and every metric of the
//! documented table is exported with its type. A rename on either side fails here instead of
//! leaving an empty panel or an alert that never fires.

use std::collections::{BTreeMap, BTreeSet};

use http::Method;
use sluice_api::CheckRequest;
use sluice_tests::{Daemon, req};

use crate::assets::{self, Expr};

/// How every panel and query of a dashboard names its Prometheus: the `datasource` variable.
const DATASOURCE: &str = "${datasource}";

/// The documented metric table: (name, type). Counters are exported as `<name>` samples too, since
/// every documented counter name already ends in `_total`.
const DOCUMENTED_METRICS: [(&str, &str); 21] = [
    ("rate_limit_requests_total", "counter"),
    ("rate_limit_redis_duration_seconds", "histogram"),
    ("rate_limit_redis_batch_size", "histogram"),
    ("rate_limit_check_duration_seconds", "histogram"),
    ("rate_limit_fail_open_total", "counter"),
    ("rate_limit_fail_closed_total", "counter"),
    ("rate_limit_backend_errors_total", "counter"),
    ("rate_limit_shadow_rejections_total", "counter"),
    ("rate_limit_keys", "gauge"),
    ("rate_limit_config_reloads_total", "counter"),
    ("rate_limit_utilization", "histogram"),
    ("rate_limit_denied_keys_ratio", "gauge"),
    ("rate_limit_evictions_total", "counter"),
    ("rate_limit_connections_refused_total", "counter"),
    // the README's multi-region section.
    ("rate_limit_replication_lag_seconds", "histogram"),
    ("rate_limit_replication_pending", "gauge"),
    ("rate_limit_replication_errors_total", "counter"),
    // the README's token leases section.
    ("rate_limit_lease_calls_total", "counter"),
    ("rate_limit_lease_units_total", "counter"),
    ("rate_limit_local_decisions_total", "counter"),
    // the README's candidate limits section.
    ("rate_limit_candidate_decisions_total", "counter"),
];

/// The text of `/metrics` after a few allowed, rejected, tiered and shadow checks.
async fn scrape(d: &Daemon) -> String {
    let c = d.unix();
    for _ in 0..6 {
        c.check(&req("fw", "drift")).await.unwrap();
    }
    c.check(&CheckRequest {
        tier: Some("pro".into()),
        endpoint: Some("/orders".into()),
        ..req("public", "drift")
    })
    .await
    .unwrap();
    for _ in 0..2 {
        c.check(&req("shadowed", "drift")).await.unwrap();
    }
    let on_metrics_listener = sluice_client::Client::tcp(d.metrics.to_string())
        .send(Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    let on_api = d
        .tcp()
        .send(Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    assert_eq!((on_api.status, on_metrics_listener.status), (200, 200));
    String::from_utf8(on_api.body.to_vec()).unwrap()
}

/// `# TYPE` families (name -> type) and the sample names a Prometheus scrape of them yields.
fn exported(text: &str) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let mut families = BTreeMap::new();
    let mut samples = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families.insert(name.to_owned(), kind.to_owned());
            match kind {
                // Prometheus text names a counter family with its `_total`; OpenMetrics without.
                "counter" if name.ends_with("_total") => {
                    samples.insert(name.to_owned());
                }
                "counter" => {
                    samples.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        samples.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {
                    samples.insert(name.to_owned());
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            samples.insert(line[..end].to_owned());
        }
    }
    (families, samples)
}

/// Series Prometheus writes itself for every scrape target, not exported by sluiced.
const SCRAPE_SERIES: [&str; 1] = ["up"];

/// Queried names that are neither exported, nor written by Prometheus, nor recorded by a rule.
fn missing(exprs: &[Expr], samples: &BTreeSet<String>, recorded: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for expr in exprs {
        for name in assets::metric_names(&expr.promql) {
            if !samples.contains(&name)
                && !SCRAPE_SERIES.contains(&name.as_str())
                && !recorded.contains(&name)
            {
                out.push(format!("{}: {name} in `{}`", expr.origin, expr.promql));
            }
        }
    }
    out
}

/// Selectors that read one bucket of a histogram (`le="…"`) whose bound the scrape has no
/// series for: such a query reads nothing (a latency SLI against a bound that is not a bucket).
fn missing_buckets(exprs: &[Expr], text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for expr in exprs {
        for selector in assets::selectors(&expr.promql) {
            for (label, op, value) in &selector.matchers {
                if label != "le" || op != "=" {
                    continue;
                }
                let bucket = format!("le=\"{value}\"");
                let found = text.lines().any(|l| {
                    l.strip_prefix(selector.metric.as_str())
                        .is_some_and(|rest| rest.starts_with('{') && rest.contains(&bucket))
                });
                if !found {
                    out.push(format!(
                        "{}: no {}{{{bucket}}} series in `{}`",
                        expr.origin, selector.metric, expr.promql
                    ));
                }
            }
        }
    }
    out
}

/// The recording rules follow `sluice:<sli>:ratio_rate<window>` (SPEC, "Status and SLOs"), or
/// `sluice:<sli>:burn_rate<window>` for the burn rates the dashboard shows; every `sluice:` name a
/// dashboard or an alert queries is recorded (a renamed SLI leaves no panel reading nothing).
#[test]
fn recording_rules_are_named_by_sli_and_window_and_every_queried_one_exists() {
    let recorded = assets::recorded_names();
    for name in [
        "sluice:check_availability:ratio_rate5m",
        "sluice:check_latency:ratio_rate1h",
        "sluice:check_rejected:ratio_rate5m",
    ] {
        assert!(
            recorded.contains(name),
            "{name} is not recorded: {recorded:?}"
        );
    }
    for sli in ["check_availability", "check_latency", "check_rejected"] {
        for window in ["5m", "30m", "1h", "6h", "1d", "3d"] {
            let name = format!("sluice:{sli}:ratio_rate{window}");
            assert!(recorded.contains(&name), "{name} is not recorded");
        }
    }
    for name in &recorded {
        let parts: Vec<&str> = name.split(':').collect();
        let well_formed = match parts.as_slice() {
            ["sluice", sli, rate] => {
                !sli.is_empty()
                    && sli.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    && ["ratio_rate", "burn_rate"].iter().any(|kind| {
                        rate.strip_prefix(kind).is_some_and(|w| {
                            w.len() >= 2
                                && w[..w.len() - 1].chars().all(|c| c.is_ascii_digit())
                                && w.ends_with(['s', 'm', 'h', 'd', 'w'])
                        })
                    })
            }
            _ => false,
        };
        assert!(
            well_formed,
            "recording rule {name}: want sluice:<sli>:ratio_rate<window> or sluice:<sli>:burn_rate<window>"
        );
    }
    let queried: Vec<String> = assets::dashboard_exprs()
        .iter()
        .chain(&assets::alert_exprs())
        .flat_map(|e| {
            assets::metric_names(&e.promql)
                .into_iter()
                .map(move |n| (n, e.origin.clone()))
        })
        .filter(|(n, _)| n.starts_with("sluice:"))
        .filter(|(n, _)| !recorded.contains(n))
        .map(|(n, origin)| format!("{origin}: {n}"))
        .collect();
    assert!(queried.is_empty(), "queried but not recorded: {queried:?}");
}

#[tokio::test]
async fn every_metric_the_dashboards_and_alerts_query_is_exported() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    let text = scrape(&d).await;
    let (_, samples) = exported(&text);

    let dashboards = assets::dashboard_exprs();
    let alerts = assets::alert_exprs();
    // The guard is only as good as what it reads: it must have found the assets' queries.
    assert!(
        dashboards.len() >= 20,
        "{} dashboard queries",
        dashboards.len()
    );
    assert!(alerts.len() >= 6, "{} alert expressions", alerts.len());
    let queried: BTreeSet<String> = dashboards
        .iter()
        .chain(&alerts)
        .flat_map(|e| assets::metric_names(&e.promql))
        .collect();
    for name in [
        "rate_limit_requests_total",
        "rate_limit_redis_duration_seconds_bucket",
        "rate_limit_fail_open_total",
    ] {
        assert!(queried.contains(name), "{name} not found in any query");
    }

    let recorded = assets::recorded_names();
    let mut problems = missing(&dashboards, &samples, &recorded);
    problems.extend(missing(&alerts, &samples, &recorded));
    problems.extend(missing_buckets(&dashboards, &text));
    problems.extend(missing_buckets(&alerts, &text));
    assert!(
        problems.is_empty(),
        "queried but not exported by sluiced:\n{}\n\n/metrics:\n{text}",
        problems.join("\n")
    );
}

#[tokio::test]
async fn every_documented_metric_is_exported_with_its_type_before_it_has_samples() {
    let d = Daemon::start(sluice_tests::TEST_CONFIG).await;
    // Before any check: names come from `# TYPE` lines alone for metrics without samples.
    let before = d
        .tcp()
        .send(Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    let (families, _) = exported(std::str::from_utf8(&before.body).unwrap());
    for (name, kind) in DOCUMENTED_METRICS {
        // `/metrics` speaks Prometheus text by default, where a counter's family is named with
        // its `_total` suffix.
        assert_eq!(
            families.get(name).map(String::as_str),
            Some(kind),
            "{name} ({kind}) not exported; families: {families:?}"
        );
    }
    let (_, samples) = exported(&scrape(&d).await);
    for name in [
        "rate_limit_requests_total",
        "rate_limit_check_duration_seconds_bucket",
        "rate_limit_keys",
    ] {
        assert!(samples.contains(name), "{name} has no sample");
    }
}

/// `rate_limit_evictions_total` counts, per policy, the keys a full memory store forgot: of
/// 200 new keys into a store of 16, all but those left tracked.
#[tokio::test]
async fn evictions_at_max_keys_are_counted_per_policy() {
    let config = r#"
[backend]
max_keys = 16

[policies.hourly]
algorithm = "fixed_window"
limit = 3
window = "1h"

[policies.idle]
algorithm = "fixed_window"
limit = 3
window = "1h"
"#;
    let d = Daemon::start(config).await;
    let c = d.unix();
    for i in 0..200 {
        let answer = c.check(&req("hourly", &format!("k{i}"))).await.unwrap();
        assert!(answer.body.allowed);
    }
    let text = d
        .tcp()
        .send(Method::GET, "/metrics", &[], "")
        .await
        .unwrap();
    let text = String::from_utf8(text.body.to_vec()).unwrap();
    let sample = |series: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(series));
        let value = line.and_then(|l| l.rsplit(' ').next());
        value
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series}:\n{text}"))
    };
    let tracked = sample(r#"rate_limit_keys{backend="memory"}"#);
    let evicted = sample(r#"rate_limit_evictions_total{policy="hourly"}"#);
    assert!(tracked <= 16, "{tracked} keys tracked");
    assert_eq!(evicted, 200 - tracked, "{text}");
    assert_eq!(sample(r#"rate_limit_evictions_total{policy="idle"}"#), 0);
}

/// Every panel and query of every dashboard uses the `datasource` variable, and every series a
/// panel selects is scoped by the `job` and `instance` variables: a dashboard imported next to
/// other sluiced fleets (or with a second Prometheus) shows only what was picked.
#[test]
fn every_dashboard_query_follows_the_datasource_job_and_instance_variables() {
    let uses_datasource_variable = |value: Option<&serde_json::Value>| {
        value.is_some_and(|ds| {
            ds.get("type").and_then(|t| t.as_str()) == Some("prometheus")
                && ds.get("uid").and_then(|u| u.as_str()) == Some(DATASOURCE)
        })
    };
    let dashboards = assets::dashboards();
    assert!(!dashboards.is_empty(), "no dashboards");
    for (name, dashboard) in &dashboards {
        let variables = dashboard["templating"]["list"].as_array().unwrap();
        let variable = |var: &str| {
            variables
                .iter()
                .find(|v| v["name"] == var)
                .unwrap_or_else(|| panic!("{name}: no template variable {var}"))
        };
        let datasource = variable("datasource");
        assert_eq!(
            (datasource["type"].as_str(), datasource["query"].as_str()),
            (Some("datasource"), Some("prometheus")),
            "{name}: the datasource variable"
        );
        for var in ["job", "instance"] {
            let query = variable(var)["query"].as_str().unwrap_or_default();
            assert!(
                query.starts_with("label_values(") && query.ends_with(&format!(", {var})")),
                "{name}: the {var} variable is `{query}`, want label_values(..., {var})"
            );
        }
        for v in variables.iter().filter(|v| v["type"] == "query") {
            assert!(
                uses_datasource_variable(v.get("datasource")),
                "{name}: variable {} does not query {DATASOURCE}",
                v["name"]
            );
        }

        let mut queries = 0;
        for panel in assets::panels(dashboard) {
            let title = panel["title"].as_str().unwrap_or("?");
            let Some(targets) = panel.get("targets").and_then(|t| t.as_array()) else {
                continue;
            };
            assert!(
                uses_datasource_variable(panel.get("datasource")),
                "{name}: panel {title:?} does not use {DATASOURCE}"
            );
            for target in targets {
                assert!(
                    uses_datasource_variable(target.get("datasource")),
                    "{name}: a query of panel {title:?} does not use {DATASOURCE}"
                );
                let expr = target["expr"].as_str().unwrap_or_default();
                let selectors = assets::selectors(expr);
                assert!(!selectors.is_empty(), "{name}: {title:?} selects nothing");
                for selector in selectors {
                    // A `sluice:` recording rule is per scrape job (the SLOs are the job's):
                    // scoped by `job` alone, never by `instance`, which it does not carry (an
                    // instance picked would empty the panel).
                    let scopes: &[(&str, &str)] = if selector.metric.starts_with("sluice:") {
                        assert!(
                            !selector.matchers.iter().any(|(l, _, _)| l == "instance"),
                            "{name}: panel {title:?} selects {} by instance in `{expr}`",
                            selector.metric
                        );
                        &[("job", "$job")]
                    } else {
                        &[("job", "$job"), ("instance", "$instance")]
                    };
                    for &(label, var) in scopes {
                        assert!(
                            selector
                                .matchers
                                .iter()
                                .any(|(l, op, v)| l == label && op == "=~" && v == var),
                            "{name}: panel {title:?} selects {} without {label}=~\"{var}\" in `{expr}`",
                            selector.metric
                        );
                    }
                    queries += 1;
                }
            }
        }
        assert!(queries >= 20, "{name}: {queries} series selectors");
    }
}
