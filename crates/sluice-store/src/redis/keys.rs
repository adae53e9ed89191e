//! The Redis key layout (documented): `{prefix}:{<policy>:<key>}:<suffix>`.
//!
//! The suffix names the state: the algorithm's ([`suffixes`]: `fw`, `swc`, `swl` and
//! `swl:sum`, `tb`, `gcra`), or a candidate limit's, which is `cand:` followed by the
//! candidate's algorithm's suffix ([`candidate_keys`]: `cand:fw`, `cand:swl` and
//! `cand:swl:sum`, …). A candidate thus shares its limit's hash tag (same slot, so the limit
//! and its candidate go in one script call on a cluster too) and never shares a key with the
//! limit, nor with a candidate of another algorithm. The replicated window hashes are
//! `r<fw|swc>:<window_ms>:<index>` ([`window_key`]).
//!
//! Everything between the braces is the cluster hash tag, so every key of one limit lands on
//! one slot and its Lua script touches one slot only. A user key containing `{`, `}` or `%`
//! is percent-encoded first (`{` → `%7B`, `}` → `%7D`, `%` → `%25`): no key can then close the
//! tag early (and so pick another key's slot), and since `%` is encoded too the encoding is
//! injective, so no two user keys share a Redis key. The policy name is encoded the same way
//! (and `:` in it as well, though policy names are `[A-Za-z0-9_.-]` and never need it), so
//! `policy:key` splits at its first colon unambiguously.

use std::borrow::Cow;

use sluice_core::Algorithm;

/// Percent-encodes `{`, `}` and `%` (and `:` when `colon`), leaving everything else as is.
pub fn encode(raw: &str, colon: bool) -> Cow<'_, str> {
    // The special characters are ASCII, so a byte scan finds them (no UTF-8 decoding).
    let special = |b: u8| matches!(b, b'{' | b'}' | b'%') || (colon && b == b':');
    if !raw.bytes().any(special) {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len() + 8);
    for c in raw.chars() {
        match c {
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            ':' if colon => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The hash tag of a limit (the text between the braces): `<policy>:<encoded key>`.
pub fn hash_tag(policy: &str, key: &str) -> String {
    let policy = encode(policy, true);
    let key = encode(key, false);
    let mut tag = String::with_capacity(policy.len() + key.len() + 1);
    tag.push_str(&policy);
    tag.push(':');
    tag.push_str(&key);
    tag
}

/// The key suffixes of an algorithm's state. gcra and leaky_bucket share their state (as in
/// the core); the other algorithms each have their own, so a policy that changes algorithm
/// starts from a fresh state.
pub fn suffixes(algorithm: Algorithm) -> &'static [&'static str] {
    match algorithm {
        Algorithm::FixedWindow => &["fw"],
        Algorithm::SlidingWindowCounter => &["swc"],
        Algorithm::SlidingWindowLog => &["swl", "swl:sum"],
        Algorithm::TokenBucket => &["tb"],
        Algorithm::Gcra | Algorithm::LeakyBucket => &["gcra"],
    }
}

/// What a candidate limit's key suffixes start with (see the module doc).
pub const CANDIDATE: &str = "cand:";

/// Every Redis key holding the state of `(policy, key)` under `algorithm`, in the order the
/// scripts expect them.
pub fn limit_keys(prefix: &str, policy: &str, key: &str, algorithm: Algorithm) -> Vec<String> {
    state_keys(prefix, policy, key, "", algorithm)
}

/// Every Redis key holding the state of stacked limit `stack` of `(policy, key)`: the
/// policy's own ([`limit_keys`]) for the first, `s<stack>:` before each suffix for the others
/// (the same hash tag: one slot for all of a policy's limits).
pub fn stacked_keys(
    prefix: &str,
    policy: &str,
    key: &str,
    stack: u8,
    algorithm: Algorithm,
) -> Vec<String> {
    if stack == 0 {
        return limit_keys(prefix, policy, key, algorithm);
    }
    state_keys(prefix, policy, key, &format!("s{stack}:"), algorithm)
}

/// Every Redis key holding the state of the candidate limit of `(policy, key)` under the
/// candidate's `algorithm`: [`limit_keys`] with [`CANDIDATE`] before each suffix.
pub fn candidate_keys(prefix: &str, policy: &str, key: &str, algorithm: Algorithm) -> Vec<String> {
    state_keys(prefix, policy, key, CANDIDATE, algorithm)
}

/// [`candidate_keys`] from `limit_key`, the first of the [`limit_keys`] of the same limit
/// under `limit_algorithm`: the candidate's keys share their stem `{prefix}:{<policy>:<key>}:`,
/// so the policy and key are not encoded again (once per check with a candidate).
pub(crate) fn candidate_keys_beside(
    limit_key: &str,
    limit_algorithm: Algorithm,
    algorithm: Algorithm,
) -> Vec<String> {
    let suffix = suffixes(limit_algorithm).first().map_or(0, |s| s.len());
    let stem = limit_key
        .get(..limit_key.len().saturating_sub(suffix))
        .unwrap_or_default();
    suffixes(algorithm)
        .iter()
        .map(|suffix| join([stem, CANDIDATE, suffix]))
        .collect()
}

/// `{prefix}:{<policy>:<key>}:<infix><suffix>` for each suffix of `algorithm`.
fn state_keys(
    prefix: &str,
    policy: &str,
    key: &str,
    infix: &str,
    algorithm: Algorithm,
) -> Vec<String> {
    let (policy, key) = (encode(policy, true), encode(key, false));
    suffixes(algorithm)
        .iter()
        .map(|suffix| join([prefix, ":{", &policy, ":", &key, "}:", infix, suffix]))
        .collect()
}

/// `parts` end to end. By hand, not `format!`: this runs once per check.
fn join<const N: usize>(parts: [&str; N]) -> String {
    let mut name = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        name.push_str(part);
    }
    name
}

