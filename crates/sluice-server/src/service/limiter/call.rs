//! The store call of a check or a batch: routed by scope, bounded where the store does not
//! bound its own calls, under its own span, and on this region's Redis timed in
//! `rate_limit_redis_duration_seconds`.

use std::time::Instant;

use sluice_core::Decision;
use sluice_store::{Check, StoreError};
use tracing::Span;

use super::{Limiter, Route, within};
use crate::service::policy::Scope;
use crate::telemetry;

/// The `op` of a batch call in `rate_limit_redis_duration_seconds`.
const BATCH_OP: &str = "batch";

impl Limiter {
    /// The store call of one check under the `op` of its algorithm (on the memory store
    /// without a wait), under its own span and, on Redis, timed.
    pub(super) async fn call_store_one(
        &self,
        check: &Check<'_>,
        scope: Scope,
        now_ms: u64,
        span: &Span,
    ) -> Result<Decision, StoreError> {
        let Route {
            store,
            bound,
            timed_as: redis,
        } = self.route(scope)?;
        let op = check.params.algorithm.as_str();
        let child = telemetry::backend_span(span, store.kind().as_str(), op);
        if let Some(result) = store.check_now(check, now_ms) {
            self.backend_call_done(&child, redis, op, None, result.as_ref().err());
            return result;
        }
        let started = redis.map(|_| Instant::now());
        let result = within(bound, store.check(check, now_ms)).await;
        self.backend_call_done(&child, redis, op, started, result.as_ref().err());
        result
    }

    /// The store call of a batch, under its own span and, on Redis, timed.
    pub(super) async fn call_store_all(
        &self,
        checks: &[Check<'_>],
        scope: Scope,
        now_ms: u64,
        span: &Span,
    ) -> Result<Vec<Decision>, StoreError> {
        let Route {
            store,
            bound,
            timed_as: redis,
        } = self.route(scope)?;
        let child = telemetry::backend_span(span, store.kind().as_str(), BATCH_OP);
        let started = redis.map(|_| Instant::now());
        let result = within(bound, store.check_all(checks, now_ms)).await;
        self.backend_call_done(&child, redis, BATCH_OP, started, result.as_ref().err());
        result
    }

    /// Records the end of a backend call: `rate_limit_redis_duration_seconds` on Redis (failed
    /// and timed-out calls included), and the error on its span.
    fn backend_call_done(
        &self,
        span: &Span,
        redis: Option<&'static str>,
        op: &'static str,
        started: Option<Instant>,
        err: Option<&StoreError>,
    ) {
        if let (Some(backend), Some(started)) = (redis, started) {
            let seconds = started.elapsed().as_secs_f64();
            self.metrics
                .backend_call(backend, op, seconds, telemetry::trace_id(span));
        }
        if let Some(err) = err
            && err.is_backend_failure()
        {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", err.kind());
        }
    }
}
