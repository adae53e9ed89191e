//! The traits the backends implement: [`Store`] for the counters of every check, and
//! [`OverrideStore`] for the run-time settings the admin API writes (limit overrides and
//! candidate limits).

use async_trait::async_trait;
use sluice_core::{Counting, Decision, Mode, Params, candidate_cost};

use crate::error::StoreError;
use crate::settings::{
    CandidateOverride, LimitOverride, Setting, SettingKey, SettingKind, Settings, StoredSetting,
    typed,
};

/// One check handed to a store: `cost` for `key` under `policy`, decided with `params`, in
/// `mode` (consume, ask, charge or refund: see [`Mode`]; a batch holding a charge still
/// commits all or nothing, so a charge goes alone), and the candidate limit judged beside it,
/// if any.
///
/// The state of a limit is identified by `(policy, key)`: a caller's tier changes its
/// parameters, not its counters. Everything a store needs to know about a check is data here
/// (a new kind of check is a new field, never a new [`Store`] method); build one with
/// [`Check::new`] so a new field keeps its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check<'a> {
    pub policy: &'a str,
    pub key: &'a str,
    pub params: Params,
    pub cost: u64,
    pub mode: Mode,
    /// A candidate limit judged beside the check: the same policy and key under these
    /// parameters, on a state of its own, consumed when the candidate alone would allow,
    /// whatever the check's answer (which it never changes). A cost beyond the candidate's
    /// capacity is no error: the candidate would reject it (allowed false, its state
    /// unchanged, no `retry_after`). The replicated store judges it on this region's backend
    /// alone (not replicated).
    pub candidate: Option<Params>,
    /// Which of its policy's stacked limits (`limits = [...]`) this check is: 0 for the
    /// first (or only) one, whose state is the policy's own; `i` ≥ 1 keeps its state apart
    /// (Redis keys `{prefix}:{<policy>:<key>}:s<i>:<suffix>`, same hash tag, so a policy's
    /// limits go in one script call). A policy's limits are decided together, all-or-nothing.
    pub stack: u8,
}

impl<'a> Check<'a> {
    /// `cost` for `key` under `policy` with `params`: an ordinary check (consumes `cost` when
    /// it fits), no candidate.
    pub fn new(policy: &'a str, key: &'a str, params: Params, cost: u64) -> Self {
        Check {
            policy,
            key,
            params,
            cost,
            mode: Mode::Consume,
            candidate: None,
            stack: 0,
        }
    }

    /// This check in `mode` (see [`Mode`]).
    pub fn in_mode(self, mode: Mode) -> Self {
        Check { mode, ..self }
    }

    /// This check with `candidate` judged beside it.
    pub fn judged_by(self, candidate: Params) -> Self {
        Check {
            candidate: Some(candidate),
            ..self
        }
    }
}

/// What a store answers for one check: its decision, and the candidate's when the check
/// carried one ([`Check::candidate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub decision: Decision,
    pub candidate: Option<Decision>,
}

impl Decided {
    /// `decision`, and `candidate`'s when judged.
    pub fn of(decision: Decision, candidate: Option<Decision>) -> Self {
        Decided {
            decision,
            candidate,
        }
    }
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

/// The mode a candidate judges a check in: the check's own, except a charge or refund on an
/// algorithm that carries no debt, which it judges as an ask.
pub(crate) fn candidate_mode(mode: Mode, candidate: &Params) -> Mode {
    if mode.adjusts() && !candidate.algorithm.carries_debt() {
        Mode::Ask
    } else {
        mode
    }
}

/// The check a candidate is judged with, where it is kept as a policy of its own (memory):
/// `check`'s key and cost (see [`candidate_cost`]) under `candidate`, in its mode (see
/// [`candidate_mode`]), on the state named `policy` ([`candidate_policy`]).
pub(crate) fn candidate_check<'a>(
    check: &Check<'a>,
    policy: &'a str,
    candidate: &Params,
) -> Check<'a> {
    Check::new(
        policy,
        check.key,
        *candidate,
        candidate_cost(check.cost, candidate),
    )
    .in_mode(candidate_mode(check.mode, candidate))
}

