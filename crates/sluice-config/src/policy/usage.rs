//! The rules of `usage = true` (a usage policy: checks ask, charges debit after the
//! response), kept apart from the policy compile they extend.

use sluice_core::Algorithm;

use crate::error::FieldError;

/// `usage = true` needs an algorithm that can carry a debt, for the policy and every tier,
/// and a scope whose counters take a charge: `algorithm` is the policy's, `tiers` the
/// tiers' names and algorithms, `replicated` whether its scope is `replicated`. (Plain data,
/// so this module imports nothing of the policy compile that calls it.)
pub(super) fn check_usage<'a>(
    name: &str,
    algorithm: Algorithm,
    tiers: impl Iterator<Item = (&'a str, Algorithm)>,
    replicated: bool,
    errors: &mut Vec<FieldError>,
) {
    let usage_field = format!("policies.{name}.usage");
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
        errors.push(FieldError::new(usage_field.clone(), why));
    }
    for (tier, tier_algorithm) in tiers {
        if tier_algorithm != algorithm
            && let Some(why) = cannot(tier_algorithm)
        {
            errors.push(FieldError::new(
                format!("policies.{name}.tiers.{tier}.algorithm"),
                format!("usage = true: {why}"),
            ));
        }
    }
    if replicated {
        errors.push(FieldError::new(
            usage_field,
            "scope = \"replicated\" shares consumption between regions and takes no charge; use scope = \"local\" or \"global\"",
        ));
    }
}
