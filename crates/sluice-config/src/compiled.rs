//! The one compile of a configuration: the settings ([`crate::compile()`]) and, from the same
//! tree in the same pass, the policies checks are decided on, the RLS rules that map
//! descriptors to them, and the policies' scopes checked against `[region]`. The daemon's
//! start, SIGHUP reload and `--check-config`, `sluice replay` and the tests all load through
//! [`load`], so every problem is reported at once and what `--check-config` accepts the
//! daemon accepts.

use figment::providers::Env;

use crate::backend::UrlCheck;
use crate::backend::replication;
use crate::load::{env_provider, load_with};
use crate::policy::{Meters, PolicySet, Scope};
use crate::rls_rules::Rules;
use crate::{BackendConfig, Config, ConfigError, ConfigSource, FieldError, RegionConfig, Settings};

/// A configuration compiled whole: the settings, the policies (each with the runtime's
/// [`Meters`]) and the RLS rules.
#[derive(Debug)]
pub struct Compiled<M = ()> {
    pub settings: Settings,
    pub policies: PolicySet<M>,
    /// `[[rls.descriptors]]`.
    pub rls: Rules,
}

/// Loads and compiles `source` with the `SLUICE_` environment over it; `redis_url` is the
/// Redis client's parse of a URL ([`UrlCheck`]; `None` for a tool that never connects).
pub fn load<M: Meters>(
    source: &ConfigSource,
    redis_url: Option<UrlCheck>,
) -> Result<Compiled<M>, ConfigError> {
    load_with_env(source, env_provider(), redis_url)
}

/// As [`load`], with the env provider given (tests pass their own map).
pub fn load_with_env<M: Meters>(
    source: &ConfigSource,
    env: Env,
    redis_url: Option<UrlCheck>,
) -> Result<Compiled<M>, ConfigError> {
    let (settings, (policies, rls)) = load_with(source, env, redis_url, compile)?;
    Ok(Compiled {
        settings,
        policies,
        rls,
    })
}

/// The policies' part of the compile: policies, RLS rules and scopes, every problem of them.
fn compile<M: Meters>(config: &Config) -> Result<(PolicySet<M>, Rules), Vec<FieldError>> {
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
fn check_scopes<M>(
    region: &RegionConfig,
    backend: &BackendConfig,
    policies: &PolicySet<M>,
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
                        "scope = \"replicated\" needs backend.kind redis, cluster or sentinel: peer regions \
                         write this region's counters into its backend",
                    ));
                }
                let algorithm = policy.base.params.algorithm;
                if let Some(why) = replication::unreplicable(algorithm) {
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
                    if let Err(why) = replication::check_budget(
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
