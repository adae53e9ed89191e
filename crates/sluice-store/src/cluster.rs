//! `ClusterStore`: state in a Redis Cluster, through the `fred` crate in cluster mode.
//!
//! Every key of one limit carries the limit's hash tag, so each check is one EVALSHA on the
//! master of that slot. A batch is grouped by slot: one `batch` EVALSHA per slot (all slots
//! concurrently), each committing only if all its checks pass; if any slot was denied, the
//! slots that committed are refunded (consume-then-refund). So no command ever spans slots
//! and no CROSSSLOT error can occur.
//!
//! The client holds one multiplexed connection per master, pipelines concurrent commands on
//! it, refreshes the slot map when a node fails over or a slot moves, and reconnects by
//! itself. MOVED and ASK are followed by [`crate::redirect`] (a redirected script did not
//! run, so sending it again is safe). Scripts are loaded on every master on NOSCRIPT (a promoted replica has an empty
//! script cache) and the call retried once.
//!
//! Consume-then-refund is not atomic across slots: between the consume and the refund a
//! concurrent check may see the batch's consumption and be denied. It never admits more than
//! the limits allow, and a refund lost to a failing node only delays the return of that quota
//! until the key's TTL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::bounds::Bounds;
use crate::config::{ClusterStoreConfig, ConfigError, check_common};
use crate::redirect::{self, Redirects};
use crate::scripts::{self, Layout, Runner, ScriptId};
use crate::{Check, LimitOverride, Store, StoreError, overrides};
use async_trait::async_trait;
use fred::prelude::{
    Builder, Client, ClientLike, Config, Error as FredError, ErrorKind, HashesInterface,
    KeysInterface, ReconnectPolicy, ServerConfig, SetsInterface,
};
use fred::types::scripts::Script;
use sluice_core::Decision;

/// Rate-limit state in a Redis Cluster.
#[derive(Debug, Clone)]
pub struct ClusterStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    /// Follows the MOVED and ASK answers fred is told not to follow.
    redirects: Redirects,
    scripts: Vec<Script>,
    layout: Layout,
    bounds: Bounds,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterStore")
            .field("prefix", &self.layout.prefix)
            .field("timeout", &self.bounds.timeout())
            .finish_non_exhaustive()
    }
}

