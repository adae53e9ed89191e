//! Who the caller of `GET /v1/forward-auth/{policy}` is, from the headers the proxy sent.
//!
//! A forward-auth request arrives from the proxy, not from the client, so every header in it
//! is either one the proxy wrote or one the client sent and the proxy passed on. The key is
//! built only from what a proxy writes:
//!
//! - the identity header, only when `forward_auth.identity_header` names one (the proxy sets
//!   it from its own authentication and drops the client's), keyed `user:<value>`;
//! - else the address in `X-Forwarded-For`: proxies append the address they saw to the
//!   list, so the entry `trusted_hops` from the right is the one the outermost trusted proxy
//!   wrote, and everything left of it is the client's to choose. Keyed `ip:<address>`;
//! - else `X-Real-IP`, keyed the same way.
//!
//! The two prefixes keep the namespaces apart: no identity value can name an address's key.
//! Addresses are parsed and written in canonical form, so one address has one key however a
//! proxy spells it.

use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, HeaderName};

use crate::service::json::ApiError;
use sluice_api::MAX_KEY_BYTES;
use sluice_config::forward_auth::CallerRules;

pub const FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub const REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Prefix of keys named by the identity header.
const USER_PREFIX: &str = "user:";
/// Prefix of keys named by an address.
const IP_PREFIX: &str = "ip:";

/// The most `X-Forwarded-For` text read (all its lines together). A proxy chain writes a few
/// dozen bytes per hop; a longer list is refused rather than walked.
pub const MAX_FORWARDED_FOR_BYTES: usize = 8 * 1024;

/// The key of the caller of `headers` by `rules` (`[forward_auth]`), or a 400 naming the
/// header that is wrong.
pub fn key_of(rules: &CallerRules, headers: &HeaderMap) -> Result<String, ApiError> {
    if let Some(name) = &rules.identity_header
        && let Some(user) = identity(headers, name)?
    {
        return Ok(format!("{USER_PREFIX}{user}"));
    }
    let address = match forwarded_for(headers, rules.trusted_hops)? {
        Some(entry) => Some((entry, FORWARDED_FOR)),
        None => single(headers, &REAL_IP)?.map(|entry| (entry, REAL_IP)),
    };
    match address {
        Some((entry, from)) => Ok(format!("{IP_PREFIX}{}", parse_address(entry, &from)?)),
        None => Err(ApiError::bad_request(
            match &rules.identity_header {
                Some(name) => format!(
                    "no caller to limit: the proxy must send {name}, X-Forwarded-For or \
                     X-Real-IP"
                ),
                None => "no caller to limit: the proxy must send X-Forwarded-For or \
                         X-Real-IP"
                    .to_owned(),
            },
            Some("X-Forwarded-For".to_owned()),
        )),
    }
}

fn bad_header(name: &HeaderName, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("{name}: {why}"), Some(name.to_string()))
}

/// The one value of header `name`, trimmed; `None` when absent or blank. Two lines of it are
/// refused: a proxy that appends instead of replacing would otherwise let the client's
/// value through.
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<Option<&'a str>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(bad_header(
            name,
            "sent more than once; the proxy must replace it, not append to it",
        ));
    }
    let text = first
        .to_str()
        .map_err(|_| bad_header(name, "is not visible ASCII text"))?
        .trim();
    Ok((!text.is_empty()).then_some(text))
}

/// The identity header's value, when present and not blank.
fn identity<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<Option<&'a str>, ApiError> {
    let value = single(headers, name)?;
    if let Some(user) = value
        && user.len() + USER_PREFIX.len() > MAX_KEY_BYTES
    {
        return Err(bad_header(
            name,
            format!(
                "{} bytes; an identity is at most {} bytes",
                user.len(),
                MAX_KEY_BYTES - USER_PREFIX.len()
            ),
        ));
    }
    Ok(value)
}

