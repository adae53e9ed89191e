//! Everything sluice keeps in Redis, over one narrow trait: [`runner::ScriptRunner`], "a Redis I can
//! run a script on". The two clients implement it once each ([`single`]: one server through
//! the `redis` crate; [`cluster`]: a Redis Cluster through `fred`); everything else is
//! written once over it:
//! - [`checks`]: a check or an all-or-nothing batch as EVALSHA of the [`scripts`], and the
//!   answer as a decision; [`group`]: checks queued behind a call in flight go as one call;
//! - [`overrides`]: the run-time limit overrides;
//! - [`replicated`]: the window counters of `scope = "replicated"`, on this region's Redis
//!   and the peers';
//! - [`keys`]: the key layout; [`bounds`]: the in-flight bound and the timeouts.
//!
//! [`RedisStore`] and [`ClusterStore`] are a client each, made a [`Store`](crate::Store) and
//! an [`OverrideStore`](crate::OverrideStore) by [`script_store!`](script_store::script_store).

pub(crate) mod answers;
pub(crate) mod bounds;
pub(crate) mod checks;
pub(crate) mod cluster;
pub(crate) mod group;
pub mod keys;
mod masters;
pub(crate) mod overrides;
mod redirect;
pub mod replicated;
pub(crate) mod runner;
mod script_store;
pub(crate) mod scripts;
pub(crate) mod single;

pub use cluster::ClusterStore;
pub use single::RedisStore;
