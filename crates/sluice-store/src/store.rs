//! The one trait every backend implements.

use async_trait::async_trait;
use sluice_core::{Decision, Params};

use crate::StoreError;

/// One check handed to a store: `cost` for `key` under `policy`, decided with `params`.
///
/// The state of a limit is identified by `(policy, key)`: a caller's tier changes its
/// parameters, not its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check<'a> {
    pub policy: &'a str,
    pub key: &'a str,
    pub params: Params,
    pub cost: u64,
}

/// A limit of one (policy, tier) changed at run time (the admin API). Stored in the backend, so
/// it survives daemon restarts and every daemon sharing the backend applies it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LimitOverride {
    pub policy: String,
    pub tier: String,
    pub limit: u64,
    /// `None`: the tier's burst defaults as in the config file.
    pub burst: Option<u64>,
}

/// Where rate-limit state lives. Object safe: the daemon holds an `Arc<dyn Store>`.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// The backend's name as metrics label it: `memory`, `redis` or `cluster`.
    fn kind(&self) -> &'static str;

    /// Decides one check at `now_ms` (unix ms), consuming when allowed.
    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError>;

    /// Decides `check` at once when this store never waits (memory), else `None` and the
    /// caller awaits [`Store::check`]. Spares the hot path of such a store the boxed future
    /// and the timeout of an async call.
    fn check_now(&self, _check: &Check<'_>, _now_ms: u64) -> Option<Result<Decision, StoreError>> {
        None
    }

    /// Decides every check; consumes for all of them only if every one is allowed.
    ///
    /// When any is denied nothing is consumed: each result still says whether that check
    /// alone would pass, and `remaining` describes the state left unchanged.
    async fn check_all(
        &self,
        checks: &[Check<'_>],
        now_ms: u64,
    ) -> Result<Vec<Decision>, StoreError>;

    /// Stores `change`, replacing the override of its policy and tier, and bumps the version.
    /// Every backend of sluice keeps overrides; the default is for stores that do not.
    async fn put_override(&self, _change: &LimitOverride) -> Result<(), StoreError> {
        Err(StoreError::Unavailable(format!(
            "the {} store keeps no overrides",
            self.kind()
        )))
    }

    /// Removes the override of (policy, tier); whether there was one. Bumps the version.
    async fn delete_override(&self, _policy: &str, _tier: &str) -> Result<bool, StoreError> {
        Err(StoreError::Unavailable(format!(
            "the {} store keeps no overrides",
            self.kind()
        )))
    }

    /// The version the overrides are at and every stored override, sorted.
    async fn overrides(&self) -> Result<(u64, Vec<LimitOverride>), StoreError> {
        Ok((0, Vec::new()))
    }

    /// A number every change increases: cheap to poll, so a daemon reloads the overrides
    /// only when another one changed them.
    async fn overrides_version(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Whether the backend answers (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Keys currently tracked, where the backend can tell cheaply (memory only).
    fn tracked_keys(&self) -> Option<u64> {
        None
    }

    /// Keys forgotten to stay within a bound before their state was fresh again, by policy,
    /// since the store started (memory only: `backend.max_keys`).
    fn evicted_keys(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Periodic upkeep at `now_ms`, such as forgetting expired keys. Called by the daemon.
    fn housekeep(&self, _now_ms: u64) {}
}
