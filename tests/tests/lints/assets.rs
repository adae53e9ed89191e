//! Reading the observability assets (`dashboards/*.json`, `alerts/*.yml`): their PromQL
//! expressions, the series selectors and metric names those expressions use, and the panels of
//! the dashboards. Shared by the drift guard (`drift.rs`) and the promtool checks (`alerts.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Files of `dir` (under the root) whose name ends with `suffix`, sorted.
pub fn files(dir: &str, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix))
        })
        .collect();
    found.sort();
    found
}

/// The alert rule files: `alerts/*.yml` except the `*.test.yml` promtool tests.
pub fn rule_files() -> Vec<PathBuf> {
    files("alerts", ".yml")
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with(".test.yml"))
        .collect()
}

/// The names the rule files record (`- record: NAME`): the `sluice:` recording rules that
/// alerts and dashboards may query besides the exported metrics.
pub fn recorded_names() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for path in rule_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            if let Some(name) = line.trim_start().strip_prefix("- record:") {
                out.insert(name.trim().to_owned());
            }
        }
    }
    out
}

/// A PromQL expression and where it came from.
#[derive(Debug, Clone)]
pub struct Expr {
    pub origin: String,
    pub promql: String,
}

/// Every dashboard: (file name, parsed JSON).
pub fn dashboards() -> Vec<(String, serde_json::Value)> {
    files("dashboards", ".json")
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|err| panic!("{} is not JSON: {err}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                json,
            )
        })
        .collect()
}

/// Every panel of a dashboard, the panels nested in collapsed rows included.
pub fn panels(dashboard: &serde_json::Value) -> Vec<&serde_json::Value> {
    fn walk<'a>(list: Option<&'a serde_json::Value>, out: &mut Vec<&'a serde_json::Value>) {
        for panel in list.and_then(|l| l.as_array()).into_iter().flatten() {
            out.push(panel);
            walk(panel.get("panels"), out);
        }
    }
    let mut out = Vec::new();
    walk(dashboard.get("panels"), &mut out);
    out
}

/// Every panel query (`expr`) of every dashboard, and the metric of every `label_values(...)`
/// template variable (as the expression `metric`).
pub fn dashboard_exprs() -> Vec<Expr> {
    let mut out = Vec::new();
    for (name, json) in dashboards() {
        collect_exprs(&json, &name, &mut out);
    }
    out
}

fn collect_exprs(value: &serde_json::Value, origin: &str, out: &mut Vec<Expr>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", serde_json::Value::String(promql)) => out.push(Expr {
                        origin: origin.to_owned(),
                        promql: promql.clone(),
                    }),
                    ("query" | "definition", serde_json::Value::String(query)) => {
                        if let Some(metric) = label_values_metric(query) {
                            out.push(Expr {
                                origin: format!("{origin} (template variable)"),
                                promql: metric,
                            });
                        }
                    }
                    _ => collect_exprs(v, origin, out),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                collect_exprs(item, origin, out);
            }
        }
        _ => {}
    }
}

/// The series selector of a Grafana `label_values(selector, label)` query.
fn label_values_metric(query: &str) -> Option<String> {
    let rest = query.trim().strip_prefix("label_values(")?;
    let (selector, _label) = rest.rsplit_once(',')?;
    Some(selector.trim().to_owned())
}

/// Every `expr:` of the alert rule files (block scalars `expr: |` and one-line values).
pub fn alert_exprs() -> Vec<Expr> {
    let mut out = Vec::new();
    for path in rule_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            let indent = line.len() - line.trim_start().len();
            if let Some(value) = line.trim_start().strip_prefix("expr:") {
                let value = value.trim();
                if value.starts_with('|') || value.starts_with('>') {
                    let mut body = Vec::new();
                    i += 1;
                    while i < lines.len() {
                        let next = lines[i];
                        let next_indent = next.len() - next.trim_start().len();
                        if !next.trim().is_empty() && next_indent <= indent {
                            break;
                        }
                        body.push(next.trim());
                        i += 1;
                    }
                    out.push(Expr {
                        origin: name.clone(),
                        promql: body.join(" "),
                    });
                    continue;
                }
                out.push(Expr {
                    origin: name.clone(),
                    promql: value.trim_matches(|c| c == '"' || c == '\'').to_owned(),
                });
            }
            i += 1;
        }
    }
    out
}

const AGGREGATIONS: [&str; 12] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
const GROUPING: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: [&str; 8] = [
    "offset", "bool", "and", "or", "unless", "inf", "nan", "atan2",
];

