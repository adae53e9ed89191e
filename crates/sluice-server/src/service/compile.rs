//! The one compile of a configuration the daemon runs on: the configuration's own settings
//! ([`crate::config`]) and, from the same tree in the same pass, what only the service knows
//! how to build: the policies checks are decided on, the RLS rules that map descriptors to
//! them, and the policies' scopes checked against `[region]`. Start, SIGHUP reload,
//! `--check-config` and the tests all load through [`load`], so every problem is reported at
//! once and what `--check-config` accepts the daemon accepts.

use figment::providers::Env;
use sluice_store::replicated;

use crate::config::{
    self, BackendConfig, Config, ConfigError, ConfigSource, FieldError, RegionConfig, Settings,
};
use crate::service::policy::{PolicySet, Scope};
use crate::service::rls_rules::Rules;

/// A configuration compiled whole: the settings, the policies and the RLS rules.
#[derive(Debug)]
pub struct Compiled {
    pub settings: Settings,
    pub policies: PolicySet,
    /// `[[rls.descriptors]]`.
    pub rls: Rules,
}

/// Loads and compiles `source` with the `SLUICE_` environment over it.
pub fn load(source: &ConfigSource) -> Result<Compiled, ConfigError> {
    load_with_env(source, config::env_provider())
}

/// As [`load`], with the env provider given (tests pass their own map).
pub fn load_with_env(source: &ConfigSource, env: Env) -> Result<Compiled, ConfigError> {
    let (settings, (policies, rls)) = config::load_with(source, env, compile)?;
    Ok(Compiled {
        settings,
        policies,
        rls,
    })
}

/// The service's part of the compile: policies, RLS rules and scopes, every problem of them.
fn compile(config: &Config) -> Result<(PolicySet, Rules), Vec<FieldError>> {
    let mut errors = Vec::new();
    let policies = PolicySet::compile(&config.policies)
        .map_err(|mut policy_errors| errors.append(&mut policy_errors))
        .ok();
    let rls = Rules::compile(&config.rls, &config.policies)
        .map_err(|mut rls_errors| errors.append(&mut rls_errors))
        .ok();
    if let Some(policies) = &policies {
        check_scopes(&config.region, &config.backend, policies, &mut errors);
    }
    match (policies, rls) {
        (Some(policies), Some(rls)) if errors.is_empty() => Ok((policies, rls)),
        _ => Err(errors),
    }
}

/// The policies' scopes against `[region]`: each scope has the backend it needs, and a
/// replicated policy's algorithm and budget can be kept.
fn check_scopes(
    region: &RegionConfig,
    backend: &BackendConfig,
    policies: &PolicySet,
    errors: &mut Vec<FieldError>,
) {
    let single = region.name.is_empty();
    let mut names: Vec<_> = policies.iter().collect();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    for policy in names {
        let field = |key: &str| format!("policies.{}.{key}", policy.name);
        match policy.scope {
            Scope::Local => {}
            Scope::Global => {
                if region.global.is_none() {
                    errors.push(FieldError::new(
                        field("scope"),
                        "scope = \"global\" needs region.global (the backend every region decides on)",
                    ));
                }
            }
            Scope::Replicated => {
                if single || region.peers.is_empty() {
                    errors.push(FieldError::new(
                        field("scope"),
                        "scope = \"replicated\" needs region.name and at least one region.peers entry",
                    ));
                    continue;
                }
                if backend.kind == "memory" {
                    errors.push(FieldError::new(
                        field("scope"),
                        "scope = \"replicated\" needs backend.kind redis or cluster: peer regions \
                         write this region's counters into its backend",
                    ));
                }
                let algorithm = policy.base.params.algorithm;
                if let Some(why) = replicated::unreplicable(algorithm) {
                    errors.push(FieldError::new(
                        field("algorithm"),
                        format!("{} cannot be replicated: {why}", algorithm.as_str()),
                    ));
                    continue;
                }
                let Some(replication) = policy.replication else {
                    continue;
                };
                let peers = region.peers.len();
                let mut limits = vec![(String::new(), policy.base.params)];
                let mut tiers: Vec<_> = policy.tiers.iter().collect();
                tiers.sort_by(|a, b| a.0.cmp(b.0));
                limits.extend(
                    tiers
                        .into_iter()
                        .map(|(t, l)| (format!(" (tier {t})"), l.params)),
                );
                for (tier, params) in limits {
                    if let Err(why) = replicated::check_budget(
                        params.limit,
                        params.window_ms,
                        &replication,
                        peers,
                    ) {
                        errors.push(FieldError::new(
                            field("overshoot_budget"),
                            format!("{why}{tier}"),
                        ));
                        break;
                    }
                }
            }
        }
    }
}
