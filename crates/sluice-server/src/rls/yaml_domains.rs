//! `ShouldRateLimit` for the domains of `rls.envoy_config` (envoyproxy/ratelimit YAML),
//! answered as envoyproxy/ratelimit answers them:
//!
//! - each descriptor gets the most specific limit of its domain's tree (see
//!   [`tree`](sluice_config::envoy_yaml::tree)), or none (`OK`, no `current_limit`);
//! - `unlimited` answers `OK` with `limit_remaining` 2^32 − 1 and no `current_limit`; a limit
//!   whose `name` another matched limit `replaces` is dropped (`OK`, no `current_limit`);
//! - every other descriptor is counted on its limit's policy (fixed_window counting every
//!   hit: `OVER_LIMIT` when the count after the hits exceeds the limit, the over-limit hits
//!   counted too), all of them in one batch (one script call on Redis, one per slot on a
//!   Cluster). The hits are the descriptor's own `hits_addend` when set (0 only asks:
//!   `OVER_LIMIT` once nothing is left), else the request's (0 is 1);
//! - `share_threshold`: the wildcard pattern stands for the value in the counter's key, so
//!   every value it matches shares one counter;
//! - `current_limit` carries the YAML's `requests_per_unit`, `unit` and `name`;
//!   `duration_until_reset` is the time to the end of the window; the headers and the 429 body
//!   are sluice's, as for `[[rls.descriptors]]`;
//! - `detailed_metric`: the check carries envoyproxy/ratelimit's detailed stats key as its
//!   metrics label ([`DetailedKey`], resolved by `metrics::detailed`, at most 100 per limit).

use tonic::Status;

use super::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use super::generated::envoy::service::ratelimit::v3 as pb;
use super::reply::{code_of, limit_error, response};
use crate::metrics::detailed::{Detail, DetailKey};
use crate::service::app::App;
use crate::service::limiter::{CheckInput, Verdict};
use pb::rate_limit_response::rate_limit::Unit as PbUnit;
use pb::rate_limit_response::{Code, DescriptorStatus, RateLimit};
use pb::{RateLimitRequest, RateLimitResponse};
use sluice_api::MAX_KEY_BYTES;
use sluice_config::envoy_yaml::EnvoyDomains;
use sluice_config::envoy_yaml::tree::{Found, Limit, Unit};
use sluice_core::Mode;

/// A descriptor counted on a limit.
struct Counted<'a> {
    index: usize,
    limit: &'a Limit,
    key: String,
    hits: u64,
    /// Its `detailed_metric` label, when the limit has the flag.
    detail: Option<DetailedKey<'a>>,
}

/// envoyproxy/ratelimit's detailed stats key of a descriptor, `<domain>.<key>_<value>…`
/// (a `share_threshold` pattern in place of the value it matched; then an entry with no
/// value is its key alone, as there), written in pieces so the metrics find its series
/// without formatting it.
struct DetailedKey<'a> {
    domain: &'a str,
    entries: &'a [Entry],
    shared: &'a [Option<&'a str>],
}

impl DetailKey for DetailedKey<'_> {
    fn pieces(&self, each: &mut dyn FnMut(&str)) {
        each(self.domain);
        let sharing = self.shared.iter().any(Option::is_some);
        for (i, entry) in self.entries.iter().enumerate() {
            each(".");
            each(&entry.key);
            match self.shared.get(i).copied().flatten() {
                Some(pattern) => {
                    each("_");
                    each(pattern);
                }
                None if sharing && entry.value.is_empty() => {}
                None => {
                    each("_");
                    each(&entry.value);
                }
            }
        }
    }
}

