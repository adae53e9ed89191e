//! Every metric of the documented table, registered in this one module with its exact name, type,
//! labels and buckets, so dashboards and alerts have a single place to agree with.
//!
//! Label values are `Arc<str>` shared with the compiled policies: recording a sample clones
//! reference counts, never allocates. prometheus-client appends `_total` to counters.
//!
//! Every metric prints its `# HELP` / `# TYPE` lines from the first scrape, even before it has
//! a sample (prometheus-client alone omits an empty family), so dashboards, alert rules and
//! the drift guard can tell an unknown name from one that has not happened yet.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_core::Algorithm;
use sluice_store::{BatchObserver, ReplicationObserver, Store, StoreKind};

use crate::histogram::{self, MAX_BUCKETS, StripedHistogram};

pub mod totals;

mod described;
pub mod detailed;
pub mod lease;
pub mod policy_meters;
use described::Described;
pub use lease::LeaseMetrics;

/// `plan_tier` label of a check without a tier.
pub use sluice_config::policy::NO_TIER;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    pub status: &'static str,
    pub policy: Arc<str>,
    pub endpoint: Arc<str>,
    pub plan_tier: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BackendOpLabels {
    pub backend: &'static str,
    pub op: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PolicyReasonLabels {
    pub policy: Arc<str>,
    pub reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BackendErrorLabels {
    pub backend: &'static str,
    pub kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BackendLabels {
    pub backend: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PolicyTierLabels {
    pub policy: Arc<str>,
    pub plan_tier: Arc<str>,
}

/// `rate_limit_candidate_decisions_total`: what a (policy, tier)'s candidate would have
/// answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CandidateLabels {
    pub policy: Arc<str>,
    pub plan_tier: Arc<str>,
    /// `would_allow` or `would_reject`.
    pub outcome: &'static str,
}

impl CandidateLabels {
    /// The `outcome` label of a candidate's decision.
    pub fn outcome(allowed: bool) -> &'static str {
        if allowed {
            "would_allow"
        } else {
            "would_reject"
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PeerLabels {
    pub peer: Arc<str>,
}

/// `listener` of `rate_limit_connections_refused_total`: unix, http, metrics, resp, resp_unix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: &'static str,
}

/// `rate_limit_tls_handshake_errors_total`: the TCP listener and why the handshake failed
/// (`sluice_tls::Reason::label`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TlsLabels {
    pub listener: &'static str,
    pub reason: &'static str,
}

/// Histograms are [`StripedHistogram`]s: the check path observes two per check from every
/// worker thread, which prometheus-client's mutex-guarded `Histogram` serialised.
type HistogramFamily<L> = Family<L, StripedHistogram, fn() -> StripedHistogram>;

/// Loopback Redis answers in a fraction of a millisecond: the buckets below 1 ms resolve it;
/// the ones from 1 ms up are those the alert rules and dashboards read (0.05 among them).
const REDIS_BUCKETS: [f64; 9] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
];
const CHECK_BUCKETS: [f64; 12] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
];
/// Checks per script call: 1 alone, up to 64 in one group.
const BATCH_SIZE_BUCKETS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
const UTILIZATION_BUCKETS: [f64; 6] = [0.5, 0.75, 0.9, 0.95, 0.99, 1.0];
/// From a fast link (sync_interval 10ms) to a partition of a minute.
const LAG_BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

const _: () = assert!(
    REDIS_BUCKETS.len() <= MAX_BUCKETS
        && CHECK_BUCKETS.len() <= MAX_BUCKETS
        && BATCH_SIZE_BUCKETS.len() <= MAX_BUCKETS
        && UTILIZATION_BUCKETS.len() <= MAX_BUCKETS
        && LAG_BUCKETS.len() <= MAX_BUCKETS,
    "a bucket set is larger than StripedHistogram holds"
);

fn redis_histogram() -> StripedHistogram {
    StripedHistogram::new(&REDIS_BUCKETS)
}

fn check_histogram() -> StripedHistogram {
    StripedHistogram::new(&CHECK_BUCKETS)
}

fn batch_size_histogram() -> StripedHistogram {
    StripedHistogram::new(&BATCH_SIZE_BUCKETS)
}

fn utilization_histogram() -> StripedHistogram {
    StripedHistogram::new(&UTILIZATION_BUCKETS)
}

fn lag_histogram() -> StripedHistogram {
    StripedHistogram::new(&LAG_BUCKETS)
}

/// The daemon's metrics and the registry that exports them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Shared with the connection gate, which counts into it.
    pub connections_refused: Family<ListenerLabels, Counter>,
    /// Shared with the listeners' TLS, which counts into it.
    pub tls_handshake_errors: Family<TlsLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    candidate_decisions: Family<CandidateLabels, Counter>,
    usage_units: Family<PolicyTierLabels, Counter>,
    redis_duration: HistogramFamily<BackendOpLabels>,
    redis_batch_size: HistogramFamily<BackendLabels>,
    check_duration: HistogramFamily<PolicyLabels>,
    fail_open: Family<PolicyReasonLabels, Counter>,
    fail_closed: Family<PolicyReasonLabels, Counter>,
    backend_errors: Family<BackendErrorLabels, Counter>,
    shadow_rejections: Family<PolicyLabels, Counter>,
    keys: Family<BackendLabels, Gauge>,
    evictions: Family<PolicyLabels, Counter>,
    config_reloads: Family<ResultLabels, Counter>,
    utilization: HistogramFamily<PolicyTierLabels>,
    denied_keys_ratio: Family<PolicyLabels, Gauge<f64, AtomicU64>>,
    replication_lag: HistogramFamily<PeerLabels>,
    replication_pending: Family<PeerLabels, Gauge>,
    replication_errors: Family<PeerLabels, Counter>,
    /// Leases and the denied cache (`metrics/lease.rs`).
    pub lease: LeaseMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let candidate_decisions = Family::<CandidateLabels, Counter>::default();
        let usage_units = Family::<PolicyTierLabels, Counter>::default();
        let redis_duration: HistogramFamily<BackendOpLabels> =
            Family::new_with_constructor(redis_histogram);
        let redis_batch_size: HistogramFamily<BackendLabels> =
            Family::new_with_constructor(batch_size_histogram);
        let check_duration: HistogramFamily<PolicyLabels> =
            Family::new_with_constructor(check_histogram);
        let fail_open = Family::<PolicyReasonLabels, Counter>::default();
        let fail_closed = Family::<PolicyReasonLabels, Counter>::default();
        let backend_errors = Family::<BackendErrorLabels, Counter>::default();
        let shadow_rejections = Family::<PolicyLabels, Counter>::default();
        let keys = Family::<BackendLabels, Gauge>::default();
        let evictions = Family::<PolicyLabels, Counter>::default();
        let config_reloads = Family::<ResultLabels, Counter>::default();
        let utilization: HistogramFamily<PolicyTierLabels> =
            Family::new_with_constructor(utilization_histogram);
        let denied_keys_ratio = Family::<PolicyLabels, Gauge<f64, AtomicU64>>::default();
        let replication_lag: HistogramFamily<PeerLabels> =
            Family::new_with_constructor(lag_histogram);
        let replication_pending = Family::<PeerLabels, Gauge>::default();
        let replication_errors = Family::<PeerLabels, Counter>::default();

        registry.register(
            "rate_limit_requests",
            "Checks decided, by outcome",
            Described(requests.clone()),
        );
        registry.register(
            "rate_limit_candidate_decisions",
            "Checks judged against a candidate limit (never enforced), by what it would have answered",
            Described(candidate_decisions.clone()),
        );
        registry.register(
            "rate_limit_usage_units",
            "Units charged to usage policies (usage = true): what requests used, and the estimates their checks consumed",
            Described(usage_units.clone()),
        );
        registry.register(
            "rate_limit_redis_duration_seconds",
            "Duration of backend calls to Redis",
            Described(redis_duration.clone()),
        );
        registry.register(
            "rate_limit_redis_batch_size",
            "Checks per Redis script call (more than one: checks grouped behind a call in flight)",
            Described(redis_batch_size.clone()),
        );
        registry.register(
            "rate_limit_check_duration_seconds",
            "Duration of one check inside the daemon, backend call included",
            Described(check_duration.clone()),
        );
        registry.register(
            "rate_limit_fail_open",
            "Checks allowed because the backend failed and the policy fails open",
            Described(fail_open.clone()),
        );
        registry.register(
            "rate_limit_fail_closed",
            "Checks refused because the backend failed and the policy fails closed",
            Described(fail_closed.clone()),
        );
        registry.register(
            "rate_limit_backend_errors",
            "Backend calls that failed",
            Described(backend_errors.clone()),
        );
        registry.register(
            "rate_limit_shadow_rejections",
            "Checks a shadow policy would have denied",
            Described(shadow_rejections.clone()),
        );
        registry.register(
            "rate_limit_keys",
            "Keys tracked by the in-memory backend",
            Described(keys.clone()),
        );
        registry.register(
            "rate_limit_evictions",
            "Keys the in-memory backend forgot at backend.max_keys before their state was fresh again",
            Described(evictions.clone()),
        );
        registry.register(
            "rate_limit_config_reloads",
            "Config reloads, by result",
            Described(config_reloads.clone()),
        );
        registry.register(
            "rate_limit_utilization",
            "Share of the limit used at decision time",
            Described(utilization.clone()),
        );
        registry.register(
            "rate_limit_denied_keys_ratio",
            "Share of distinct keys denied at least once in the last 5 minutes",
            Described(denied_keys_ratio.clone()),
        );
        registry.register(
            "rate_limit_replication_lag_seconds",
            "Time from a replicated consumption to its acknowledgement by a peer region",
            Described(replication_lag.clone()),
        );
        registry.register(
            "rate_limit_replication_pending",
            "Window totals buffered for a peer region, not yet delivered",
            Described(replication_pending.clone()),
        );
        registry.register(
            "rate_limit_replication_errors",
            "Failed deliveries to a peer region, and updates refused by a full buffer",
            Described(replication_errors.clone()),
        );
        let connections_refused = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "rate_limit_connections_refused",
            "Connections answered overloaded and closed at listen.max_connections, by listener",
            Described(connections_refused.clone()),
        );
        let tls_handshake_errors = Family::<TlsLabels, Counter>::default();
        registry.register(
            "rate_limit_tls_handshake_errors",
            "Failed TLS handshakes on the TCP listeners, by listener and reason",
            Described(tls_handshake_errors.clone()),
        );
        let lease = LeaseMetrics::register(&mut registry);
        Metrics {
            lease,
            registry,
            connections_refused,
            tls_handshake_errors,
            requests,
            candidate_decisions,
            usage_units,
            redis_duration,
            redis_batch_size,
            check_duration,
            fail_open,
            fail_closed,
            backend_errors,
            shadow_rejections,
            keys,
            evictions,
            config_reloads,
            utilization,
            denied_keys_ratio,
            replication_lag,
            replication_pending,
            replication_errors,
        }
    }

    /// Hears how many checks each script call to Redis carried
    /// (`rate_limit_redis_batch_size`).
    pub fn batch_observer(&self) -> Arc<dyn BatchObserver> {
        Arc::new(BatchSizes(self.redis_batch_size.clone()))
    }

    /// Creates the zero series of every peer region.
    pub fn prime_peers(&self, peers: &[Arc<str>]) {
        for peer in peers {
            let labels = PeerLabels { peer: peer.clone() };
            drop(self.replication_lag.get_or_create(&labels));
            drop(self.replication_pending.get_or_create(&labels));
            drop(self.replication_errors.get_or_create(&labels));
        }
    }

    /// Sets `rate_limit_replication_pending` of `peer`.
    pub fn set_replication_pending(&self, peer: Arc<str>, pending: usize) {
        self.replication_pending
            .get_or_create(&PeerLabels { peer })
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// What the replicated store reports, recorded into these metrics.
    pub fn replication_observer(&self) -> Arc<dyn ReplicationObserver> {
        Arc::new(ReplicationMetrics {
            lag: self.replication_lag.clone(),
            errors: self.replication_errors.clone(),
        })
    }

    /// Creates the zero series of every policy (and, on Redis, of every backend operation), so
    /// `rate()` has a starting point before the first event. `rate_limit_denied_keys_ratio` has
    /// series once something measures it.
    pub fn prime<'a>(
        &self,
        backend: &'static str,
        policies: impl IntoIterator<Item = &'a Arc<str>>,
    ) {
        let none: Arc<str> = NO_TIER.into();
        for policy in policies {
            for status in ["allowed", "rejected"] {
                drop(self.requests.get_or_create(&RequestLabels {
                    status,
                    policy: policy.clone(),
                    endpoint: none.clone(),
                    plan_tier: none.clone(),
                }));
            }
            let labels = PolicyLabels {
                policy: policy.clone(),
            };
            drop(self.check_duration.get_or_create(&labels));
            drop(self.shadow_rejections.get_or_create(&labels));
            if backend == "memory" {
                drop(self.evictions.get_or_create(&labels));
            }
            let reason = PolicyReasonLabels {
                policy: policy.clone(),
                reason: "timeout",
            };
            drop(self.fail_open.get_or_create(&reason));
            drop(self.fail_closed.get_or_create(&reason));
            drop(self.utilization.get_or_create(&PolicyTierLabels {
                policy: policy.clone(),
                plan_tier: none.clone(),
            }));
        }
        drop(self.backend_errors.get_or_create(&BackendErrorLabels {
            backend,
            kind: "timeout",
        }));
        for result in ["ok", "error"] {
            drop(self.config_reloads.get_or_create(&ResultLabels { result }));
        }
        if backend == "memory" {
            drop(self.keys.get_or_create(&BackendLabels { backend }));
        }
        if matches!(backend, "redis" | "cluster") {
            drop(
                self.redis_batch_size
                    .get_or_create(&BackendLabels { backend }),
            );
            let ops = Algorithm::ALL.iter().map(|a| a.as_str()).chain(["batch"]);
            for op in ops {
                drop(
                    self.redis_duration
                        .get_or_create(&BackendOpLabels { backend, op }),
                );
            }
        }
    }

    /// Creates the zero series of the candidates of `limits` (each a policy and the
    /// `plan_tier` label of a tier with a candidate), so the dashboards' ratios have a
    /// starting point before the first check is judged.
    pub fn prime_candidates(&self, limits: impl IntoIterator<Item = (Arc<str>, Arc<str>)>) {
        for (policy, plan_tier) in limits {
            for allowed in [true, false] {
                drop(self.candidate_decisions.get_or_create(&CandidateLabels {
                    policy: policy.clone(),
                    plan_tier: plan_tier.clone(),
                    outcome: CandidateLabels::outcome(allowed),
                }));
            }
        }
    }

    /// A call to a Redis backend (`backend` = redis or cluster) for `op` ended after
    /// `seconds`, failed and timed-out calls included; `trace` is its sampled trace (the
    /// exemplar).
    pub fn backend_call(
        &self,
        backend: &'static str,
        op: &'static str,
        seconds: f64,
        trace: Option<u128>,
    ) {
        self.redis_duration
            .get_or_create(&BackendOpLabels { backend, op })
            .observe_traced(seconds, trace);
    }

    /// A backend call failed with an error of `kind` (a bounded label).
    pub fn backend_failed(&self, backend: &'static str, kind: &'static str) {
        self.backend_errors
            .get_or_create(&BackendErrorLabels { backend, kind })
            .inc();
    }

    /// A check of `policy` was allowed, degraded, because the backend failed with `reason`.
    pub fn failed_open(&self, policy: &Arc<str>, reason: &'static str) {
        self.fail_open
            .get_or_create(&PolicyReasonLabels {
                policy: policy.clone(),
                reason,
            })
            .inc();
    }

    /// A check of `policy` was refused (503) because the backend failed with `reason`.
    pub fn failed_closed(&self, policy: &Arc<str>, reason: &'static str) {
        self.fail_closed
            .get_or_create(&PolicyReasonLabels {
                policy: policy.clone(),
                reason,
            })
            .inc();
    }

    /// A shadow policy would have denied a check of `policy`.
    pub fn shadow_rejected(&self, policy: &Arc<str>) {
        self.shadow_rejections
            .get_or_create(&PolicyLabels {
                policy: policy.clone(),
            })
            .inc();
    }

    /// The share of `policy`'s recent keys that were denied at least once.
    pub fn denied_keys(&self, policy: &Arc<str>, ratio: f64) {
        self.denied_keys_ratio
            .get_or_create(&PolicyLabels {
                policy: policy.clone(),
            })
            .set(ratio);
    }

    /// Counts one config reload.
    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.config_reloads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Sets `rate_limit_keys` for the memory backend.
    pub fn set_keys(&self, backend: &'static str, keys: u64) {
        self.keys
            .get_or_create(&BackendLabels { backend })
            .set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// Copies what `store` counts itself into the metrics: `rate_limit_keys`, and
    /// `rate_limit_evictions_total` of each of the configured `policies` (raised to the store's
    /// count, which only grows). Names the store counts but the config does not have are left
    /// out, so the label set stays that of the config.
    pub fn record_store<'a>(
        &self,
        store: &dyn Store,
        policies: impl IntoIterator<Item = &'a Arc<str>>,
    ) {
        let Some(keys) = store.capabilities().keys else {
            return;
        };
        self.set_keys(store.kind().as_str(), keys.tracked());
        let evicted = keys.evicted();
        if evicted.is_empty() {
            return;
        }
        for policy in policies {
            if let Some((_, total)) = evicted.iter().find(|(name, _)| **name == **policy) {
                self.evictions
                    .get_or_create(&PolicyLabels {
                        policy: policy.clone(),
                    })
                    .inner()
                    .fetch_max(*total, Ordering::Relaxed);
            }
        }
    }

    /// The OpenMetrics text of every metric ([`crate::exposition`] turns it into what the
    /// scraper asked for).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// [`Metrics::encode`] with the histograms' exemplars, for a scraper that asked for
    /// OpenMetrics (the 0.0.4 text has no place for them).
    pub fn encode_with_exemplars(&self) -> String {
        histogram::with_exemplars(|| self.encode())
    }
}