/// The `X-Forwarded-For` entry `hops` from the right, over every line of the header in order
/// (a list split over lines is one list); the leftmost when there are fewer entries. Blank
/// entries are skipped. `None` when the header is absent or holds no entry.
fn forwarded_for(headers: &HeaderMap, hops: usize) -> Result<Option<&str>, ApiError> {
    let lines = headers.get_all(FORWARDED_FOR);
    let mut total = 0usize;
    let mut texts = Vec::new();
    for line in lines {
        total = total.saturating_add(line.len());
        if total > MAX_FORWARDED_FOR_BYTES {
            return Err(bad_header(
                &FORWARDED_FOR,
                format!("over {MAX_FORWARDED_FOR_BYTES} bytes"),
            ));
        }
        texts.push(
            line.to_str()
                .map_err(|_| bad_header(&FORWARDED_FOR, "is not visible ASCII text"))?,
        );
    }
    let mut chosen = None;
    let entries = texts
        .iter()
        .rev()
        .flat_map(|text| text.rsplit(','))
        .map(str::trim)
        .filter(|entry| !entry.is_empty());
    for (seen, entry) in entries.enumerate() {
        chosen = Some(entry);
        if seen + 1 == hops {
            break;
        }
    }
    Ok(chosen)
}

/// An address as a proxy writes it (`192.0.2.1`, `2001:db8::1`, `[2001:db8::1]:443`,
/// `192.0.2.1:443`), in canonical form (an IPv4-mapped IPv6 address is its IPv4 address).
fn parse_address(entry: &str, from: &HeaderName) -> Result<IpAddr, ApiError> {
    entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|socket| socket.ip()))
        .or_else(|_| {
            entry
                .strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
                .ok_or(())
                .and_then(|inner| inner.parse::<IpAddr>().map_err(|_| ()))
        })
        .map(|ip| ip.to_canonical())
        .map_err(|_| {
            // The entry may be long: name only its start.
            let shown: String = entry.chars().take(64).collect();
            bad_header(from, format!("{shown:?} is not an IP address"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_config::forward_auth::MAX_TRUSTED_HOPS;
    use sluice_config::schema::ForwardAuthConfig;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn rules(identity: &str, hops: u64) -> CallerRules {
        CallerRules::compile(&ForwardAuthConfig {
            identity_header: identity.to_owned(),
            trusted_hops: hops,
        })
        .unwrap()
    }

    fn key(rules: &CallerRules, pairs: &[(&'static str, &str)]) -> String {
        key_of(rules, &headers(pairs)).unwrap()
    }

    fn refused_field(rules: &CallerRules, pairs: &[(&'static str, &str)]) -> String {
        let err = key_of(rules, &headers(pairs)).unwrap_err();
        format!("{err:?}")
    }

    #[test]
    fn without_an_identity_header_a_client_sent_id_is_ignored() {
        let default = CallerRules::default();
        assert_eq!(default, rules("", 1));
        let spoofed = [("x-user-id", "anyone"), ("x-forwarded-for", "192.0.2.7")];
        assert_eq!(key(&default, &spoofed), "ip:192.0.2.7");
    }

    #[test]
    fn identities_are_keyed_apart_from_addresses() {
        let rules = rules("X-User-Id", 1);
        let user = [("x-user-id", "ann"), ("x-forwarded-for", "192.0.2.7")];
        assert_eq!(key(&rules, &user), "user:ann");
        // An identity that looks like an address key stays an identity.
        let spoof = [("x-user-id", "ip:192.0.2.66")];
        assert_eq!(key(&rules, &spoof), "user:ip:192.0.2.66");
        // Blank: the address.
        let blank = [("x-user-id", "  "), ("x-forwarded-for", "192.0.2.7")];
        assert_eq!(key(&rules, &blank), "ip:192.0.2.7");
        // Twice: refused, as a proxy appended to the client's value.
        let twice = [
            ("x-user-id", "ann"),
            ("x-user-id", "bob"),
            ("x-forwarded-for", "192.0.2.7"),
        ];
        assert!(refused_field(&rules, &twice).contains("x-user-id"));
        let long = "u".repeat(MAX_KEY_BYTES);
        assert!(refused_field(&rules, &[("x-user-id", &long)]).contains("bytes"));
        let fits = "u".repeat(MAX_KEY_BYTES - USER_PREFIX.len());
        assert_eq!(key(&rules, &[("x-user-id", &fits)]).len(), MAX_KEY_BYTES);
    }

    #[test]
    fn the_address_is_the_entry_trusted_hops_from_the_right() {
        // client-chosen, then what proxy 1 saw, then what proxy 2 saw.
        let chain = [("x-forwarded-for", "203.0.113.9, 198.51.100.1 ,192.0.2.2")];
        assert_eq!(key(&rules("", 1), &chain), "ip:192.0.2.2");
        assert_eq!(key(&rules("", 2), &chain), "ip:198.51.100.1");
        assert_eq!(key(&rules("", 3), &chain), "ip:203.0.113.9");
        // Fewer entries than hops: the leftmost.
        assert_eq!(key(&rules("", 5), &chain), "ip:203.0.113.9");
        // A list over several lines is one list, in order; blank entries do not count.
        let lines = [
            ("x-forwarded-for", "203.0.113.9,"),
            ("x-forwarded-for", " , 198.51.100.1"),
            ("x-forwarded-for", "192.0.2.2"),
        ];
        assert_eq!(key(&rules("", 1), &lines), "ip:192.0.2.2");
        assert_eq!(key(&rules("", 2), &lines), "ip:198.51.100.1");
        assert_eq!(key(&rules("", 3), &lines), "ip:203.0.113.9");
    }

    #[test]
    fn x_real_ip_is_used_only_without_x_forwarded_for() {
        let both = [("x-forwarded-for", "192.0.2.2"), ("x-real-ip", "192.0.2.3")];
        assert_eq!(key(&rules("", 1), &both), "ip:192.0.2.2");
        let real = [("x-real-ip", " 192.0.2.3 ")];
        assert_eq!(key(&rules("", 1), &real), "ip:192.0.2.3");
        let blank = [("x-forwarded-for", " , "), ("x-real-ip", "192.0.2.3")];
        assert_eq!(key(&rules("", 1), &blank), "ip:192.0.2.3");
        assert!(refused_field(&rules("", 1), &[]).contains("X-Forwarded-For"));
    }

    #[test]
    fn addresses_are_canonical_and_bad_ones_are_refused() {
        let r = rules("", 1);
        for (written, canonical) in [
            ("2001:DB8:0::1", "ip:2001:db8::1"),
            ("[2001:db8::1]:443", "ip:2001:db8::1"),
            ("[2001:db8::1]", "ip:2001:db8::1"),
            ("192.0.2.1:443", "ip:192.0.2.1"),
            ("::ffff:192.0.2.1", "ip:192.0.2.1"),
        ] {
            assert_eq!(key(&r, &[("x-forwarded-for", written)]), canonical);
        }
        for bad in ["unknown", "192.0.2.300", "ip:192.0.2.1", "_hidden", "[::1"] {
            let why = refused_field(&r, &[("x-forwarded-for", bad)]);
            assert!(why.contains("is not an IP address"), "{bad}: {why}");
        }
        let why = refused_field(&r, &[("x-real-ip", "nonsense")]);
        assert!(why.contains("x-real-ip"), "{why}");
        // A list past the bound is refused without being walked.
        let long = vec!["192.0.2.1"; 1000].join(",");
        let why = refused_field(&r, &[("x-forwarded-for", &long)]);
        assert!(why.contains("bytes"), "{why}");
        let huge_entry = "9".repeat(4000);
        let why = refused_field(&r, &[("x-forwarded-for", &huge_entry)]);
        assert!(why.contains("is not an IP address"), "{why}");
    }

    #[test]
    fn the_settings_are_checked_naming_the_field() {
        for (identity, hops, field) in [
            ("X User", 1, "forward_auth.identity_header"),
            ("X-User-Id:", 1, "forward_auth.identity_header"),
            ("X-User-Id", 0, "forward_auth.trusted_hops"),
            ("", MAX_TRUSTED_HOPS + 1, "forward_auth.trusted_hops"),
        ] {
            let errors = CallerRules::compile(&ForwardAuthConfig {
                identity_header: identity.to_owned(),
                trusted_hops: hops,
            })
            .unwrap_err();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].field, field);
        }
        let named = rules(" X-User-Id ", MAX_TRUSTED_HOPS);
        assert_eq!(named.identity_header.unwrap().as_str(), "x-user-id");
    }
}
