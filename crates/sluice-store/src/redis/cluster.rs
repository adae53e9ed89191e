//! [`Cluster`], the client of a Redis Cluster through the `fred` crate in cluster mode, and
//! `ClusterStore`, the [`ScriptStore`] over it.
//!
//! Every key of one limit carries the limit's hash tag, so each check is one EVALSHA on the
//! master of that slot. A batch is grouped by slot: one `batch` EVALSHA per slot (all slots
//! concurrently), each committing only if all its checks pass; if any slot was denied, the
//! slots that committed are refunded (consume-then-refund). So no command ever spans slots
//! and no CROSSSLOT error can occur.
//!
//! The client holds one multiplexed connection per master, pipelines concurrent commands on
//! it, refreshes the slot map when a node fails over or a slot moves, and reconnects by
//! itself. MOVED and ASK are followed by [`super::redirect`] (a redirected script did not
//! run, so sending it again is safe). A call answered NOSCRIPT (a restarted node, a promoted
//! replica) is sent again once as EVAL to the same node, which caches the script there;
//! loading it on every master would wait for all of them, one hung master included.
//!
//! Consume-then-refund is not atomic across slots: between the consume and the refund a
//! concurrent check may see the batch's consumption and be denied. It never admits more than
//! the limits allow, and a refund lost to a failing node only delays the return of that quota
//! until the key's TTL.

use std::time::Duration;

use async_trait::async_trait;
use fred::bytes::Bytes;
use fred::prelude::{
    Builder, Client, ClientLike, ClusterInterface, Config, Error as FredError, ErrorKind,
    LuaInterface, ReconnectPolicy, ServerConfig,
};
use fred::types::{FromValue, Value};

use super::keys;
use super::masters::Masters;
use super::redirect::{self, Redirects};
use super::runner::{GroupCall, Lane, ScriptCall, ScriptRunner};
use super::script_store::ScriptStore;
use super::scripts::Script;
use sluice_config::backend::ClusterStoreConfig;
use sluice_config::backend::stores::{ConfigError, check_common, credentials, parse_node};

use crate::error::StoreError;
use crate::store::StoreKind;

/// Rate-limit state in a Redis Cluster.
pub type ClusterStore = ScriptStore<Cluster>;

/// The client of a Redis Cluster, running sluice's scripts on the master of each key's slot.
pub struct Cluster {
    client: Client,
    /// Follows the MOVED and ASK answers fred is told not to follow.
    redirects: Redirects,
    /// The master of each slot: the lanes of one-key checks.
    masters: Masters,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
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
        let tls = config.effective_tls();
        let redirects = Redirects::new(
            username.as_deref(),
            password.as_deref(),
            config.connect_timeout,
            tls.as_ref()
                .map(crate::tls::redis_certificates)
                .transpose()?,
        );
        let fred_tls = match &tls {
            Some(tls) => Some(fred_tls(tls)?),
            None => None,
        };
        let fred_config = Config {
            server: ServerConfig::new_clustered(hosts),
            username,
            password,
            tls: fred_tls,
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
        let cluster = Cluster {
            client,
            redirects,
            masters: Masters::default(),
        };
        Ok(ScriptStore::with_client(
            cluster,
            config.prefix,
            timeout,
            config.ttl_grace,
            max_in_flight,
        ))
    }

    /// Waits until the client has connected to the cluster (or `limit` passed).
    pub async fn wait_connected(&self, limit: Duration) -> Result<(), StoreError> {
        tokio::time::timeout(limit, self.client().client.wait_for_connect())
            .await
            .map_err(|_| StoreError::Timeout)?
            .map_err(|e| map_error(&e))
    }
}

/// A key of a script call, as both clients send it.
trait ScriptKey: AsRef<str> + redis::ToRedisArgs + Sync {}
impl ScriptKey for String {}
impl ScriptKey for &str {}

/// An argument of a script call: text or bytes, as both clients send it.
trait ScriptArg: AsRef<[u8]> + redis::ToRedisArgs + Sync {}
impl ScriptArg for String {}
impl ScriptArg for &[u8] {}

/// fred's TLS from `tls`: every node connection verified, by `server_name` when set (else
/// by the address the cluster announces for the node).
fn fred_tls(
    tls: &sluice_config::backend::RedisTls,
) -> Result<fred::types::config::TlsConfig, ConfigError> {
    use fred::types::config::{TlsConfig, TlsConnector, TlsHostMapping};
    let hostnames = match &tls.server_name {
        Some(name) => TlsHostMapping::Custom(std::sync::Arc::new(SameName(name.clone()))),
        None => TlsHostMapping::None,
    };
    Ok(TlsConfig {
        connector: TlsConnector::from(crate::tls::client_config(tls)?),
        hostnames,
    })
}

/// Every node verified by one name (`backend.tls.server_name`).
#[derive(Debug)]
struct SameName(String);

impl fred::types::config::HostMapping for SameName {
    fn map(&self, _ip: &std::net::IpAddr, _default_host: &str) -> Option<String> {
        Some(self.0.clone())
    }
}

