//! Test support, for the tests of every crate (feature `test-support`, and this crate's own
//! unit tests): [`Daemon`], a real daemon in process on a temp-dir Unix socket and loopback
//! ports, and [`stores`], backends that fail on purpose.

#[cfg(feature = "test-support")]
mod daemon;
pub mod stores;

#[cfg(feature = "test-support")]
pub use daemon::{Daemon, T0};
pub use stores::{Down, Gate, Hung};

use crate::config::{self, ConfigSource, Settings};

/// `toml` compiled under the name `test.toml`, without reading the environment.
///
/// # Panics
/// When `toml` is not a valid config: a test's own config is a bug of the test.
#[allow(clippy::unwrap_used)]
pub fn settings(toml: &str) -> Settings {
    config::load_with_env(
        &ConfigSource::Text {
            name: "test.toml".to_owned(),
            toml: toml.to_owned(),
        },
        figment::providers::Env::raw().only(&[]),
    )
    .unwrap()
}
