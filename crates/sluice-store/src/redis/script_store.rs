//! [`script_store!`]: the [`Store`](crate::Store) and [`OverrideStore`](crate::OverrideStore)
//! of a Redis client, written once for both clients (they differ only in how they reach
//! Redis, which [`ScriptRunner`](super::runner::ScriptRunner) hides).

/// Makes a store holding its client in `self.client: Arc<impl Grouped>` a [`Store`]
/// and an [`OverrideStore`], so both Redis stores share one implementation of each.
///
/// [`Store`]: crate::Store
/// [`OverrideStore`]: crate::OverrideStore
macro_rules! script_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::Store for $store {
            fn kind(&self) -> $crate::StoreKind {
                $crate::redis::runner::ScriptRunner::kind(&*self.client)
            }

            async fn check(
                &self,
                check: &$crate::Check<'_>,
                now_ms: u64,
            ) -> Result<sluice_core::Decision, $crate::StoreError> {
                $crate::redis::checks::check(&self.client, check, now_ms).await
            }

            async fn check_all(
                &self,
                checks: &[$crate::Check<'_>],
                now_ms: u64,
            ) -> Result<Vec<sluice_core::Decision>, $crate::StoreError> {
                $crate::redis::checks::check_all(&self.client, checks, now_ms).await
            }

            fn bounds_its_calls(&self) -> bool {
                true
            }

            async fn ping(&self) -> Result<(), $crate::StoreError> {
                $crate::redis::runner::ScriptRunner::ping(&*self.client).await
            }

            fn set_batch_observer(&self, observer: std::sync::Arc<dyn $crate::BatchObserver>) {
                $crate::redis::group::Grouped::groups(&*self.client).set_observer(observer);
            }
        }

        #[async_trait::async_trait]
        impl $crate::OverrideStore for $store {
            async fn put(&self, change: &$crate::LimitOverride) -> Result<(), $crate::StoreError> {
                $crate::redis::overrides::put(&*self.client, change).await
            }

            async fn delete(&self, policy: &str, tier: &str) -> Result<bool, $crate::StoreError> {
                $crate::redis::overrides::delete(&*self.client, policy, tier).await
            }

            async fn list(&self) -> Result<(u64, Vec<$crate::LimitOverride>), $crate::StoreError> {
                $crate::redis::overrides::list(&*self.client).await
            }

            async fn version(&self) -> Result<u64, $crate::StoreError> {
                $crate::redis::overrides::version(&*self.client).await
            }
        }
    };
}
pub(crate) use script_store;
