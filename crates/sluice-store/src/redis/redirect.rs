//! Following MOVED and ASK for the cluster store's scripts, by hand.
//!
//! fred follows a redirection only by spending one of the command's write attempts, and the
//! cluster store allows each command a single attempt so that a command whose connection
//! dropped is never sent twice (it may have run). fred's ASK path also cannot reach a master
//! it holds no connection to (one that owned no slot when the map was read, such as a master
//! added for a reshard), and when its ASKING fails its router task ends for good. So fred is
//! told to follow no redirection: it answers a redirected command with an error (after
//! refreshing its slot map on MOVED), and this module sends the script again itself.
//!
//! That is safe for the same reason a dropped connection is not: a MOVED, ASK or TRYAGAIN
//! answer means the node did not run the script. The script is sent to the slot's owner on a
//! plain connection of the `redis` crate; an ASK answer is followed by `ASKING` and the
//! script on the importing node, in one pipeline so nothing runs between them; a MOVED
//! answer by the script on the new owner; TRYAGAIN (keys of one call split by a migration in
//! progress) by a short pause. The script goes as EVAL, so a node with an empty script cache
//! (a new master) needs no NOSCRIPT round. An error of the connection itself ends the call
//! without a re-send, like everywhere else.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use fred::prelude::{ClusterInterface, Error as FredError};
use fred::types::cluster::ClusterRouting;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::StoreError;

/// Answers followed for one call before it fails: a slot moves at most once at a time
/// (owner → ASK → importing node, a hop more if the map changed meanwhile), plus a few
/// TRYAGAIN pauses. The store's timeout bounds the call in any case.
const MAX_HOPS: usize = 8;

/// Pause before sending again after TRYAGAIN (the migration of the slot's keys goes on).
const TRY_AGAIN_PAUSE: Duration = Duration::from_millis(20);

/// Connections kept, one per node address; past it the cache starts over.
const MAX_NODES: usize = 64;

/// What fred answers a command it was told not to follow: its redirection budget (zero) is
/// spent. TRYAGAIN comes back as a plain server error.
pub(crate) fn not_run(e: &FredError) -> bool {
    let details = e.details();
    details == "Too many redirections." || details.starts_with("TRYAGAIN")
}

/// Plain connections to cluster nodes, for the calls fred answered with a redirection.
pub(crate) struct Redirects {
    credentials: RedisConnectionInfo,
    connect_timeout: Duration,
    /// The cluster's TLS (`[backend.tls]`): redirected calls are verified like every other.
    tls: Option<redis::TlsCertificates>,
    nodes: Mutex<HashMap<String, MultiplexedConnection>>,
}

impl Redirects {
    pub(crate) fn new(
        username: Option<&str>,
        password: Option<&str>,
        connect_timeout: Duration,
        tls: Option<redis::TlsCertificates>,
    ) -> Redirects {
        let mut credentials = RedisConnectionInfo::default();
        if let Some(username) = username {
            credentials = credentials.set_username(username);
        }
        if let Some(password) = password {
            credentials = credentials.set_password(password);
        }
        Redirects {
            credentials,
            connect_timeout,
            tls,
            nodes: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `source` on the node that owns the slot of `keys` now, following the
    /// redirections it answers. `client` tells the owner (its slot map).
    pub(crate) async fn run<T, K, A>(
        &self,
        client: &fred::prelude::Client,
        source: &str,
        keys: &[K],
        args: &[A],
    ) -> Result<T, StoreError>
    where
        T: redis::FromRedisValue,
        K: AsRef<str> + redis::ToRedisArgs,
        A: redis::ToRedisArgs,
    {
        let Some(first) = keys.first() else {
            return Err(StoreError::Backend("a script call without keys".into()));
        };
        let slot = ClusterRouting::hash_key(first.as_ref().as_bytes());
        let mut node = client
            .cached_cluster_state()
            .and_then(|map| {
                map.get_server(slot)
                    .map(|s| format!("{}:{}", s.host, s.port))
            })
            .ok_or_else(|| StoreError::Unavailable(format!("no known owner of slot {slot}")))?;
        let mut asking = false;
        for _ in 0..MAX_HOPS {
            let mut conn = self.connection(&node).await?;
            let mut pipe = redis::pipe();
            if asking {
                pipe.cmd("ASKING").ignore();
            }
            pipe.cmd("EVAL")
                .arg(source)
                .arg(keys.len())
                .arg(keys)
                .arg(args);
            let err = match pipe.query_async::<(T,)>(&mut conn).await {
                Ok((answer,)) => return Ok(answer),
                Err(err) => err,
            };
            match err.kind() {
                redis::ErrorKind::Server(redis::ServerErrorKind::Ask) => {
                    node = target(&err)?;
                    asking = true;
                }
                redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => {
                    node = target(&err)?;
                    asking = false;
                }
                redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain) => {
                    tokio::time::sleep(TRY_AGAIN_PAUSE).await;
                }
                _ => {
                    if err.is_io_error() || err.is_connection_dropped() {
                        self.forget(&node);
                    }
                    return Err(super::single::map_error(&err));
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "slot {slot} still redirected after {MAX_HOPS} hops"
        )))
    }

    /// The cached connection to `node` (`host:port`), or a new one.
    async fn connection(&self, node: &str) -> Result<MultiplexedConnection, StoreError> {
        if let Some(conn) = self.lock().get(node) {
            return Ok(conn.clone());
        }
        let (host, port) = sluice_config::backend::stores::parse_node(node)
            .map_err(|e| StoreError::Backend(format!("bad node address in a redirection: {e}")))?;
        let addr = match self.tls {
            Some(_) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            },
            None => ConnectionAddr::Tcp(host, port),
        };
        let info = addr
            .into_connection_info()
            .map_err(|e| super::single::map_error(&e))?
            .set_redis_settings(self.credentials.clone());
        let client = match &self.tls {
            Some(certs) => redis::Client::build_with_tls(info, certs.clone()),
            None => redis::Client::open(info),
        }
        .map_err(|e| super::single::map_error(&e))?;
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(self.connect_timeout));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| super::single::map_error_at(&e, Some((node, self.tls.is_some()))))?;
        let mut nodes = self.lock();
        if nodes.len() >= MAX_NODES {
            nodes.clear();
        }
        nodes.insert(node.to_owned(), conn.clone());
        Ok(conn)
    }

    fn forget(&self, node: &str) {
        self.lock().remove(node);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, MultiplexedConnection>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `host:port` of a MOVED or ASK answer (`<slot> <host:port>`), also when it came back
/// inside a pipeline's error.
fn target(err: &redis::RedisError) -> Result<String, StoreError> {
    let from_details = |details: Option<&str>| {
        details
            .and_then(|d| d.split_ascii_whitespace().nth(1))
            .map(str::to_owned)
    };
    err.redirect_node()
        .map(|(addr, _)| addr.to_owned())
        .or_else(|| {
            err.clone()
                .into_server_errors()
                .and_then(|all| all.first().and_then(|(_, e)| from_details(e.details())))
        })
        .ok_or_else(|| StoreError::Backend(format!("a redirection without a node: {err}")))
}
