//! The series of one policy, reached by slot instead of by label look-up on the check path.

use std::sync::{Arc, OnceLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::detailed::DetailedTable;
use super::{CandidateLabels, Metrics, PolicyLabels, PolicyTierLabels, RequestLabels};
use crate::histogram::StripedHistogram;
use crate::top::HistoryCache;

/// The series one policy's checks record into, found in their families once and then reached
/// by slot: a family look-up hashes every label string (SipHash) under a lock, which cost about
/// a tenth of a check's CPU. Slots are the policy's tier and endpoint positions (see
/// `policy::Policy::tier`); a series is created on first use, so `/metrics` shows the same
/// series as with plain look-ups. Holds clones of the families' handles, which share their
/// values.
#[derive(Debug)]
pub struct PolicyMeters {
    endpoints: usize,
    /// By `(allowed, tier, endpoint)`; empty when a config names so many tiers and endpoints
    /// that the table would be large, and the families are asked directly.
    requests: Box<[OnceLock<Counter>]>,
    /// By tier.
    utilization: Box<[OnceLock<StripedHistogram>]>,
    /// By `(would allow, tier)`: `rate_limit_candidate_decisions_total`. Two slots a tier,
    /// as bounded as the tiers.
    candidates: Box<[OnceLock<Counter>]>,
    check_duration: OnceLock<StripedHistogram>,
    /// The `detailed_metric` series of a YAML limit, made on its first detailed check (no
    /// other policy pays for the table).
    detailed: OnceLock<Box<DetailedTable>>,
    /// The policy's top-keys history, found on its first check.
    top: HistoryCache,
}

/// A compiled policy's series (`service::compiled::Policy`): sized when the policy compiles.
impl sluice_config::policy::Meters for PolicyMeters {
    fn new(tiers: usize, endpoints: usize) -> Self {
        PolicyMeters::new(tiers, endpoints)
    }
}

/// Most `requests` slots kept per policy (16 bytes each).
const MAX_REQUEST_SLOTS: usize = 8192;

impl PolicyMeters {
    pub fn new(tiers: usize, endpoints: usize) -> Self {
        let slots = 2 * tiers * endpoints;
        let slots = if slots <= MAX_REQUEST_SLOTS { slots } else { 0 };
        PolicyMeters {
            endpoints,
            requests: (0..slots).map(|_| OnceLock::new()).collect(),
            utilization: (0..tiers).map(|_| OnceLock::new()).collect(),
            candidates: (0..2 * tiers).map(|_| OnceLock::new()).collect(),
            check_duration: OnceLock::new(),
            detailed: OnceLock::new(),
            top: HistoryCache::default(),
        }
    }

    /// Counts one decision in `rate_limit_requests_total`; `labels` names the series the first
    /// time this slot is used.
    pub fn count_request(
        &self,
        metrics: &Metrics,
        allowed: bool,
        tier: usize,
        endpoint: usize,
        labels: impl FnOnce() -> RequestLabels,
    ) {
        let at = (usize::from(allowed) * self.utilization.len() + tier) * self.endpoints + endpoint;
        count_in(&self.requests, at, &metrics.requests, labels);
    }

    /// Counts what a tier slot's candidate would have answered in
    /// `rate_limit_candidate_decisions_total`; `labels` names the series the first time.
    pub fn count_candidate(
        &self,
        metrics: &Metrics,
        allowed: bool,
        tier: usize,
        labels: impl FnOnce() -> CandidateLabels,
    ) {
        let at = usize::from(allowed) * self.utilization.len() + tier;
        count_in(&self.candidates, at, &metrics.candidate_decisions, labels);
    }

    /// Observes `rate_limit_utilization` of a tier slot.
    pub fn observe_utilization(
        &self,
        metrics: &Metrics,
        tier: usize,
        share: f64,
        labels: impl FnOnce() -> PolicyTierLabels,
    ) {
        match self.utilization.get(tier) {
            Some(slot) => slot
                .get_or_init(|| metrics.utilization.get_or_create(&labels()).clone())
                .observe(share),
            None => metrics.utilization.get_or_create(&labels()).observe(share),
        }
    }

    /// The `detailed_metric` series of the policy named `policy`.
    pub fn detailed(&self, policy: &str) -> &DetailedTable {
        self.detailed
            .get_or_init(|| Box::new(DetailedTable::new(policy)))
    }

    /// Where the policy's top-keys history is kept once found
    /// ([`TopKeys::record_cached`](crate::top::TopKeys::record_cached)).
    pub fn top(&self) -> &HistoryCache {
        &self.top
    }

    /// Observes `rate_limit_check_duration_seconds` of the policy (`trace`: the exemplar).
    pub fn observe_check_duration(
        &self,
        metrics: &Metrics,
        seconds: f64,
        policy: &Arc<str>,
        trace: Option<u128>,
    ) {
        self.check_duration
            .get_or_init(|| {
                metrics
                    .check_duration
                    .get_or_create(&PolicyLabels {
                        policy: policy.clone(),
                    })
                    .clone()
            })
            .observe_traced(seconds, trace);
    }
}

/// Counts one in slot `at` of `slots` (its series found in `family` on first use), or in
/// `family` directly when the table has no such slot.
fn count_in<L: Clone + std::hash::Hash + Eq>(
    slots: &[OnceLock<Counter>],
    at: usize,
    family: &Family<L, Counter>,
    labels: impl FnOnce() -> L,
) {
    match slots.get(at) {
        Some(slot) => slot
            .get_or_init(|| family.get_or_create(&labels()).clone())
            .inc(),
        None => family.get_or_create(&labels()).inc(),
    };
}
