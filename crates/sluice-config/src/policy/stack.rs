//! Stacked limits (`limits = [...]` on a policy or a tier): several limits on one key, all of
//! which must have room, decided together (all or none consume). Compiled here into each
//! limit's parameters and the label headers name it by (`<policy>.<window>`); the first
//! limit is the policy's own, so everything that reads one limit (`X-RateLimit-Limit`'s
//! default, the metrics) reads it.

use std::sync::Arc;

use sluice_core::Params;

use super::fields::field;
use super::window::window_of;
use crate::error::FieldError;
use crate::schema::{LimitConfig, PolicyConfig};

/// Most limits a policy or tier may stack: each is one more state per key and one more entry
/// in a check's script call.
pub const MAX_STACKED: usize = 4;

/// One of a policy's stacked limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stacked {
    pub params: Params,
    /// `<policy>.<window>`: how `RateLimit-Policy` and `RateLimit` name it.
    pub label: Arc<str>,
}

/// The policy's config with its first stacked limit as its `limit`, `window` and `burst`, so
/// the rest of the compile reads one limit as for any policy; errors when both are given.
pub(super) fn as_single(
    name: &str,
    config: &PolicyConfig,
    errors: &mut Vec<FieldError>,
) -> Option<PolicyConfig> {
    let limits = config.limits.as_ref()?;
    for (key, set) in [
        ("limit", config.limit.is_some()),
        ("window", config.window.is_some()),
        ("burst", config.burst.is_some()),
    ] {
        if set {
            errors.push(FieldError::new(
                field(name, key),
                "`limits` replaces limit, window and burst: give one or the other",
            ));
        }
    }
    let first = limits.first();
    Some(PolicyConfig {
        limit: first.map(|l| l.limit),
        window: first.map(|l| l.window.clone()),
        burst: first.and_then(|l| l.burst),
        ..config.clone()
    })
}

/// `limits` (at field `at`, e.g. `policies.llm.limits`) of policy `name` under the
/// algorithm and counting of `base`: every limit's parameters, or the errors (all of them).
/// A stack of one is returned as it is: the caller takes its limit as a single one.
pub(super) fn compile_stack(
    name: &str,
    at: &str,
    limits: &[LimitConfig],
    config: &PolicyConfig,
    base: &Params,
    errors: &mut Vec<FieldError>,
) -> Vec<Stacked> {
    if limits.is_empty() || limits.len() > MAX_STACKED {
        errors.push(FieldError::new(
            at,
            format!("holds 1 to {MAX_STACKED} limits, this one {}", limits.len()),
        ));
        return Vec::new();
    }
    let mut stacked: Vec<Stacked> = Vec::with_capacity(limits.len());
    for (i, limit) in limits.iter().enumerate() {
        let here = |key: &str| format!("{at}[{i}].{key}");
        if limit.limit == 0 {
            errors.push(FieldError::new(here("limit"), "limit must be at least 1"));
        }
        if limit.burst == Some(0) {
            errors.push(FieldError::new(here("burst"), "burst must be at least 1"));
        }
        if let Some(j) = limits[..i].iter().position(|l| l.window == limit.window) {
            errors.push(FieldError::new(
                here("window"),
                format!(
                    "{at}[{j}] has the window {:?} too: one limit per window (the smaller alone would matter)",
                    limit.window
                ),
            ));
        }
        let (window_ms, calendar) = window_of(
            name,
            &here("window"),
            &limit.window,
            config,
            Some(base.algorithm),
            errors,
        );
        let Some(window_ms) = window_ms else { continue };
        let params = Params {
            limit: limit.limit.max(1),
            window_ms,
            burst: limit.burst.unwrap_or(limit.limit).max(1),
            calendar,
            ..*base
        };
        if let Err(why) = params.validate() {
            errors.push(FieldError::new(here("limit"), why.to_string()));
            continue;
        }
        stacked.push(Stacked {
            params,
            label: format!("{name}.{}", limit.window).into(),
        });
    }
    stacked
}

/// What a stacked policy cannot have: a candidate (judged against one limit) or scope
/// "replicated" (whose windows are shipped one limit at a time).
pub(super) fn check_stack_fits(
    name: &str,
    config: &PolicyConfig,
    replicated: bool,
    errors: &mut Vec<FieldError>,
) {
    let stacked = config.limits.as_ref().is_some_and(|l| l.len() > 1)
        || config
            .tiers
            .values()
            .any(|t| t.limits.as_ref().is_some_and(|l| l.len() > 1));
    if !stacked {
        return;
    }
    if config.candidate.is_some() {
        errors.push(FieldError::new(
            field(name, "candidate"),
            "a candidate is judged against one limit; a policy with stacked limits has none (judge each limit as a policy of its own)",
        ));
    }
    if replicated {
        errors.push(FieldError::new(
            field(name, "scope"),
            "stacked limits cannot be replicated (replication ships one limit's windows); use scope = \"global\" or \"local\"",
        ));
    }
}
