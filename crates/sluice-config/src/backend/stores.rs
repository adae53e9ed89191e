//! Configuration of the backends: process memory, one Redis server, a Redis Cluster, each with
//! the checks the store makes before it connects.

use std::time::Duration;

use super::grace::CLOCK_MARGIN;

/// Whether the Redis client parses a URL, with the client's reason when it does not. Only the
/// client knows its URL syntax, and this crate links none: sluice-store hands in its client's
/// parse (`sluice_store::parse_redis_url`), the daemon's config compile passes it on, and a
/// tool that never connects passes none (the URL is then not checked).
pub type UrlCheck = fn(&str) -> Result<(), String>;

/// A backend configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{url:?} is not a valid Redis URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("backend.nodes is empty: a cluster needs at least one seed node")]
    NoNodes,
    #[error(
        "backend.sentinels is empty: kind = \"sentinel\" needs at least one sentinel, e.g. [\"redis://10.0.0.1:26379\"]"
    )]
    NoSentinels,
    #[error("backend.master is empty: the name the sentinels monitor the master under")]
    NoMasterName,
    #[error(
        "backend.prefix {0:?} must be non-empty and contain neither '{{' nor '}}' (it precedes the hash tag)"
    )]
    InvalidPrefix(String),
    #[error("backend.timeout must be more than 0")]
    ZeroTimeout,
    #[error("max_in_flight must be at least 1")]
    ZeroInFlight,
    #[error("backend client: {0}")]
    Client(String),
    /// A TLS file that cannot be used, or a TLS setting the client cannot honour.
    #[error("{0}")]
    Tls(String),
}

/// The TLS of a Redis backend (`rediss://`, `[backend.tls]`). Certificates are always
/// verified.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RedisTls {
    /// The CA bundle (`None`: the system's roots) and the client certificate, if any.
    pub files: sluice_tls::ClientFiles,
    /// The name verified and sent as SNI; `None`: the host of the URL.
    pub server_name: Option<String>,
}

impl From<sluice_tls::PemError> for ConfigError {
    fn from(err: sluice_tls::PemError) -> ConfigError {
        ConfigError::Tls(err.to_string())
    }
}

/// Default `backend.timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// Default bound on concurrent calls into one store.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 4096;
/// Default time allowed to open one TCP connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Sizing of a memory store (`backend.kind = "memory"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStoreConfig {
    /// Most keys tracked at once (`backend.max_keys`).
    pub max_keys: u64,
    /// Number of independently locked shards; rounded up to a power of two.
    pub shards: usize,
    /// How long a key is kept past its state's expiry, by housekeeping and by eviction alike,
    /// for a check stamped before that expiry that reaches its shard after it (see
    /// [`super::expiry_grace`]). Default [`CLOCK_MARGIN`].
    pub grace: Duration,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        MemoryStoreConfig {
            max_keys: 1_000_000,
            shards: 64,
            grace: CLOCK_MARGIN,
        }
    }
}

/// A single Redis server (`backend.kind = "redis"`).
///
/// One multiplexed connection carries every request: concurrent checks are pipelined on it
/// (written back to back, answered in order), so a single connection is not a bottleneck
/// until Redis itself is (a Redis server runs scripts on one thread anyway). Past
/// `max_in_flight` concurrent calls the store answers `Unavailable` at once instead of
/// queueing, so a slow or hung Redis never builds a backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisStoreConfig {
    /// `backend.url`, e.g. `redis://127.0.0.1:6379` (`redis://:password@host:port/db`).
    /// Default `redis://127.0.0.1:6379`.
    pub url: String,
    /// `backend.prefix`, the first component of every key. Default `rl`.
    pub prefix: String,
    /// `backend.timeout`: bound on each store call, including a NOSCRIPT reload, and the
    /// response timeout of the connection. Default 50 ms.
    pub timeout: Duration,
    /// `backend.connect_timeout`: bound on opening a connection, and on the daemon's wait for
    /// its backend before it serves. Default 1 s (calls still end at `timeout`).
    pub connect_timeout: Duration,
    /// Most concurrent calls; more are refused with `Unavailable`. Default 4096.
    pub max_in_flight: usize,
    /// Added to every key's TTL on top of the [`expiry_grace`](super::expiry_grace) of
    /// `timeout` every key keeps anyway. Default 0. Keeping a key longer never changes a
    /// decision (an expired state decides as a fresh one); it only costs memory. Tests
    /// replaying synthetic time use it.
    pub ttl_grace: Duration,
    /// Sets `TCP_NODELAY` on the connection. Default false (the client's default: small
    /// concurrent commands may be coalesced). True for a link to another region, where
    /// Nagle's algorithm would hold a command back for up to a round trip.
    pub tcp_nodelay: bool,
    /// `[backend.tls]`: set = TLS (a `rediss://` URL turns it on with the defaults: the
    /// system's roots, no client certificate). Default none.
    pub tls: Option<RedisTls>,
}

