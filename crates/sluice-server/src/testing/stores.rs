//! Backends that fail, for the tests of fail modes: nothing else can make the memory
//! store fail, and a real Redis belongs to the store crate's tests.

use async_trait::async_trait;
use sluice_core::Decision;
use sluice_store::{Check, Store, StoreError, StoreKind};

/// A backend that refuses every connection.
#[derive(Debug)]
pub struct Down;

#[async_trait]
impl Store for Down {
    fn kind(&self) -> StoreKind {
        StoreKind::Redis
    }
    async fn check(&self, _: &Check<'_>, _: u64) -> Result<Decision, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    async fn check_all(&self, _: &[Check<'_>], _: u64) -> Result<Vec<Decision>, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
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
    async fn check(&self, _: &Check<'_>, _: u64) -> Result<Decision, StoreError> {
        std::future::pending().await
    }
    async fn check_all(&self, _: &[Check<'_>], _: u64) -> Result<Vec<Decision>, StoreError> {
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
    async fn check(&self, check: &Check<'_>, now_ms: u64) -> Result<Decision, StoreError> {
        self.entered.notify_one();
        self.release.notified().await;
        Ok(Decision {
            allowed: true,
            limit: check.params.limit,
            remaining: check.params.limit - check.cost,
            reset_ms: now_ms,
            retry_after_ms: 0,
            delay_ms: 0,
            debt: 0,
        })
    }
    async fn check_all(&self, _: &[Check<'_>], _: u64) -> Result<Vec<Decision>, StoreError> {
        Err(StoreError::Backend("not used".into()))
    }
}
