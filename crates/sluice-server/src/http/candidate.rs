//! The candidate routes of the admin API, under `/v1/admin/policies/{policy}/tiers/{tier}/`:
//! `candidate` (`PUT` sets a run-time candidate, `GET` shows the one in force and where it
//! comes from, `DELETE` removes the run-time one) and `candidate/promote` (the candidate
//! becomes the tier's limit override). Tier `none` is the policy's own limit.
//!
//! A run-time candidate replaces the file's of its (policy, tier); removing it puts the file's,
//! if any, in force again. A candidate judges a tier the policy has (`none`, a tier of the
//! file, one an override added): 404 naming the tiers otherwise. Promotion stores an override
//! of limit and burst, so only a candidate with the policy's window and algorithm can be
//! promoted (409 `candidate_not_promotable` otherwise: that change belongs in the file). A
//! promoted run-time candidate is cleared; a promoted file candidate stays judged (now equal
//! to the limit) until the file changes, since the file still names it.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use sluice_api::{CandidateRemoved, CandidateRequest, CandidateView, PromotedView, codes};
use sluice_core::Params;
use sluice_store::{CandidateOverride, LimitOverride};

use super::change::{check_names, effective, log_change, refused, request_of, resync, unavailable};
use super::respond::json_response;
use crate::service::app::App;
use crate::service::json::ApiError;
use crate::service::overrides::CandidateSource;
use sluice_config::policy::params_view;

/// `GET …/candidate`: the candidate in force, or 404.
pub(super) async fn show(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_names(&policy, &tier)?;
    app.limiter
        .snapshot()
        .limits
        .check_tier(&policy, &tier)
        .map_err(refused)?;
    let view = in_force(&app, &policy, &tier).ok_or_else(|| no_candidate(&policy, &tier))?;
    Ok(json_response(StatusCode::OK, &view))
}

/// `PUT …/candidate`: stores a run-time candidate once it compiles with the policy.
pub(super) async fn set(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CandidateRequest = request_of((&policy, &tier), body)?;
    let candidate = CandidateOverride {
        policy,
        tier,
        limit: request.limit,
        burst: request.burst,
        window: request.window,
        algorithm: request.algorithm,
    };
    app.limiter
        .snapshot()
        .limits
        .validate_candidate(&candidate)
        .map_err(refused)?;
    let (policy, tier) = (candidate.policy.as_str(), candidate.tier.as_str());
    let before = in_force(&app, policy, tier);
    app.overrides
        .put_candidate(&candidate)
        .await
        .map_err(|e| unavailable("store the candidate", &e))?;
    resync(&app, "candidate").await;
    let after = in_force(&app, policy, tier);
    log_candidate(
        "candidate set",
        (policy, tier),
        before.as_ref(),
        after.as_ref(),
    );
    let view = after.ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            codes::BACKEND_UNAVAILABLE,
            "the candidate is stored but could not be read back yet: every daemon applies it on its next poll",
        )
    })?;
    Ok(json_response(StatusCode::OK, &view))
}

/// `DELETE …/candidate`: removes the run-time candidate; the file's, if any, is in force again.
pub(super) async fn remove(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_names(&policy, &tier)?;
    let before = in_force(&app, &policy, &tier);
    // Deleted whether or not its tier is still there: a stored candidate whose tier an
    // override added, then lost, must remain removable.
    let deleted = app
        .overrides
        .delete_candidate(&policy, &tier)
        .await
        .map_err(|e| unavailable("delete the candidate", &e))?;
    if !deleted {
        app.limiter
            .snapshot()
            .limits
            .check_tier(&policy, &tier)
            .map_err(refused)?;
        let file = if before.is_some() {
            " (the candidate in force is the config file's: change the file to remove it)"
        } else {
            ""
        };
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            codes::NOT_FOUND,
            format!("no candidate set at run time for policy {policy:?} tier {tier:?}{file}"),
        ));
    }
    resync(&app, "candidate deletion").await;
    let after = in_force(&app, &policy, &tier);
    log_candidate(
        "candidate removed",
        (&policy, &tier),
        before.as_ref(),
        after.as_ref(),
    );
    Ok(json_response(
        StatusCode::OK,
        &CandidateRemoved {
            policy,
            tier,
            deleted: true,
            in_force: after,
        },
    ))
}