/// Whether `decision` of `check` makes its all-or-nothing batch consume nothing: a denial,
/// unless the check counts every hit ([`Counting::EveryHit`]), whose hits count whatever the
/// others answer, or is a charge or refund, which always applies.
pub(crate) fn cancels_batch((check, decision): (&Check<'_>, &Decision)) -> bool {
    // A charge or refund is never refused: a key it leaves in debt must not undo it.
    !decision.allowed && check.params.counting == Counting::Admitted && !check.mode.adjusts()
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
///
/// Narrow on purpose: one way to decide checks ([`Store::decide`], and [`Store::decide_now`]
/// for a store that never waits), and no method with a default body, so a store that wraps
/// another (the daemon's health watch, the replicated store) says what it does with each
/// call and cannot silently take a default. What only some stores have is reached through
/// [`Store::capabilities`]; the convenience forms tests and tools call (one check, a batch,
/// a check with a candidate) are written once over `decide` in [`StoreExt`].
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Which backend this is (its metric label, and what the daemon may expect of it).
    fn kind(&self) -> StoreKind;

    /// What this store offers besides checks: whether it bounds its own calls, its key table
    /// (memory), its group commit (Redis).
    fn capabilities(&self) -> Capabilities<'_>;

    /// Decides `checks` at `now_ms` (unix ms), each with its candidate if it carries one, and
    /// answers one [`Decided`] per check, in order.
    ///
    /// One check is decided alone, consumed when allowed. Several are all-or-nothing:
    /// consumed for all only if every one is allowed; when any is denied nothing of their
    /// limits is consumed, each result still says whether that check alone would pass, and
    /// `remaining` and `reset` describe the state left unchanged (`delay_ms` 0). Candidates
    /// are judged each on its own whatever the batch's answer. The Redis stores send a check
    /// and its candidate in one script call (a lone check may share a group call with others
    /// queued behind a call in flight: group commit), a batch in one call per slot.
    async fn decide(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError>;

    /// Decides one check at once when this store never waits (memory), else `None` and the
    /// caller awaits [`Store::decide`]. Spares the hot path of such a store the boxed future,
    /// the answer's vector and the timeout of an async call.
    fn decide_now(&self, check: &Check<'_>, now_ms: u64) -> Option<Result<Decided, StoreError>>;

    /// Whether the backend answers (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Gives back what a daemon's lease took and did not spend ([`Unspent`]), if the key is
    /// still in the window it was taken in. A store that leases nothing answers `Ok` and does
    /// nothing.
    async fn give_back(&self, unspent: &Unspent<'_>, now_ms: u64) -> Result<(), StoreError>;
}

/// Units a daemon's lease took and did not spend: `check.cost` units of `check`'s
/// fixed_window state, consumed in the window `token` (its index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unspent<'a> {
    pub check: Check<'a>,
    pub token: u64,
}

/// What a store offers besides checks ([`Store::capabilities`]): plain data and borrowed
/// capability traits, so a wrapper states what it passes on.
#[derive(Clone, Copy, Default)]
pub struct Capabilities<'a> {
    /// The store bounds each of its calls by its own timeout (the Redis stores do, in-flight
    /// bound and queueing included), so a caller adds no second timer per check.
    pub bounds_its_calls: bool,
    /// The store's own table of keys (memory): counted, evicted and housekept.
    pub keys: Option<&'a dyn KeyTable>,
    /// The store groups checks into script calls (Redis): who hears of each call.
    pub groups: Option<&'a dyn GroupCommit>,
    /// The store's client reads TLS files (a Redis backend with `[backend.tls]`): read them
    /// again on SIGHUP.
    pub tls: Option<&'a dyn TlsFiles>,
}

impl std::fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("bounds_its_calls", &self.bounds_its_calls)
            .field("keys", &self.keys.is_some())
            .field("groups", &self.groups.is_some())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// A store whose client reads TLS files (a client certificate, a CA bundle).
pub trait TlsFiles {
    /// Reads the files again (a rotated client certificate, a new CA bundle): the next
    /// connections use them, calls in flight finish on the old ones.
    fn reload_tls(&self);
}

/// A store that keeps its keys itself (memory): how many, which were forgotten early, and
/// the periodic upkeep that forgets the expired ones.
pub trait KeyTable: Send + Sync {
    /// Keys currently tracked.
    fn tracked(&self) -> u64;

    /// Keys forgotten to stay within a bound before their state was fresh again, by policy,
    /// since the store started (`backend.max_keys`).
    fn evicted(&self) -> Vec<(String, u64)>;

    /// Periodic upkeep at `now_ms`: forgets expired keys. Called by the daemon.
    fn housekeep(&self, now_ms: u64);
}

/// A store that sends checks to Redis as script calls, grouping those that queue behind a
/// call in flight (group commit).
pub trait GroupCommit: Send + Sync {
    /// Sets who hears how many checks each script call carried.
    fn set_observer(&self, observer: std::sync::Arc<dyn BatchObserver>);
}

/// The convenience forms of [`Store::decide`], written once for every store (a store cannot
/// override them, so every path of a wrapper goes through its `decide`).
#[async_trait]
pub trait StoreExt: Store {
    /// Decides one check (its candidate, if it carries one, is judged and dropped).
    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        Ok(self.decide_one(check, now_ms).await?.decision)
    }

    /// Decides one check and answers its decision and its candidate's.
    async fn decide_one(&self, check: &Check<'_>, now_ms: u64) -> Result<Decided, StoreError> {
        if let Some(decided) = self.decide_now(check, now_ms) {
            return decided;
        }
        self.decide(std::slice::from_ref(check), now_ms)
            .await?
            .pop()
            .ok_or_else(|| StoreError::Backend("the store answered no decision".into()))
    }

    /// Decides `check` with `candidate` judged beside it: its decision and the candidate's.
    async fn check_with_candidate(
        &self,
        check: &Check<'_>,
        candidate: &Params,
        now_ms: u64,
    ) -> Result<(Decision, Decision), StoreError> {
        let decided = self
            .decide_one(&check.judged_by(*candidate), now_ms)
            .await?;
        match decided.candidate {
            Some(judged) => Ok((decided.decision, judged)),
            None => Err(StoreError::Backend("a candidate was not decided".into())),
        }
    }

    /// Decides `checks` all-or-nothing (see [`Store::decide`]); their decisions alone.
    async fn check_all(
        &self,
        checks: &[Check<'_>],
        now_ms: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let decided = self.decide(checks, now_ms).await?;
        Ok(decided.into_iter().map(|d| d.decision).collect())
    }

    /// [`StoreExt::check_all`] with `candidates[i]` (when set) judged beside `checks[i]`.
    async fn check_all_with_candidates(
        &self,
        checks: &[Check<'_>],
        candidates: &[Option<Params>],
        now_ms: u64,
    ) -> Result<Vec<(Decision, Option<Decision>)>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let judged: Vec<Check<'_>> = checks
            .iter()
            .zip(candidates.iter().chain(std::iter::repeat(&None)))
            .map(|(check, candidate)| Check {
                candidate: *candidate,
                ..*check
            })
            .collect();
        let decided = self.decide(&judged, now_ms).await?;
        Ok(decided
            .into_iter()
            .map(|d| (d.decision, d.candidate))
            .collect())
    }

    /// Sets who hears of each script call, on a store that groups checks into script calls
    /// (Redis); whether it does.
    fn set_batch_observer(&self, observer: std::sync::Arc<dyn BatchObserver>) -> bool {
        match self.capabilities().groups {
            Some(groups) => {
                groups.set_observer(observer);
                true
            }
            None => false,
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

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

    /// Removes the setting `key` names; whether there was one. Bumps the version.
    async fn delete_setting(&self, key: SettingKey<'_>) -> Result<bool, StoreError>;

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
        let kind = SettingKind::Limit;
        self.delete_setting(SettingKey { kind, policy, tier }).await
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
        let kind = SettingKind::Candidate;
        self.delete_setting(SettingKey { kind, policy, tier }).await
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
