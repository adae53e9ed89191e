//! The descriptor trees of envoyproxy/ratelimit YAML domains, and the lookup of the limit a
//! request's descriptor gets, as envoyproxy/ratelimit looks it up:
//!
//! - at each level, the entry `key`/`value` picks the child written with that exact `key` and
//!   `value`; failing that, the first child (in file order) whose `value` has `*` wildcards
//!   matching the entry's value; failing that, the child written with the `key` alone;
//! - the descriptor gets the limit of the node its **last** entry reached; a descriptor with
//!   more entries than the tree is deep, or one that leaves the tree, gets none;
//! - a `share_threshold` node met on the way through a wildcard makes every value its
//!   wildcard matches share one counter (the pattern stands for the value in the key).

use std::collections::HashMap;

/// envoyproxy/ratelimit's units (Envoy's `RateLimitUnit`); week, month and year are 7, 30 and
/// 365 days, aligned to unix time as every window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    /// The unit a YAML `unit` names, in any case (`minute`, `MINUTE`), as there.
    pub fn parse(text: &str) -> Option<Unit> {
        Some(match text.to_ascii_lowercase().as_str() {
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        })
    }

    /// Its length in seconds.
    pub fn seconds(self) -> u64 {
        const DAY: u64 = 86_400;
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => DAY,
            Unit::Week => 7 * DAY,
            Unit::Month => 30 * DAY,
            Unit::Year => 365 * DAY,
        }
    }
}

/// One `rate_limit` of the YAML, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The sluice policy its checks are decided on (see [`policies`](crate::envoy::policies));
    /// empty when `unlimited`.
    pub policy: String,
    pub unlimited: bool,
    pub requests_per_unit: u32,
    /// `None` only when `unlimited`.
    pub unit: Option<Unit>,
    pub unit_multiplier: u32,
    /// `name`, empty when not given.
    pub name: String,
    pub replaces: Vec<String>,
    pub shadow_mode: bool,
    pub detailed_metric: bool,
}

/// One descriptor of the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// As envoyproxy/ratelimit names it in a key path: `key`, or `key_value`.
    pub written: String,
    pub limit: Option<Limit>,
    pub share_threshold: bool,
    pub children: Level,
}

/// The children of a node (or a domain's top level), indexed as the lookup reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Level {
    pub nodes: Vec<Node>,
    /// `key` (no value) or `key_value` (exact value) to its node.
    by_key: HashMap<String, usize>,
    /// Children whose value has wildcards, in file order: (key, the value split at `*`, node).
    wildcards: Vec<(String, Vec<String>, usize)>,
}

impl Level {
    /// Adds `node` written as `key` and `value` (`""`: none); `false` when that key/value
    /// is already at this level.
    pub fn insert(&mut self, key: &str, value: &str, node: Node) -> bool {
        let composite = composite(key, value);
        if self.by_key.contains_key(&composite) {
            return false;
        }
        let at = self.nodes.len();
        if value.contains('*') {
            let parts = value.split('*').map(str::to_owned).collect();
            self.wildcards.push((key.to_owned(), parts, at));
        } else {
            self.by_key.insert(composite, at);
        }
        self.nodes.push(node);
        true
    }

    /// The child an entry picks: exact value, else the first matching wildcard (with its
    /// pattern), else the key alone.
    fn pick(&self, key: &str, value: &str) -> Option<(&Node, Option<String>)> {
        if let Some(&at) = self.by_key.get(&composite(key, value)) {
            return Some((&self.nodes[at], None));
        }
        for (wild_key, parts, at) in &self.wildcards {
            if wild_key == key && wildcard_match(parts, value) {
                return Some((&self.nodes[*at], Some(parts.join("*"))));
            }
        }
        self.by_key.get(key).map(|&at| (&self.nodes[at], None))
    }
}

/// How a level indexes a child: `key`, or `key_value` as envoyproxy/ratelimit writes it.
/// A NUL separator, not `_`: a key with `_` in it must not meet another's value.
fn composite(key: &str, value: &str) -> String {
    if value.is_empty() {
        key.to_owned()
    } else {
        format!("{key}\0{value}")
    }
}

/// Whether `value` matches a pattern split at its `*`s, each `*` matching any run of
/// characters (none included).
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|only| only == value);
    };
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The limit a descriptor got, and for each entry the wildcard pattern that stands for its
/// value in the counter's key (`share_threshold`), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    pub limit: &'a Limit,
    pub shared: Vec<Option<String>>,
}

/// One YAML domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    /// The file it came from.
    pub file: String,
    pub top: Level,
}

impl Domain {
    /// The limit of a descriptor's `entries`, as envoyproxy/ratelimit picks it.
    pub fn find<'a>(&'a self, entries: &[(&str, &str)]) -> Option<Found<'a>> {
        let mut level = &self.top;
        let mut shared: Vec<Option<String>> = Vec::new();
        for (i, &(key, value)) in entries.iter().enumerate() {
            let (node, pattern) = level.pick(key, value)?;
            if node.share_threshold
                && let Some(pattern) = pattern
            {
                shared.resize(i, None);
                shared.push(Some(pattern));
            }
            if i + 1 == entries.len() {
                shared.resize(entries.len(), None);
                return node.limit.as_ref().map(|limit| Found { limit, shared });
            }
            if node.children.nodes.is_empty() {
                return None;
            }
            level = &node.children;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(pattern: &str) -> Vec<String> {
        pattern.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn wildcards_match_any_run_of_characters() {
        for (pattern, value, matches) in [
            ("/api/*", "/api/v1/x", true),
            ("/api/*", "/api/", true),
            ("/api/*", "/apx/", false),
            ("*.png", "a/b.png", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("ab*ba", "aba", false),
            ("exact", "exact", true),
        ] {
            assert_eq!(
                wildcard_match(&parts(pattern), value),
                matches,
                "{pattern} vs {value}"
            );
        }
    }

    #[test]
    fn units_parse_in_any_case_and_have_their_lengths() {
        assert_eq!(Unit::parse("MINUTE"), Some(Unit::Minute));
        assert_eq!(Unit::parse("Week").map(Unit::seconds), Some(604_800));
        assert_eq!(Unit::parse("month").map(Unit::seconds), Some(2_592_000));
        assert_eq!(Unit::parse("year").map(Unit::seconds), Some(31_536_000));
        assert_eq!(Unit::parse("unknown"), None);
        assert_eq!(Unit::parse("minutes"), None);
    }
}
