//! `ReplicatedStore` (`scope = "replicated"`): decides at local latency on this region's
//! backend and ships this region's consumption to every peer region's backend in the
//! background, so a check never waits on a peer.
//!
//! ## State: a G-counter per window
//! Only window counters are replicated (fixed_window, sliding_window_counter): their state is
//! a sum of consumption per aligned window, which merges as a grow-only counter. Each window of
//! a limit is one Redis hash ([`keys::window_key`]) with one field per region, `r:<region>`.
//! This region's field grows by HINCRBY when a check is admitted here; a peer's field is only
//! written by the merge script (`lua/merge.lua`) with `max(stored, shipped)`. A region ships its
//! *absolute* total, never a delta, so a late, duplicated or reordered delivery is harmless
//! (max is idempotent, commutative and associative) and a retry can never double count. A
//! region decides on the sum of every region's field it holds: its own consumption, exact, plus
//! the latest totals peers shipped.
//!
//! ## The overshoot bound: capped unacknowledged consumption
//! Plain async replication overshoots by whatever the other regions admit during the
//! replication delay, which grows with the offered load. Here each region also keeps, per
//! window, the highest own total every peer has acknowledged (`a:<peer>`, written to the local
//! backend after a delivery succeeds), and admits a check only while its *unacknowledged*
//! consumption (own total minus the lowest acknowledgement, this and the previous window) stays
//! within `cap = floor(overshoot_budget · limit / (regions − 1))` ([`unacked_cap`]). When the
//! last admission anywhere happens, the deciding region has seen all of every peer's
//! consumption but its unacknowledged part, so `admitted ≤ limit + (regions − 1) · cap ≤
//! (1 + overshoot_budget) · limit`, whatever the load or the latency (a single check costing
//! more than the cap passes only with nothing unacknowledged, so with such costs the bound is
//! `limit + (regions − 1) · max(cap, cost)`). The cap only gates: a decision's `remaining` is
//! the limit minus every region's consumption this region holds, and a check only the cap
//! denies is told to retry after one `sync_interval` (when acknowledgements free the cap),
//! not at the window's end. The price is throughput
//! under latency: a region can have at most `cap` in flight per acknowledgement round trip
//! (`sync_interval` + link RTT), which [`check_budget`] requires to cover the policy's rate.
//!
//! ## Candidate limits
//! Not replicated: the config refuses a candidate on a `replicated` policy. Should one reach
//! this store anyway, it is decided on this region's backend alone, as a plain store would
//! (same keys, see [`keys`]), beside the replicated check, never a panic or a changed answer.
//!
//! ## Partitions and the pending bound
//! Updates for each peer coalesce in a map keyed by window hash (the latest total wins), so
//! the buffer is bounded by a number of (limit, window) entries, `max_pending`, not by the
//! request rate. Entries whose window is over are dropped (a peer no longer needs them). Past
//! the bound a new entry is not buffered and counted as a failure
//! ([`ReplicationObserver::failed`]); its consumption still reaches the peer with the next
//! update of the same window (totals are absolute), and until then it stays unacknowledged, so
//! the cap keeps the budget. While the last delivery to some peer failed, the region is
//! *partitioned*: its cap is raised to its fair share `floor(limit / regions)` so it keeps
//! serving, and the worst case while partitioned is `(1 + (regions − 1) / regions) · limit`
//! (documented in docs/src/guides/multi-region.md). After the heal the buffered totals are delivered and merged
//! with max: nothing is lost or counted twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::{Mutex, RwLock};
use sluice_core::{Algorithm, Decision};

use super::checks;
use super::keys;
use super::runner::ScriptRunner;
use super::script_store::ScriptStore;
use super::scripts::ScriptId;
use crate::error::StoreError;
use crate::store::{Capabilities, Check, Decided, Store, StoreKind, Unspent};

// The budget's arithmetic is the config's too (a replicated policy's budget is checked when
// the config compiles), so it lives in sluice-config.
pub use sluice_config::backend::replication::{
    DEFAULT_MAX_PENDING, Replication, check_budget, partition_cap, unacked_cap, unreplicable,
};

/// A backend other regions can write into: one Redis or a Redis Cluster
/// (`SharedBackend::from(store)`).
#[derive(Debug, Clone)]
pub struct SharedBackend {
    store: ScriptStore<dyn ScriptRunner>,
}