fn map_error(e: &FredError) -> StoreError {
    match e.kind() {
        ErrorKind::Timeout => StoreError::Timeout,
        ErrorKind::Tls => StoreError::Unavailable(match crate::tls::reason_in(e) {
            Some(reason) => format!("TLS handshake with a cluster node failed: {reason}"),
            None => e.to_string(),
        }),
        ErrorKind::IO
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Cluster
        | ErrorKind::Routing => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Backend(e.to_string()),
    }
}

impl Cluster {
    /// EVALSHA of `script`, following MOVED and ASK (see [`redirect`]).
    async fn invoke<T: FromValue + redis::FromRedisValue, K: ScriptKey, A: ScriptArg>(
        &self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> Result<T, StoreError> {
        match self.invoke_here(script, keys, args).await? {
            Some(answer) => Ok(answer),
            None => {
                let source = script.source();
                self.redirects.run(&self.client, source, keys, args).await
            }
        }
    }

    /// EVALSHA of `script` where the client's slot map sends it; `None` when the node
    /// answered with a redirection (the script did not run).
    async fn invoke_here<T: FromValue, K: ScriptKey, A: ScriptArg>(
        &self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> Result<Option<T>, StoreError> {
        // Built again for the EVAL below only when it is needed (rarely): no copies per call.
        let keys = || keys.iter().map(AsRef::as_ref).collect::<Vec<&str>>();
        let args = || {
            args.iter()
                .map(|arg| Value::Bytes(Bytes::copy_from_slice(arg.as_ref())))
                .collect::<Vec<Value>>()
        };
        // A node without the script (restarted, failed over, flushed) gets it as EVAL, which
        // also caches it there: loading it on every master instead (fred's
        // `evalsha_with_reload`) would wait for all of them, so one hung master would stall
        // the calls, and the groups queued behind them, of every other master.
        let answer = match self
            .client
            .evalsha::<T, _, _, _>(script.sha1(), keys(), args())
            .await
        {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                self.client
                    .eval::<T, _, _, _>(script.source(), keys(), args())
                    .await
            }
            answer => answer,
        };
        match answer {
            Ok(answer) => Ok(Some(answer)),
            Err(e) if redirect::not_run(&e) => Ok(None),
            Err(e) => Err(map_error(&e)),
        }
    }

    /// Fills the lanes from the client's slot map, when it has one.
    fn look_up_masters(&self) {
        if let Some(routing) = self.client.cached_cluster_state() {
            self.masters.fill(&routing);
        }
    }
}

#[async_trait]
impl ScriptRunner for Cluster {
    fn kind(&self) -> StoreKind {
        StoreKind::Cluster
    }

    fn slot(&self, key: &str) -> u16 {
        keys::key_slot(key)
    }

    /// A one-key check (with a one-key candidate, if any) queues behind the call in flight
    /// to its slot's master; a check of several keys (the sliding log, as the limit or as the
    /// candidate) behind the call to its slot.
    fn lane(&self, key: &str, one_key_each: bool, now_ms: u64) -> Lane {
        let slot = keys::key_slot(key);
        if !one_key_each {
            return Lane::Slot(slot);
        }
        if let Some(lane) = self.masters.lane(slot) {
            return lane;
        }
        // The table does not know the slot (not filled yet): look it up, at most so often.
        self.lanes_moved(now_ms);
        self.masters.lane(slot).unwrap_or(Lane::Slot(slot))
    }

    fn lanes_moved(&self, now_ms: u64) {
        if self.masters.due(now_ms) {
            self.look_up_masters();
        }
    }

    /// A slot's group follows redirections like any script; a master's group does not (its
    /// other keys are not on the node it would be sent to): its checks go again alone.
    async fn eval_group(&self, call: GroupCall<'_>) -> Result<Option<Vec<u8>>, StoreError> {
        let GroupCall {
            script,
            lane,
            keys,
            args,
        } = call;
        match lane {
            Lane::Slot(_) => self.invoke(script, keys, args).await.map(Some),
            Lane::Master(_) => self.invoke_here(script, keys, args).await,
        }
    }

    async fn eval(&self, call: ScriptCall<'_>) -> Result<Vec<i64>, StoreError> {
        self.invoke(call.script, &call.keys, &call.args).await
    }

    async fn eval_text(&self, call: ScriptCall<'_>) -> Result<Vec<String>, StoreError> {
        self.invoke(call.script, &call.keys, &call.args).await
    }

    /// Until the client has the slot map (just started, or reconnecting) a command fails at
    /// once with "missing routing state": wait for it (callers bound the wait).
    async fn routable(&self) -> Result<(), StoreError> {
        if self.client.is_connected() {
            return Ok(());
        }
        self.client
            .wait_for_connect()
            .await
            .map_err(|e| map_error(&e))
    }

    /// Every master must answer: a check may land on any of them. A client still learning
    /// the slot map (just started, or reconnecting) is waited for, within the caller's bound.
    async fn ping(&self) -> Result<(), StoreError> {
        self.routable().await?;
        self.client
            .ping::<()>(None)
            .await
            .map_err(|e| map_error(&e))
    }
}