/// `POST …/candidate/promote`: the candidate in force becomes the tier's limit override.
pub(super) async fn promote(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_names(&policy, &tier)?;
    let snapshot = app.limiter.snapshot();
    snapshot
        .limits
        .check_tier(&policy, &tier)
        .map_err(refused)?;
    let (limit, candidate) = {
        let policies = &snapshot.policies;
        let limit = policies
            .get(&policy)
            .and_then(|p| p.named_tier(&tier))
            .ok_or_else(|| no_candidate(&policy, &tier))?;
        let candidate = limit
            .candidate
            .ok_or_else(|| no_candidate(&policy, &tier))?;
        (limit.params, candidate)
    };
    if let Err((field, why)) = promotable(&candidate, &limit) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            codes::CANDIDATE_NOT_PROMOTABLE,
            format!(
                "{why}: an override changes only limit and burst, so this candidate cannot become one; change the config file"
            ),
        )
        .field(Some(field.to_owned())));
    }
    let source = snapshot.limits.candidate_source(&policy, &tier);
    let change = LimitOverride {
        policy,
        tier,
        limit: candidate.limit,
        burst: Some(candidate.burst),
    };
    snapshot.limits.validate(&change).map_err(refused)?;
    let (policy, tier) = (change.policy.as_str(), change.tier.as_str());
    let before = effective(&app, policy, tier);
    app.overrides
        .put(&change)
        .await
        .map_err(|e| unavailable("store the promoted limit", &e))?;
    if source == CandidateSource::Admin {
        app.overrides
            .delete_candidate(policy, tier)
            .await
            .map_err(|e| {
                unavailable(
                    "clear the promoted candidate (the limit override is stored)",
                    &e,
                )
            })?;
    }
    resync(&app, "promoted candidate").await;
    log_change(
        "limit override set",
        " (promoted candidate)",
        (policy, tier),
        before,
        &app,
    );
    let promoted = Params {
        limit: candidate.limit,
        burst: candidate.burst,
        ..limit
    };
    Ok(json_response(
        StatusCode::OK,
        &PromotedView {
            policy: change.policy.clone(),
            tier: change.tier.clone(),
            previous: params_view(&limit),
            limit: params_view(&promoted),
            source: source.as_str().to_owned(),
        },
    ))
}

/// The candidate in force of (policy, tier), with the limit it is judged beside.
fn in_force(app: &App, policy: &str, tier: &str) -> Option<CandidateView> {
    let snapshot = app.limiter.snapshot();
    let policies = &snapshot.policies;
    let limit = policies.get(policy)?.named_tier(tier)?;
    let candidate = limit.candidate?;
    Some(CandidateView {
        policy: policy.to_owned(),
        tier: tier.to_owned(),
        source: snapshot
            .limits
            .candidate_source(policy, tier)
            .as_str()
            .to_owned(),
        candidate: params_view(&candidate),
        current: params_view(&limit.params),
        promotable: promotable(&candidate, &limit.params).is_ok(),
    })
}

/// Whether `candidate` can become an override of `limit` (same window and algorithm); else
/// the field that differs and why.
fn promotable(candidate: &Params, limit: &Params) -> Result<(), (&'static str, String)> {
    if candidate.algorithm != limit.algorithm {
        return Err((
            "algorithm",
            format!(
                "the candidate's algorithm {} is not the policy's {}",
                candidate.algorithm.as_str(),
                limit.algorithm.as_str()
            ),
        ));
    }
    if candidate.window_ms != limit.window_ms {
        let (c, l) = (params_view(candidate), params_view(limit));
        return Err((
            "window",
            format!(
                "the candidate's window {} is not the policy's {}",
                c.window, l.window
            ),
        ));
    }
    Ok(())
}

fn no_candidate(policy: &str, tier: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::NOT_FOUND,
        format!("policy {policy:?} tier {tier:?} has no candidate"),
    )
}

/// The audit line of a candidate change: `candidate set: policy=public tier=pro candidate
/// none→1500 per 60s burst 1500 token_bucket (admin)`.
fn log_candidate(
    what: &str,
    (policy, tier): (&str, &str),
    before: Option<&CandidateView>,
    after: Option<&CandidateView>,
) {
    let show = |view: Option<&CandidateView>| {
        view.map_or_else(
            || "none".to_owned(),
            |v| {
                let c = &v.candidate;
                format!(
                    "{} per {} burst {} {} ({})",
                    c.limit, c.window, c.burst, c.algorithm, v.source
                )
            },
        )
    };
    tracing::info!(
        who = "admin-token",
        "{what}: policy={policy} tier={tier} candidate {}→{}",
        show(before),
        show(after),
    );
}