impl Default for RedisStoreConfig {
    fn default() -> Self {
        RedisStoreConfig {
            url: "redis://127.0.0.1:6379".into(),
            prefix: "rl".into(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            ttl_grace: Duration::ZERO,
            tcp_nodelay: false,
            tls: None,
        }
    }
}

/// A Redis Cluster (`backend.kind = "cluster"`).
///
/// The client keeps one multiplexed connection per master and pipelines concurrent requests
/// on each; it learns the slot map from any seed node and follows MOVED/ASK and failovers by
/// itself. Bounds as for [`RedisStoreConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStoreConfig {
    /// `backend.nodes`: seed nodes, e.g. `["redis://127.0.0.1:7000", …]`; one reachable
    /// node is enough. `redis://[user:]password@host:port` sets the credentials (those of
    /// the first node that has any, for every node). No TLS. No default.
    pub nodes: Vec<String>,
    /// `backend.prefix`. Default `rl`.
    pub prefix: String,
    /// `backend.timeout`: bound on each store call (a cross-slot batch with its refund
    /// included) and the client's command timeout. Default 50 ms.
    pub timeout: Duration,
    /// `backend.connect_timeout`: bound on opening a connection to a node, and on the daemon's
    /// wait for the slot map before it serves. Default 1 s.
    pub connect_timeout: Duration,
    /// Most concurrent calls; more are refused with `Unavailable`. Default 4096.
    pub max_in_flight: usize,
    /// Added to every key's TTL on top of the [`expiry_grace`](super::expiry_grace) of
    /// `timeout` every key keeps anyway. Default 0. Keeping a key longer never changes a
    /// decision (an expired state decides as a fresh one); it only costs memory. Tests
    /// replaying synthetic time use it.
    pub ttl_grace: Duration,
    /// `[backend.tls]`, for every node and redirection (`rediss://` nodes turn it on).
    pub tls: Option<RedisTls>,
}

impl Default for ClusterStoreConfig {
    fn default() -> Self {
        ClusterStoreConfig {
            nodes: Vec::new(),
            prefix: "rl".into(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            ttl_grace: Duration::ZERO,
            tls: None,
        }
    }
}

impl RedisStoreConfig {
    /// The TLS this store connects with: `tls`, or the defaults when the URL is `rediss://`.
    pub fn effective_tls(&self) -> Option<RedisTls> {
        self.tls
            .clone()
            .or_else(|| self.url.starts_with("rediss://").then(RedisTls::default))
    }

    /// The URL the client opens: `rediss://` whenever TLS is on.
    pub fn client_url(&self) -> String {
        match self.url.strip_prefix("redis://") {
            Some(rest) if self.tls.is_some() => format!("rediss://{rest}"),
            _ => self.url.clone(),
        }
    }

    /// Every check the Redis store makes before it connects, the URL's by `url` (the client's
    /// parse; `None`: not checked): the store passes its client's, and so does the daemon's
    /// config compile, so what the compile accepts the store accepts.
    pub fn validate(&self, url: Option<UrlCheck>) -> Result<(), ConfigError> {
        check_common(&self.prefix, self.timeout, self.max_in_flight)?;
        if let Some(tls) = self.effective_tls() {
            sluice_tls::client_config("backend.tls", &tls.files)?;
            // The `redis` client verifies the URL's host and offers no other name.
            if let (Some(name), Ok((host, _))) = (&tls.server_name, parse_node(&self.url))
                && *name != host
            {
                return Err(ConfigError::Tls(format!(
                    "backend.tls.server_name: {name:?} differs from the URL's host {host:?}; with kind = \"redis\" the name verified is the URL's host (name the server by its certificate's name in the URL)"
                )));
            }
        }
        let Some(parse) = url else {
            return Ok(());
        };
        parse(&self.client_url()).map_err(|reason| ConfigError::InvalidUrl {
            url: redact_url(&self.url),
            reason: redact_text(&reason, &self.url),
        })
    }
}

impl ClusterStoreConfig {
    /// The TLS of every node connection: `tls`, or the defaults when a node is `rediss://`.
    pub fn effective_tls(&self) -> Option<RedisTls> {
        self.tls.clone().or_else(|| {
            self.nodes
                .iter()
                .any(|node| node.starts_with("rediss://"))
                .then(RedisTls::default)
        })
    }

    /// Every check the cluster store makes before it connects (the node syntax is this
    /// crate's own: [`parse_node`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_common(&self.prefix, self.timeout, self.max_in_flight)?;
        if self.nodes.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        for node in &self.nodes {
            parse_node(node)?;
        }
        if let Some(tls) = self.effective_tls() {
            sluice_tls::client_config("backend.tls", &tls.files)?;
        }
        Ok(())
    }
}

