//! [`ScriptRunner`], "a Redis I can run a script on": the one seam between sluice's Redis
//! code and its two clients, [`Single`](super::single::Single) (one server) and
//! [`Cluster`](super::cluster::Cluster). A client only sends: the scripts, the key layout,
//! the bounds and the group commit are the [`ScriptStore`](super::script_store::ScriptStore)'s,
//! written once over this trait.

use async_trait::async_trait;

use super::scripts::Script;
use crate::error::StoreError;
use crate::store::StoreKind;

/// Where a group call of queued checks goes (see `group.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// Checks whose keys share one slot: the call declares every key (one server; on a
    /// cluster, a check of several keys).
    Slot(u16),
    /// One-key checks (and their one-key candidates) on the slots of one cluster master (its
    /// index in the client's map): the call declares the first check's key only and reads the
    /// others as keys of that node.
    Master(u16),
}

/// One script call: the script, its KEYS and its ARGV.
pub(crate) struct ScriptCall<'a> {
    pub script: &'a Script,
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

/// One group call on `lane`, its KEYS and ARGV borrowed from the queued checks.
pub(crate) struct GroupCall<'a> {
    pub script: &'a Script,
    pub lane: Lane,
    pub keys: &'a [&'a str],
    pub args: &'a [&'a [u8]],
}

/// A Redis that runs sluice's scripts: one server or a cluster. Each call is EVALSHA of the
/// script's SHA1, and on NOSCRIPT the script loaded or sent as EVAL, once. Every call here is
/// unbounded: the store wraps them in its in-flight bound and timeouts.
#[async_trait]
pub(crate) trait ScriptRunner: Send + Sync + 'static {
    /// Which backend this is.
    fn kind(&self) -> StoreKind;

    /// The slot `key` lives on: the keys of one script call must share it. One server has
    /// one slot for every key.
    fn slot(&self, _key: &str) -> u16 {
        0
    }

    /// The lane at `now_ms` of a check whose first key is `key` (every key of a check, its
    /// candidate's included, shares that key's slot); `one_key_each`: whether each state the
    /// call decides (the check's, and its candidate's if any) is one key. The checks queued
    /// on one lane go in one group call. By default the slot of the key (one server has one
    /// slot).
    fn lane(&self, key: &str, _one_key_each: bool, _now_ms: u64) -> Lane {
        Lane::Slot(self.slot(key))
    }

    /// A group on a [`Lane::Master`] reached a node that did not serve some of its checks
    /// (slots moved): the lanes are looked up again.
    fn lanes_moved(&self, _now_ms: u64) {}

    /// The `group` script on `lane`, its arguments and answer binary (see `group.lua`),
    /// borrowed from the queued checks, which keep them for a second try; `None` when the
    /// node answered with a redirection for a master lane (the script did not run there: its
    /// checks go again each alone).
    async fn eval_group(&self, call: GroupCall<'_>) -> Result<Option<Vec<u8>>, StoreError>;

    /// The script of `call`, answering integers.
    async fn eval(&self, call: ScriptCall<'_>) -> Result<Vec<i64>, StoreError>;

    /// The script of `call`, answering strings.
    async fn eval_text(&self, call: ScriptCall<'_>) -> Result<Vec<String>, StoreError>;

    /// Waits until a command can be routed (a cluster client needs its slot map first).
    async fn routable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether every server a check may land on answers (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;
}
