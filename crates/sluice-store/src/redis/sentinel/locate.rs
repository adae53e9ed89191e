//! "Where is the master now": every sentinel asked at once (`SENTINEL MASTER <name>`: the
//! address and the epoch of the configuration it knows), the server of the newest one
//! checked to be a master (`ROLE`), and a connection to it opened with the master's
//! credentials, as the single-server client's.
//!
//! Written over the `redis` crate's commands rather than its `redis::sentinel` module, which
//! does not fit: it takes either one password for every sentinel or no certificates of its
//! own for the master (sluice has a sentinel's password in each URL and one CA for both), and
//! it bounds no step (a hung sentinel would hold the lookup) and takes the first sentinel's
//! word (a sentinel that missed a failover names the old master). Here every step is bounded
//! by `connect_timeout`, a sentinel that is down or does not know the name is passed over,
//! and the newest configuration wins.

use std::collections::HashMap;
use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, Role};
use sluice_config::backend::{
    RedisTls, SentinelStoreConfig, StoreConfigError as ConfigError, redact_url,
};

use super::events::host_port;
use crate::redis::plain_probe::PlainProbe;
use crate::redis::single::{ClientError, Single, manager_config, open_client};

/// One sentinel: its address (redacted) and a connection that reconnects by itself.
pub(crate) struct Link {
    pub address: String,
    pub client: ::redis::Client,
    manager: ConnectionManager,
}

/// What a lookup found.
pub(crate) enum Located {
    /// The master the client is connected to already (`host:port`).
    Same,
    /// Another server, checked to be a master, and a connection to it.
    Moved { at: String, single: Single },
}

/// The sentinels and what connecting to the master they name takes.
pub(crate) struct Locator {
    pub master: String,
    pub links: Vec<Link>,
    credentials: RedisConnectionInfo,
    tls: Option<RedisTls>,
    timeout: Duration,
    connect_timeout: Duration,
    max_in_flight: usize,
}

fn client_error(url: &str) -> impl Fn(ClientError) -> ConfigError + '_ {
    move |e| match e {
        ClientError::Tls(e) => ConfigError::from(e),
        ClientError::Redis(e) => ConfigError::InvalidUrl {
            url: redact_url(url),
            reason: e.to_string(),
        },
    }
}

