//! A policy's scope (`local`, `global`, `replicated`) and a replicated policy's shipping
//! settings, compiled on their own; how they fit `[region]` is checked with it.

use super::fields::field;
use crate::backend::replication::Replication;
use crate::error::FieldError;
use crate::parse::parse_duration_ms;
use crate::schema::PolicyConfig;

/// Where a policy's counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// This region's backend only.
    Local,
    /// The one global backend: exact across regions, pays the round trip.
    Global,
    /// This region's backend, consumption shipped to every peer region.
    Replicated,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Global => "global",
            Scope::Replicated => "replicated",
        }
    }
}

/// Default `sync_interval` of a replicated policy.
pub const DEFAULT_SYNC_INTERVAL_MS: u64 = 100;
/// Default `overshoot_budget` of a replicated policy.
pub const DEFAULT_OVERSHOOT_BUDGET: f64 = 0.05;

/// `scope`, `sync_interval` and `overshoot_budget` on their own; how they fit `[region]` and
/// the policy's rate is checked with `[region]` by the config compile.
pub(super) fn compile_scope(
    name: &str,
    config: &PolicyConfig,
    errors: &mut Vec<FieldError>,
) -> (Scope, Option<Replication>) {
    let field = |key: &str| field(name, key);
    let scope = match config.scope.as_str() {
        "local" => Scope::Local,
        "global" => Scope::Global,
        "replicated" => Scope::Replicated,
        other => {
            errors.push(FieldError::new(
                field("scope"),
                format!("unknown scope {other:?}; expected local, global or replicated"),
            ));
            Scope::Local
        }
    };
    if scope != Scope::Replicated {
        for (key, set) in [
            ("sync_interval", config.sync_interval.is_some()),
            ("overshoot_budget", config.overshoot_budget.is_some()),
        ] {
            if set {
                errors.push(FieldError::new(
                    field(key),
                    format!(
                        "only applies to scope = \"replicated\" (this policy is {scope:?})",
                        scope = scope.as_str()
                    ),
                ));
            }
        }
        return (scope, None);
    }
    let interval_ms = match config.sync_interval.as_deref() {
        None => DEFAULT_SYNC_INTERVAL_MS,
        Some(text) => match parse_duration_ms(text) {
            Ok(ms) if (10..=60_000).contains(&ms) => ms,
            Ok(_) => {
                errors.push(FieldError::new(
                    field("sync_interval"),
                    "sync_interval must be between 10ms and 60s",
                ));
                DEFAULT_SYNC_INTERVAL_MS
            }
            Err(why) => {
                errors.push(FieldError::new(field("sync_interval"), why));
                DEFAULT_SYNC_INTERVAL_MS
            }
        },
    };
    let budget = config.overshoot_budget.unwrap_or(DEFAULT_OVERSHOOT_BUDGET);
    if !(budget > 0.0 && budget <= 1.0) {
        errors.push(FieldError::new(
            field("overshoot_budget"),
            format!("{budget} is not a fraction above 0 and at most 1 (0.05 = 5% over the limit)"),
        ));
    }
    (
        scope,
        Some(Replication {
            sync_interval: std::time::Duration::from_millis(interval_ms),
            overshoot_budget: budget,
        }),
    )
}
