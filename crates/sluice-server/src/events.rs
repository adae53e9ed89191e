//! What the limiter reports happened, as named events (in the manner of Vector's
//! `internal_events`). The limiter says what occurred in its own words — a backend call
//! finished, a policy failed open, a lease was granted — and never names a series: each
//! event's [`Event::record`] is the one place it becomes metrics, so the list of what the
//! limiter reports is this file, and a metric's name or labels change in `metrics` alone.
//!
//! The per-check counters and histograms of a policy (`rate_limit_requests_total`,
//! `rate_limit_check_duration_seconds`, `rate_limit_utilization`) are not here: they are
//! pre-resolved handles in the policy's meters (`metrics::policy_meters`), recorded without a
//! label lookup on every check.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::metrics::lease::{Source, Units};

/// Something that happened, recorded into `metrics`.
pub(crate) trait Event {
    fn record(self, metrics: &Metrics);
}

impl Metrics {
    /// Records `event`.
    pub(crate) fn emit(&self, event: impl Event) {
        event.record(self);
    }
}

/// A call to this region's Redis ended, after `seconds` (failed and timed-out calls too).
pub(crate) struct BackendCallDone {
    pub backend: &'static str,
    pub op: &'static str,
    pub seconds: f64,
    /// The sampled trace of the call, kept as the latency's exemplar.
    pub trace: Option<u128>,
}

impl Event for BackendCallDone {
    fn record(self, metrics: &Metrics) {
        metrics.backend_call(self.backend, self.op, self.seconds, self.trace);
    }
}

/// A store call failed for `kind` (timeout, connection, script, …).
pub(crate) struct BackendFailed {
    pub backend: &'static str,
    pub kind: &'static str,
}

impl Event for BackendFailed {
    fn record(self, metrics: &Metrics) {
        metrics.backend_failed(self.backend, self.kind);
    }
}

/// A check of `policy` was answered by its fail mode because the backend failed (`reason`):
/// allowed, degraded (`open`), or refused (`open` false).
pub(crate) struct FailModeApplied<'a> {
    pub policy: &'a Arc<str>,
    pub reason: &'static str,
    pub open: bool,
}

impl Event for FailModeApplied<'_> {
    fn record(self, metrics: &Metrics) {
        if self.open {
            metrics.failed_open(self.policy, self.reason);
        } else {
            metrics.failed_closed(self.policy, self.reason);
        }
    }
}

/// A shadow policy would have denied a check it let through.
pub(crate) struct ShadowRejected<'a> {
    pub policy: &'a Arc<str>,
}

impl Event for ShadowRejected<'_> {
    fn record(self, metrics: &Metrics) {
        metrics.shadow_rejected(self.policy);
    }
}

/// `units` of a usage policy were used: charged after a request, or an ask's estimate
/// consumed.
pub(crate) struct UsageCounted<'a> {
    pub policy: &'a Arc<str>,
    pub plan_tier: Arc<str>,
    pub units: u64,
}

impl Event for UsageCounted<'_> {
    fn record(self, metrics: &Metrics) {
        metrics.count_usage(self.policy, self.plan_tier, self.units);
    }
}

/// A block of a lease was asked of `backend`.
pub(crate) struct LeaseCalled {
    pub backend: &'static str,
}

impl Event for LeaseCalled {
    fn record(self, metrics: &Metrics) {
        metrics.lease.call(self.backend);
    }
}

/// `units` of `policy`'s leases went `what` (granted, used, returned, expired).
pub(crate) struct LeaseUnits<'a> {
    pub policy: &'a Arc<str>,
    pub what: Units,
    pub units: u64,
}

impl Event for LeaseUnits<'_> {
    fn record(self, metrics: &Metrics) {
        metrics.lease.units(self.policy, self.what, self.units);
    }
}

/// A check of `policy` was answered without a backend call, from `source`.
pub(crate) struct AnsweredLocally<'a> {
    pub policy: &'a Arc<str>,
    pub source: Source,
}

impl Event for AnsweredLocally<'_> {
    fn record(self, metrics: &Metrics) {
        metrics.lease.local(self.policy, self.source);
    }
}

/// `pending` units of consumption wait to be shipped to `peer` (replicated policies).
pub(crate) struct ReplicationPending {
    pub peer: Arc<str>,
    pub pending: usize,
}

impl Event for ReplicationPending {
    fn record(self, metrics: &Metrics) {
        metrics.set_replication_pending(self.peer, self.pending);
    }
}

/// The share of `policy`'s recent keys denied at least once is now `ratio`.
pub(crate) struct DeniedKeysRatio<'a> {
    pub policy: &'a Arc<str>,
    pub ratio: f64,
}

impl Event for DeniedKeysRatio<'_> {
    fn record(self, metrics: &Metrics) {
        metrics.denied_keys(self.policy, self.ratio);
    }
}