/// The window hash of a replicated limit (scope = "replicated"): one Redis hash per window,
/// `{prefix}:{<policy>:<key>}:r<fw|swc>:<window_ms>:<window index>`, holding one field per
/// region (`r:<region>`) and one per acknowledging peer (`a:<peer>`). The window length is
/// part of the name so a reload that changes it starts fresh windows instead of misreading
/// old ones; the algorithm is, so a policy that changes algorithm starts fresh.
pub fn window_key(
    prefix: &str,
    policy: &str,
    key: &str,
    algorithm: Algorithm,
    window_ms: u64,
    index: u64,
) -> String {
    let tag = hash_tag(policy, key);
    let family = match algorithm {
        Algorithm::SlidingWindowCounter => "rswc",
        _ => "rfw",
    };
    format!("{prefix}:{{{tag}}}:{family}:{window_ms}:{index}")
}

/// The Redis Cluster slot of every key of `(policy, key)` (CRC16 of the hash tag, mod 16384).
pub fn slot(policy: &str, key: &str) -> u16 {
    key_slot(&hash_tag(policy, key))
}

/// The cluster slot of a raw Redis key, honouring a `{…}` hash tag as Redis does.
pub fn key_slot(key: &str) -> u16 {
    fred::util::redis_keyslot(key.as_bytes())
}

/// What every key and script call of one store shares.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// `backend.prefix`.
    pub prefix: String,
    /// Milliseconds added to every TTL: the store's expiry grace and any extra grace.
    pub ttl_grace_ms: u64,
}

impl Layout {
    /// The layout of a store with `prefix` whose calls end within `timeout`, keeping keys
    /// [`expiry_grace`](sluice_config::backend::expiry_grace) plus `extra_grace` past their state's expiry.
    pub(crate) fn new(
        prefix: String,
        timeout: std::time::Duration,
        extra_grace: std::time::Duration,
    ) -> Self {
        let grace = sluice_config::backend::expiry_grace(timeout).saturating_add(extra_grace);
        Layout {
            prefix,
            // Far beyond any window; keeps TTL arithmetic from overflowing.
            ttl_grace_ms: grace.as_millis().min(1 << 40) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_prefix_tag_suffix() {
        assert_eq!(
            limit_keys("rl", "public", "user:123", Algorithm::TokenBucket),
            vec!["rl:{public:user:123}:tb".to_owned()]
        );
        assert_eq!(
            limit_keys("rl", "p", "a}b", Algorithm::SlidingWindowLog),
            vec![
                "rl:{p:a%7Db}:swl".to_owned(),
                "rl:{p:a%7Db}:swl:sum".to_owned()
            ]
        );
    }

    #[test]
    fn candidate_keys_share_the_tag_and_never_a_key() {
        assert_eq!(
            candidate_keys("rl", "public", "user:123", Algorithm::TokenBucket),
            vec!["rl:{public:user:123}:cand:tb".to_owned()]
        );
        assert_eq!(
            candidate_keys("rl", "p", "a}b", Algorithm::SlidingWindowLog),
            vec![
                "rl:{p:a%7Db}:cand:swl".to_owned(),
                "rl:{p:a%7Db}:cand:swl:sum".to_owned()
            ]
        );
        for key in ["user:1", "a}b", "{x}", "%7B"] {
            for limit in Algorithm::ALL {
                let first = &limit_keys("rl", "p:q", key, limit)[0];
                for algorithm in Algorithm::ALL {
                    assert_eq!(
                        candidate_keys_beside(first, limit, algorithm),
                        candidate_keys("rl", "p:q", key, algorithm)
                    );
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for algorithm in Algorithm::ALL {
            let limit = limit_keys("rl", "p", "{k}", algorithm);
            let candidate = candidate_keys("rl", "p", "{k}", algorithm);
            for name in limit.iter().chain(&candidate) {
                assert_eq!(key_slot(name), slot("p", "{k}"), "{name}");
            }
            // gcra and leaky_bucket share their state, as for the limit.
            if algorithm != Algorithm::LeakyBucket {
                for name in limit.into_iter().chain(candidate) {
                    assert!(seen.insert(name.clone()), "{name} twice");
                }
            }
        }
    }

    #[test]
    fn encoding_is_injective_on_hostile_keys() {
        let keys = [
            "a}b", "{x}", "}{", "user:{1}", "%7B", "{", "%", "%25", "a%7Db", "x",
        ];
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            let tag = hash_tag("p", key);
            assert!(!tag.contains(['{', '}']), "{tag}");
            assert!(seen.insert(tag), "collision for {key}");
        }
    }

    #[test]
    fn slot_is_the_tag_slot() {
        // Known value: CLUSTER KEYSLOT foo = 12182.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("rl:{foo}:tb"), 12182);
        let keys = limit_keys("rl", "p", "{x}", Algorithm::SlidingWindowLog);
        assert_eq!(key_slot(&keys[0]), slot("p", "{x}"));
        assert_eq!(key_slot(&keys[1]), slot("p", "{x}"));
    }
}
