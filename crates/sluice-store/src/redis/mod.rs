//! Everything sluice keeps in Redis, over one narrow trait: [`ScriptRunner`], "a Redis I can
//! run a script on". The two clients implement it once each ([`single`]: one server through
//! the `redis` crate; [`cluster`]: a Redis Cluster through `fred`); everything else is
//! written once over it:
//! - [`checks`]: a check or an all-or-nothing batch as EVALSHA of the [`scripts`], and the
//!   answer as a decision; [`group`]: checks queued behind a call in flight go as one call;
//! - [`overrides`]: the run-time limit overrides;
//! - [`replicated`]: the window counters of `scope = "replicated"`, on this region's Redis
//!   and the peers';
//! - [`keys`]: the key layout; [`bounds`]: the in-flight bound and the timeouts.
//!
//! [`RedisStore`] and [`ClusterStore`] are a client each, made a [`Store`] and an
//! [`OverrideStore`] by [`script_store!`].

pub(crate) mod bounds;
pub(crate) mod checks;
pub(crate) mod cluster;
pub(crate) mod group;
pub mod keys;
pub(crate) mod overrides;
mod redirect;
pub mod replicated;
pub(crate) mod scripts;
pub(crate) mod single;

use async_trait::async_trait;

use crate::{StoreError, StoreKind};
use bounds::Bounds;
use group::Groups;
use keys::Layout;
use scripts::ScriptId;

pub use cluster::ClusterStore;
pub use single::RedisStore;

/// A Redis that runs sluice's scripts: one server or a cluster. The two required calls are
/// the client's EVALSHA (loading the script on NOSCRIPT and retrying once); the bounded calls
/// every caller uses are built on them here.
#[async_trait]
pub(crate) trait ScriptRunner: Send + Sync + std::fmt::Debug + 'static {
    /// Which backend this is.
    fn kind(&self) -> StoreKind;

    /// The key prefix and TTL grace of this store.
    fn layout(&self) -> &Layout;

    /// The in-flight bound and the timeouts of this store.
    fn bounds(&self) -> &Bounds;

    /// The checks queued behind calls in flight (group commit).
    fn groups(&self) -> &Groups;

    /// The slot `key` lives on: the keys of one script call must share it. One server has
    /// one slot for every key.
    fn slot(&self, _key: &str) -> u16 {
        0
    }

    /// EVALSHA of `script`, answering integers. Unbounded: callers go through [`run`].
    ///
    /// [`run`]: ScriptRunner::run
    async fn eval(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError>;

    /// EVALSHA of `script`, answering strings. Unbounded: callers go through [`admin`].
    ///
    /// [`admin`]: ScriptRunner::admin
    async fn eval_text(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError>;

    /// Waits until a command can be routed (a cluster client needs its slot map first).
    async fn routable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether every server a check may land on answers (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// A check-path script call, within the in-flight bound and the timeout.
    async fn run(
        &self,
        script: ScriptId,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        self.bounds()
            .call(async {
                self.routable().await?;
                self.eval(script, keys, args).await
            })
            .await
    }

    /// An admin script call on one key (overrides), bounded by time only so a saturated check
    /// path cannot lock an operator out.
    async fn admin(
        &self,
        script: ScriptId,
        key: String,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        self.bounds()
            .admin(async {
                self.routable().await?;
                self.eval_text(script, vec![key], args).await
            })
            .await
    }
}

/// Makes a store holding its client in `self.client: Arc<impl ScriptRunner>` a [`Store`]
/// and an [`OverrideStore`], so both Redis stores share one implementation of each.
///
/// [`Store`]: crate::Store
/// [`OverrideStore`]: crate::OverrideStore
macro_rules! script_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::Store for $store {
            fn kind(&self) -> $crate::StoreKind {
                $crate::redis::ScriptRunner::kind(&*self.client)
            }

            async fn check(
                &self,
                check: &$crate::Check<'_>,
                now_ms: u64,
            ) -> Result<sluice_core::Decision, $crate::StoreError> {
                $crate::redis::checks::check(&self.client, check, now_ms).await
            }

            async fn check_all(
                &self,
                checks: &[$crate::Check<'_>],
                now_ms: u64,
            ) -> Result<Vec<sluice_core::Decision>, $crate::StoreError> {
                $crate::redis::checks::check_all(&self.client, checks, now_ms).await
            }

            async fn ping(&self) -> Result<(), $crate::StoreError> {
                $crate::redis::ScriptRunner::ping(&*self.client).await
            }

            fn set_batch_observer(&self, observer: std::sync::Arc<dyn $crate::BatchObserver>) {
                $crate::redis::ScriptRunner::groups(&*self.client).set_observer(observer);
            }
        }

        #[async_trait::async_trait]
        impl $crate::OverrideStore for $store {
            async fn put(&self, change: &$crate::LimitOverride) -> Result<(), $crate::StoreError> {
                $crate::redis::overrides::put(&*self.client, change).await
            }

            async fn delete(&self, policy: &str, tier: &str) -> Result<bool, $crate::StoreError> {
                $crate::redis::overrides::delete(&*self.client, policy, tier).await
            }

            async fn list(&self) -> Result<(u64, Vec<$crate::LimitOverride>), $crate::StoreError> {
                $crate::redis::overrides::list(&*self.client).await
            }

            async fn version(&self) -> Result<u64, $crate::StoreError> {
                $crate::redis::overrides::version(&*self.client).await
            }
        }
    };
}
pub(crate) use script_store;
