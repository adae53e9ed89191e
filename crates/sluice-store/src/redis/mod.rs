//! Everything sluice keeps in Redis, in one store generic over its client:
//! [`ScriptStore`](script_store::ScriptStore) owns the scripts, the key layout, the bounds and
//! the queues of group commit, and sends through a [`ScriptRunner`](runner::ScriptRunner),
//! "a Redis I can run a script on". The clients implement it once each ([`single`]: one
//! server through the `redis` crate; [`cluster`]: a Redis Cluster through `fred`;
//! [`sentinel`]: the master a set of sentinels names, over the single-server client), and
//! [`RedisStore`], [`ClusterStore`] and [`SentinelStore`] are the store over each. Everything else is written
//! once over the store:
//! - [`checks`]: a check or an all-or-nothing batch as EVALSHA of the [`scripts`], and the
//!   answer ([`answers`]) as a decision (the store's [`Store`](crate::Store));
//! - [`group`]: checks queued behind a call in flight go as one call, queued on the
//!   [`lanes`];
//! - [`overrides`]: the run-time limit overrides (the store's
//!   [`OverrideStore`](crate::OverrideStore));
//! - [`replicated`]: the window counters of `scope = "replicated"`, on this region's Redis
//!   and the peers';
//! - [`keys`]: the key layout; [`bounds`]: the in-flight bound and the timeouts.

pub(crate) mod answers;
pub(crate) mod bounds;
pub(crate) mod checks;
pub(crate) mod cluster;
pub(crate) mod group;
pub mod keys;
pub(crate) mod lanes;
mod masters;
pub(crate) mod overrides;
pub(crate) mod plain_probe;
mod redirect;
pub mod replicated;
pub(crate) mod runner;
pub(crate) mod script_store;
pub(crate) mod scripts;
pub(crate) mod sentinel;
pub(crate) mod single;

pub use cluster::{Cluster, ClusterStore};
pub use script_store::ScriptStore;
pub use sentinel::{Sentinel, SentinelStore};
pub use single::{RedisStore, Single, parse_redis_url};
