//! One envoyproxy/ratelimit YAML file read into a [`Domain`], refusing what envoyproxy/ratelimit
//! refuses — and a misspelt or misplaced field, which it would also refuse or silently ignore —
//! with every problem of the file at once, each at its YAML path
//! (`descriptors[2].rate_limit.unit`).
//!
//! The text is parsed into a generic YAML tree first (a syntax error names its line and
//! column), then walked by hand: a typed deserialisation would stop at the first problem.

use serde_yaml_ng::{Mapping, Value};

use super::tree::{Domain, Level, Limit, Node, Unit};

/// A problem of a file: the YAML path (empty: the file itself) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

/// The fields each kind of map may hold (envoyproxy/ratelimit's keys, each where it belongs).
const ROOT_KEYS: &[&str] = &["domain", "descriptors"];
const DESCRIPTOR_KEYS: &[&str] = &[
    "key",
    "value",
    "rate_limit",
    "descriptors",
    "shadow_mode",
    "quota_mode",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];
const RATE_LIMIT_KEYS: &[&str] = &[
    "requests_per_unit",
    "unit",
    "unit_multiplier",
    "unlimited",
    "name",
    "replaces",
];
const REPLACES_KEYS: &[&str] = &["name"];

/// Reads `text` (the file `file`): the domain as far as it could be read (its name, for the
/// check across files, even when the rest is refused) and every problem found; the domain is
/// only served when there are none.
pub fn read(file: &str, text: &str) -> (Domain, Vec<Problem>) {
    let value: Value = match serde_yaml_ng::from_str(text) {
        Ok(value) => value,
        Err(err) => {
            let at = err
                .location()
                .map(|l| format!(" (line {}, column {})", l.line(), l.column()))
                .unwrap_or_default();
            let domain = Domain {
                file: file.to_owned(),
                ..Domain::default()
            };
            return (
                domain,
                vec![problem("", format!("not valid YAML{at}: {err}"))],
            );
        }
    };
    let mut reader = Reader::default();
    let domain = reader.root(file, &value);
    (domain, reader.problems)
}

