//! The HTTP API: one router, identical on every listener, that knows nothing of sockets.
//!
//! - [`check`]: `POST /v1/check`, single checks and batches;
//! - [`forward_auth`]: `GET /v1/forward-auth/{policy}` for proxies;
//! - [`top`]: `GET /v1/top`;
//! - [`admin`]: run-time limit overrides (only with `admin.token`);
//! - [`answer`]: the body and headers of a decision, shared with the Envoy RLS;
//! - [`error`]: the JSON error shape and body parsing.
//!
//! Here: the router and the operational routes (`/healthz`, `/readyz`, `/metrics`,
//! `/v1/policies`). Decisions come from the [`Limiter`](crate::limiter::Limiter) only.

pub mod admin;
pub mod answer;
mod check;
pub mod error;
pub mod forward_auth;
mod top;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use serde::Serialize;
use sluice_api::{MAX_BODY_BYTES, codes};

use crate::App;
use crate::metrics;
use error::{ApiError, json_response, method_not_allowed, not_found};

/// The router of the API.
pub fn router(app: App) -> Router {
    // Without a token the admin routes do not exist: they answer the JSON 404 of any path.
    let admin = app
        .admin_token
        .clone()
        .map(|token| admin::router(app.clone(), token));
    let router = Router::new()
        .route("/v1/check", post(check::check))
        .route("/v1/policies", get(policies))
        .route("/v1/top", get(top::top_keys))
        .route("/v1/forward-auth/{policy}", get(forward_auth::forward_auth))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app);
    match admin {
        Some(admin) => router.merge(admin),
        None => router,
    }
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// A router serving only `/metrics`, for `listen.metrics`.
pub fn metrics_router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

#[derive(Debug, Serialize)]
struct Status {
    status: &'static str,
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &Status { status: "ok" })
}

async fn readyz(State(app): State<App>) -> Response {
    match app.limiter.ready().await {
        Ok(()) => json_response(StatusCode::OK, &Status { status: "ready" }),
        Err(err) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            codes::BACKEND_UNAVAILABLE,
            format!(
                "the {} backend does not answer: {err}",
                app.limiter.store().kind()
            ),
        )
        .into_response(),
    }
}

async fn policies(State(app): State<App>) -> Response {
    json_response(StatusCode::OK, &app.limiter.policies().view())
}

async fn metrics_text(State(app): State<App>) -> Response {
    app.limiter.refresh_gauges(app.clock.now_ms());
    let store = app.limiter.store();
    if let Some(keys) = store.tracked_keys() {
        app.limiter.metrics().set_keys(store.kind(), keys);
    }
    (
        StatusCode::OK,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        app.limiter.metrics().encode(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    //! How fail modes look on the wire; the e2e tests cover everything the memory store can do.

    use std::sync::Arc;

    use axum::body::Body;
    use http::HeaderMap;
    use tower::ServiceExt;

    use super::*;
    use crate::clock::ManualClock;
    use crate::stores::Stores;
    use crate::testing::{self, Down};

    async fn call(body: &'static str, path: &str) -> (StatusCode, HeaderMap, serde_json::Value) {
        let settings = testing::settings(
            "[policies.open]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\n\
             [policies.closed]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\nfail = \"closed\"\n",
        );
        let app = App::new(
            settings,
            Stores::local(Arc::new(Down)),
            Arc::new(ManualClock::new(5_000)),
        );
        let method = if body.is_empty() { "GET" } else { "POST" };
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::from(body))
            .unwrap();
        let response = router(app).oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (
            parts.status,
            parts.headers,
            serde_json::from_slice(&bytes).unwrap(),
        )
    }

    #[tokio::test]
    async fn fail_open_answers_200_degraded() {
        let (status, headers, body) = call(r#"{"policy":"open","key":"k"}"#, "/v1/check").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["x-ratelimit-degraded"], "1");
        assert_eq!(headers["x-ratelimit-limit"], "10");
        assert_eq!(body["degraded"], true);
        assert_eq!(body["allowed"], true);
    }

    #[tokio::test]
    async fn fail_closed_answers_503_with_retry_after() {
        let (status, headers, body) = call(r#"{"policy":"closed","key":"k"}"#, "/v1/check").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers["retry-after"], "1");
        assert_eq!(body["error"], codes::BACKEND_UNAVAILABLE);
    }

    #[tokio::test]
    async fn readyz_is_503_while_the_backend_is_down() {
        let (status, _, body) = call("", "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"], codes::BACKEND_UNAVAILABLE);
        let (status, _, _) = call("", "/healthz").await;
        assert_eq!(status, StatusCode::OK);
    }
}
