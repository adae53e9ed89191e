//! The admin API: change a tier's limit at run time without a deploy. Served only when
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
use axum::routing::{get, put};
use http::StatusCode;
use sluice_api::{OverrideRequest, OverrideView, OverridesResponse, codes};
use sluice_store::{LimitOverride, StoreError};
use subtle::ConstantTimeEq;

use super::error::parse_json;
use crate::config::is_valid_name;
use crate::service::app::App;
use crate::service::json::{ApiError, json_response};
use crate::service::overrides::{self, OverrideError};

/// The admin routes, guarded by `token`.
pub fn router(app: App, token: std::sync::Arc<str>) -> Router {
    Router::new()
        .route("/v1/admin/policies", get(list))
        .route(
            "/v1/admin/policies/{policy}/tiers/{tier}",
            put(set).delete(remove),
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

/// The backend failed `what` ("store the change", "read the overrides").
fn unavailable(what: &str, err: &StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        codes::BACKEND_UNAVAILABLE,
        format!("the backend could not {what}: {err}"),
    )
}

fn view(o: LimitOverride) -> OverrideView {
    OverrideView {
        policy: o.policy,
        tier: o.tier,
        limit: o.limit,
        burst: o.burst,
    }
}

async fn list(State(app): State<App>) -> Result<Response, ApiError> {
    let (version, all) = app
        .overrides
        .list()
        .await
        .map_err(|e| unavailable("read the overrides", &e))?;
    let body = OverridesResponse {
        version,
        overrides: all.into_iter().map(view).collect(),
    };
    Ok(json_response(StatusCode::OK, &body))
}

fn check_names(policy: &str, tier: &str) -> Result<(), ApiError> {
    if !is_valid_name(tier) {
        return Err(ApiError::bad_request(
            "tier: 1 to 64 of A-Z a-z 0-9 _ . -",
            Some("tier".to_owned()),
        ));
    }
    if !is_valid_name(policy) {
        return Err(unknown_policy(policy));
    }
    Ok(())
}

/// The `(limit, burst)` a caller of `policy` on `tier` is held to right now.
fn effective(app: &App, policy: &str, tier: &str) -> Option<(u64, u64)> {
    let policies = app.limiter.policies();
    let params = policies.get(policy)?.limit_for(Some(tier)).params;
    Some((params.limit, params.burst))
}

/// One line an operator reads: `policy=public tier=pro limit 1000→2000 burst 2000→4000`.
fn log_change(what: &str, policy: &str, tier: &str, before: Option<(u64, u64)>, app: &App) {
    let after = effective(app, policy, tier);
    let show = |value: Option<u64>| value.map_or_else(|| "?".to_owned(), |v| v.to_string());
    tracing::info!(
        who = "admin-token",
        "{what}: policy={policy} tier={tier} limit {}→{} burst {}→{}",
        show(before.map(|b| b.0)),
        show(after.map(|a| a.0)),
        show(before.map(|b| b.1)),
        show(after.map(|a| a.1)),
    );
}

fn unknown_policy(policy: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::UNKNOWN_POLICY,
        format!("unknown policy {policy:?}"),
    )
    .field(Some("policy".to_owned()))
}

async fn set(
    State(app): State<App>,
    Path((policy, tier)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    check_names(&policy, &tier)?;
    let body = body.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let request: OverrideRequest = parse_json(&body)?;
    let change = LimitOverride {
        policy,
        tier,
        limit: request.limit,
        burst: request.burst,
    };
    app.limits.validate(&change).map_err(|err| match err {
        OverrideError::UnknownPolicy(policy) => unknown_policy(&policy),
        OverrideError::Invalid { field, message } => {
            ApiError::bad_request(format!("{field}: {message}"), Some(field))
        }
    })?;
    let before = effective(&app, &change.policy, &change.tier);
    app.overrides
        .put(&change)
        .await
        .map_err(|e| unavailable("store the change", &e))?;
    // In force here at once; the other daemons follow on their next poll.
    if let Err(err) = overrides::sync(&app.limits, &*app.overrides, &app.limiter).await {
        tracing::warn!(error = %err, "override stored but not yet re-read");
    }
    log_change(
        "limit override set",
        &change.policy,
        &change.tier,
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
    if let Err(err) = overrides::sync(&app.limits, &*app.overrides, &app.limiter).await {
        tracing::warn!(error = %err, "override deleted but not yet re-read");
    }
    log_change("limit override removed", &policy, &tier, before, &app);
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
