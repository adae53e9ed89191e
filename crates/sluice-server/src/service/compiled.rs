//! The configuration as the daemon runs on it: sluice-config's compile with the daemon's parts
//! filled in, the metric series of every policy ([`PolicyMeters`]) and the Redis client's own
//! check of a backend URL (`sluice_store::parse_redis_url`). Start, SIGHUP reload,
//! `--check-config` and the tests all load through [`load`], so what `--check-config` accepts
//! the daemon accepts.

use sluice_config::{ConfigError, ConfigSource};

use crate::metrics::policy_meters::PolicyMeters;

/// A compiled policy with its metric series.
pub type Policy = sluice_config::policy::Policy<PolicyMeters>;
/// Every policy, each with its metric series.
pub type PolicySet = sluice_config::policy::PolicySet<PolicyMeters>;
/// A configuration compiled whole: the settings, the policies and the RLS rules.
pub type Compiled = sluice_config::Compiled<PolicyMeters>;

/// Loads and compiles `source` with the `SLUICE_` environment over it.
pub fn load(source: &ConfigSource) -> Result<Compiled, ConfigError> {
    sluice_config::load(source, Some(sluice_store::parse_redis_url))
}

/// As [`load`], with the env provider given (tests pass their own map).
#[cfg(any(test, feature = "test-support"))]
pub fn load_with_env(
    source: &ConfigSource,
    env: figment::providers::Env,
) -> Result<Compiled, ConfigError> {
    sluice_config::load_with_env(source, env, Some(sluice_store::parse_redis_url))
}
