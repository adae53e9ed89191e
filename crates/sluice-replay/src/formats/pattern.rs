//! Formats that are a fixed sequence of variables between literal separators: any nginx
//! `log_format` string (`combined` by default) and Envoy's default text format, written as
//! the same kind of template with Envoy's fields named as the SPEC lists them.
//!
//! A variable's value runs up to the first occurrence of the literal that follows it (nginx
//! escapes `"` inside quoted values, so a separator never occurs inside a value), or to the
//! end of the line for a trailing variable. Matching stops after the last variable a replay
//! needs (the time and those the expressions name): the rest of a line is never scanned.
//! A value logged as `-` (nginx's and Envoy's "empty") is empty.

use memchr::memmem::Finder;

use super::{Fields, Span};
use crate::template::{self, Piece};
use crate::time::{self, NginxTimeCache};

/// nginx's predefined `combined` format.
pub const NGINX_COMBINED: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent""#;

/// Envoy's default access-log format, its fields named as `--key` / `--tier` variables.
pub const ENVOY_DEFAULT: &str = r#"[$start_time] "$method $path $protocol" $response_code $response_flags $bytes_received $bytes_sent $duration $upstream_service_time "$x_forwarded_for" "$user_agent" "$request_id" "$authority" "$upstream_host""#;

/// How the time variable of a pattern is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeForm {
    /// `$time_local`: `06/Dec/2026:10:00:00 +0000`.
    NginxLocal,
    /// `$time_iso8601`, Envoy's `START_TIME`: RFC 3339.
    Rfc3339,
    /// `$msec`: unix seconds with milliseconds.
    UnixSeconds,
}

/// One variable of the pattern and the literal that ends it.
#[derive(Debug, Clone)]
struct Slot {
    name: String,
    /// The literal after the variable; `None` for a trailing variable (runs to the line's end).
    until: Option<Finder<'static>>,
    /// Binding index, when a replay needs this variable's value.
    binding: Option<usize>,
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    /// `nginx` or `envoy`, for messages.
    kind: &'static str,
    /// Text before the first variable.
    leading: Vec<u8>,
    slots: Vec<Slot>,
    time_slot: usize,
    time_form: TimeForm,
    /// The slot after which matching stops.
    last_needed: usize,
    bound: usize,
    cache: NginxTimeCache,
}

impl Pattern {
    /// nginx's `log_format` string `format`: the time is `$msec` when logged (milliseconds),
    /// else `$time_iso8601`, else `$time_local`.
    pub(crate) fn nginx(format: &str) -> Result<Self, String> {
        let preference = [
            ("msec", TimeForm::UnixSeconds),
            ("time_iso8601", TimeForm::Rfc3339),
            ("time_local", TimeForm::NginxLocal),
        ];
        Self::compile("nginx", format, &preference)
    }

    /// Envoy's default text format.
    pub(crate) fn envoy() -> Result<Self, String> {
        Self::compile("envoy", ENVOY_DEFAULT, &[("start_time", TimeForm::Rfc3339)])
    }

