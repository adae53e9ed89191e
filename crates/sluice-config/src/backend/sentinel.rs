//! `backend.kind = "sentinel"`: one Redis master found through Redis Sentinel, with the checks
//! the store makes before it connects.
//!
//! Two sets of credentials are apart on purpose: a sentinel's own (in its URL, as Sentinel's
//! `requirepass` is its own) and the master's (`username`, `password`), which the store uses
//! on whichever server the sentinels name. The master's password is a secret: [`Debug`] and
//! every error leave it out.

use std::time::Duration;

use super::stores::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_IN_FLIGHT, DEFAULT_TIMEOUT, RedisTls,
    UrlCheck, check_common, parse_node, redact_url,
};

/// The Redis master a set of sentinels monitors (`backend.kind = "sentinel"`).
///
/// The store asks the sentinels where the master is, checks that the server it is told of is
/// a master (`ROLE`), and keeps one multiplexed connection to it, as
/// [`RedisStoreConfig`](super::RedisStoreConfig) does for a fixed address; it asks again on a
/// `+switch-master` event, a `READONLY` answer or a lost connection.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelStoreConfig {
    /// `backend.sentinels`: `redis://[[user]:password@]host:port` of each sentinel, its own
    /// credentials in its URL (`rediss://` or `[backend.tls]`: TLS). No default.
    pub sentinels: Vec<String>,
    /// `backend.master`: the name the sentinels monitor the master under. No default.
    pub master: String,
    /// `backend.username` of the master (ACL user); `None`: the default user.
    pub username: Option<String>,
    /// `backend.password` of the master; `None`: no AUTH. Never printed.
    pub password: Option<String>,
    /// `backend.prefix`. Default `rl`.
    pub prefix: String,
    /// `backend.timeout`: bound on each store call. Default 50 ms.
    pub timeout: Duration,
    /// `backend.connect_timeout`: bound on opening a connection (to a sentinel or the master)
    /// and on asking one sentinel, and on the daemon's wait before it serves. Default 1 s.
    pub connect_timeout: Duration,
    /// Most concurrent calls; more are refused with `Unavailable`. Default 4096.
    pub max_in_flight: usize,
    /// Added to every key's TTL, as [`RedisStoreConfig::ttl_grace`](super::RedisStoreConfig).
    pub ttl_grace: Duration,
    /// `[backend.tls]`: TLS to the sentinels and to the master (a `rediss://` sentinel turns
    /// it on). Default none.
    pub tls: Option<RedisTls>,
}

impl Default for SentinelStoreConfig {
    fn default() -> Self {
        SentinelStoreConfig {
            sentinels: Vec::new(),
            master: String::new(),
            username: None,
            password: None,
            prefix: "rl".into(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            ttl_grace: Duration::ZERO,
            tls: None,
        }
    }
}

impl std::fmt::Debug for SentinelStoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelStoreConfig")
            .field("sentinels", &self.addresses())
            .field("master", &self.master)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// A problem of one field of a sentinel backend (the field relative to its section:
/// `sentinels[1]`, `master`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelProblem {
    pub field: String,
    pub error: ConfigError,
}

impl SentinelStoreConfig {
    /// The sentinels' URLs, credentials redacted (for logs and errors).
    pub fn addresses(&self) -> Vec<String> {
        self.sentinels.iter().map(|url| redact_url(url)).collect()
    }

    /// The TLS of every connection: `tls`, or the defaults when a sentinel is `rediss://`.
    pub fn effective_tls(&self) -> Option<RedisTls> {
        self.tls.clone().or_else(|| {
            self.sentinels
                .iter()
                .any(|url| url.starts_with("rediss://"))
                .then(RedisTls::default)
        })
    }

    /// The URL the client opens for sentinel `url`: `rediss://` whenever TLS is on.
    pub fn client_url(&self, url: &str) -> String {
        match url.strip_prefix("redis://") {
            Some(rest) if self.effective_tls().is_some() => format!("rediss://{rest}"),
            _ => url.to_owned(),
        }
    }

    /// Every problem the store would refuse before it connects, each naming its field, all at
    /// once; `url` is the client's parse of a URL (`None`: only this crate's own syntax check).
    pub fn problems(&self, url: Option<UrlCheck>) -> Vec<SentinelProblem> {
        let mut problems = Vec::new();
        let mut push = |field: &str, error: ConfigError| {
            problems.push(SentinelProblem {
                field: field.to_owned(),
                error,
            });
        };
        if let Err(error) = check_common(&self.prefix, self.timeout, self.max_in_flight) {
            push("", error);
        }
        if self.sentinels.is_empty() {
            push("sentinels", ConfigError::NoSentinels);
        }
        if self.master.trim().is_empty() {
            push("master", ConfigError::NoMasterName);
        }
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            let field = format!("sentinels[{i}]");
            let checked = parse_node(sentinel).and_then(|_| match url {
                Some(parse) => {
                    parse(&self.client_url(sentinel)).map_err(|reason| ConfigError::InvalidUrl {
                        url: redact_url(sentinel),
                        reason: super::stores::redact_text(&reason, sentinel),
                    })
                }
                None => Ok(()),
            });
            if let Err(error) = checked {
                push(&field, error);
            }
        }
        if let Some(tls) = self.effective_tls() {
            if let Err(err) = sluice_tls::client_config("backend.tls", &tls.files) {
                push("", err.into());
            }
            // The master's address is the one the sentinels announce (an IP, most often):
            // that is the name verified, and the client offers no other.
            if tls.server_name.is_some() {
                push(
                    "tls.server_name",
                    ConfigError::Tls(
                        "backend.tls.server_name: not used with kind = \"sentinel\": each sentinel is verified by its URL's host, the master by the address the sentinels announce (give its certificate that IP or name)".into(),
                    ),
                );
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_named_at_once_and_no_password_shows() {
        let config = SentinelStoreConfig {
            sentinels: vec![
                "redis://:s3cret@127.0.0.1:26379".into(),
                "redis://:s3cret@h:notaport".into(),
            ],
            master: " ".into(),
            password: Some("hunter22".into()),
            ..SentinelStoreConfig::default()
        };
        let problems = config.problems(None);
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["master", "sentinels[1]"]);
        let text = format!("{problems:?} {config:?}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("hunter22"), "{text}");
        let empty = SentinelStoreConfig::default().problems(None);
        assert_eq!(
            empty.iter().map(|p| p.field.as_str()).collect::<Vec<_>>(),
            ["sentinels", "master"]
        );
    }

    #[test]
    fn a_rediss_sentinel_turns_tls_on_for_every_sentinel() {
        let config = SentinelStoreConfig {
            sentinels: vec!["rediss://a:1".into(), "redis://b:2".into()],
            master: "m".into(),
            ..SentinelStoreConfig::default()
        };
        assert!(config.effective_tls().is_some());
        assert_eq!(config.client_url("redis://b:2"), "rediss://b:2");
    }
}