/// The answer to a request of a YAML domain (`domains` holds `request.domain`).
pub async fn answer(
    app: &App,
    domains: &EnvoyDomains,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, Status> {
    let found: Vec<Option<Found<'_>>> = request
        .descriptors
        .iter()
        .map(|d| {
            let entries = d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()));
            domains.find(&request.domain, entries)
        })
        .collect();
    // A few names at most: a list (empty, unallocated, when nothing replaces).
    let replaced: Vec<&str> = found
        .iter()
        .flatten()
        .flat_map(|f| f.limit.replaces.iter().map(String::as_str))
        .collect();
    let mut statuses = vec![
        DescriptorStatus {
            code: Code::Ok.into(),
            ..DescriptorStatus::default()
        };
        request.descriptors.len()
    ];
    let mut counted = Vec::new();
    for (index, (descriptor, found)) in request.descriptors.iter().zip(&found).enumerate() {
        let Some(found) = found else { continue };
        let limit = found.limit;
        if limit.unlimited {
            statuses[index].limit_remaining = u32::MAX;
            continue;
        }
        if !limit.name.is_empty() && replaced.contains(&limit.name.as_str()) {
            continue;
        }
        let key = counter_key(&descriptor.entries, &found.shared);
        if key.len() > MAX_KEY_BYTES {
            return Err(Status::invalid_argument(format!(
                "descriptors[{index}].entries: the key they make is {} bytes; a key is at most {MAX_KEY_BYTES}",
                key.len()
            )));
        }
        let hits = descriptor
            .hits_addend
            .unwrap_or_else(|| u64::from(request.hits_addend).max(1));
        let detail = limit.detailed_metric.then_some(DetailedKey {
            domain: &request.domain,
            entries: &descriptor.entries,
            shared: &found.shared,
        });
        counted.push(Counted {
            index,
            limit,
            key,
            hits,
            detail,
        });
    }
    if counted.is_empty() {
        return Ok(RateLimitResponse {
            overall_code: Code::Ok.into(),
            statuses,
            ..RateLimitResponse::default()
        });
    }
    let inputs: Vec<CheckInput<'_>> = counted
        .iter()
        // A cost of 0 (a descriptor's own hits_addend 0) asks: counting every hit, the core
        // answers it as envoyproxy/ratelimit does.
        .map(|c| CheckInput {
            detail: c.detail.as_ref().map(|d| Detail(d)),
            ..CheckInput::descriptor(&c.limit.policy, &c.key, c.hits, Mode::Consume)
        })
        .collect();
    let verdicts = app
        .limiter
        .check_batch(&inputs, app.clock.now_ms())
        .await
        .map_err(limit_error)?;
    for (c, verdict) in counted.iter().zip(&verdicts) {
        statuses[c.index] = status_of(c.limit, verdict);
    }
    Ok(response(statuses, &verdicts))
}

/// The counter's key of a descriptor: its entries as `key=value|…` (`%`, `|` and `=`
/// escaped, so no two descriptors share a key by accident), a `share_threshold` pattern in
/// place of the value it matched.
fn counter_key(entries: &[Entry], shared: &[Option<&str>]) -> String {
    let bytes: usize = entries
        .iter()
        .map(|e| e.key.len() + e.value.len() + 2)
        .sum();
    let mut key = String::with_capacity(bytes);
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            key.push('|');
        }
        escape_into(&mut key, &entry.key);
        key.push('=');
        match shared.get(i).copied().flatten() {
            Some(pattern) => escape_into(&mut key, pattern),
            None => escape_into(&mut key, &entry.value),
        }
    }
    key
}

fn escape_into(out: &mut String, text: &str) {
    // Most keys and values have nothing to escape: copied whole.
    if !text.bytes().any(|b| matches!(b, b'%' | b'|' | b'=')) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '|' => out.push_str("%7C"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
}

/// A counted descriptor's status: envoyproxy/ratelimit's fields from the YAML limit.
fn status_of(limit: &Limit, verdict: &Verdict) -> DescriptorStatus {
    let window = verdict.limit.params.window_ms.max(1);
    let until_reset_ms = window - verdict.now_ms % window;
    DescriptorStatus {
        code: code_of(verdict.allowed),
        current_limit: Some(RateLimit {
            name: limit.name.clone(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit.map_or(PbUnit::Unknown, pb_unit).into(),
        }),
        limit_remaining: u32::try_from(verdict.decision.remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(prost_types::Duration {
            seconds: i64::try_from(until_reset_ms / 1000).unwrap_or(i64::MAX),
            // Below 1e9, so it fits.
            nanos: i32::try_from((until_reset_ms % 1000) * 1_000_000).unwrap_or(0),
        }),
    }
}

fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: &str) -> Entry {
        Entry {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    #[test]
    fn keys_escape_their_separators_and_take_shared_patterns() {
        let a = counter_key(&[entry("k1", "a|k2=b"), entry("k2", "c")], &[]);
        let b = counter_key(&[entry("k1", "a"), entry("k2", "b|k2=c")], &[]);
        assert_ne!(a, b);
        assert_eq!(
            counter_key(
                &[entry("path", "/api/x"), entry("m", "GET")],
                &[Some("/api/*"), None]
            ),
            "path=/api/*|m=GET"
        );
    }
}