/// The replication metrics, as the replicated store's observer.
#[derive(Debug)]
struct ReplicationMetrics {
    lag: HistogramFamily<PeerLabels>,
    errors: Family<PeerLabels, Counter>,
}

impl ReplicationObserver for ReplicationMetrics {
    fn delivered(&self, peer: &str, lags: &[std::time::Duration]) {
        let histogram = self.lag.get_or_create(&PeerLabels { peer: peer.into() });
        for lag in lags {
            histogram.observe(lag.as_secs_f64());
        }
    }

    fn failed(&self, peer: &str) {
        self.errors
            .get_or_create(&PeerLabels { peer: peer.into() })
            .inc();
    }
}

/// `rate_limit_redis_batch_size`, fed by the Redis stores.
#[derive(Debug)]
struct BatchSizes(HistogramFamily<BackendLabels>);

impl BatchObserver for BatchSizes {
    fn batch(&self, backend: StoreKind, checks: usize) {
        #[allow(clippy::cast_precision_loss)] // at most 64
        self.0
            .get_or_create(&BackendLabels {
                backend: backend.as_str(),
            })
            .observe(checks as f64);
    }
}

impl Metrics {
    /// Counts `units` charged to a usage policy's tier in `rate_limit_usage_units_total`.
    pub fn count_usage(&self, policy: &Arc<str>, plan_tier: Arc<str>, units: u64) {
        if units > 0 {
            self.usage_units
                .get_or_create(&PolicyTierLabels {
                    policy: policy.clone(),
                    plan_tier,
                })
                .inc_by(units);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback Redis latencies (tens to hundreds of µs) land in buckets of their own, and the
    /// 50 ms bucket the alert rules read stays.
    #[test]
    fn the_latency_histograms_resolve_sub_millisecond_calls() {
        let metrics = Metrics::new();
        metrics.backend_call("redis", "fixed_window", 0.000_2, None);
        let text = metrics.encode();
        for le in ["0.0001", "0.00025", "0.0005", "0.001", "0.05", "0.1"] {
            let bucket = format!(
                "rate_limit_redis_duration_seconds_bucket{{le=\"{le}\",backend=\"redis\",op=\"fixed_window\"}}"
            );
            assert!(text.contains(&bucket), "{bucket} missing from:\n{text}");
        }
        let below = "rate_limit_redis_duration_seconds_bucket{le=\"0.00025\",backend=\"redis\",op=\"fixed_window\"} 1";
        assert!(text.contains(below), "{text}");
        assert!(CHECK_BUCKETS.starts_with(&[0.000_025, 0.000_05, 0.000_1]));
    }
}