/// The metric names a PromQL expression selects.
pub fn metric_names(promql: &str) -> BTreeSet<String> {
    selectors(promql).into_iter().map(|s| s.metric).collect()
}

/// A series selector of a PromQL expression: `metric{matchers}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub metric: String,
    /// The label matchers as (label, operator, value), the value unquoted.
    pub matchers: Vec<(String, String, String)>,
}

/// The series selectors of a PromQL expression, in order. Strings, ranges, Grafana variables,
/// function names, aggregation and grouping clauses are skipped; every other identifier is a
/// metric name, with the label matchers that follow it.
pub fn selectors(promql: &str) -> Vec<Selector> {
    let chars: Vec<char> = promql.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '{' => i = skip_until(&chars, i, '}'),
            '[' => i = skip_until(&chars, i, ']'),
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_until(&chars, i, '}');
                } else {
                    while i < chars.len() && is_part(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                while i < chars.len() && (is_part(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if is_start(c) => {
                let start = i;
                while i < chars.len() && is_part(chars[i]) {
                    i += 1;
                }
                let ident: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let called = chars.get(next) == Some(&'(');
                if GROUPING.contains(&ident.as_str()) {
                    if called {
                        i = skip_until(&chars, next, ')');
                    }
                } else if called
                    || AGGREGATIONS.contains(&ident.as_str())
                    || KEYWORDS.contains(&ident.to_ascii_lowercase().as_str())
                {
                    // A function, an aggregation (its clause may come first) or a keyword.
                } else {
                    let mut matchers = Vec::new();
                    if chars.get(next) == Some(&'{') {
                        i = skip_until(&chars, next, '}');
                        let inner: String = chars[next + 1..i - 1].iter().collect();
                        matchers = label_matchers(&inner);
                    }
                    found.push(Selector {
                        metric: ident,
                        matchers,
                    });
                }
            }
            _ => i += 1,
        }
    }
    found
}

/// `a="x", b=~"y"` as (label, operator, value) triples; the values keep their escapes.
fn label_matchers(text: &str) -> Vec<(String, String, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && !matches!(chars[i], '=' | '!' | '~') {
            i += 1;
        }
        let label: String = chars[start..i].iter().collect();
        let op_start = i;
        while i < chars.len() && matches!(chars[i], '=' | '!' | '~') {
            i += 1;
        }
        let op: String = chars[op_start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let value = if i < chars.len() && matches!(chars[i], '"' | '\'' | '`') {
            let end = skip_string(&chars, i);
            let value: String = chars[i + 1..end.saturating_sub(1).max(i + 1)]
                .iter()
                .collect();
            i = end;
            value
        } else {
            String::new()
        };
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if !label.trim().is_empty() {
            out.push((label.trim().to_owned(), op, value));
        }
    }
    out
}

/// The index just past the string starting at `start`.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index just past the first `close` after `start`, skipping strings on the way.
fn skip_until(chars: &[char], start: usize, close: char) -> usize {
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => i = skip_string(chars, i),
            c if c == close => return i + 1,
            _ => i += 1,
        }
    }
    i
}

#[test]
fn selectors_carry_their_label_matchers() {
    let found = selectors(
        r#"sum(rate(a_total{job=~"$job", instance =~ "$instance",status!="x,y"}[5m])) / b{} and on (job) c"#,
    );
    let pairs = |s: &Selector| -> Vec<String> {
        s.matchers
            .iter()
            .map(|(l, op, v)| format!("{l}{op}{v}"))
            .collect()
    };
    let metrics: Vec<&str> = found.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(metrics, ["a_total", "b", "c"]);
    assert_eq!(
        pairs(&found[0]),
        ["job=~$job", "instance=~$instance", "status!=x,y"]
    );
    assert!(found[1].matchers.is_empty() && found[2].matchers.is_empty());
}

#[test]
fn metric_names_skips_everything_that_is_not_a_metric() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, backend) (rate(rate_limit_redis_duration_seconds_bucket{op=~"a|b", x="}"}[$__rate_interval] offset 1w))) > 0.05
           and on (policy) max without (x) (rate_limit_keys) / ignoring(a) group_left(b) up2 # comment metric_not"#,
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "rate_limit_keys",
            "rate_limit_redis_duration_seconds_bucket",
            "up2"
        ]
    );
    assert_eq!(
        label_values_metric(
            r#"label_values(rate_limit_requests_total{policy=~"$policy"}, endpoint)"#
        )
        .as_deref(),
        Some(r#"rate_limit_requests_total{policy=~"$policy"}"#)
    );
}
