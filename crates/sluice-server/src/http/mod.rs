//! The HTTP API: one router, identical on every listener, that knows nothing of sockets.
//!
//! - [`check`]: `POST /v1/check`, single checks and batches; [`charge`]: `POST /v1/charge`,
//!   what a request used charged to a usage policy after it;
//! - [`forward_auth`]: `GET /v1/forward-auth/{policy}` for proxies, and [`caller`], who its
//!   caller is (the trusted identity header or address);
//! - [`top`]: `GET /v1/top`; [`slo`]: `GET /v1/status`;
//! - [`admin`]: run-time limit overrides (only with `admin.token`), and [`candidate`], the
//!   candidate limits set, shown, removed and promoted through it;
//! - the body and headers of a decision come from [`crate::service::answer`], shared with the
//!   Envoy RLS and RESP;
//! - [`error`]: the JSON error shape and body parsing;
//! - [`plain_body`]: the plain check body read without serde;
//! - [`large_bodies`]: the 413 of a declared body over the limit, before it is read.
//! - [`api`]: the service a connection calls, the check straight to its handler.
//! - [`respond`]: the service's answers and errors made axum responses.
//!
//! Here: the router and the operational routes (`/healthz`, `/readyz`, `/metrics`,
//! `/v1/policies`). Decisions come from the [`Limiter`](crate::service::limiter::Limiter) only.

pub mod admin;
mod api;
pub mod caller;
pub mod candidate;
mod change;
mod charge;
mod check;
pub mod error;
pub mod forward_auth;
mod large_bodies;
mod plain_body;
mod respond;
mod slo;
mod top;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Serialize;
use sluice_api::{MAX_BODY_BYTES, codes};

use self::respond::json_response;
use crate::exposition::Format;
use crate::service::app::App;
use crate::service::json::ApiError;
pub use api::Api;
pub(crate) use api::{answer_check, is_direct_length};
use error::{method_not_allowed, not_found};

/// The router of the API.
pub fn router(app: App) -> Router {
    // Without a token the admin routes do not exist: they answer the JSON 404 of any path.
    let admin = app
        .admin_token
        .clone()
        .map(|token| admin::router(app.clone(), token));
    let router = Router::new()
        .route("/v1/check", post(check::check))
        .route("/v1/charge", post(charge::charge))
        .route("/v1/policies", get(policies))
        .route("/v1/top", guarded(&app, get(top::top_keys)))
        .route("/v1/status", guarded(&app, get(slo::status)))
        .route("/v1/forward-auth/{policy}", get(forward_auth::forward_auth))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app);
    match admin {
        Some(admin) => router.merge(admin),
        None => router
            .route("/v1/admin/policies", axum::routing::any(admin_disabled))
            .route("/v1/admin/{*rest}", axum::routing::any(admin_disabled)),
    }
    .layer(large_bodies::RefuseLargeBodiesLayer)
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// Without `admin.token` the admin routes say why they are not there.
async fn admin_disabled() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::ADMIN_DISABLED,
        "the admin API is off: set admin.token",
    )
}

/// `GET /v1/top` and `GET /v1/status` show raw keys (API keys, e-mail addresses): with an
/// admin token set, they are guarded by it as the admin API is.
fn guarded(app: &App, route: axum::routing::MethodRouter<App>) -> axum::routing::MethodRouter<App> {
    match app.admin_token.clone() {
        None => route,
        Some(token) => route.route_layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let token = token.clone();
                async move { admin::authorize(&token, request, next).await }
            },
        )),
    }
}

/// The router of `listen.metrics`: `/metrics` and the probes `/healthz` and `/readyz`, so a
/// pod's kubelet and Prometheus reach it on a TCP port while the check API stays on the Unix
/// socket. Nothing else: no keys (`/v1/top`) and no check on this listener.
pub fn metrics_router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
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
                "the {} backend is not ready: {err}",
                app.limiter.store().kind()
            ),
        )
        .into_response(),
    }
}

async fn policies(State(app): State<App>) -> Response {
    json_response(StatusCode::OK, &app.limiter.snapshot().policies.view())
}

