//! Test support, for the tests of every crate (feature `test-support`, and this crate's own
//! unit tests): [`Daemon`], a real daemon in process on a temp-dir Unix socket and loopback
//! ports, and [`stores`], backends that fail on purpose.

#[cfg(feature = "test-support")]
mod daemon;
mod settings;
pub mod stores;

#[cfg(feature = "test-support")]
pub use daemon::{Daemon, T0};
pub use settings::{memory_app, settings};
pub use stores::{Down, Gate, Hung};