/// `url` with its password (and user name) replaced by `***`, for logs and errors:
/// `redis://:secret@host:6379/0` → `redis://***@host:6379/0`. Text that is not a URL with
/// credentials comes back unchanged.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((_, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match scheme {
        Some(scheme) => format!("{scheme}://***@{host}{path}"),
        None => format!("***@{host}{path}"),
    }
}

/// `text` (a client's error message about `url`) with `url`'s credentials redacted wherever
/// they appear.
pub(crate) fn redact_text(text: &str, url: &str) -> String {
    let mut text = text.replace(url, &redact_url(url));
    if let Some((userinfo, _)) = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .and_then(|authority| authority.rsplit_once('@'))
    {
        for secret in userinfo.split(':').filter(|s| s.len() >= 3) {
            text = text.replace(secret, "***");
        }
    }
    text
}

/// The bounds every Redis store checks: a prefix that leaves the hash tag alone, a timeout and
/// an in-flight bound above zero.
pub fn check_common(
    prefix: &str,
    timeout: Duration,
    max_in_flight: usize,
) -> Result<(), ConfigError> {
    if !valid_prefix(prefix) {
        return Err(ConfigError::InvalidPrefix(prefix.to_owned()));
    }
    if timeout.is_zero() {
        return Err(ConfigError::ZeroTimeout);
    }
    if max_in_flight == 0 {
        return Err(ConfigError::ZeroInFlight);
    }
    Ok(())
}

/// `redis://[user:password@]host:port` → `(user, password)`, if any.
pub fn credentials(url: &str) -> Option<(Option<String>, String)> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (userinfo, _) = rest.split('/').next()?.rsplit_once('@')?;
    match userinfo.split_once(':') {
        Some((user, password)) => Some((
            (!user.is_empty()).then(|| user.to_owned()),
            password.to_owned(),
        )),
        None => Some((None, userinfo.to_owned())),
    }
}

/// `redis://host:port` (or `host:port`) → `(host, port)`; the port defaults to 6379.
pub fn parse_node(url: &str) -> Result<(String, u16), ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidUrl {
        url: redact_url(url),
        reason: reason.to_owned(),
    };
    let rest = url
        .strip_prefix("redis://")
        .or_else(|| url.strip_prefix("rediss://"))
        .or_else(|| url.strip_prefix("redis-cluster://"))
        .unwrap_or(url);
    let rest = rest.split('/').next().unwrap_or(rest);
    let rest = rest.rsplit('@').next().unwrap_or(rest);
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, port.parse::<u16>().map_err(|_| invalid("bad port"))?),
        None => (rest, 6379),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(invalid("missing host"));
    }
    Ok((host.to_owned(), port))
}

/// Whether `prefix` can start a key without disturbing the hash tag that follows it
/// (`{prefix}:{<policy>:<key>}:<suffix>`, see `sluice_store::keys`).
fn valid_prefix(prefix: &str) -> bool {
    !prefix.is_empty() && !prefix.contains(['{', '}'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redact_url("redis://:hunter22@h:6379/0"),
            "redis://***@h:6379/0"
        );
        assert_eq!(redact_url("redis://u:pw@h:1"), "redis://***@h:1");
        assert_eq!(redact_url("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(redact_url("u:pw@h:1"), "***@h:1");
    }

    /// A client refusing every URL with a reason that quotes it, as a client's message may.
    fn quoting(url: &str) -> Result<(), String> {
        Err(format!("cannot parse {url}"))
    }

    #[test]
    fn a_bad_url_is_refused_without_its_password() {
        let err = RedisStoreConfig {
            url: "redis://:hunter22@host:notaport/0".into(),
            ..RedisStoreConfig::default()
        }
        .validate(Some(quoting))
        .unwrap_err();
        assert!(matches!(err, ConfigError::InvalidUrl { .. }), "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
        let err = ClusterStoreConfig {
            nodes: vec!["redis://:hunter22@h:x".into()],
            ..ClusterStoreConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(!err.to_string().contains("hunter22"), "{err}");
    }

    #[test]
    fn node_urls() {
        assert_eq!(
            parse_node("redis://127.0.0.1:7000").ok(),
            Some(("127.0.0.1".into(), 7000))
        );
        assert_eq!(
            parse_node("10.0.0.1:7001").ok(),
            Some(("10.0.0.1".into(), 7001))
        );
        assert_eq!(parse_node("redis://h").ok(), Some(("h".into(), 6379)));
        assert_eq!(parse_node("redis://:pw@h:1/0").ok(), Some(("h".into(), 1)));
        assert!(parse_node("redis://h:x").is_err());
        assert_eq!(credentials("redis://h:1"), None);
        assert_eq!(credentials("redis://:pw@h:1"), Some((None, "pw".into())));
        assert_eq!(
            credentials("redis://u:pw@h:1"),
            Some((Some("u".into()), "pw".into()))
        );
    }
}
