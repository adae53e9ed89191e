//! The traits the backends implement: [`Store`] for the counters of every check, and
//! [`OverrideStore`] for the run-time settings the admin API writes (limit overrides and
//! candidate limits).

use async_trait::async_trait;
use sluice_core::{Counting, Decision, Params, candidate_cost, candidate_decision};

use crate::StoreError;
use crate::settings::{
    CandidateOverride, LimitOverride, Setting, SettingKind, Settings, StoredSetting, typed,
};

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

/// The name a candidate limit's state of `policy` is kept under by the stores that keep it as
/// a policy of its own (memory): `#` never appears in a policy name, so no policy shares it.
/// (The Redis stores keep it under the limit's own hash tag instead, see [`keys`](crate::keys).)
pub fn candidate_policy(policy: &str) -> String {
    let mut name = String::with_capacity(policy.len() + 10);
    name.push_str(policy);
    name.push_str("#candidate");
    name
}

/// The check a candidate is judged with, where it is kept as a policy of its own (the default
/// methods, memory): `check`'s key and cost (see [`candidate_cost`]) under `candidate`, on the
/// state named `policy` ([`candidate_policy`]).
pub(crate) fn candidate_check<'a>(
    check: &Check<'a>,
    policy: &'a str,
    candidate: &Params,
) -> Check<'a> {
    Check {
        policy,
        params: *candidate,
        cost: candidate_cost(check.cost, candidate),
        key: check.key,
    }
}

/// Whether `decision` of `check` makes its all-or-nothing batch consume nothing: a denial,
/// unless the check counts every hit ([`Counting::EveryHit`]), whose hits count whatever the
/// others answer.
pub(crate) fn cancels_batch((check, decision): (&Check<'_>, &Decision)) -> bool {
    !decision.allowed && check.params.counting == Counting::Admitted
}

/// The backends sluice can keep state in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// Process memory: one daemon, never waits.
    Memory,
    /// One Redis server.
    Redis,
    /// A Redis Cluster: the keys of one call must share a slot.
    Cluster,
}

