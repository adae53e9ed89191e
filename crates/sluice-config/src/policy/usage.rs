//! The rules of `usage = true` (a usage policy: checks ask, charges debit after the
//! response), kept apart from the policy compile they extend.

use std::sync::Arc;

use sluice_core::Algorithm;

use super::{Limit, Names, Scope, field};
use crate::error::FieldError;

/// `usage = true` needs an algorithm that can carry a debt, for the policy and every tier,
/// and a scope whose counters take a charge.
pub(super) fn check_usage(
    name: &str,
    base: &Limit,
    tiers: &Names<Arc<Limit>>,
    scope: Scope,
    errors: &mut Vec<FieldError>,
) {
    let algorithm = base.params.algorithm;
    let cannot = |algorithm: Algorithm| match algorithm {
        Algorithm::SlidingWindowLog => Some(
            "sliding_window_log keeps one entry per request and cannot count what a request used after it (a debt); use sliding_window_counter",
        ),
        Algorithm::LeakyBucket => Some(
            "leaky_bucket queues requests and cannot owe what a request used after it (a debt); use gcra or token_bucket",
        ),
        _ => None,
    };
    if let Some(why) = cannot(algorithm) {
        errors.push(FieldError::new(field(name, "usage"), why));
    }
    for (tier, limit) in tiers.iter() {
        if limit.params.algorithm != algorithm
            && let Some(why) = cannot(limit.params.algorithm)
        {
            errors.push(FieldError::new(
                format!("policies.{name}.tiers.{tier}.algorithm"),
                format!("usage = true: {why}"),
            ));
        }
    }
    if scope == Scope::Replicated {
        errors.push(FieldError::new(
            field(name, "usage"),
            "scope = \"replicated\" shares consumption between regions and takes no charge; use scope = \"local\" or \"global\"",
        ));
    }
}
