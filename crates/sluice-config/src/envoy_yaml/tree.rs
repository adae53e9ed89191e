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

/// The children of a node (or a domain's top level), indexed as the lookup reads them: by
/// the entry's key, then its value, so a lookup hashes the request's own strings and builds
/// none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Level {
    pub nodes: Vec<Node>,
    keys: HashMap<String, Keyed>,
}

/// The children written with one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Keyed {
    /// The child written with the key alone.
    alone: Option<usize>,
    /// Children with an exact value, by value.
    values: HashMap<String, usize>,
    /// Children whose value has wildcards, in file order.
    wildcards: Vec<Wildcard>,
}

/// A child whose value has `*` wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wildcard {
    /// The value as written (what stands for a shared counter's value).
    pattern: String,
    /// The value split at its `*`s.
    parts: Vec<String>,
    at: usize,
}

impl Level {
    /// Adds `node` written as `key` and `value` (`""`: none); `false` when that key/value
    /// is already at this level.
    pub fn insert(&mut self, key: &str, value: &str, node: Node) -> bool {
        let at = self.nodes.len();
        let keyed = self.keys.entry(key.to_owned()).or_default();
        if value.is_empty() {
            if keyed.alone.is_some() {
                return false;
            }
            keyed.alone = Some(at);
        } else if value.contains('*') {
            if keyed.wildcards.iter().any(|w| w.pattern == value) {
                return false;
            }
            keyed.wildcards.push(Wildcard {
                pattern: value.to_owned(),
                parts: value.split('*').map(str::to_owned).collect(),
                at,
            });
        } else {
            if keyed.values.contains_key(value) {
                return false;
            }
            keyed.values.insert(value.to_owned(), at);
        }
        self.nodes.push(node);
        true
    }

    /// The child an entry picks: exact value, else the first matching wildcard (with its
    /// pattern), else the key alone.
    fn pick(&self, key: &str, value: &str) -> Option<(&Node, Option<&str>)> {
        let keyed = self.keys.get(key)?;
        // An empty value names no value: the key alone.
        let exact = if value.is_empty() {
            keyed.alone
        } else {
            keyed.values.get(value).copied()
        };
        if let Some(at) = exact {
            return Some((&self.nodes[at], None));
        }
        if let Some(w) = keyed
            .wildcards
            .iter()
            .find(|w| wildcard_match(&w.parts, value))
        {
            return Some((&self.nodes[w.at], Some(w.pattern.as_str())));
        }
        keyed.alone.map(|at| (&self.nodes[at], None))
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

/// The limit a descriptor got, and for the entries up to the last one matched through a
/// `share_threshold` wildcard, the pattern that stands for each one's value in the counter's
/// key (`None`: its own value); empty, and unallocated, when no such wildcard was met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    pub limit: &'a Limit,
    pub shared: Vec<Option<&'a str>>,
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
    /// The limit of a descriptor's `entries` (key, value), as envoyproxy/ratelimit picks it.
    pub fn find<'a, 'e>(
        &'a self,
        entries: impl ExactSizeIterator<Item = (&'e str, &'e str)>,
    ) -> Option<Found<'a>> {
        let last = entries.len().checked_sub(1)?;
        let mut level = &self.top;
        let mut shared: Vec<Option<&'a str>> = Vec::new();
        for (i, (key, value)) in entries.enumerate() {
            let (node, pattern) = level.pick(key, value)?;
            if node.share_threshold
                && let Some(pattern) = pattern
            {
                shared.resize(i, None);
                shared.push(Some(pattern));
            }
            if i == last {
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
    fn a_level_refuses_a_key_and_value_twice_wildcards_included() {
        let mut level = Level::default();
        for (key, value) in [
            ("path", ""),
            ("path", "/a"),
            ("path", "/b*"),
            ("user", "/a"),
        ] {
            assert!(level.insert(key, value, Node::default()), "{key} {value}");
            assert!(
                !level.insert(key, value, Node::default()),
                "{key} {value} twice"
            );
        }
        let picked = |value| level.pick("path", value).map(|(_, pattern)| pattern);
        assert_eq!(picked("/a"), Some(None));
        assert_eq!(picked("/bc"), Some(Some("/b*")));
        assert_eq!(picked("/z"), Some(None));
        assert!(level.pick("other", "/a").is_none());
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
