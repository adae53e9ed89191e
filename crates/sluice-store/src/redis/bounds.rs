//! The promise every call to a networked backend keeps: at most `max_in_flight` check calls
//! at once (past it a call fails at once instead of queueing, so a slow or dead Redis never
//! piles requests up), each within `backend.timeout`; admin commands are bounded by time only,
//! so a saturated check path cannot lock an operator out. The script store holds one over
//! either client, so both keep the same promise.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::Either;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

use crate::error::StoreError;

/// Floor of the timeout of admin commands: an operator can wait longer than a check.
const ADMIN_TIMEOUT: Duration = Duration::from_millis(500);

/// Floor of the timeout of a ping: a readiness probe tolerates a slow answer (a loaded host
/// can take over 100 ms to schedule one; Kubernetes waits 1 s for a probe by default).
const PING_TIMEOUT: Duration = Duration::from_millis(500);

/// The in-flight bound and the timeout of one store.
#[derive(Debug)]
pub(crate) struct Bounds {
    permits: Arc<Semaphore>,
    timeout: Duration,
}

impl Bounds {
    pub(crate) fn new(timeout: Duration, max_in_flight: usize) -> Self {
        Bounds {
            permits: Arc::new(Semaphore::new(max_in_flight)),
            timeout,
        }
    }

    /// `backend.timeout`.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A permit for one call, or `Unavailable` at once when `max_in_flight` calls are running.
    pub(crate) fn permit(&self) -> Result<SemaphorePermit<'_>, StoreError> {
        self.permits.try_acquire().map_err(|_| too_many())
    }

    /// A permit a spawned task can hold past its caller.
    pub(crate) fn owned_permit(&self) -> Result<OwnedSemaphorePermit, StoreError> {
        Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| too_many())
    }

    /// Runs a check-path call within the in-flight bound and the timeout (the permit is taken,
    /// or refused, at once).
    ///
    /// This and [`within`] are combinators, not `async fn`s: an `async fn` keeps its argument
    /// future in its own state beside the future it awaits, so each level of nesting doubled
    /// the size of every check's future (2.6 KB of a 4.7 KB future, copied several times
    /// per check).
    pub(crate) fn call<'a, T: 'a>(
        &'a self,
        call: impl Future<Output = Result<T, StoreError>> + 'a,
    ) -> impl Future<Output = Result<T, StoreError>> + 'a {
        match self.permit() {
            Err(refused) => Either::Left(std::future::ready(Err(refused))),
            Ok(permit) => Either::Right(within(self.timeout, call).map(move |answer| {
                drop(permit);
                answer
            })),
        }
    }

    /// Runs `call` within the timeout, for a caller that holds its permit already.
    pub(crate) fn timed<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> impl Future<Output = Result<T, StoreError>> {
        within(self.timeout, call)
    }

    /// Runs an admin command (rare, not on the check path) within the timeout, or
    /// [`ADMIN_TIMEOUT`] if that is longer.
    pub(crate) async fn admin<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        within(self.timeout.max(ADMIN_TIMEOUT), call).await
    }

    /// Runs `call` (a ping) within the timeout, or [`PING_TIMEOUT`] if that is longer.
    pub(crate) async fn ping<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        within(self.timeout.max(PING_TIMEOUT), call).await
    }
}

/// `call`, or [`StoreError::Timeout`] once `limit` has passed (counted from now).
fn within<T>(
    limit: Duration,
    call: impl Future<Output = Result<T, StoreError>>,
) -> impl Future<Output = Result<T, StoreError>> {
    tokio::time::timeout(limit, call).map(|answer| answer.unwrap_or(Err(StoreError::Timeout)))
}

fn too_many() -> StoreError {
    StoreError::Unavailable("too many calls in flight".into())
}
