//! `GET /v1/forward-auth/{policy}`: the check API shaped for proxies that ask a sub-request
//! before forwarding (nginx `auth_request`, Traefik `forwardAuth`, Caddy `forward_auth`).
//!
//! The key comes from the request's headers: `X-User-Id` when present, else `ip:` + the first
//! `X-Forwarded-For` address, else `ip:` + `X-Real-IP`. `X-Plan-Tier` (or `?tier=`) picks the
//! plan tier, `?cost=N` the cost, and `X-Original-URI` / `X-Forwarded-Uri` (path only) the
//! `endpoint` metrics label. The answer carries the same headers and body as `POST /v1/check`;
//! a denial is `429`, or the status `?deny=` names (401, 403 or 429), since nginx's
//! `auth_request` takes only 401 and 403 as a denial.

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};

use super::answer::{body_of, set_headers};
use super::error::{ApiError, PROBLEM_JSON, json_response, json_with};
use crate::App;
use crate::limiter::CheckInput;

/// Headers the key is read from, in order of preference.
pub const USER_HEADER: &str = "x-user-id";
pub const FORWARDED_FOR: &str = "x-forwarded-for";
pub const REAL_IP: &str = "x-real-ip";
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
    let key = key_of(headers)?;
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
    };
    let verdict = app.limiter.check(&input, app.clock.now_ms()).await?;
    let body = body_of(&verdict);
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

/// The key of the caller: `X-User-Id`, else `ip:` + the first `X-Forwarded-For` address
/// (the client as the first proxy saw it), else `ip:` + `X-Real-IP`.
fn key_of(headers: &HeaderMap) -> Result<String, ApiError> {
    if let Some(user) = header(headers, USER_HEADER) {
        return Ok(user.to_owned());
    }
    let forwarded = header(headers, FORWARDED_FOR)
        .and_then(|list| list.split(',').map(str::trim).find(|a| !a.is_empty()));
    if let Some(ip) = forwarded.or_else(|| header(headers, REAL_IP)) {
        return Ok(format!("ip:{ip}"));
    }
    Err(ApiError::bad_request(
        "no caller to limit: send X-User-Id, X-Forwarded-For or X-Real-IP",
        Some("X-User-Id".to_owned()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_key_prefers_the_user_then_the_first_forwarded_address() {
        let both = headers(&[("x-user-id", "u1"), ("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(key_of(&both).unwrap(), "u1");
        let chain = headers(&[
            ("x-forwarded-for", " 10.0.0.1 , 10.0.0.2"),
            ("x-real-ip", "9.9.9.9"),
        ]);
        assert_eq!(key_of(&chain).unwrap(), "ip:10.0.0.1");
        let real = headers(&[("x-user-id", " "), ("x-real-ip", "9.9.9.9")]);
        assert_eq!(key_of(&real).unwrap(), "ip:9.9.9.9");
        assert!(key_of(&headers(&[])).is_err());
    }
}