async fn metrics_text(State(app): State<App>, headers: HeaderMap) -> Response {
    let format = Format::negotiate(
        headers
            .get(http::header::ACCEPT)
            .and_then(|accept| accept.to_str().ok()),
    );
    app.limiter.refresh_gauges(app.clock.now_ms());
    let limiter = &app.limiter;
    limiter.metrics().record_store(
        limiter.store().as_ref(),
        limiter.snapshot().policies.names(),
    );
    let metrics = limiter.metrics();
    let text = match format {
        Format::OpenMetrics => metrics.encode_with_exemplars(),
        Format::PrometheusText => metrics.encode(),
    };
    (
        StatusCode::OK,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        )],
        format.render(text),
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
    use crate::service::stores::Stores;
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

    #[tokio::test]
    async fn the_metrics_listener_serves_the_probes_and_no_api() {
        let router = metrics_router(memory_app(GUARDED));
        for (path, status) in [
            ("/healthz", StatusCode::OK),
            ("/readyz", StatusCode::OK),
            ("/metrics", StatusCode::OK),
            ("/v1/top?policy=p", StatusCode::NOT_FOUND),
            ("/v1/policies", StatusCode::NOT_FOUND),
        ] {
            let response = router.clone().oneshot(get(path, None)).await.unwrap();
            assert_eq!(response.status(), status, "{path}");
        }
    }

    /// An app serving `toml` on the stores it names, at a fixed time.
    fn memory_app(toml: &str) -> App {
        testing::memory_app(toml, 5_000)
    }

    /// The status and JSON body of `request` on a memory-backed daemon serving `toml`.
    async fn answer(toml: &str, request: http::Request<Body>) -> (StatusCode, serde_json::Value) {
        let response = router(memory_app(toml)).oneshot(request).await.unwrap();
        let status = response.status();
        assert_eq!(
            response.headers()[CONTENT_TYPE],
            "application/json",
            "{status}"
        );
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    const GUARDED: &str = "[admin]\ntoken = \"s3cret\"\n\
        [policies.p]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\n";

    fn get(path: &str, authorization: Option<&str>) -> http::Request<Body> {
        let mut request = http::Request::builder().uri(path);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn a_body_with_a_check_beside_its_batch_is_refused() {
        let request = http::Request::builder()
            .method("POST")
            .uri("/v1/check")
            .body(Body::from(
                r#"{"policy":"p","key":"k","checks":[{"policy":"p","key":"k"}]}"#,
            ))
            .unwrap();
        let (status, body) = answer(GUARDED, request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"], codes::BAD_REQUEST);
        assert_eq!(body["field"], "policy");
    }

    #[tokio::test]
    async fn a_path_that_does_not_decode_answers_the_json_error() {
        let (status, body) = answer(GUARDED, get("/v1/forward-auth/%FF", None)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["field"], "policy");
    }

    #[tokio::test]
    async fn top_keys_need_the_admin_token_when_one_is_set_and_the_scheme_is_any_case() {
        let path = "/v1/top?policy=p";
        let (status, body) = answer(GUARDED, get(path, None)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"], codes::UNAUTHORIZED);
        let (status, _) = answer(GUARDED, get(path, Some("Bearer wrong"))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        for scheme in ["Bearer", "bearer", "BEARER"] {
            let auth = format!("{scheme} s3cret");
            let (status, body) = answer(GUARDED, get(path, Some(&auth))).await;
            assert_eq!(status, StatusCode::OK, "{scheme}: {body}");
            let (status, _) = answer(GUARDED, get("/v1/admin/policies", Some(&auth))).await;
            assert_eq!(status, StatusCode::OK, "{scheme}");
        }
        // Without a token the sketch stays open, as before.
        let open = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\n";
        let (status, _) = answer(open, get(path, None)).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn without_a_token_the_admin_routes_say_the_api_is_off() {
        let open = "[policies.p]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\n";
        for path in ["/v1/admin/policies", "/v1/admin/policies/p/tiers/pro"] {
            let (status, body) = answer(open, get(path, None)).await;
            assert_eq!(status, StatusCode::NOT_FOUND);
            assert_eq!(body["error"], codes::ADMIN_DISABLED, "{path}");
            assert_eq!(body["message"], "the admin API is off: set admin.token");
        }
    }

    #[tokio::test]
    async fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
        // The body never arrives: a 413 here cannot have waited for it.
        let (tx, body) = tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(1);
        let request = http::Request::builder()
            .method("POST")
            .uri("/v1/check")
            .header("content-length", "10000000000")
            .body(Body::from_stream(
                tokio_stream::wrappers::ReceiverStream::new(body),
            ))
            .unwrap();
        let (status, body) = answer(GUARDED, request).await;
        drop(tx);
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body["error"], codes::PAYLOAD_TOO_LARGE);
    }
}
