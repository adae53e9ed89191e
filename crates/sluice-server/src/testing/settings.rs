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

/// An app serving `toml` on the stores it names (in process memory unless it names Redis), on
/// a manual clock at `now_ms`.
///
/// # Panics
/// When `toml` is not a valid config or its stores cannot be built.
#[allow(clippy::unwrap_used)]
pub fn memory_app(toml: &str, now_ms: u64) -> crate::service::app::App {
    let settings = settings(toml);
    let clock = std::sync::Arc::new(crate::clock::ManualClock::new(now_ms));
    let stores = crate::service::stores::Stores::build(
        &settings.settings.backend,
        &settings.settings.region,
        clock.clone(),
    )
    .unwrap();
    crate::service::app::App::new(settings, stores, clock)
}
