//! Storage of rate-limit state behind one narrow async trait, so the daemon does not care
//! whether counters live in process memory, in Redis or in a Redis Cluster.
//!
//! A store is used as `Arc<dyn Store>`. It receives the policy's parameters and the time with
//! every call (the daemon owns the clock and the config), and decides with the arithmetic of
//! `sluice-core`, so every backend gives the same decisions for the same inputs.

mod error;
mod memory;
mod store;

pub use error::StoreError;
pub use memory::{MemoryStore, MemoryStoreConfig};
pub use store::{Check, Store};
