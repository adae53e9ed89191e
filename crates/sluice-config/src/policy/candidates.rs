//! `[policies.NAME.candidate]` compiled: the parameters of each tier's candidate limit, with
//! their defaults (the candidate's window and algorithm, then the policy's) and every bad field
//! named.

use sluice_core::{Algorithm, Params};

use super::fields::{self, field};
use crate::FieldError;
use crate::schema::{CandidateConfig, PolicyConfig};

/// The candidates of one policy, compiled: tier `none`'s and each named tier's.
#[derive(Debug, Default)]
pub(super) struct Candidates {
    pub(super) base: Option<Params>,
    pub(super) tiers: Vec<(String, Params)>,
}

/// `[policies.NAME.candidate]`: each candidate's parameters, defaulting window and algorithm
/// to the candidate's then the policy's, and burst to the candidate's own limit. A tier
/// candidate must name a tier of the policy; a replicated policy cannot have candidates (its
/// state is spread over regions that would each judge a share of the traffic).
pub(super) fn compile_candidates(
    name: &str,
    config: &PolicyConfig,
    candidate: &CandidateConfig,
    policy: &Params,
    errors: &mut Vec<FieldError>,
) -> Candidates {
    let at = |key: &str| field(name, &format!("candidate.{key}"));
    if config.scope == "replicated" {
        errors.push(FieldError::new(
            at("limit"),
            "a candidate cannot be judged on a scope = \"replicated\" policy (each region sees a share of its traffic)",
        ));
        return Candidates::default();
    }
    if candidate.limit.is_none() && candidate.tiers.is_empty() {
        errors.push(FieldError::new(
            at("limit"),
            "is required unless tiers names the tiers that have a candidate",
        ));
        return Candidates::default();
    }
    let algorithm = compile_candidate_algorithm(
        &at("algorithm"),
        candidate.algorithm.as_deref(),
        policy.algorithm,
        errors,
    );
    let window_ms = compile_candidate_window(
        &at("window"),
        candidate.window.as_deref(),
        policy.window_ms,
        errors,
    );
    let mut out = Candidates::default();
    if let Some(limit) = candidate.limit {
        out.base = candidate_params(
            &field(name, "candidate"),
            algorithm,
            limit,
            window_ms,
            candidate.burst,
            errors,
        );
    } else if candidate.burst.is_some() {
        errors.push(FieldError::new(
            at("burst"),
            "applies to the candidate's limit, which is not set",
        ));
    }
    for (tier, tier_candidate) in &candidate.tiers {
        let at = |key: &str| at(&format!("tiers.{tier}.{key}"));
        if !config.tiers.contains_key(tier) {
            let known = config.tiers.keys().map(String::as_str).collect::<Vec<_>>();
            errors.push(FieldError::new(
                field(name, &format!("candidate.tiers.{tier}")),
                if known.is_empty() {
                    "the policy has no tiers; the candidate of its own limit is candidate.limit"
                        .to_owned()
                } else {
                    format!(
                        "the policy has no tier {tier:?}; its tiers are {}",
                        known.join(", ")
                    )
                },
            ));
            continue;
        }
        let Some(limit) = tier_candidate.limit else {
            errors.push(FieldError::new(at("limit"), "is required"));
            continue;
        };
        let algorithm = compile_candidate_algorithm(
            &at("algorithm"),
            tier_candidate.algorithm.as_deref(),
            algorithm,
            errors,
        );
        let window_ms = compile_candidate_window(
            &at("window"),
            tier_candidate.window.as_deref(),
            window_ms,
            errors,
        );
        if let Some(params) = candidate_params(
            &field(name, &format!("candidate.tiers.{tier}")),
            algorithm,
            limit,
            window_ms,
            tier_candidate.burst,
            errors,
        ) {
            out.tiers.push((tier.clone(), params));
        }
    }
    out
}

/// A candidate's `algorithm`, or `default` when unset (or unknown: reported).
fn compile_candidate_algorithm(
    at: &str,
    text: Option<&str>,
    default: Algorithm,
    errors: &mut Vec<FieldError>,
) -> Algorithm {
    text.and_then(|text| fields::algorithm(at, text, errors))
        .unwrap_or(default)
}

/// A candidate's `window` in ms, or `default` when unset (or bad: reported).
fn compile_candidate_window(
    at: &str,
    text: Option<&str>,
    default: u64,
    errors: &mut Vec<FieldError>,
) -> u64 {
    text.and_then(|text| fields::window(at, text, errors))
        .unwrap_or(default)
}

/// One candidate's parameters, validated as a policy's are. Errors name the field under `at`
/// (`policies.public.candidate`) that is to blame: `burst` for a zero burst, else `limit`.
fn candidate_params(
    at: &str,
    algorithm: Algorithm,
    limit: u64,
    window_ms: u64,
    burst: Option<u64>,
    errors: &mut Vec<FieldError>,
) -> Option<Params> {
    let params = Params {
        algorithm,
        limit,
        window_ms,
        burst: burst.unwrap_or(limit),
        counting: sluice_core::Counting::Admitted,
        calendar: None,
    };
    match params.validate() {
        Ok(()) => Some(params),
        Err(why) => {
            let key = match why {
                sluice_core::ParamsError::ZeroBurst => "burst",
                _ => "limit",
            };
            errors.push(FieldError::new(format!("{at}.{key}"), why.to_string()));
            None
        }
    }
}
