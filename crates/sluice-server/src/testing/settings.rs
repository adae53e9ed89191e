//! A test's config, compiled as the daemon compiles a file.

use crate::service::compiled::{Compiled, load_with_env};
use sluice_config::ConfigSource;

/// `toml` compiled under the name `test.toml`, without reading the environment.
///
/// # Panics
/// When `toml` is not a valid config: a test's own config is a bug of the test.
#[allow(clippy::unwrap_used)]
pub fn settings(toml: &str) -> Compiled {
    load_with_env(
        &ConfigSource::Text {
            name: "test.toml".to_owned(),
            toml: toml.to_owned(),
        },
        figment::providers::Env::raw().only(&[]),
    )
    .unwrap()
}