impl<C: ScriptRunner> From<ScriptStore<C>> for SharedBackend {
    fn from(store: ScriptStore<C>) -> Self {
        SharedBackend {
            store: store.erased(),
        }
    }
}

impl SharedBackend {
    /// Raises `field` of each window hash to at least its total (one script per slot on a
    /// cluster, at most [`MERGE_CHUNK`] hashes per script).
    async fn merge(
        &self,
        field: &str,
        updates: &[(String, u64, u64)],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let store = &self.store;
        let mut groups: HashMap<u16, Vec<&(String, u64, u64)>> = HashMap::new();
        for update in updates {
            groups
                .entry(store.client().slot(&update.0))
                .or_default()
                .push(update);
        }
        let grace = store.layout().ttl_grace_ms.to_string();
        for group in groups.values() {
            for chunk in group.chunks(MERGE_CHUNK) {
                let mut keys = Vec::with_capacity(chunk.len());
                let mut args = Vec::with_capacity(2 + 3 * chunk.len());
                args.push(now_ms.to_string());
                args.push(grace.clone());
                for (key, total, expires) in chunk {
                    keys.push(key.clone());
                    args.push(field.to_owned());
                    args.push(total.to_string());
                    args.push(expires.to_string());
                }
                store.run(ScriptId::Merge, keys, args).await?;
            }
        }
        Ok(())
    }
}

/// Most window hashes merged by one script call.
const MERGE_CHUNK: usize = 512;

/// What the replicated store reports, for the daemon's metrics (the store holds no
/// observability code of its own).
pub trait ReplicationObserver: Send + Sync + std::fmt::Debug {
    /// Totals reached `peer`; `lags` holds, per delivered window, the time from its oldest
    /// undelivered consumption to the acknowledgement.
    fn delivered(&self, peer: &str, lags: &[Duration]);
    /// A delivery to `peer` failed (it stays buffered), or an update found the buffer full.
    fn failed(&self, peer: &str);
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl ReplicationObserver for NoObserver {
    fn delivered(&self, _peer: &str, _lags: &[Duration]) {}
    fn failed(&self, _peer: &str) {}
}

/// One peer region.
#[derive(Debug, Clone)]
pub struct PeerBackend {
    /// The peer's region name (`[[region.peers]] name`), which labels its field and metrics.
    pub name: String,
    pub backend: SharedBackend,
}

/// How to build a [`ReplicatedStore`].
#[derive(Debug, Clone)]
pub struct ReplicatedStoreConfig {
    /// This region's name (`region.name`).
    pub region: String,
    /// This region's backend.
    pub local: SharedBackend,
    pub peers: Vec<PeerBackend>,
    /// Most buffered (limit, window) entries per peer. Default 100 000.
    pub max_pending: usize,
}

/// A buffered total for one peer.
#[derive(Debug, Clone, Copy)]
struct Entry {
    total: u64,
    /// When the oldest consumption not yet delivered happened.
    since_ms: u64,
    /// When it must be shipped.
    due_ms: u64,
    /// When the window stops mattering.
    expires_ms: u64,
    interval_ms: u64,
}

#[derive(Debug)]
struct Peer {
    name: Arc<str>,
    backend: SharedBackend,
    ack_field: String,
    pending: Mutex<HashMap<String, Entry>>,
    /// The last delivery attempt failed.
    partitioned: AtomicBool,
}

#[derive(Debug)]
struct Shared {
    region: String,
    own_field: String,
    local: SharedBackend,
    peers: Vec<Peer>,
    policies: RwLock<HashMap<Box<str>, Replication>>,
    max_pending: usize,
    observer: RwLock<Arc<dyn ReplicationObserver>>,
}

/// Replicated window counters on this region's backend, shipped to every peer.
#[derive(Debug, Clone)]
pub struct ReplicatedStore {
    inner: Arc<Shared>,
}

/// A check resolved to its window hashes.
struct Prepared {
    keys: [String; 2],
    expires_ms: u64,
    interval_ms: u64,
}

/// What [`ReplicatedStore::flush`] did for one peer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FlushReport {
    /// Windows delivered.
    pub delivered: usize,
    /// Whether a delivery failed (the rest stays buffered).
    pub failed: bool,
}

