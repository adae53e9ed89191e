//! Each YAML limit as a sluice policy: fixed_window counting every hit, one window of
//! `unit × unit_multiplier` aligned to unix time, never leased (leases and the denied cache
//! answer without counting, and envoyproxy/ratelimit counts every hit), failing open as
//! envoyproxy/ratelimit does when Redis is away, shadow when `shadow_mode`.
//!
//! Its name is the `policy` label of the metrics and what `/v1/top?policy=` takes: the limit's
//! `name` when it has one, else `<domain>.<key path>` (`edge.remote_address.path_/api`, as
//! envoyproxy/ratelimit names its stats), each made a valid policy name (characters outside
//! `A-Z a-z 0-9 _ . -` become `_`, at most 64 bytes) and unique (`-2`, `-3`… on a clash).

use std::collections::{BTreeMap, BTreeSet};

use sluice_core::Counting;

use crate::envoy_yaml::tree::{Domain, Level, Unit};
use crate::parse::is_valid_name;
use crate::schema::PolicyConfig;

/// Names each limit of `domains` (set in its `policy`) and answers their policies; `taken`
/// are the names of `[policies.*]`, which no YAML limit takes.
pub fn assign(
    domains: &mut BTreeMap<String, Domain>,
    taken: &[String],
) -> BTreeMap<String, PolicyConfig> {
    let mut names: BTreeSet<String> = taken.iter().cloned().collect();
    let mut out = BTreeMap::new();
    for domain in domains.values_mut() {
        let prefix = domain.name.clone();
        walk(&mut domain.top, &prefix, &mut names, &mut out);
    }
    out
}

fn walk(
    level: &mut Level,
    path: &str,
    names: &mut BTreeSet<String>,
    out: &mut BTreeMap<String, PolicyConfig>,
) {
    for node in &mut level.nodes {
        let here = format!("{path}.{}", node.written);
        if let Some(limit) = &mut node.limit
            && let (false, Some(unit)) = (limit.unlimited, limit.unit)
        {
            let wanted = if limit.name.is_empty() {
                here.clone()
            } else {
                limit.name.clone()
            };
            let name = unique(&sanitize(&wanted), names);
            out.insert(
                name.clone(),
                policy(
                    limit.requests_per_unit,
                    unit,
                    limit.unit_multiplier,
                    limit.shadow_mode,
                ),
            );
            limit.policy = name;
        }
        walk(&mut node.children, &here, names, out);
    }
}

/// The policy of one limit.
fn policy(requests_per_unit: u32, unit: Unit, multiplier: u32, shadow: bool) -> PolicyConfig {
    let seconds = unit.seconds().saturating_mul(u64::from(multiplier));
    PolicyConfig {
        algorithm: Some("fixed_window".to_owned()),
        limit: Some(u64::from(requests_per_unit)),
        window: Some(format!("{seconds}s")),
        shadow,
        lease: "off".to_owned(),
        counting: Counting::EveryHit,
        calendar: None,
        ..PolicyConfig::default()
    }
}

/// `wanted` as a policy name: other characters as `_`, at most 64 bytes.
fn sanitize(wanted: &str) -> String {
    let mut name: String = wanted
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.truncate(64);
    if name.is_empty() {
        "_".to_owned()
    } else {
        name
    }
}

/// `name`, or `name-N` (shortened to fit 64 bytes) for the first N from 2 not yet taken.
fn unique(name: &str, names: &mut BTreeSet<String>) -> String {
    let mut candidate = name.to_owned();
    let mut n = 2u64;
    while names.contains(&candidate) || !is_valid_name(&candidate) {
        let suffix = format!("-{n}");
        let keep = name.len().min(64 - suffix.len());
        candidate = format!("{}{suffix}", &name[..keep]);
        n += 1;
    }
    names.insert(candidate.clone());
    candidate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_unique() {
        let mut names = BTreeSet::from(["edge.path".to_owned()]);
        assert_eq!(unique(&sanitize("edge.path"), &mut names), "edge.path-2");
        assert_eq!(
            unique(&sanitize("edge.path_/api/*"), &mut names),
            "edge.path__api__"
        );
        let long = "x".repeat(100);
        let first = unique(&sanitize(&long), &mut names);
        let second = unique(&sanitize(&long), &mut names);
        assert_eq!((first.len(), second.len()), (64, 64));
        assert!(second.ends_with("-2"));
    }
}