impl Locator {
    /// The sentinels of `config` (not connected yet: each connects on its first question).
    pub(crate) fn new(config: &SentinelStoreConfig) -> Result<Locator, ConfigError> {
        let tls = config.effective_tls();
        let links = config
            .sentinels
            .iter()
            .map(|url| {
                let info = config
                    .client_url(url)
                    .as_str()
                    .into_connection_info()
                    .map_err(|e| client_error(url)(ClientError::Redis(e)))?;
                let client = open_client(info, tls.as_ref()).map_err(client_error(url))?;
                // A sentinel answers one short command per lookup: its own, longer bound.
                let settings = manager_config(config.connect_timeout, config.connect_timeout, 1);
                let manager = ConnectionManager::new_lazy_with_config(client.clone(), settings)
                    .map_err(|e| ConfigError::Client(e.to_string()))?;
                Ok(Link {
                    address: redact_url(url),
                    client,
                    manager,
                })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        let mut credentials = RedisConnectionInfo::default();
        if let Some(user) = &config.username {
            credentials = credentials.set_username(user);
        }
        if let Some(password) = &config.password {
            credentials = credentials.set_password(password);
        }
        Ok(Locator {
            master: config.master.clone(),
            links,
            credentials,
            tls,
            timeout: config.timeout,
            connect_timeout: config.connect_timeout,
            max_in_flight: config.max_in_flight,
        })
    }

    /// The bound on each step of a lookup.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Asks every sentinel at once (each within `connect_timeout`) and tries the masters they
    /// name, the newest configuration first (the highest `config-epoch`: a sentinel that has
    /// not heard of a failover yet names the old master with an older epoch), until one
    /// answers `ROLE` as a master. `current` is the `host:port` connected to already (kept
    /// when named first); a sentinel naming `stale` (a master being failed over, whose replica
    /// is in use already) has not seen the failover end and is passed over. The error says
    /// what each sentinel answered (no credentials).
    pub(crate) async fn locate(
        &self,
        current: Option<&str>,
        stale: Option<&str>,
    ) -> Result<Located, String> {
        let asked = futures::future::join_all(self.links.iter().map(|link| self.ask(link))).await;
        let mut answers = Vec::with_capacity(self.links.len());
        let mut named = Vec::with_capacity(self.links.len());
        let (mut unknown, mut unreachable) = (0, 0);
        for (link, answer) in self.links.iter().zip(asked) {
            match answer {
                Ok(Some((at, epoch))) => named.push((epoch, at, link)),
                Ok(None) => {
                    unknown += 1;
                    answers.push(format!(
                        "{}: no master named {:?}",
                        link.address, self.master
                    ));
                }
                Err(why) => {
                    unreachable += 1;
                    answers.push(format!("{}: {why}", link.address));
                }
            }
        }
        // Newest epoch first; among equals, the configured order.
        named.sort_by_key(|(epoch, _, _)| std::cmp::Reverse(*epoch));
        let mut tried: Vec<&str> = Vec::new();
        for (_, at, link) in &named {
            if tried.contains(&at.as_str()) {
                continue;
            }
            tried.push(at);
            if current == Some(at.as_str()) {
                return Ok(Located::Same);
            }
            if stale == Some(at.as_str()) {
                answers.push(format!("{} still names {at}", link.address));
                continue;
            }
            match self.connect(at).await {
                Ok(single) => {
                    return Ok(Located::Moved {
                        at: at.clone(),
                        single,
                    });
                }
                Err(why) => answers.push(format!("{} named {at}, which {why}", link.address)),
            }
        }
        // Every sentinel that answered knows no such name: the name is what to fix.
        Err(
            if unknown > 0 && unknown + unreachable == self.links.len() {
                format!(
                    "no sentinel knows a master named {:?} (backend.master): {}",
                    self.master,
                    answers.join("; ")
                )
            } else {
                format!(
                    "no master {:?} found through the sentinels: {}",
                    self.master,
                    answers.join("; ")
                )
            },
        )
    }

    /// The master `link` names (`host:port`) and the epoch of its configuration; `None` when
    /// it monitors no master of that name.
    async fn ask(&self, link: &Link) -> Result<Option<(String, u64)>, String> {
        let mut conn = link.manager.clone();
        let mut ask = ::redis::cmd("SENTINEL");
        ask.arg("MASTER").arg(&self.master);
        let answer = match tokio::time::timeout(
            self.connect_timeout,
            ask.query_async::<HashMap<String, String>>(&mut conn),
        )
        .await
        {
            Ok(Ok(answer)) => answer,
            // `ERR No such master with that name`.
            Ok(Err(e)) if e.to_string().contains("No such master") => return Ok(None),
            Ok(Err(e)) => return Err(why(&e, &link.address, self.tls.is_some())),
            Err(_) => return Err(format!("no answer within {:?}", self.connect_timeout)),
        };
        let field = |name: &str| answer.get(name).map(String::as_str);
        match (
            field("ip"),
            field("port").and_then(|p| p.parse::<u16>().ok()),
        ) {
            (Some(ip), Some(port)) => {
                let epoch = field("config-epoch")
                    .and_then(|e| e.parse().ok())
                    .unwrap_or(0);
                Ok(Some((host_port(ip, port), epoch)))
            }
            _ => Err("answered SENTINEL MASTER without an address".into()),
        }
    }

    /// A connection to `at` (`host:port`) with the master's credentials, once `ROLE` says it is a
    /// master; why not otherwise.
    pub(crate) async fn connect(&self, at: &str) -> Result<Single, String> {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        let info: ConnectionInfo = format!("{scheme}://{at}")
            .as_str()
            .into_connection_info()
            .map_err(|e| format!("is not an address: {e}"))?;
        let probe = PlainProbe::of(&info, self.timeout, self.connect_timeout);
        let info = info.set_redis_settings(self.credentials.clone());
        let client = open_client(info, self.tls.as_ref()).map_err(|e| match e {
            ClientError::Tls(e) => e.to_string(),
            ClientError::Redis(e) => e.to_string(),
        })?;
        let settings = manager_config(self.timeout, self.connect_timeout, self.max_in_flight);
        let single = |manager| Single::over(manager, at.to_owned(), self.tls.is_some(), probe);
        let manager = match tokio::time::timeout(
            self.connect_timeout,
            ConnectionManager::new_with_config(client, settings),
        )
        .await
        {
            Ok(Ok(manager)) => manager,
            Ok(Err(e)) => {
                return Err(format!(
                    "cannot be reached: {}",
                    why(&e, at, self.tls.is_some())
                ));
            }
            Err(_) => return Err(format!("did not answer within {:?}", self.connect_timeout)),
        };
        let mut conn = manager.clone();
        let role = tokio::time::timeout(
            self.connect_timeout,
            ::redis::cmd("ROLE").query_async::<Role>(&mut conn),
        )
        .await;
        match role {
            Ok(Ok(Role::Primary { .. })) => Ok(single(manager)),
            Ok(Ok(Role::Replica { .. })) => Err("is a replica (not failed over yet?)".into()),
            Ok(Ok(_)) => Err("is not a Redis master".into()),
            Ok(Err(e)) => Err(format!("refused ROLE: {}", why(&e, at, self.tls.is_some()))),
            Err(_) => Err(format!(
                "did not answer ROLE within {:?}",
                self.connect_timeout
            )),
        }
    }
}

/// What went wrong talking to `address` (redacted): the TLS reason when TLS explains it, else
/// the client's words (which carry no credentials).
fn why(e: &::redis::RedisError, address: &str, tls: bool) -> String {
    crate::tls::explain(e, address, tls).unwrap_or_else(|| e.to_string())
}