impl ReplicatedStore {
    /// A store deciding on `config.local` and shipping to `config.peers`. Ships nothing until
    /// [`start`](Self::start) (or [`flush`](Self::flush) by hand).
    pub fn new(config: ReplicatedStoreConfig) -> Self {
        let peers = config
            .peers
            .into_iter()
            .map(|peer| Peer {
                ack_field: format!("a:{}", peer.name),
                name: peer.name.into(),
                backend: peer.backend,
                pending: Mutex::new(HashMap::new()),
                partitioned: AtomicBool::new(false),
            })
            .collect();
        ReplicatedStore {
            inner: Arc::new(Shared {
                own_field: format!("r:{}", config.region),
                region: config.region,
                local: config.local,
                peers,
                policies: RwLock::new(HashMap::new()),
                max_pending: config.max_pending.max(1),
                observer: RwLock::new(Arc::new(NoObserver)),
            }),
        }
    }

    /// This region's name.
    pub fn region(&self) -> &str {
        &self.inner.region
    }

    /// Replaces the replicated policies (on start and on every reload).
    pub fn set_policies(&self, policies: HashMap<Box<str>, Replication>) {
        *self.inner.policies.write() = policies;
    }

    /// Sets who hears about deliveries and failures.
    pub fn set_observer(&self, observer: Arc<dyn ReplicationObserver>) {
        *self.inner.observer.write() = observer;
    }

    /// Entries buffered per peer (`rate_limit_replication_pending`).
    pub fn pending(&self) -> Vec<(Arc<str>, usize)> {
        self.inner
            .peers
            .iter()
            .map(|peer| (peer.name.clone(), peer.pending.lock().len()))
            .collect()
    }

    /// Peer names, in configuration order.
    pub fn peers(&self) -> Vec<Arc<str>> {
        self.inner.peers.iter().map(|p| p.name.clone()).collect()
    }

    /// Ships, in the background, every peer's due entries every quarter of the shortest
    /// `sync_interval` (so each is delivered within its sync interval plus the link time),
    /// reading time from `clock`. The tasks end when the store is dropped.
    pub fn start(&self, clock: Arc<dyn Fn() -> u64 + Send + Sync>) {
        for index in 0..self.inner.peers.len() {
            let weak: Weak<Shared> = Arc::downgrade(&self.inner);
            let clock = clock.clone();
            tokio::spawn(async move {
                loop {
                    let tick = match weak.upgrade() {
                        Some(shared) => flush_tick(&shared),
                        None => return,
                    };
                    tokio::time::sleep(tick).await;
                    let Some(shared) = weak.upgrade() else { return };
                    let store = ReplicatedStore { inner: shared };
                    store.flush(index, &*clock).await;
                }
            });
        }
    }

    /// Delivers peer `index`'s due entries (all of them with `all`) now: one merge per chunk on
    /// the peer, then the acknowledgements on the local backend. `clock` is read before and
    /// after the delivery, for its lag.
    pub async fn flush(&self, index: usize, clock: &(dyn Fn() -> u64 + Sync)) -> FlushReport {
        self.flush_inner(index, clock, false).await
    }

    /// As [`flush`](Self::flush), shipping every buffered entry whether due or not.
    pub async fn flush_all(&self, index: usize, clock: &(dyn Fn() -> u64 + Sync)) -> FlushReport {
        self.flush_inner(index, clock, true).await
    }

    async fn flush_inner(
        &self,
        index: usize,
        clock: &(dyn Fn() -> u64 + Sync),
        all: bool,
    ) -> FlushReport {
        let Some(peer) = self.inner.peers.get(index) else {
            return FlushReport::default();
        };
        let started = clock();
        let due: Vec<(String, u64, u64)> = {
            let mut pending = peer.pending.lock();
            pending.retain(|_, e| e.expires_ms > started);
            pending
                .iter()
                .filter(|(_, e)| all || e.due_ms <= started)
                .map(|(k, e)| (k.clone(), e.total, e.expires_ms))
                .collect()
        };
        if due.is_empty() {
            return FlushReport::default();
        }
        let observer = self.inner.observer.read().clone();
        if peer
            .backend
            .merge(&self.inner.own_field, &due, started)
            .await
            .is_err()
        {
            peer.partitioned.store(true, Ordering::Relaxed);
            observer.failed(&peer.name);
            return FlushReport {
                delivered: 0,
                failed: true,
            };
        }
        peer.partitioned.store(false, Ordering::Relaxed);
        let done = clock();
        let mut lags = Vec::with_capacity(due.len());
        {
            let mut pending = peer.pending.lock();
            for (key, total, _) in &due {
                let Some(entry) = pending.get_mut(key) else {
                    continue;
                };
                lags.push(Duration::from_millis(done.saturating_sub(entry.since_ms)));
                if entry.total <= *total {
                    pending.remove(key);
                } else {
                    // Consumed again during the delivery: at most since the delivery began.
                    entry.since_ms = started;
                    entry.due_ms = started + entry.interval_ms * 3 / 4;
                }
            }
        }
        // The acknowledgements free this region's cap. A failure here only keeps the cap
        // tighter (the next delivery of the window acknowledges again), never admits more.
        let _ = self
            .inner
            .local
            .merge(&peer.ack_field, &due, done.max(started))
            .await;
        observer.delivered(&peer.name, &lags);
        FlushReport {
            delivered: due.len(),
            failed: false,
        }
    }

