//! Backends that fail, for the tests of fail modes: nothing else can make the memory
//! store fail, and a real Redis belongs to the store crate's tests.

use async_trait::async_trait;
use sluice_core::Decision;
use sluice_store::{Capabilities, Check, Decided, Store, StoreError, StoreKind, Unspent};

/// What [`Down`] answers every call.
fn refused<T>() -> Result<T, StoreError> {
    Err(StoreError::Unavailable("connection refused".into()))
}

/// A backend that refuses every connection.
#[derive(Debug)]
pub struct Down;

#[async_trait]
impl Store for Down {
    fn kind(&self) -> StoreKind {
        StoreKind::Redis
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::default()
    }
    async fn decide(&self, _: &[Check<'_>], _: u64) -> Result<Vec<Decided>, StoreError> {
        refused()
    }
    fn decide_now(&self, _: &Check<'_>, _: u64) -> Option<Result<Decided, StoreError>> {
        None
    }
    async fn ping(&self) -> Result<(), StoreError> {
        refused()
    }
    async fn give_back(&self, _: &Unspent<'_>, _: u64) -> Result<(), StoreError> {
        refused()
    }
}

/// A backend that never answers.
#[derive(Debug)]
pub struct Hung;

#[async_trait]
impl Store for Hung {
    fn kind(&self) -> StoreKind {
        StoreKind::Redis
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::default()
    }
    async fn decide(&self, _: &[Check<'_>], _: u64) -> Result<Vec<Decided>, StoreError> {
        std::future::pending().await
    }
    fn decide_now(&self, _: &Check<'_>, _: u64) -> Option<Result<Decided, StoreError>> {
        None
    }
    /// PING still answers: a hung backend is found by its checks.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn give_back(&self, _: &Unspent<'_>, _: u64) -> Result<(), StoreError> {
        std::future::pending().await
    }
}

/// A backend that holds each check until released, to have a request provably in flight.
#[derive(Debug, Default)]
pub struct Gate {
    pub entered: tokio::sync::Notify,
    pub release: tokio::sync::Notify,
}

#[async_trait]
impl Store for Gate {
    fn kind(&self) -> StoreKind {
        StoreKind::Memory
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::default()
    }
    /// Holds the call until released, then allows every check.
    async fn decide(&self, checks: &[Check<'_>], now_ms: u64) -> Result<Vec<Decided>, StoreError> {
        self.entered.notify_one();
        self.release.notified().await;
        let allowed = |check: &Check<'_>| Decision {
            allowed: true,
            limit: check.params.limit,
            remaining: check.params.limit.saturating_sub(check.cost),
            reset_ms: now_ms,
            retry_after_ms: 0,
            delay_ms: 0,
        };
        Ok(checks
            .iter()
            .map(|check| Decided::of(allowed(check), check.candidate.map(|_| allowed(check))))
            .collect())
    }
    /// Never at once: a check must be provably in flight.
    fn decide_now(&self, _: &Check<'_>, _: u64) -> Option<Result<Decided, StoreError>> {
        None
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn give_back(&self, _: &Unspent<'_>, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
}