    fn compile(
        kind: &'static str,
        format: &str,
        times: &[(&str, TimeForm)],
    ) -> Result<Self, String> {
        let pieces = template::parse(format)?;
        let mut leading = Vec::new();
        let mut slots: Vec<Slot> = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Text(text) => match slots.last_mut() {
                    Some(slot) => slot.until = Some(Finder::new(text.as_bytes()).into_owned()),
                    None => leading = text.into_bytes(),
                },
                Piece::Var(name) => {
                    if let Some(previous) = slots.last()
                        && previous.until.is_none()
                    {
                        return Err(format!(
                            "${} and ${name} have no text between them, so a line cannot tell where one ends",
                            previous.name
                        ));
                    }
                    slots.push(Slot {
                        name,
                        until: None,
                        binding: None,
                    });
                }
            }
        }
        let (time_slot, time_form) = times
            .iter()
            .find_map(|(name, form)| {
                slots
                    .iter()
                    .position(|slot| slot.name == *name)
                    .map(|i| (i, *form))
            })
            .ok_or_else(|| {
                let names: Vec<String> = times.iter().map(|(n, _)| format!("${n}")).collect();
                format!(
                    "the format logs no time: it needs one of {}",
                    names.join(", ")
                )
            })?;
        Ok(Pattern {
            kind,
            leading,
            slots,
            time_slot,
            time_form,
            last_needed: time_slot,
            bound: 0,
            cache: NginxTimeCache::default(),
        })
    }

    pub(crate) fn bind(&mut self, name: &str) -> Result<usize, String> {
        let Some(index) = self.slots.iter().position(|slot| slot.name == name) else {
            let names: Vec<String> = self.slots.iter().map(|s| format!("${}", s.name)).collect();
            return Err(format!(
                "the {} format has no variable ${name}; it has {}",
                self.kind,
                names.join(" ")
            ));
        };
        let slot = &mut self.slots[index];
        if let Some(binding) = slot.binding {
            return Ok(binding);
        }
        let binding = self.bound;
        slot.binding = Some(binding);
        self.bound += 1;
        self.last_needed = self.last_needed.max(index);
        Ok(binding)
    }

    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    pub(crate) fn parse(&mut self, line: &[u8], fields: &mut Fields) -> Result<u64, String> {
        if !self.leading.is_empty() && !line.starts_with(&self.leading) {
            return Err(format!(
                "does not start with {:?} as the {} format does",
                String::from_utf8_lossy(&self.leading),
                self.kind
            ));
        }
        let mut at = self.leading.len();
        let mut time = None;
        for (index, slot) in self.slots[..=self.last_needed].iter().enumerate() {
            let rest = &line[at..];
            let (end, next) = match &slot.until {
                Some(until) => match until.find(rest) {
                    Some(found) => (at + found, at + found + until.needle().len()),
                    None => {
                        return Err(format!(
                            "no {:?} after ${}",
                            String::from_utf8_lossy(until.needle()),
                            slot.name
                        ));
                    }
                },
                None => (line.len(), line.len()),
            };
            let value = &line[at..end];
            if index == self.time_slot {
                time = Some(value);
            }
            if let Some(binding) = slot.binding
                && value != b"-"
            {
                fields.spans[binding] = Span::of_line(at, end);
            }
            at = next;
        }
        let value = time.unwrap_or_default();
        let millis = match self.time_form {
            TimeForm::NginxLocal => self.cache.millis(value),
            TimeForm::Rfc3339 => time::rfc3339_millis(value),
            TimeForm::UnixSeconds => time::unix_seconds_millis(value),
        };
        millis.ok_or_else(|| {
            format!(
                "bad time {:?} in ${}",
                String::from_utf8_lossy(value),
                self.slots[self.time_slot].name
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_one(pattern: &mut Pattern, line: &str, names: &[&str]) -> (u64, Vec<String>) {
        let bindings: Vec<usize> = names.iter().map(|n| pattern.bind(n).unwrap()).collect();
        let mut fields = Fields::default();
        fields.reset(pattern.bound());
        let at = pattern.parse(line.as_bytes(), &mut fields).unwrap();
        let values = bindings
            .iter()
            .map(|&b| String::from_utf8_lossy(fields.get(line.as_bytes(), b)).into_owned())
            .collect();
        (at, values)
    }

    #[test]
    fn combined_reads_the_address_and_the_time() {
        let mut pattern = Pattern::nginx(NGINX_COMBINED).unwrap();
        let line =
            r#"10.0.0.1 - - [06/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "curl/8""#;
        let (at, values) = parse_one(
            &mut pattern,
            line,
            &["remote_addr", "remote_user", "http_user_agent"],
        );
        assert_eq!(at, 1_796_551_200_000);
        assert_eq!(values, ["10.0.0.1", "", "curl/8"]);
    }

    #[test]
    fn envoy_reads_its_fields() {
        let mut pattern = Pattern::envoy().unwrap();
        let line = r#"[2026-12-06T10:00:00.123Z] "GET /v1/items HTTP/1.1" 200 - 0 17 3 2 "10.1.2.3" "curl/8" "abc" "api.example" "10.9.9.9:80""#;
        let (at, values) = parse_one(
            &mut pattern,
            line,
            &["x_forwarded_for", "path", "upstream_host", "response_flags"],
        );
        assert_eq!(at, 1_796_551_200_123);
        assert_eq!(values, ["10.1.2.3", "/v1/items", "10.9.9.9:80", ""]);
    }

    #[test]
    fn a_custom_format_with_msec() {
        let mut pattern = Pattern::nginx("$msec $http_x_user_id|$status").unwrap();
        let (at, values) = parse_one(&mut pattern, "1796551200.250 u42|429", &["http_x_user_id"]);
        assert_eq!(at, 1_796_551_200_250);
        assert_eq!(values, ["u42"]);
    }

    #[test]
    fn bad_formats_and_lines_say_why() {
        assert!(
            Pattern::nginx("$remote_addr$status $time_local")
                .unwrap_err()
                .contains("no text between")
        );
        assert!(
            Pattern::nginx("$remote_addr")
                .unwrap_err()
                .contains("no time")
        );
        let mut pattern = Pattern::nginx(NGINX_COMBINED).unwrap();
        assert!(
            pattern
                .bind("http_x_user_id")
                .unwrap_err()
                .contains("$remote_addr")
        );
        let mut fields = Fields::default();
        fields.reset(pattern.bound());
        assert!(pattern.parse(b"garbage", &mut fields).is_err());
        let bad_time = br#"1.2.3.4 - - [06/Dec/2026:10:00 +0000] "GET / HTTP/1.1" 200 5 "-" "x""#;
        assert!(
            pattern
                .parse(bad_time, &mut fields)
                .unwrap_err()
                .contains("bad time")
        );
    }
}