    /// Resolves a check to its window hashes, or refuses a check this store cannot decide.
    fn prepare(&self, check: &Check<'_>, now_ms: u64) -> Result<(Prepared, u64, u64), StoreError> {
        checks::validate(check)?;
        let algorithm = check.params.algorithm;
        if let Some(why) = unreplicable(algorithm) {
            return Err(StoreError::Backend(format!(
                "policy {:?} cannot be replicated: {why}",
                check.policy
            )));
        }
        let replication = self
            .inner
            .policies
            .read()
            .get(check.policy)
            .copied()
            .ok_or_else(|| {
                StoreError::Backend(format!("policy {:?} is not replicated", check.policy))
            })?;
        let w = check.params.window_ms;
        let index = now_ms / w;
        let prefix = &self.inner.local.store.layout().prefix;
        let window = |i: u64| keys::window_key(prefix, check.policy, check.key, algorithm, w, i);
        let previous = match index.checked_sub(1) {
            Some(i) => window(i),
            // No window before the epoch: a key of the same slot that is never written.
            None => format!("{}:none", window(index)),
        };
        // Every window hash lives one window past its end (2 · window at most, as documented
        // allows): a sliding window counter still reads it, and a delivery late by up to a
        // window still lands.
        let span = 2;
        let peers = self.inner.peers.len();
        let partitioned = self
            .inner
            .peers
            .iter()
            .any(|p| p.partitioned.load(Ordering::Relaxed));
        let limit = check.params.limit;
        let cap = if partitioned {
            partition_cap(limit, replication.overshoot_budget, peers)
        } else {
            unacked_cap(limit, replication.overshoot_budget, peers)
        };
        let interval_ms = u64::try_from(replication.sync_interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Ok((
            Prepared {
                keys: [window(index), previous],
                expires_ms: index.saturating_add(span).saturating_mul(w),
                interval_ms,
            },
            cap,
            interval_ms,
        ))
    }

    /// Buffers this region's new total of a window for every peer.
    fn enqueue(&self, prepared: &Prepared, total: u64, now_ms: u64) {
        for peer in &self.inner.peers {
            let mut pending = peer.pending.lock();
            if let Some(entry) = pending.get_mut(&prepared.keys[0]) {
                entry.total = entry.total.max(total);
                continue;
            }
            if pending.len() >= self.inner.max_pending {
                pending.retain(|_, e| e.expires_ms > now_ms);
            }
            if pending.len() >= self.inner.max_pending {
                drop(pending);
                self.inner.observer.read().failed(&peer.name);
                continue;
            }
            pending.insert(
                prepared.keys[0].clone(),
                Entry {
                    total,
                    since_ms: now_ms,
                    due_ms: now_ms + prepared.interval_ms * 3 / 4,
                    expires_ms: prepared.expires_ms,
                    interval_ms: prepared.interval_ms,
                },
            );
        }
    }

    async fn replicate(
        &self,
        checks: &[Check<'_>],
        now_ms: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        let mut prepared = Vec::with_capacity(checks.len());
        let peers = &self.inner.peers;
        let mut keys = Vec::with_capacity(2 * checks.len());
        let mut args = Vec::with_capacity(5 + peers.len() + 6 * checks.len());
        args.push(now_ms.to_string());
        args.push(checks.len().to_string());
        args.push(self.inner.local.store.layout().ttl_grace_ms.to_string());
        args.push(self.inner.own_field.clone());
        args.push(peers.len().to_string());
        args.extend(peers.iter().map(|p| p.ack_field.clone()));
        let mut slot = None;
        for check in checks {
            let (p, cap, hint) = self.prepare(check, now_ms)?;
            let this = self.inner.local.store.client().slot(&p.keys[0]);
            if *slot.get_or_insert(this) != this {
                return Err(StoreError::Backend(
                    "a batch of replicated policies must share one cluster slot".into(),
                ));
            }
            keys.extend(p.keys.iter().cloned());
            let mode = u8::from(check.params.algorithm == Algorithm::SlidingWindowCounter);
            args.push(mode.to_string());
            args.push(check.params.limit.to_string());
            args.push(check.params.window_ms.to_string());
            args.push(check.cost.to_string());
            args.push(cap.to_string());
            args.push(hint.to_string());
            prepared.push(p);
        }
        let answer = self
            .inner
            .local
            .store
            .run(ScriptId::Replicated, keys, args)
            .await?;
        let Some((committed, rest)) = answer.split_first() else {
            return Err(StoreError::Backend(
                "replicated script answered nothing".into(),
            ));
        };
        const FIELDS: usize = 9;
        if rest.len() != FIELDS * checks.len() {
            return Err(StoreError::Backend(format!(
                "replicated script answered {} fields for {} checks",
                rest.len(),
                checks.len()
            )));
        }
        let committed = *committed == 1;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        let mut decisions = Vec::with_capacity(checks.len());
        for ((fields, check), p) in rest.chunks(FIELDS).zip(checks).zip(&prepared) {
            let [
                allowed,
                remaining,
                reset,
                retry,
                _,
                before_remaining,
                before_reset,
                _,
                own,
            ] = fields
            else {
                return Err(StoreError::Backend("replicated script answer".into()));
            };
            if committed && check.cost > 0 {
                self.enqueue(p, n(*own), now_ms);
            }
            // A denied batch consumed nothing: each check reports the state before it.
            let (remaining, reset) = if committed || checks.len() == 1 {
                (remaining, reset)
            } else {
                (before_remaining, before_reset)
            };
            decisions.push(Decision {
                allowed: *allowed == 1,
                limit: check.params.limit,
                remaining: n(*remaining),
                reset_ms: n(*reset),
                retry_after_ms: n(*retry),
                delay_ms: 0,
            });
        }
        Ok(decisions)
    }
}

/// How long the background loop sleeps between flushes: a quarter of the shortest
/// `sync_interval`, between 5 ms and 1 s.
fn flush_tick(shared: &Shared) -> Duration {
    let shortest = shared
        .policies
        .read()
        .values()
        .map(|r| r.sync_interval)
        .min()
        .unwrap_or(Duration::from_millis(100));
    (shortest / 4).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

#[async_trait]
impl Store for ReplicatedStore {
    fn kind(&self) -> StoreKind {
        self.inner.local.store.kind()
    }

    /// Bounded by the caller: a replicated decision is several calls, and what the local
    /// backend offers (its group commit, its bounds) is not this store's.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::default()
    }

    /// The checks replicated (see [`ReplicatedStore::replicate`]). Candidates are not
    /// replicated (the config refuses them with `scope = "replicated"`): each is decided on
    /// this region's backend alone, under the limit's hash tag as on a plain store, in a call
    /// of its own beside the checks' (concurrent with it). Its counts are this region's, not
    /// the fleet's. Any call failing fails the checks.
    async fn decide(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let local = &self.inner.local.store;
        let judging = checks.iter().map(|check| async move {
            match &check.candidate {
                Some(params) => checks::candidate_alone(local, check, params, now_ms)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        });
        let (decisions, judged) = futures::future::join(
            self.replicate(checks, now_ms),
            futures::future::join_all(judging),
        )
        .await;
        let mut judged = judged.into_iter();
        decisions?
            .into_iter()
            .map(|decision| Ok(Decided::of(decision, judged.next().transpose()?.flatten())))
            .collect()
    }

    fn decide_now(&self, _: &Check<'_>, _: u64) -> Option<Result<Decided, StoreError>> {
        None
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.local.store.ping().await
    }

    /// Nothing is leased on a replicated policy (leases are `scope = "local"` only).
    async fn give_back(&self, _: &Unspent<'_>, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
}