/// `redis://[user:password@]host:port` → `(user, password)`, if any.
fn credentials(url: &str) -> Option<(Option<String>, String)> {
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
pub(crate) fn parse_node(url: &str) -> Result<(String, u16), ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidUrl {
        url: crate::config::redact_url(url),
        reason: reason.to_owned(),
    };
    let rest = url
        .strip_prefix("redis://")
        .or_else(|| url.strip_prefix("redis-cluster://"))
        .unwrap_or(url);
    if rest.starts_with("rediss://") || url.starts_with("rediss://") {
        return Err(invalid("TLS is not supported"));
    }
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

impl ClusterStore {
    /// A store on the cluster reachable through `config.nodes`. Starts connecting in the
    /// background and returns at once (the daemon serves its fail mode until the cluster
    /// answers). Must be called within a Tokio runtime.
    pub fn new(config: ClusterStoreConfig) -> Result<Self, ConfigError> {
        check_common(&config.prefix, config.timeout, config.max_in_flight)?;
        if config.nodes.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        let hosts = config
            .nodes
            .iter()
            .map(|url| parse_node(url))
            .collect::<Result<Vec<_>, _>>()?;
        let (username, password) = config
            .nodes
            .iter()
            .find_map(|url| credentials(url))
            .map_or((None, None), |(user, password)| (user, Some(password)));
        let redirects = Redirects::new(
            username.as_deref(),
            password.as_deref(),
            config.connect_timeout,
        );
        let fred_config = Config {
            server: ServerConfig::new_clustered(hosts),
            username,
            password,
            // Keep retrying the first connection too: the cluster may come up after us.
            fail_fast: false,
            ..Default::default()
        };
        let timeout = config.timeout;
        let connect_timeout = config.connect_timeout;
        let max_in_flight = config.max_in_flight;
        let client = Builder::from_config(fred_config)
            .with_performance_config(|perf| {
                perf.default_command_timeout = timeout;
            })
            .with_connection_config(|conn| {
                conn.connection_timeout = connect_timeout;
                conn.internal_command_timeout = connect_timeout.max(Duration::from_millis(500));
                // A command whose connection closed under it is not re-sent: it may have run
                // already, and re-running a check would consume twice. The caller's next
                // check goes to the new connection (or the promoted replica).
                conn.max_command_attempts = 1;
                // fred would follow a redirection only by spending a write attempt, and its
                // ASK path ends the router when ASKING fails (as it does towards a master it
                // has no connection to yet): it follows none, answers a redirected command
                // with an error (after refreshing the slot map on MOVED), and
                // `crate::redirect` sends the script again.
                conn.max_redirections = 0;
                // Bounded queue towards the router: past it commands fail at once.
                // (a cross-slot batch is one command per slot, hence the factor).
                conn.max_command_buffer_len = max_in_flight.saturating_mul(8);
                // A node that stops answering (hung, or dead without a RST) is dropped and
                // the slot map refreshed, instead of waiting for TCP to notice.
                conn.unresponsive.max_timeout = Some(Duration::from_secs(2));
                conn.unresponsive.interval = Duration::from_millis(500);
            })
            // Reconnect forever, 50 ms doubling up to 1 s between attempts.
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 1000, 2))
            .build()
            .map_err(|e| ConfigError::Client(e.to_string()))?;
        let _connection_task = client.connect();
        let scripts = scripts::sources()
            .iter()
            .map(|src| Script::from_lua(src.as_str()))
            .collect();
        Ok(ClusterStore {
            inner: Arc::new(Inner {
                client,
                redirects,
                scripts,
                layout: Layout::new(config.prefix, config.ttl_grace),
                bounds: Bounds::new(timeout, max_in_flight),
            }),
        })
    }

    /// Waits until the client has connected to the cluster (or `limit` passed).
    pub async fn wait_connected(&self, limit: Duration) -> Result<(), StoreError> {
        tokio::time::timeout(limit, self.inner.client.wait_for_connect())
            .await
            .map_err(|_| StoreError::Timeout)?
            .map_err(|e| map_error(&e))
    }

    /// Runs a check-path call within the in-flight bound and the timeout, once the client
    /// has the slot map.
    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.inner
            .bounds
            .call(async {
                // Until the client has the slot map (just started, or reconnecting) a command
                // fails at once with "missing routing state": wait for it within the timeout.
                if !self.inner.client.is_connected() {
                    self.inner
                        .client
                        .wait_for_connect()
                        .await
                        .map_err(|e| map_error(&e))?;
                }
                call.await
            })
            .await
    }

    /// An admin command, bounded by time only.
    async fn admin<T>(
        &self,
        call: impl Future<Output = Result<T, FredError>>,
    ) -> Result<T, StoreError> {
        self.inner.bounds.admin(call, map_error).await
    }
}

fn map_error(e: &FredError) -> StoreError {
    match e.kind() {
        ErrorKind::Timeout => StoreError::Timeout,
        ErrorKind::IO
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Cluster
        | ErrorKind::Routing => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Backend(e.to_string()),
    }
}

impl ClusterStore {
    /// Runs one script within the in-flight bound and the timeout (the replicated scope's
    /// scripts, which live beside the check scripts).
    pub(crate) async fn run_script(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        let inner: &Inner = &self.inner;
        self.bounded(inner.run(script, keys, args)).await
    }

    /// The key prefix and TTL grace of this store.
    pub(crate) fn layout(&self) -> &Layout {
        &self.inner.layout
    }
}

#[async_trait]
impl Runner for Inner {
    async fn run(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        let index = script.index();
        let (Some(script), Some(source)) = (self.scripts.get(index), scripts::sources().get(index))
        else {
            return Err(StoreError::Backend("unknown script".into()));
        };
        // Borrowed: the redirection path needs them again.
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        match script
            .evalsha_with_reload::<Vec<i64>, _, _>(&self.client, key_refs, arg_refs)
            .await
        {
            Ok(answer) => Ok(answer),
            Err(e) if redirect::not_run(&e) => {
                self.redirects.run(&self.client, source, &keys, &args).await
            }
            Err(e) => Err(map_error(&e)),
        }
    }
}

