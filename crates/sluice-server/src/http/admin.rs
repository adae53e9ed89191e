//! The admin API: change a tier's limit at run time without a deploy, and its candidate (the
//! routes under `…/candidate`, in [`candidate`](super::candidate)). Served only when
//! `admin.token` is set, and only to requests carrying `Authorization: Bearer TOKEN` (compared
//! in constant time). Changes are stored in the backend, so they survive restarts and reach
//! every daemon sharing it (see [`overrides`](crate::service::overrides)); each is logged with who,
//! what, the old and the new value.

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use http::StatusCode;
use sluice_api::{
    CandidateRequest, CandidateRequestView, OverrideRequest, OverrideView, OverridesResponse, codes,
};
use sluice_store::{CandidateOverride, LimitOverride};
use subtle::ConstantTimeEq;

use super::candidate;
use super::change::{check_names, effective, log_change, refused, request_of, resync, unavailable};
use super::respond::json_response;
use crate::service::app::App;
use crate::service::json::ApiError;

/// The admin routes, guarded by `token`.
pub fn router(app: App, token: std::sync::Arc<str>) -> Router {
    Router::new()
        .route("/v1/admin/policies", get(list))
        .route(
            "/v1/admin/policies/{policy}/tiers/{tier}",
            put(set).delete(remove),
        )
        .route(
            "/v1/admin/policies/{policy}/tiers/{tier}/candidate",
            get(candidate::show)
                .put(candidate::set)
                .delete(candidate::remove),
        )
        .route(
            "/v1/admin/policies/{policy}/tiers/{tier}/candidate/promote",
            post(candidate::promote),
        )
        .route_layer(middleware::from_fn(move |request: Request, next: Next| {
            let token = token.clone();
            async move { authorize(&token, request, next).await }
        }))
        .with_state(app)
}

/// Runs `next` only for a request carrying `Authorization: Bearer <token>` (the scheme is
/// case-insensitive); else 401.
pub(crate) async fn authorize(token: &str, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, credentials) = v.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| credentials.trim_start())
        })
        .unwrap_or("");
    if tokens_match(presented, token) {
        next.run(request).await
    } else {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            codes::UNAUTHORIZED,
            "the admin API needs Authorization: Bearer <admin.token>",
        )
        .into_response()
    }
}

/// Compares fixed-size digests of both, in constant time: neither the length of the token nor
/// the place of the first differing byte shows in how long a refusal takes.
fn tokens_match(presented: &str, token: &str) -> bool {
    let digest = |s: &str| sha1_smol::Sha1::from(s).digest().bytes();
    bool::from(digest(presented).ct_eq(&digest(token)))
}

fn view(o: LimitOverride) -> OverrideView {
    OverrideView {
        policy: o.policy,
        tier: o.tier,
        limit: o.limit,
        burst: o.burst,
    }
}

fn candidate_view(c: CandidateOverride) -> CandidateRequestView {
    CandidateRequestView {
        policy: c.policy,
        tier: c.tier,
        request: CandidateRequest {
            limit: c.limit,
            burst: c.burst,
            window: c.window,
            algorithm: c.algorithm,
        },
    }
}

async fn list(State(app): State<App>) -> Result<Response, ApiError> {
    let settings = app
        .overrides
        .settings()
        .await
        .map_err(|e| unavailable("read the overrides", &e))?;
    let body = OverridesResponse {
        version: settings.version,
        overrides: settings.limits.into_iter().map(view).collect(),
        candidates: settings
            .candidates
            .into_iter()
            .map(candidate_view)
            .collect(),
    };
    Ok(json_response(StatusCode::OK, &body))
}

async fn set(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: OverrideRequest = request_of((&policy, &tier), body)?;
    let change = LimitOverride {
        policy,
        tier,
        limit: request.limit,
        burst: request.burst,
    };
    app.limiter
        .snapshot()
        .limits
        .validate(&change)
        .map_err(refused)?;
    let before = effective(&app, &change.policy, &change.tier);
    app.overrides
        .put(&change)
        .await
        .map_err(|e| unavailable("store the change", &e))?;
    resync(&app, "override").await;
    log_change(
        "limit override set",
        "",
        (&change.policy, &change.tier),
        before,
        &app,
    );
    Ok(json_response(StatusCode::OK, &view(change)))
}

async fn remove(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_names(&policy, &tier)?;
    let before = effective(&app, &policy, &tier);
    let deleted = app
        .overrides
        .delete(&policy, &tier)
        .await
        .map_err(|e| unavailable("delete the override", &e))?;
    if !deleted {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            codes::NOT_FOUND,
            format!("no override for policy {policy:?} tier {tier:?}"),
        ));
    }
    resync(&app, "override deletion").await;
    log_change("limit override removed", "", (&policy, &tier), before, &app);
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({"policy": policy, "tier": tier, "deleted": true}),
    ))
}

#[cfg(test)]
mod tests {
    use super::tokens_match;

    #[test]
    fn tokens_match_only_the_same_token_whatever_the_length() {
        assert!(tokens_match("s3cret-token", "s3cret-token"));
        assert!(!tokens_match("s3cret-tokem", "s3cret-token"));
        assert!(!tokens_match("s3cret", "s3cret-token"));
        assert!(!tokens_match("s3cret-token-and-more", "s3cret-token"));
        assert!(!tokens_match("", "s3cret-token"));
    }
}