fn problem(path: &str, message: impl Into<String>) -> Problem {
    Problem {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// `path.key`, or `key` at the root.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[derive(Debug, Default)]
struct Reader {
    problems: Vec<Problem>,
}

impl Reader {
    fn push(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(problem(path, message));
    }

    fn root(&mut self, file: &str, value: &Value) -> Domain {
        let mut domain = Domain {
            file: file.to_owned(),
            ..Domain::default()
        };
        let Some(map) = self.map("", value, ROOT_KEYS, "a map of domain and descriptors") else {
            return domain;
        };
        domain.name = self.string("domain", map.get("domain")).unwrap_or_default();
        if domain.name.is_empty() {
            self.push("domain", "a file needs a non-empty domain");
        }
        domain.top = self.descriptors("descriptors", map.get("descriptors"));
        domain
    }

    /// `value` as a map whose keys are strings among `allowed`; each other key is reported.
    fn map<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        allowed: &[&str],
        what: &str,
    ) -> Option<&'v Mapping> {
        let Value::Mapping(map) = value else {
            let found = kind(value);
            let at = if path.is_empty() { "the file" } else { path };
            self.push(path, format!("{at} must be {what}, not {found}"));
            return None;
        };
        for key in map.keys() {
            match key {
                Value::String(name) if allowed.contains(&name.as_str()) => {}
                Value::String(name) => self.push(
                    &join(path, name),
                    format!("unknown field; expected one of {}", allowed.join(", ")),
                ),
                other => self.push(
                    path,
                    format!(
                        "a key must be a string, not {} ({})",
                        kind(other),
                        scalar(other).unwrap_or_default()
                    ),
                ),
            }
        }
        Some(map)
    }

    /// A list of descriptors (absent or null: none).
    fn descriptors(&mut self, path: &str, value: Option<&Value>) -> Level {
        let mut level = Level::default();
        let items = match value {
            None | Some(Value::Null) => return level,
            Some(Value::Sequence(items)) => items,
            Some(other) => {
                self.push(
                    path,
                    format!("must be a list of descriptors, not {}", kind(other)),
                );
                return level;
            }
        };
        for (i, item) in items.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let Some((key, value, node)) = self.descriptor(&at, item) else {
                continue;
            };
            if !level.insert(&key, &value, node) {
                let shown = if value.is_empty() {
                    format!("key {key:?}")
                } else {
                    format!("key {key:?} with value {value:?}")
                };
                self.push(&at, format!("{shown} is already at this level"));
            }
        }
        level
    }

    /// One descriptor: its key, value and node.
    fn descriptor(&mut self, path: &str, value: &Value) -> Option<(String, String, Node)> {
        let map = self.map(path, value, DESCRIPTOR_KEYS, "a map (a descriptor)")?;
        let key_path = join(path, "key");
        let key = self.string(&key_path, map.get("key")).unwrap_or_default();
        if key.is_empty() {
            self.push(&key_path, "a descriptor needs a non-empty key");
        }
        let value = self
            .string(&join(path, "value"), map.get("value"))
            .unwrap_or_default();
        let shadow_mode = self.flag(&join(path, "shadow_mode"), map.get("shadow_mode"));
        let detailed_metric = self.flag(&join(path, "detailed_metric"), map.get("detailed_metric"));
        let share_threshold = self.flag(&join(path, "share_threshold"), map.get("share_threshold"));
        self.flag(&join(path, "value_to_metric"), map.get("value_to_metric"));
        if self.flag(&join(path, "quota_mode"), map.get("quota_mode")) {
            self.push(
                &join(path, "quota_mode"),
                "quota_mode is not supported by sluice (use a usage policy in [policies.*])",
            );
        }
        if share_threshold && !value.contains('*') {
            self.push(
                &join(path, "share_threshold"),
                "share_threshold needs a value with a * wildcard",
            );
        }
        let limit = match map.get("rate_limit") {
            None | Some(Value::Null) => None,
            Some(rate_limit) => self.rate_limit(
                &join(path, "rate_limit"),
                rate_limit,
                shadow_mode,
                detailed_metric,
            ),
        };
        let children = self.descriptors(&join(path, "descriptors"), map.get("descriptors"));
        let written = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}_{value}")
        };
        let node = Node {
            written,
            limit,
            share_threshold,
            children,
        };
        Some((key, value, node))
    }

    fn rate_limit(
        &mut self,
        path: &str,
        value: &Value,
        shadow_mode: bool,
        detailed_metric: bool,
    ) -> Option<Limit> {
        let map = self.map(path, value, RATE_LIMIT_KEYS, "a map (a rate_limit)")?;
        let before = self.problems.len();
        let unlimited = self.flag(&join(path, "unlimited"), map.get("unlimited"));
        let unit_path = join(path, "unit");
        let unit_text = self.string(&unit_path, map.get("unit")).unwrap_or_default();
        let unit = Unit::parse(&unit_text);
        match (unlimited, unit) {
            (true, Some(_)) => self.push(&unit_path, "an unlimited rate_limit takes no unit"),
            (false, None) => self.push(
                &unit_path,
                format!(
                    "invalid unit {unit_text:?}; expected second, minute, hour, day, week, month or year"
                ),
            ),
            _ => {}
        }
        let requests_per_unit = self.number(
            &join(path, "requests_per_unit"),
            map.get("requests_per_unit"),
            0,
        );
        if !unlimited && requests_per_unit == Some(0) {
            self.push(
                &join(path, "requests_per_unit"),
                "requests_per_unit must be at least 1 (sluice refuses a limit of 0)",
            );
        }
        let unit_multiplier = self.number(
            &join(path, "unit_multiplier"),
            map.get("unit_multiplier"),
            1,
        );
        if unit_multiplier == Some(0) {
            self.push(
                &join(path, "unit_multiplier"),
                "unit_multiplier must be at least 1",
            );
        }
        let name = self
            .string(&join(path, "name"), map.get("name"))
            .unwrap_or_default();
        let replaces = self.replaces(&join(path, "replaces"), map.get("replaces"), &name);
        if self.problems.len() > before {
            return None;
        }
        Some(Limit {
            policy: String::new(),
            unlimited,
            requests_per_unit: requests_per_unit.unwrap_or(0),
            unit: if unlimited { None } else { unit },
            unit_multiplier: unit_multiplier.unwrap_or(1),
            name,
            replaces,
            shadow_mode,
            detailed_metric,
        })
    }

    /// `replaces`: a list of `{name: …}`, none empty, none this limit's own name.
    fn replaces(&mut self, path: &str, value: Option<&Value>, own: &str) -> Vec<String> {
        let items = match value {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Sequence(items)) => items,
            Some(other) => {
                self.push(
                    path,
                    format!("must be a list of {{name: …}}, not {}", kind(other)),
                );
                return Vec::new();
            }
        };
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let Some(map) = self.map(&at, item, REPLACES_KEYS, "a map ({name: …})") else {
                continue;
            };
            let name_path = join(&at, "name");
            let name = self.string(&name_path, map.get("name")).unwrap_or_default();
            if name.is_empty() {
                self.push(&name_path, "a replaces entry needs a non-empty name");
            } else if name == own {
                self.push(&name_path, "a rate_limit cannot replace itself");
            } else {
                names.push(name);
            }
        }
        names
    }

    /// A scalar as text (absent or null: `None`); a list or map is reported.
    fn string(&mut self, path: &str, value: Option<&Value>) -> Option<String> {
        let value = value?;
        if value.is_null() {
            return None;
        }
        let text = scalar(value);
        if text.is_none() {
            self.push(path, format!("must be a string, not {}", kind(value)));
        }
        text
    }

    /// A boolean (absent or null: false).
    fn flag(&mut self, path: &str, value: Option<&Value>) -> bool {
        match value {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.push(path, format!("must be true or false, not {}", kind(other)));
                false
            }
        }
    }

    /// An integer from 0 to 2^32 - 1 (absent or null: `default`).
    fn number(&mut self, path: &str, value: Option<&Value>, default: u32) -> Option<u32> {
        match value {
            None | Some(Value::Null) => Some(default),
            Some(Value::Number(n)) => {
                let parsed = n.as_u64().and_then(|n| u32::try_from(n).ok());
                if parsed.is_none() {
                    self.push(
                        path,
                        format!("must be an integer from 0 to 4294967295, not {n}"),
                    );
                }
                parsed
            }
            Some(other) => {
                self.push(path, format!("must be an integer, not {}", kind(other)));
                None
            }
        }
    }
}

