//! JSON access logs: one object per line. Variables name fields: a top-level field by its
//! name, else a nested one by a dotted path (`${request.ip}`), else a nested one by its path
//! joined with `_` (`$usage_total_tokens` reaches `{"usage": {"total_tokens": 812}}`, since a
//! bare `$name` cannot hold a dot). Strings are their text,
//! numbers and booleans as written, `null` (and a missing field) is empty, an object or array
//! its compact JSON. The time is in `time` or `timestamp` (the first present), or in the
//! field the time-field option names: RFC 3339 or unix seconds, as a number or a string.

use serde_json::{Map, Value};

use super::Fields;
use crate::time;

/// The fields looked at for the time when no time field is named.
pub const DEFAULT_TIME_FIELDS: [&str; 2] = ["time", "timestamp"];

/// The JSON format with its bound field names.
#[derive(Debug, Clone)]
pub(crate) struct JsonFormat {
    names: Vec<String>,
    time_fields: Vec<String>,
}

impl JsonFormat {
    pub(crate) fn new(time_field: Option<&str>) -> Self {
        let time_fields = match time_field {
            Some(field) => vec![field.to_owned()],
            None => DEFAULT_TIME_FIELDS
                .iter()
                .map(|f| (*f).to_owned())
                .collect(),
        };
        JsonFormat {
            names: Vec::new(),
            time_fields,
        }
    }

    pub(crate) fn bind(&mut self, name: &str) -> usize {
        if let Some(index) = self.names.iter().position(|n| n == name) {
            return index;
        }
        self.names.push(name.to_owned());
        self.names.len() - 1
    }

    pub(crate) fn bound(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn parse(&mut self, line: &[u8], fields: &mut Fields) -> Result<u64, String> {
        let object: Map<String, Value> =
            serde_json::from_slice(line).map_err(|e| format!("not a JSON object: {e}"))?;
        let mut text = String::new();
        for (index, name) in self.names.iter().enumerate() {
            text.clear();
            if let Some(value) = field(&object, name) {
                write_text(value, &mut text);
            }
            fields.set_scratch(index, text.as_bytes());
        }
        let (name, value) = self
            .time_fields
            .iter()
            .find_map(|name| field(&object, name).map(|value| (name, value)))
            .ok_or_else(|| format!("no time field ({})", self.time_fields.join(" or ")))?;
        let millis = match value {
            Value::Number(number) => number.as_f64().and_then(time::unix_seconds_f64_millis),
            Value::String(text) => time::any_millis(text.as_bytes()),
            _ => None,
        };
        millis.ok_or_else(|| format!("bad time {value} in field {name:?}"))
    }
}

/// The field `name` of `object`: top-level first, else a dotted path into nested objects,
/// else a path joined with `_`.
fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(value) = object.get(name) {
        return Some(value);
    }
    dotted(object, name).or_else(|| underscored(object, name))
}

fn dotted<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    let mut parts = name.split('.');
    let mut value = object.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// `name` as fields of nested objects joined with `_`: a field of `object` whose name and an
/// `_` start `name`, and the rest of `name` inside it (only fields that are objects are
/// entered, each at a `_` of `name`, so the search is bounded by the name's underscores).
fn underscored<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    name.match_indices('_').find_map(|(at, _)| {
        let inner = object.get(&name[..at])?.as_object()?;
        let rest = &name[at + 1..];
        inner.get(rest).or_else(|| underscored(inner, rest))
    })
}

/// The text a variable expands to for `value`.
fn write_text(value: &Value, out: &mut String) {
    match value {
        Value::Null => {}
        Value::String(text) => out.push_str(text),
        Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => {
            out.push_str(&value.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        format: &mut JsonFormat,
        names: &[&str],
        line: &str,
    ) -> Result<(u64, Vec<String>), String> {
        let bindings: Vec<usize> = names.iter().map(|n| format.bind(n)).collect();
        let mut fields = Fields::default();
        fields.reset(format.bound());
        let at = format.parse(line.as_bytes(), &mut fields)?;
        let values = bindings
            .iter()
            .map(|&b| String::from_utf8_lossy(fields.get(line.as_bytes(), b)).into_owned())
            .collect();
        Ok((at, values))
    }

    #[test]
    fn fields_nested_fields_and_times() {
        let mut format = JsonFormat::new(None);
        let (at, values) = parse(
            &mut format,
            &["ip", "req.user", "n", "gone"],
            r#"{"time":"2026-12-06T10:00:00Z","ip":"10.0.0.1","req":{"user":"u\"1"},"n":7}"#,
        )
        .unwrap();
        assert_eq!(at, 1_796_551_200_000);
        assert_eq!(values, ["10.0.0.1", "u\"1", "7", ""]);
        let (_, values) = parse(
            &mut format,
            &["usage_total_tokens", "usage_detail_cached", "usage_none"],
            r#"{"time":1796551200,"usage":{"total_tokens":812,"detail":{"cached":5}}}"#,
        )
        .unwrap();
        assert_eq!(values, ["812", "5", ""]);
        let (at, _) = parse(&mut format, &[], r#"{"timestamp":1796551200.5}"#).unwrap();
        assert_eq!(at, 1_796_551_200_500);
        let (at, _) = parse(&mut format, &[], r#"{"timestamp":"1796551200"}"#).unwrap();
        assert_eq!(at, 1_796_551_200_000);
    }

    #[test]
    fn a_named_time_field_and_bad_lines() {
        let mut format = JsonFormat::new(Some("ts"));
        assert!(parse(&mut format, &[], r#"{"ts":1796551200}"#).is_ok());
        assert!(
            parse(&mut format, &[], r#"{"time":1796551200}"#)
                .unwrap_err()
                .contains("no time field (ts)")
        );
        assert!(
            parse(&mut format, &[], r#"{"ts":true}"#)
                .unwrap_err()
                .contains("bad time")
        );
        assert!(
            parse(&mut format, &[], "[1]")
                .unwrap_err()
                .contains("not a JSON object")
        );
    }
}
