//! [`ScriptStore`]: sluice's state in Redis, written once over a client (one server or a
//! cluster, [`ScriptRunner`]). It owns what both clients share: the scripts, the key
//! layout, the in-flight bound and timeouts, and the lanes of group commit; a client only
//! sends. It is made a [`Store`](crate::Store) in `checks.rs` and an
//! [`OverrideStore`](crate::OverrideStore) in `overrides.rs`, where those calls are.

use std::sync::Arc;
use std::time::Duration;

use super::bounds::Bounds;
use super::keys::Layout;
use super::lanes::Groups;
use super::runner::{ScriptCall, ScriptRunner};
use super::scripts::{Script, ScriptId, Scripts};
use crate::error::StoreError;
use crate::store::StoreKind;

/// Rate-limit state in Redis through the client `C`: [`RedisStore`](crate::RedisStore) (one
/// server) or [`ClusterStore`](crate::ClusterStore) (a cluster). Cloning it is cheap: clones
/// share the client, the bounds and the queues.
pub struct ScriptStore<C: ?Sized> {
    parts: Arc<Parts<C>>,
}

/// What a store and its clones share. The client comes last so that `Parts<Single>` and
/// `Parts<Cluster>` coerce to `Parts<dyn ScriptRunner>` (see [`ScriptStore::erased`]).
struct Parts<C: ?Sized> {
    scripts: Scripts,
    layout: Layout,
    bounds: Bounds,
    groups: Groups,
    client: C,
}

impl<C: ?Sized> Clone for ScriptStore<C> {
    fn clone(&self) -> Self {
        ScriptStore {
            parts: Arc::clone(&self.parts),
        }
    }
}

impl<C: ScriptRunner + ?Sized> std::fmt::Debug for ScriptStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Neither URL nor credentials: a Debug line may reach a log.
        let name = match self.client().kind() {
            StoreKind::Cluster => "ClusterStore",
            _ => "RedisStore",
        };
        f.debug_struct(name)
            .field("prefix", &self.layout().prefix)
            .field("timeout", &self.bounds().timeout())
            .finish_non_exhaustive()
    }
}

// The methods are the crate's own; the bound names the crate's clients, which is all the
// public type needs to say (`RedisStore` and `ClusterStore` are the two it is used with).
#[allow(private_bounds)]
impl<C: ScriptRunner> ScriptStore<C> {
    /// A store on `client`, its keys under `prefix`, at most `max_in_flight` check calls at
    /// once, each within `timeout`; keys kept `ttl_grace` past the store's expiry grace.
    pub(crate) fn with_client(
        client: C,
        prefix: String,
        timeout: Duration,
        ttl_grace: Duration,
        max_in_flight: usize,
    ) -> Self {
        ScriptStore {
            parts: Arc::new(Parts {
                scripts: Scripts::new(),
                layout: Layout::new(prefix, timeout, ttl_grace),
                bounds: Bounds::new(timeout, max_in_flight),
                groups: Groups::default(),
                client,
            }),
        }
    }

    /// The same store over a client of either kind, for code that holds both kinds in one
    /// place (the replicated store's local backend and peers).
    pub(crate) fn erased(self) -> ScriptStore<dyn ScriptRunner> {
        let parts: Arc<Parts<dyn ScriptRunner>> = self.parts;
        ScriptStore { parts }
    }
}

#[allow(private_bounds)]
impl<C: ScriptRunner + ?Sized> ScriptStore<C> {
    /// The client that sends the calls.
    pub(crate) fn client(&self) -> &C {
        &self.parts.client
    }

    /// The key prefix and TTL grace.
    pub(crate) fn layout(&self) -> &Layout {
        &self.parts.layout
    }

    /// The in-flight bound and the timeouts.
    pub(crate) fn bounds(&self) -> &Bounds {
        &self.parts.bounds
    }

    /// The checks queued behind calls in flight.
    pub(crate) fn groups(&self) -> &Groups {
        &self.parts.groups
    }

    /// The script `id` names.
    pub(crate) fn script(&self, id: ScriptId) -> &Script {
        self.parts.scripts.get(id)
    }

    /// `id` answering integers, unbounded: for a caller within the bounds already.
    pub(crate) async fn eval(
        &self,
        id: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        let script = self.script(id);
        self.client().eval(ScriptCall { script, keys, args }).await
    }

    /// A check-path script call, within the in-flight bound and the timeout.
    pub(crate) async fn run(
        &self,
        id: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        self.bounds()
            .call(async {
                self.client().routable().await?;
                self.eval(id, keys, args).await
            })
            .await
    }

    /// An admin script call on one key (overrides), bounded by time only so a saturated check
    /// path cannot lock an operator out.
    pub(crate) async fn admin(
        &self,
        id: ScriptId,
        key: String,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        self.bounds()
            .admin(async {
                self.client().routable().await?;
                let (script, keys) = (self.script(id), vec![key]);
                self.client()
                    .eval_text(ScriptCall { script, keys, args })
                    .await
            })
            .await
    }
}
