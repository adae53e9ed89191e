//! Storage of rate-limit state behind one narrow async trait, so the daemon does not care
//! whether counters live in process memory, in Redis or in a Redis Cluster.
//!
//! A store is used as `Arc<dyn Store>`; the run-time settings the admin API writes (limit
//! overrides [`LimitOverride`] and candidate limits [`CandidateOverride`]) live beside it
//! behind [`OverrideStore`] (every backend implements both). It receives the policy's
//! parameters and the time with every call (the daemon owns the clock and the config), and decides with the arithmetic of
//! `sluice-core`, so every backend gives the same decisions for the same inputs.
//!
//! Backends:
//! - [`MemoryStore`]: process memory, one daemon (`src/memory/`: the key table, the shards,
//!   eviction, the all-or-nothing batch and the run-time settings, a file each).
//! - [`RedisStore`] (`backend.kind = "redis"`): one Redis server, `redis` crate, one
//!   multiplexed auto-reconnecting connection: the [`ScriptStore`] over the [`Single`] client.
//! - [`ClusterStore`] (`backend.kind = "cluster"`): Redis Cluster, `fred` crate: the
//!   [`ScriptStore`] over the [`Cluster`] client.
//! - [`SentinelStore`] (`backend.kind = "sentinel"`): the Redis master a set of sentinels
//!   names, followed across failovers: the [`ScriptStore`] over the [`Sentinel`] client,
//!   which connects as [`Single`] does.
//!
//! Multi-region (`[region]`) is a storage concern too: `scope = "global"` policies decide on
//! a plain store of the global backend; `scope = "replicated"` ones on a [`ReplicatedStore`],
//! which wraps this region's backend and the peers' and ships per-region window counters
//! between them (see [`replicated`] for the state, the overshoot bound and partitions).
//!
//! Everything on Redis lives under `src/redis/`, written once: [`ScriptStore`] owns the
//! scripts, the key layout, the in-flight bound and timeouts and the queues of group commit,
//! and sends through its client, which only runs scripts (one server or a cluster). Each
//! algorithm is a Lua script (`src/redis/lua/`) mirroring the core's integer arithmetic
//! exactly, run by EVALSHA with the daemon's `now` (loaded on NOSCRIPT, never re-sent per
//! call): one check is one EVALSHA. Keys follow [`keys`]:
//! `{prefix}:{<policy>:<key>}:<suffix>`, every key with a TTL of the time until its state is
//! fresh again plus the store's [`expiry_grace`], so a check that queued past an edge still
//! finds the state it was stamped against. A batch is one script when its keys share a slot (always on a
//! single server) and consume-then-refund across slots on a cluster. A candidate limit judged
//! beside a check ([`Check::candidate`]) rides in the check's own call, its keys
//! `cand:<suffix>` under the limit's hash tag; on memory both are decided under one lock.
//!
//! A check whose cost exceeds its policy's capacity is refused once on each path: by the
//! core's decision in memory, before anything is sent on Redis (whose scripts assume valid
//! checks).
//!
//! Neither Redis store ever blocks past its `timeout` nor queues without bound: at most
//! `max_in_flight` calls run at once, further calls get [`StoreError::Unavailable`] at once;
//! a call past `timeout` gets [`StoreError::Timeout`]; a server that is down gives
//! `Unavailable`. Both reconnect by themselves, so the same store serves again once the
//! server is back or the cluster has failed over.

mod error;
mod memory;
mod redis;
mod settings;
mod store;
mod tls;

// The backends' configurations are sluice-config's (the config compile checks them without
// a Redis client); the stores are built from them.
pub use error::StoreError;
pub use memory::MemoryStore;
pub use redis::parse_redis_url;
pub use redis::replicated::{
    PeerBackend, ReplicatedStore, ReplicatedStoreConfig, Replication, ReplicationObserver,
    SharedBackend,
};
pub use redis::{
    Cluster, ClusterStore, RedisStore, ScriptStore, Sentinel, SentinelStore, Single, keys,
    replicated,
};
pub use settings::{
    CandidateOverride, LimitOverride, Setting, SettingKey, SettingKind, Settings, StoredSetting,
};
pub use sluice_config::backend::{
    CLOCK_MARGIN, ClusterStoreConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_TIMEOUT, MemoryStoreConfig, RedisStoreConfig, RedisTls, SentinelStoreConfig,
    StoreConfigError as ConfigError, expiry_grace, redact_url,
};
pub use store::{
    BatchObserver, Capabilities, Check, Decided, GroupCommit, KeyTable, OverrideStore, Store,
    StoreExt, StoreKind, TlsFiles, Unspent, candidate_policy,
};