#[async_trait]
impl Store for ClusterStore {
    fn kind(&self) -> &'static str {
        "cluster"
    }

    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        let inner: &Inner = &self.inner;
        self.bounded(scripts::check(inner, &inner.layout, check, now_ms))
            .await
    }

    /// A batch runs in a task of its own, holding its in-flight permit: if the caller stops
    /// waiting (its timeout), the task still finishes, and a batch denied on one slot is
    /// still refunded on the others instead of leaving half its consumption behind. Every
    /// command in it is bounded by the client's command timeout.
    async fn check_all(
        &self,
        checks: &[Check<'_>],
        now_ms: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        let permit = self.inner.bounds.owned_permit()?;
        let owned: Vec<(String, String, sluice_core::Params, u64)> = checks
            .iter()
            .map(|c| (c.policy.to_owned(), c.key.to_owned(), c.params, c.cost))
            .collect();
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(async move {
            let _permit = permit;
            let checks: Vec<Check<'_>> = owned
                .iter()
                .map(|(policy, key, params, cost)| Check {
                    policy,
                    key,
                    params: *params,
                    cost: *cost,
                })
                .collect();
            scripts::check_all(inner.as_ref(), &inner.layout, &checks, now_ms, true).await
        });
        match tokio::time::timeout(self.inner.bounds.timeout(), task).await {
            Err(_) => Err(StoreError::Timeout),
            Ok(Err(e)) => Err(StoreError::Backend(format!("batch task failed: {e}"))),
            Ok(Ok(result)) => result,
        }
    }

    async fn put_override(&self, change: &LimitOverride) -> Result<(), StoreError> {
        let prefix = &self.inner.layout.prefix;
        let client = &self.inner.client;
        let hash = overrides::hash_key(prefix, &change.policy, &change.tier);
        let fields: Vec<(&str, String)> = overrides::fields(change);
        // The keys live on different slots: no transaction, so the order matters. The hash
        // is complete before the index names it and before the version tells anyone.
        self.admin(async {
            client.del::<(), _>(&hash).await?;
            client.hset::<(), _, _>(&hash, fields).await?;
            client
                .sadd::<(), _, _>(
                    overrides::index_key(prefix),
                    overrides::member(&change.policy, &change.tier),
                )
                .await?;
            client.incr::<(), _>(overrides::version_key(prefix)).await
        })
        .await
    }

    async fn delete_override(&self, policy: &str, tier: &str) -> Result<bool, StoreError> {
        let prefix = &self.inner.layout.prefix;
        let client = &self.inner.client;
        self.admin(async {
            let deleted: u64 = client
                .del(overrides::hash_key(prefix, policy, tier))
                .await?;
            client
                .srem::<(), _, _>(
                    overrides::index_key(prefix),
                    overrides::member(policy, tier),
                )
                .await?;
            client.incr::<(), _>(overrides::version_key(prefix)).await?;
            Ok(deleted > 0)
        })
        .await
    }

    async fn overrides(&self) -> Result<(u64, Vec<LimitOverride>), StoreError> {
        let prefix = &self.inner.layout.prefix;
        let client = &self.inner.client;
        self.admin(async {
            let version: Option<u64> = client.get(overrides::version_key(prefix)).await?;
            let members: Vec<String> = client.smembers(overrides::index_key(prefix)).await?;
            let mut all = Vec::with_capacity(members.len());
            for member in members {
                let Some((policy, tier)) = member.split_once(':') else {
                    continue;
                };
                let fields: HashMap<String, String> = client
                    .hgetall(overrides::hash_key(prefix, policy, tier))
                    .await?;
                all.extend(overrides::parse(&member, &fields));
            }
            all.sort();
            Ok((version.unwrap_or(0), all))
        })
        .await
    }

    async fn overrides_version(&self) -> Result<u64, StoreError> {
        let key = overrides::version_key(&self.inner.layout.prefix);
        let client = &self.inner.client;
        self.admin(async {
            let version: Option<u64> = client.get(key).await?;
            Ok(version.unwrap_or(0))
        })
        .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        // Every master must answer: a check may land on any of them.
        tokio::time::timeout(
            self.inner.bounds.timeout().max(Duration::from_millis(100)),
            self.inner.client.ping::<()>(None),
        )
        .await
        .map_err(|_| StoreError::Timeout)?
        .map_err(|e| map_error(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::{credentials, parse_node};

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
