//! The store call of a check or a batch: routed by scope, bounded where the store does not
//! bound its own calls, under its own span, and on this region's Redis timed in
//! `rate_limit_redis_duration_seconds`. A check judged against a candidate limit makes the
//! same one call: the candidate rides on the check.

use std::time::Instant;

use sluice_store::{Check, Decided, Store, StoreError};
use tracing::Span;

use super::{Limiter, Route, within};
use crate::events::BackendCallDone;
use crate::telemetry;
use sluice_config::policy::Scope;

/// The `op` of a batch call in `rate_limit_redis_duration_seconds`.
const BATCH_OP: &str = "batch";

impl Limiter {
    /// The store call of one check (with its candidate, if it carries one) under the `op` of
    /// its algorithm (on the memory store without a wait), under its own span and, on Redis,
    /// timed.
    pub(super) async fn call_store_one(
        &self,
        check: &Check<'_>,
        scope: Scope,
        now_ms: u64,
        span: &Span,
    ) -> Result<Decided, StoreError> {
        let op = check.params.algorithm.as_str();
        self.store_call(
            self.route(scope)?,
            op,
            span,
            |store| store.decide_now(check, now_ms),
            |store| async move {
                store
                    .decide(std::slice::from_ref(check), now_ms)
                    .await?
                    .pop()
                    .ok_or_else(|| StoreError::Backend("the store answered no decision".into()))
            },
        )
        .await
    }

    /// The store call of a batch (each check with its candidate, if it carries one), under
    /// its own span and, on Redis, timed.
    pub(super) async fn call_store_all(
        &self,
        checks: &[Check<'_>],
        scope: Scope,
        now_ms: u64,
        span: &Span,
    ) -> Result<Vec<Decided>, StoreError> {
        self.store_call(
            self.route(scope)?,
            BATCH_OP,
            span,
            |_| None,
            |store| store.decide(checks, now_ms),
        )
        .await
    }

    /// One call to `route`'s store under `op`: `at_once` when the store answers without a
    /// wait, else `call` bounded; its span, and its timing on Redis.
    async fn store_call<'r, T, F>(
        &self,
        route: Route<'r>,
        op: &'static str,
        span: &Span,
        at_once: impl FnOnce(&'r dyn Store) -> Option<Result<T, StoreError>>,
        call: impl FnOnce(&'r dyn Store) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        let Route {
            store,
            bound,
            timed_as: redis,
        } = route;
        let child = telemetry::backend_span(span, store.kind().as_str(), op);
        if let Some(result) = at_once(store) {
            self.backend_call_done(&child, redis, op, None, result.as_ref().err());
            return result;
        }
        let started = redis.map(|_| Instant::now());
        let result = within(bound, call(store)).await;
        self.backend_call_done(&child, redis, op, started, result.as_ref().err());
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
            self.metrics.emit(BackendCallDone {
                backend,
                op,
                seconds,
                trace: telemetry::trace_id(span),
            });
        }
        if let Some(err) = err
            && err.is_backend_failure()
        {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", err.kind());
        }
    }
}
