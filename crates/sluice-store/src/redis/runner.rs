//! [`ScriptRunner`], "a Redis I can run a script on": the one seam between sluice's Redis
//! code and the two clients (one server, a cluster). Everything that talks to Redis is
//! written once over it.

use async_trait::async_trait;

use super::bounds::Bounds;
use super::keys::Layout;
use super::scripts::ScriptId;
use crate::{StoreError, StoreKind};

/// Where a group call of queued checks goes (see `group.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// Checks whose keys share one slot: the call declares every key (one server; on a
    /// cluster, a check of several keys).
    Slot(u16),
    /// One-key checks on the slots of one cluster master (its index in the client's map): the
    /// call declares the first check's key only and reads the others as keys of that node.
    Master(u16),
}

/// A Redis that runs sluice's scripts: one server or a cluster. The required calls are the
/// client's EVALSHA (on NOSCRIPT, loading the script or sending it as EVAL, once); the
/// bounded calls every caller uses are built on them here.
#[async_trait]
pub(crate) trait ScriptRunner: Send + Sync + std::fmt::Debug + 'static {
    /// Which backend this is.
    fn kind(&self) -> StoreKind;

    /// The key prefix and TTL grace of this store.
    fn layout(&self) -> &Layout;

    /// The in-flight bound and the timeouts of this store.
    fn bounds(&self) -> &Bounds;

    /// The slot `key` lives on: the keys of one script call must share it. One server has
    /// one slot for every key.
    fn slot(&self, _key: &str) -> u16 {
        0
    }

    /// The lane of a check on `keys` at `now_ms`: the checks queued on one lane go in one
    /// group call. By default the slot of the keys (one server has one slot).
    fn lane(&self, keys: &[String], _now_ms: u64) -> Lane {
        Lane::Slot(keys.first().map_or(0, |key| self.slot(key)))
    }

    /// A group on a [`Lane::Master`] reached a node that did not serve some of its checks
    /// (slots moved): the lanes are looked up again.
    fn lanes_moved(&self, _now_ms: u64) {}

    /// EVALSHA of the `group` script on `lane`, its arguments and answer binary (see
    /// `group.lua`), borrowed from the queued checks, which keep them for a second try; `None` when the node answered with a redirection for a master lane (the
    /// script did not run there: its checks go again each alone). Unbounded, like
    /// [`eval`](ScriptRunner::eval).
    async fn eval_group(
        &self,
        lane: Lane,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Option<Vec<u8>>, StoreError>;

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
