//! `[rls] envoy_config`: envoyproxy/ratelimit's YAML configuration, read as it reads it, so a
//! team moves to sluice with the descriptor trees it already has.
//!
//! - [`envoy_yaml`](crate::envoy_yaml): the files read into domains' descriptor trees, every
//!   refusal at its YAML path, and the lookup of the limit a descriptor gets;
//! - [`policies`]: each limit as the sluice policy its checks are decided on (fixed_window
//!   counting every hit, as envoyproxy/ratelimit counts), so metrics, `/v1/top`, the
//!   dashboard and replay see them like any policy.
//!
//! Pure: files are read here, nothing runs. The load ([`attach`]) happens inside the one
//! config load, so start, SIGHUP, the file watch and `--check-config` all see the same
//! problems, all at once, each naming its file and YAML path.

pub mod policies;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::envoy_yaml::{EnvoyDomains, FIELD, load};
use crate::error::FieldError;
use crate::schema::Config;

/// Reads `config.rls.envoy_config` (when set) into `config`: the domains into
/// `config.rls.envoy`, each limit's policy into `config.policies`. A relative path is taken
/// from `base`, the directory of the config file (none: the working directory). Every problem
/// is returned, the YAML's under [`FIELD`] naming the file and the path.
pub fn attach(config: &mut Config, base: Option<&Path>) -> Vec<FieldError> {
    let written = config.rls.envoy_config.trim();
    if written.is_empty() {
        return Vec::new();
    }
    let path = match base {
        Some(base) if Path::new(written).is_relative() => base.join(written),
        _ => PathBuf::from(written),
    };
    let mut errors = Vec::new();
    let mut domains = load(&path, &mut errors);
    let taken: Vec<String> = config.policies.keys().cloned().collect();
    let generated = policies::assign(&mut domains, &taken);
    for domain in domains.values() {
        if config
            .rls
            .descriptors
            .iter()
            .any(|d| d.domain == domain.name)
        {
            errors.push(FieldError::new(
                FIELD,
                format!(
                    "{}: domain {:?} is also served by [[rls.descriptors]]; a domain is served by one of them",
                    domain.file, domain.name
                ),
            ));
        }
    }
    config.policies.extend(generated);
    config.rls.envoy = Arc::new(EnvoyDomains::new(domains, path));
    errors
}
