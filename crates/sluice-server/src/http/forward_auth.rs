//! `GET /v1/forward-auth/{policy}`: the check API shaped for proxies that ask a sub-request
//! before forwarding (nginx `auth_request`, Traefik `forwardAuth`, Caddy `forward_auth`).
//!
//! The key is the caller as [`caller`](super::caller) finds it: the configured identity
//! header (`user:<value>`), else the trusted `X-Forwarded-For` entry, else `X-Real-IP`
//! (`ip:<address>`). `X-Plan-Tier` (or `?tier=`) picks the plan tier, `?cost=N` the cost,
//! and `X-Original-URI` / `X-Forwarded-Uri` (path only) the `endpoint` metrics label. The
//! answer carries the same headers and body as `POST /v1/check`; a denial is `429`, or the
//! status `?deny=` names (401, 403 or 429), since nginx's `auth_request` takes only 401 and
//! 403 as a denial. The problem document of a denial states the status actually sent.

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};

use super::respond::{json_response, json_with};
use crate::service::answer::{body_of, set_headers};
use crate::service::app::App;
use crate::service::json::{ApiError, PROBLEM_JSON};
use crate::service::limiter::CheckInput;

/// The plan tier of the caller.
pub const TIER_HEADER: &str = "x-plan-tier";
/// The original request path (nginx convention, then Traefik's).
const URI_HEADERS: [&str; 2] = ["x-original-uri", "x-forwarded-uri"];

/// `GET /v1/forward-auth/{policy}?deny=403&cost=1&tier=pro`.
pub(crate) async fn forward_auth(
    State(app): State<App>,
    policy: Result<Path<String>, PathRejection>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let policy = match policy {
        Ok(Path(policy)) => policy,
        Err(rejection) => {
            return ApiError::bad_request(
                format!("policy: {}", rejection.body_text()),
                Some("policy".to_owned()),
            )
            .into_response();
        }
    };
    match decide(&app, &policy, query, &headers).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn decide(
    app: &App,
    policy: &str,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let deny = match query.get("deny").map(String::as_str) {
        None | Some("429") => StatusCode::TOO_MANY_REQUESTS,
        Some("403") => StatusCode::FORBIDDEN,
        Some("401") => StatusCode::UNAUTHORIZED,
        Some(other) => {
            return Err(ApiError::bad_request(
                format!("deny: {other:?} is not 401, 403 or 429"),
                Some("deny".to_owned()),
            ));
        }
    };
    let cost = match query.get("cost") {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(
                format!("cost: {text:?} is not a non-negative integer"),
                Some("cost".to_owned()),
            )
        })?),
    };
    let key = super::caller::key_of(&app.limiter.snapshot().forward_auth, headers)?;
    let tier = query
        .get("tier")
        .map(String::as_str)
        .or_else(|| header(headers, TIER_HEADER));
    let endpoint = URI_HEADERS
        .iter()
        .find_map(|name| header(headers, name))
        .map(|uri| uri.split(['?', '#']).next().unwrap_or(uri));
    let input = CheckInput {
        policy,
        key: &key,
        cost,
        tier,
        endpoint,
        mode: sluice_core::Mode::Consume,
        detail: None,
    };
    let verdict = app.limiter.check(&input, app.clock.now_ms()).await?;
    let mut body = body_of(&verdict);
    if let Some(problem) = body.problem.as_mut() {
        problem.status = deny.as_u16();
    }
    let mut response = if verdict.allowed {
        json_response(StatusCode::OK, &body)
    } else {
        json_with(deny, PROBLEM_JSON, &body)
    };
    set_headers(response.headers_mut(), &verdict);
    Ok(response)
}

/// A header's trimmed, non-empty text.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}
