//! The one place that calls the store. It turns a request into a [`Check`] (policy, tier,
//! cost), bounds remote backends by `backend.timeout`, maps backend failures to the policy's
//! fail mode, applies shadow mode and records the decision metrics and the trace: the
//! `ratelimit.check` span of a check and, at the store call, the child span and the
//! `rate_limit_redis_duration_seconds` timing of every backend call. Backends themselves hold
//! no observability code.
//!
//! Here: the limiter, its routes and its entry points. [`decide`]: a check or a batch
//! resolved against its policies and decided; [`call`]: the store call, bounded, timed and
//! traced; [`verdict`]: a decision (or a store failure) made the answer, recorded;
//! [`candidate`]: checks also judged against a candidate limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod call;
mod candidate;
mod decide;
mod denied;
mod leases;
mod local;
mod slots;
mod stack;
mod verdict;

use arc_swap::ArcSwap;
use sluice_core::{CheckError, Decision};
use sluice_store::{Check, Store, StoreError, StoreExt, StoreKind};
use tracing::Span;

use crate::events::{DeniedKeysRatio, ReplicationPending};
use crate::metrics::Metrics;
use crate::metrics::detailed::Detail;
use crate::service::compiled::Policy;
use crate::service::snapshot::Snapshot;
use crate::service::stores::RegionStores;
use crate::telemetry::{self, TraceParent};
use crate::top::TopKeys;
use sluice_config::policy::{Limit, NO_TIER, OTHER, Scope};

/// Whether checks came as one check or as a batch (which names its fields `checks[i].…`
/// and lists its policies on the span).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    One,
    Batch,
}

/// Where a scope's checks go.
struct Route<'a> {
    store: &'a dyn Store,
    /// The limiter's bound on a call ([`outer_bound`]): `None` when the store bounds its
    /// own calls or cannot hang.
    bound: Option<Duration>,
    /// The `backend` label of `rate_limit_redis_duration_seconds`: only this region's Redis
    /// is timed there.
    timed_as: Option<&'static str>,
}

/// When a check's decision started, and its sampled trace (the latency exemplar).
#[derive(Debug, Clone, Copy)]
struct Started {
    at: Instant,
    trace: Option<u128>,
}

impl Started {
    /// Now, under `span`'s trace when it is sampled.
    fn now(span: &Span) -> Started {
        Started {
            at: Instant::now(),
            trace: telemetry::trace_id(span),
        }
    }
}

/// One check as the edge parsed it (borrowed from the request body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckInput<'a> {
    pub policy: &'a str,
    pub key: &'a str,
    pub cost: Option<u64>,
    pub tier: Option<&'a str>,
    pub endpoint: Option<&'a str>,
    /// What the check does with its cost (`Consume` for an ordinary check, which a usage
    /// policy turns into an ask; `Ask` for an Envoy descriptor's explicit `hits_addend` 0;
    /// `Charge`/`Refund` for what a request used, on usage policies only).
    pub mode: sluice_core::Mode,
    /// The label of a `detailed_metric` YAML limit's series (see `metrics::detailed`);
    /// `None` records under the policy's name.
    pub detail: Option<Detail<'a>>,
}

impl<'a> CheckInput<'a> {
    /// An ordinary check of `key` under `policy`: cost 1, no tier or endpoint.
    pub fn new(policy: &'a str, key: &'a str) -> Self {
        CheckInput {
            policy,
            key,
            cost: None,
            tier: None,
            endpoint: None,
            mode: sluice_core::Mode::Consume,
            detail: None,
        }
    }

    /// `cost` for `key` under `policy` in `mode`, naming no tier or endpoint: a descriptor
    /// of Envoy's rate-limit service.
    pub fn descriptor(policy: &'a str, key: &'a str, cost: u64, mode: sluice_core::Mode) -> Self {
        CheckInput {
            policy,
            key,
            cost: Some(cost),
            tier: None,
            endpoint: None,
            mode,
            detail: None,
        }
    }