impl StoreKind {
    /// The `backend` label of the metrics: `memory`, `redis` or `cluster`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
            StoreKind::Cluster => "cluster",
        }
    }

    /// Whether calls go over the network to Redis (and so are bounded by a timeout).
    pub fn is_redis(self) -> bool {
        self != StoreKind::Memory
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where rate-limit state lives. Object safe: the daemon holds an `Arc<dyn Store>`.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Which backend this is (its metric label, and what the daemon may expect of it).
    fn kind(&self) -> StoreKind;

    /// Decides one check at `now_ms` (unix ms), consuming when allowed.
    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError>;

    /// Decides `check` at once when this store never waits (memory), else `None` and the
    /// caller awaits [`Store::check`]. Spares the hot path of such a store the boxed future
    /// and the timeout of an async call.
    fn check_now(&self, _check: &Check<'_>, _now_ms: u64) -> Option<Result<Decision, StoreError>> {
        None
    }

    /// Whether this store bounds each of its check calls by its own timeout (the Redis stores
    /// do, in-flight bound and queueing included), so a caller adds no second timer per check.
    fn bounds_its_calls(&self) -> bool {
        false
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

    /// Decides `check` as [`Store::check`] does and, beside it, `candidate`: the same policy
    /// and key under the candidate limit's parameters, on a state of its own, consumed when
    /// the candidate alone would allow, whatever `check`'s answer. Answers `check`'s decision
    /// (exactly what [`Store::check`] would have answered: the candidate never changes it) and
    /// the candidate's. A cost beyond the candidate's capacity is no error: the candidate
    /// would reject it (allowed false, its state unchanged, no `retry_after`).
    ///
    /// The default decides the candidate by a second call, on the state of
    /// [`candidate_policy`]`(policy)`; the memory store decides both under one lock, the
    /// Redis stores in one script call (one round trip per check or group, with or without a
    /// candidate), the candidate's keys under the limit's hash tag. The replicated store
    /// decides the candidate on this region's backend alone (not replicated).
    async fn check_with_candidate(
        &self,
        check: &Check<'_>,
        candidate: &Params,
        now_ms: u64,
    ) -> Result<(Decision, Decision), StoreError> {
        let decision = self.check(check, now_ms).await?;
        let policy = candidate_policy(check.policy);
        let judged = candidate_check(check, &policy, candidate);
        let answered = self.check(&judged, now_ms).await?;
        Ok((
            decision,
            candidate_decision(check.cost, candidate, answered),
        ))
    }

    /// [`Store::check_with_candidate`] at once, for the stores [`Store::check_now`] serves;
    /// `None` for the others.
    fn check_with_candidate_now(
        &self,
        check: &Check<'_>,
        candidate: &Params,
        now_ms: u64,
    ) -> Option<Result<(Decision, Decision), StoreError>> {
        let decision = match self.check_now(check, now_ms)? {
            Ok(decision) => decision,
            Err(e) => return Some(Err(e)),
        };
        let policy = candidate_policy(check.policy);
        let judged = candidate_check(check, &policy, candidate);
        Some(self.check_now(&judged, now_ms)?.map(|answered| {
            (
                decision,
                candidate_decision(check.cost, candidate, answered),
            )
        }))
    }

    /// [`Store::check_all`] with candidates: `candidates[i]` (when set) is judged beside
    /// `checks[i]` on its own, consumed when it alone would allow, whatever the batch's
    /// answer (a denied batch consumes nothing of its limits, but its candidates judge each
    /// check as if alone). The checks' decisions are exactly what [`Store::check_all`] would
    /// answer. The default makes one more call per candidate; the Redis stores carry the
    /// candidates in the batch's own call (on a cluster, in the call of their check's slot).
    async fn check_all_with_candidates(
        &self,
        checks: &[Check<'_>],
        candidates: &[Option<Params>],
        now_ms: u64,
    ) -> Result<Vec<(Decision, Option<Decision>)>, StoreError> {
        let decisions = self.check_all(checks, now_ms).await?;
        let mut out = Vec::with_capacity(decisions.len());
        for ((decision, check), candidate) in decisions
            .into_iter()
            .zip(checks)
            .zip(candidates.iter().copied().chain(std::iter::repeat(None)))
        {
            let judged = match candidate {
                Some(params) => {
                    let policy = candidate_policy(check.policy);
                    let judged = candidate_check(check, &policy, &params);
                    let answered = self.check(&judged, now_ms).await?;
                    Some(candidate_decision(check.cost, &params, answered))
                }
                None => None,
            };
            out.push((decision, judged));
        }
        Ok(out)
    }

    /// Whether the backend answers (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Keys currently tracked, where the backend can tell cheaply (memory only).
    fn tracked_keys(&self) -> Option<u64> {
        None
    }

    /// Sets who hears how many checks each script call to Redis carried (group commit); the
    /// stores that make no such calls ignore it.
    fn set_batch_observer(&self, _observer: std::sync::Arc<dyn BatchObserver>) {}

    /// Keys forgotten to stay within a bound before their state was fresh again, by policy,
    /// since the store started (memory only: `backend.max_keys`).
    fn evicted_keys(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Periodic upkeep at `now_ms`, such as forgetting expired keys. Called by the daemon.
    fn housekeep(&self, _now_ms: u64) {}

    /// Gives back `check.cost` units a fixed_window check consumed in the window `token`
    /// (its index), if the key is still in that window: a daemon's unspent lease returned.
    /// Stores that lease nothing ignore it.
    async fn give_back(
        &self,
        _check: &Check<'_>,
        _token: u64,
        _now_ms: u64,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

/// What a Redis store reports about its script calls, for the daemon's metrics (the store
/// holds no observability code of its own).
pub trait BatchObserver: Send + Sync + std::fmt::Debug {
    /// A script call to a `backend` carried `checks` single checks (1: a check alone; more:
    /// checks that queued behind a call in flight and went as one group).
    fn batch(&self, backend: StoreKind, checks: usize);

    /// A group call to a cluster master did not run `checks` of its checks (their slots had
    /// moved, or were moving): they went again each alone, following the redirection.
    fn sent_again(&self, _backend: StoreKind, _checks: usize) {}
}

/// Where the run-time settings of (policy, tier)s live — limit overrides and candidate limits
/// — apart from the counters: every daemon sharing a backend reads the same settings, so they
/// survive restarts and reach every daemon. Object safe: the daemon holds an
/// `Arc<dyn OverrideStore>`.
///
/// A backend implements the four record methods; the typed methods are written once over
/// them. One version covers both kinds: every change of either bumps it, so a daemon polls
/// one number to learn that anything changed.
#[async_trait]
pub trait OverrideStore: Send + Sync + std::fmt::Debug + 'static {
    /// Stores `setting`, replacing the one of its kind, policy and tier, and bumps the version.
    async fn put_setting(&self, setting: &StoredSetting) -> Result<(), StoreError>;

    /// Removes the setting of `kind` of (policy, tier); whether there was one. Bumps the
    /// version.
    async fn delete_setting(
        &self,
        kind: SettingKind,
        policy: &str,
        tier: &str,
    ) -> Result<bool, StoreError>;

    /// Every stored setting of `kind`, in no particular order.
    async fn list_settings(&self, kind: SettingKind) -> Result<Vec<StoredSetting>, StoreError>;

    /// A number every change increases: cheap to poll, so a daemon reloads the settings only
    /// when another one changed them.
    async fn version(&self) -> Result<u64, StoreError>;

    /// Stores `change`, replacing the override of its policy and tier, and bumps the version.
    async fn put(&self, change: &LimitOverride) -> Result<(), StoreError> {
        self.put_setting(&change.stored()).await
    }

    /// Removes the override of (policy, tier); whether there was one. Bumps the version.
    async fn delete(&self, policy: &str, tier: &str) -> Result<bool, StoreError> {
        self.delete_setting(SettingKind::Limit, policy, tier).await
    }

    /// The version the settings are at and every stored override, sorted.
    async fn list(&self) -> Result<(u64, Vec<LimitOverride>), StoreError> {
        let version = self.version().await?;
        let stored = self.list_settings(SettingKind::Limit).await?;
        Ok((version, typed(&stored)))
    }

    /// Stores `candidate`, replacing the run-time candidate of its policy and tier, and bumps
    /// the version.
    async fn put_candidate(&self, candidate: &CandidateOverride) -> Result<(), StoreError> {
        self.put_setting(&candidate.stored()).await
    }

    /// Removes the run-time candidate of (policy, tier); whether there was one. Bumps the
    /// version.
    async fn delete_candidate(&self, policy: &str, tier: &str) -> Result<bool, StoreError> {
        self.delete_setting(SettingKind::Candidate, policy, tier)
            .await
    }

    /// Every setting of both kinds and the version they were read at. The version is read
    /// first: a change made meanwhile leaves it behind, so the next poll reads again.
    async fn settings(&self) -> Result<Settings, StoreError> {
        let version = self.version().await?;
        let limits = self.list_settings(SettingKind::Limit).await?;
        let candidates = self.list_settings(SettingKind::Candidate).await?;
        Ok(Settings {
            version,
            limits: typed(&limits),
            candidates: typed(&candidates),
        })
    }
}