/// A scalar's text, as envoyproxy/ratelimit reads a string field (`value: 8080` is "8080").
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What kind of YAML value this is, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a map",
        Value::Tagged(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        read("f.yaml", text)
            .1
            .into_iter()
            .map(|p| format!("{}: {}", p.path, p.message))
            .collect()
    }

    #[test]
    fn what_envoyproxy_ratelimit_accepts_is_accepted() {
        let text = "domain: d\ndescriptors:\n  - key: port\n    value: 8080\n    value_to_metric: true\n    metadata: {team: {a: [1, 2]}}\n    rate_limit: {unit: SECOND, requests_per_unit: 5}\n    descriptors:\n  - key: other\n    rate_limit:\n";
        let (domain, found) = read("f.yaml", text);
        assert!(found.is_empty(), "{found:?}");
        let limit = domain.find([("port", "8080")].into_iter()).unwrap().limit;
        assert_eq!(
            (limit.requests_per_unit, limit.unit),
            (5, Some(Unit::Second))
        );
        assert!(
            domain.find([("other", "x")].into_iter()).is_none(),
            "no rate_limit, no limit"
        );
    }

    #[test]
    fn what_sluice_cannot_serve_is_refused_by_name() {
        let text = "domain: d\ndescriptors:\n  - key: a\n    quota_mode: true\n    rate_limit: {unit: second, requests_per_unit: 0}\n";
        let found = problems(text);
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("descriptors[0].quota_mode: quota_mode is not supported")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|p| p.starts_with(
                "descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be at least 1"
            )),
            "{found:?}"
        );
    }

    #[test]
    fn every_problem_of_a_file_is_reported_at_once() {
        let text = "domain: \"\"\ndescriptors:\n  - key: a\n    shadow_mode: yes please\n    rate_limit: {unit: second, requests_per_unit: -1}\n  - {}\n";
        let found = problems(text);
        assert_eq!(found.len(), 4, "{found:?}");
    }
}