    /// A charge of `amount` to `key` of a usage policy (`POST /v1/charge`,
    /// `SLUICE.CHARGE`): a negative amount refunds. Refuses an amount beyond what every
    /// backend counts exactly (2^53), naming `amount`.
    pub fn charge(
        policy: &'a str,
        key: &'a str,
        tier: Option<&'a str>,
        amount: i64,
    ) -> Result<Self, LimitError> {
        let units = amount.unsigned_abs();
        if units > sluice_core::MAX_EXACT {
            return Err(LimitError::BadRequest {
                message: format!(
                    "amount must be between -{0} and {0}, this one is {amount}",
                    sluice_core::MAX_EXACT
                ),
                field: Some("amount".to_owned()),
            });
        }
        Ok(CheckInput {
            policy,
            key,
            cost: Some(units),
            tier,
            endpoint: None,
            mode: if amount < 0 {
                sluice_core::Mode::Refund
            } else {
                sluice_core::Mode::Charge
            },
            detail: None,
        })
    }
}

/// The answer to one check, with everything its headers and body need.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub policy: Arc<Policy>,
    /// Whether the caller may proceed (after shadow mode and fail-open).
    pub allowed: bool,
    pub decision: Decision,
    /// `RateLimit-Policy` of the (policy, tier).
    pub limit: Arc<Limit>,
    /// The backend failed and the policy failed open.
    pub degraded: bool,
    /// Decided by a shadow policy.
    pub shadow: bool,
    pub now_ms: u64,
}

/// Why a check got no decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("{message}")]
    BadRequest {
        message: String,
        field: Option<String>,
    },
    #[error("unknown policy {policy:?}")]
    UnknownPolicy { policy: String, field: String },
    #[error("cost {cost} exceeds the capacity {capacity} of policy {policy:?}")]
    CostExceedsCapacity {
        policy: String,
        cost: u64,
        capacity: u64,
        field: String,
    },
    #[error("the rate-limit backend is unavailable")]
    BackendUnavailable,
}

/// Decides checks against the current policies and the store.
#[derive(Debug)]
pub struct Limiter {
    store: Arc<dyn Store>,
    /// The one swap of the run-time settings: every check loads one snapshot.
    snapshot: ArcSwap<Snapshot>,
    metrics: Arc<Metrics>,
    /// The limiter's bound on a local check call ([`outer_bound`]): `None` for the memory
    /// backend, which cannot hang, and for a store that bounds its own calls.
    timeout: Option<Duration>,
    /// `backend.timeout` on Redis (`None` on memory): the bound of a readiness ping, and of
    /// the replicated store's calls unless it bounds them itself.
    bound: Option<Duration>,
    /// The `backend` label of `rate_limit_redis_duration_seconds`, for the Redis backends.
    redis: Option<&'static str>,
    other: Arc<str>,
    none: Arc<str>,
    /// Who is being limited, per policy (`/v1/top`, `rate_limit_denied_keys_ratio`).
    top: TopKeys,
    /// The stores of `scope = "global"` and `"replicated"` policies (`[region]`).
    region: RegionStores,
    /// The denied cache and the leases (`local.rs`).
    local: local::Local,
}

/// A check resolved against its policy, not yet decided.
struct Resolved<'a> {
    policy: Arc<Policy>,
    limit: Arc<Limit>,
    check: Check<'a>,
    /// Where the check's `plan_tier` and `endpoint` labels sit in the policy's meters.
    tier_slot: usize,
    endpoint_slot: usize,
    detail: Option<Detail<'a>>,
}

impl Limiter {
    /// A limiter deciding on `store` with `snapshot` (a
    /// [`PolicySet`](crate::service::policy::PolicySet) alone will do).
    pub fn new(
        store: Arc<dyn Store>,
        snapshot: impl Into<Snapshot>,
        metrics: Arc<Metrics>,
        timeout: Duration,
    ) -> Self {
        let snapshot = snapshot.into();
        let policies = &snapshot.policies;
        let kind = store.kind();
        let bound = kind.is_redis().then_some(timeout);
        let timeout = bound.and_then(|bound| outer_bound(&*store, bound));
        let redis = kind.is_redis().then_some(kind.as_str());
        metrics.prime(kind.as_str(), policies.names());
        candidate::prime(&metrics, policies);
        store.set_batch_observer(metrics.batch_observer());
        let top = TopKeys::new();
        top.retain_policies(policies.names());
        Limiter {
            store,
            snapshot: ArcSwap::from_pointee(snapshot),
            metrics,
            timeout,
            bound,
            redis,
            other: OTHER.into(),
            none: NO_TIER.into(),
            top,
            region: RegionStores::default(),
            local: local::Local::default(),
        }
    }

    /// Routes `scope = "global"` and `"replicated"` policies to `stores`, and reports
    /// replication in the metrics.
    pub fn with_region(mut self, stores: RegionStores) -> Self {
        if let Some(replicated) = &stores.replicated {
            replicated.set_policies(self.snapshot.load().policies.replicated());
            replicated.set_observer(self.metrics.replication_observer());
            self.metrics.prime_peers(&replicated.peers());
        }
        self.region = stores;
        self
    }

    /// The store of `scope`, the bound on its calls, and its `backend` label in
    /// `rate_limit_redis_duration_seconds` (only this region's Redis is timed there: a global
    /// round trip is not this region's Redis latency).
    fn route(&self, scope: Scope) -> Result<Route<'_>, StoreError> {
        match scope {
            Scope::Local => Ok(Route {
                store: &*self.store,
                bound: self.timeout,
                timed_as: self.redis,
            }),
            Scope::Global => match &self.region.global {
                Some((store, timeout)) => Ok(Route {
                    store: &**store,
                    bound: outer_bound(&**store, *timeout),
                    timed_as: None,
                }),
                None => Err(StoreError::Unavailable(
                    "no global backend ([region] global) is configured".into(),
                )),
            },
            Scope::Replicated => match &self.region.replicated {
                Some(store) => Ok(Route {
                    store,
                    bound: self.bound.and_then(|bound| outer_bound(store, bound)),
                    timed_as: self.redis,
                }),
                None => Err(StoreError::Unavailable(
                    "no peer regions ([region] peers) are configured".into(),
                )),
            },
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Who is being limited, per policy.
    pub fn top(&self) -> &TopKeys {
        &self.top
    }

    /// Brings the gauges computed from recent history up to `now_ms` (before a scrape).
    pub fn refresh_gauges(&self, now_ms: u64) {
        if let Some(replicated) = &self.region.replicated {
            for (peer, pending) in replicated.pending() {
                self.metrics.emit(ReplicationPending { peer, pending });
            }
        }
        for name in self.snapshot.load().policies.names() {
            if let Some(ratio) = self.top.denied_keys_ratio(name, now_ms) {
                self.metrics.emit(DeniedKeysRatio {
                    policy: name,
                    ratio,
                });
            }
        }
    }

    /// The snapshot in force: policies, RLS rules, forward-auth rules and their sources.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Publishes `snapshot` (only the settings writer does, and [`App::new`] at start); checks
    /// in flight finish on the old one. The denied cache is dropped whole when the policies
    /// changed: a limit may have been raised (every reload, admin override and candidate
    /// change comes here).
    ///
    /// [`App::new`]: crate::service::App::new
    pub fn publish(&self, snapshot: Snapshot) {
        let policies = &snapshot.policies;
        self.metrics
            .prime(self.store.kind().as_str(), policies.names());
        candidate::prime(&self.metrics, policies);
        self.top.retain_policies(policies.names());
        if let Some(replicated) = &self.region.replicated {
            replicated.set_policies(policies.replicated());
        }
        // A denial stays true while the policies are the same ones (a new settings version
        // alone); dropping it then would let concurrent answers re-fill the cache out of order.
        let same = self.snapshot.load().policies.same_as(&snapshot.policies);
        self.snapshot.store(Arc::new(snapshot));
        if !same {
            self.local.denied.clear();
        }
    }

    /// Whether every check is decided without a wait: on the memory store, with no region
    /// stores (whose calls wait on the network). A caller holding many checks then decides
    /// them one after the other, as fast as at once and without a future for each.
    pub fn never_waits(&self) -> bool {
        self.store.kind() == StoreKind::Memory
            && self.region.global.is_none()
            && self.region.replicated.is_none()
    }

    /// Whether the backend answers, within the timeout.
    pub async fn ready(&self) -> Result<(), StoreError> {
        within(self.bound, self.store.ping()).await
    }

    /// Decides one check at `now_ms`, starting a trace if it is sampled.
    pub async fn check(&self, input: &CheckInput<'_>, now_ms: u64) -> Result<Verdict, LimitError> {
        self.check_traced(input, now_ms, &TraceParent::Absent).await
    }

    /// Decides one check at `now_ms`, its span continuing the caller's trace `parent`.
    pub async fn check_traced(
        &self,
        input: &CheckInput<'_>,
        now_ms: u64,
        parent: &TraceParent,
    ) -> Result<Verdict, LimitError> {
        let span = telemetry::check_span(parent);
        let result = self.decide_one(input, Shape::One, now_ms, &span).await;
        if !span.is_disabled() {
            self.trace_outcome(
                &span,
                std::slice::from_ref(input),
                Shape::One,
                result.as_ref().map(std::slice::from_ref),
            );
        }
        result
    }

    /// Decides `check` on this region's store outside every policy, for a caller that names
    /// the limit itself (redis-cell's `CL.THROTTLE` over RESP; `check.policy` is its own
    /// namespace). Bounded by `backend.timeout`, timed and traced as a policy's check; with no
    /// policy to fail open, a backend failure is counted and refused.
    pub async fn check_unlisted(
        &self,
        check: &Check<'_>,
        now_ms: u64,
    ) -> Result<Decision, LimitError> {
        let span = telemetry::check_span(&TraceParent::Absent);
        span.record("ratelimit.policy", check.policy);
        span.record("ratelimit.backend", self.store.kind().as_str());
        match self
            .call_store_one(check, Scope::Local, now_ms, &span)
            .await
            .map(|decided| decided.decision)
        {
            Ok(decision) => {
                span.record("ratelimit.allowed", decision.allowed);
                Ok(decision)
            }
            Err(StoreError::Check(CheckError::CostExceedsCapacity { cost, capacity })) => {
                Err(LimitError::CostExceedsCapacity {
                    policy: check.policy.to_owned(),
                    cost,
                    capacity,
                    field: "cost".to_owned(),
                })
            }
            Err(err) => {
                self.metrics
                    .backend_failed(self.store.kind().as_str(), err.kind());
                span.record("ratelimit.allowed", false);
                span.record("otel.status_code", "ERROR");
                Err(LimitError::BackendUnavailable)
            }
        }
    }

    /// Decides a batch all-or-nothing at `now_ms`, starting a trace if it is sampled.
    pub async fn check_batch(
        &self,
        inputs: &[CheckInput<'_>],
        now_ms: u64,
    ) -> Result<Vec<Verdict>, LimitError> {
        self.check_batch_traced(inputs, now_ms, &TraceParent::Absent)
            .await
    }

    /// Decides a batch all-or-nothing at `now_ms`: one `ratelimit.check` span for the batch
    /// (`ratelimit.policy` lists its policies), continuing the caller's trace `parent`.
    pub async fn check_batch_traced(
        &self,
        inputs: &[CheckInput<'_>],
        now_ms: u64,
        parent: &TraceParent,
    ) -> Result<Vec<Verdict>, LimitError> {
        let span = telemetry::check_span(parent);
        let result = match inputs {
            [one] => self
                .decide_one(one, Shape::Batch, now_ms, &span)
                .await
                .map(|verdict| vec![verdict]),
            _ => self.decide(inputs, now_ms, &span).await,
        };
        if !span.is_disabled() {
            self.trace_outcome(&span, inputs, Shape::Batch, result.as_deref());
        }
        result
    }

    /// Records on the `ratelimit.check` span of `inputs` what was decided: the policy (a
    /// batch: how many checks and their policies), whether it was allowed or degraded, and a
    /// backend failure as the span's error.
    fn trace_outcome(
        &self,
        span: &Span,
        inputs: &[CheckInput<'_>],
        shape: Shape,
        result: Result<&[Verdict], &LimitError>,
    ) {
        span.record("ratelimit.backend", self.store.kind().as_str());
        match inputs {
            [one] if shape == Shape::One => span.record("ratelimit.policy", one.policy),
            _ => {
                span.record(
                    "ratelimit.checks",
                    i64::try_from(inputs.len()).unwrap_or(i64::MAX),
                );
                let mut names: Vec<&str> = inputs.iter().map(|i| i.policy).collect();
                names.sort_unstable();
                names.dedup();
                span.record("ratelimit.policy", names.join(",").as_str())
            }
        };
        match result {
            Ok(verdicts) => {
                span.record("ratelimit.allowed", verdicts.iter().all(|v| v.allowed));
                if verdicts.iter().any(|v| v.degraded) {
                    span.record("ratelimit.degraded", true);
                }
            }
            Err(LimitError::BackendUnavailable) => {
                span.record("ratelimit.allowed", false);
                span.record("otel.status_code", "ERROR");
            }
            Err(_) => {}
        }
    }
}

/// The bound the limiter puts around a call to `store` that must end within `timeout`: none
/// when the store bounds its own calls (the Redis stores), so each check runs one timer.
fn outer_bound(store: &dyn Store, timeout: Duration) -> Option<Duration> {
    (!store.capabilities().bounds_its_calls).then_some(timeout)
}

/// `call` bounded by `timeout` when there is one (the memory store has none: it cannot hang).
async fn within<T>(
    timeout: Option<Duration>,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match timeout {
        None => call.await,
        Some(limit) => tokio::time::timeout(limit, call)
            .await
            .unwrap_or(Err(StoreError::Timeout)),
    }
}

#[cfg(test)]
mod tests {
    //! Fail modes need a backend that fails: `testing` stands in for a Redis down or hung.

    use std::collections::BTreeMap;

    use super::*;
    use crate::service::compiled::PolicySet;
    use crate::testing::{Down, Hung};
    use sluice_config::PolicyConfig;

    fn limiter(store: Arc<dyn Store>) -> Limiter {
        let policy = |fail: &str| PolicyConfig {
            algorithm: Some("fixed_window".into()),
            limit: Some(10),
            window: Some("1s".into()),
            fail: fail.into(),
            ..PolicyConfig::default()
        };
        let configs = BTreeMap::from([
            ("open".to_owned(), policy("open")),
            ("closed".to_owned(), policy("closed")),
        ]);
        let policies = PolicySet::compile(&configs).unwrap();
        Limiter::new(
            store,
            policies,
            Arc::new(Metrics::new()),
            Duration::from_millis(10),
        )
    }

    fn input<'a>(policy: &'a str, cost: Option<u64>) -> CheckInput<'a> {
        CheckInput {
            policy,
            key: "k",
            cost,
            tier: None,
            endpoint: None,
            mode: sluice_core::Mode::Consume,
            detail: None,
        }
    }

    #[tokio::test]
    async fn fail_open_allows_degraded_and_fail_closed_refuses() {
        let l = limiter(Arc::new(Down));
        let open = l.check(&input("open", None), 1_000).await.unwrap();
        assert!(open.allowed && open.degraded);
        assert_eq!(
            l.check(&input("closed", None), 1_000).await.unwrap_err(),
            LimitError::BackendUnavailable
        );
        let text = l.metrics().encode();
        assert!(
            text.contains(r#"rate_limit_fail_open_total{policy="open",reason="unavailable"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"rate_limit_fail_closed_total{policy="closed",reason="unavailable"} 1"#
            )
        );
        assert!(
            text.contains(
                r#"rate_limit_backend_errors_total{backend="redis",kind="unavailable"} 2"#
            )
        );
        assert!(l.ready().await.is_err());
    }

    #[tokio::test]
    async fn a_batch_fails_closed_if_any_policy_does() {
        let l = limiter(Arc::new(Down));
        let open = [input("open", None), input("open", Some(2))];
        let verdicts = l.check_batch(&open, 1_000).await.unwrap();
        assert!(verdicts.iter().all(|v| v.allowed && v.degraded));
        let mixed = [input("open", None), input("closed", None)];
        assert_eq!(
            l.check_batch(&mixed, 1_000).await.unwrap_err(),
            LimitError::BackendUnavailable
        );
    }

    #[tokio::test]
    async fn a_hung_backend_is_cut_at_the_timeout() {
        let l = limiter(Arc::new(Hung));
        let open = l.check(&input("open", None), 1_000).await.unwrap();
        assert!(open.degraded);
        assert!(l.metrics().encode().contains(r#"kind="timeout"} 1"#));
    }

    #[tokio::test]
    async fn cost_above_capacity_is_refused_even_when_the_backend_is_down() {
        let l = limiter(Arc::new(Down));
        assert!(matches!(
            l.check(&input("closed", Some(11)), 1_000).await,
            Err(LimitError::CostExceedsCapacity {
                cost: 11,
                capacity: 10,
                ..
            })
        ));
    }
}
