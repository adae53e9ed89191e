//! The HTTP API of SPEC ("Check API"): routes, request parsing, the decision headers and
//! bodies, and the JSON errors of the bad-input table. Identical on every listener; it knows
//! nothing of sockets. Decisions come from the [`Limiter`](crate::limiter::Limiter) only.

use std::borrow::Cow;
use std::fmt;

use axum::Router;
use axum::body::Bytes;
use std::collections::HashMap;

use axum::extract::Query;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequestParts, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use sluice_api::{
    BatchResponse, CheckResponse, ErrorBody, MAX_BODY_BYTES, Problem, TopEntry, TopErrorBound,
    TopResponse, codes,
};

use crate::App;
use crate::limiter::{CheckInput, LimitError, Verdict};
use crate::metrics;
use crate::telemetry::TraceParent;
use crate::top::{By, MAX_TOP, Period};

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const X_DEGRADED: HeaderName = HeaderName::from_static("x-ratelimit-degraded");
const X_SHADOW: HeaderName = HeaderName::from_static("x-ratelimit-shadow");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const JSON: HeaderValue = HeaderValue::from_static("application/json");
pub(crate) const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const ONE: HeaderValue = HeaderValue::from_static("1");

/// The router of the API.
pub fn router(app: App) -> Router {
    // Without a token the admin routes do not exist: they answer the JSON 404 of any path.
    let admin = app
        .admin_token
        .clone()
        .map(|token| crate::admin::router(app.clone(), token));
    let router = Router::new()
        .route("/v1/check", post(check))
        .route("/v1/policies", get(policies))
        .route("/v1/top", get(top_keys))
        .route(
            "/v1/forward-auth/{policy}",
            get(crate::forward_auth::forward_auth),
        )
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

/// A JSON error answer.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
    retry_after: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: ErrorBody {
                error: code.to_owned(),
                message: message.into(),
                field: None,
            },
            retry_after: false,
        }
    }

    pub(crate) fn field(mut self, field: Option<String>) -> Self {
        self.body.field = field;
        self
    }

    pub(crate) fn bad_request(message: impl Into<String>, field: Option<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, codes::BAD_REQUEST, message).field(field)
    }
}

impl From<LimitError> for ApiError {
    fn from(err: LimitError) -> Self {
        let message = err.to_string();
        match err {
            LimitError::BadRequest { field, .. } => ApiError::bad_request(message, field),
            LimitError::UnknownPolicy { field, .. } => {
                ApiError::new(StatusCode::NOT_FOUND, codes::UNKNOWN_POLICY, message)
                    .field(Some(field))
            }
            LimitError::CostExceedsCapacity { field, .. } => ApiError::new(
                StatusCode::BAD_REQUEST,
                codes::COST_EXCEEDS_CAPACITY,
                message,
            )
            .field(Some(field)),
            LimitError::BackendUnavailable => {
                let mut err = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    codes::BACKEND_UNAVAILABLE,
                    message,
                );
                err.retry_after = true;
                err
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(self.status, &self.body);
        if self.retry_after {
            response.headers_mut().insert(RETRY_AFTER, ONE);
        }
        response
    }
}

pub(crate) fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    json_with(status, JSON, body)
}

pub(crate) fn json_with<T: Serialize>(
    status: StatusCode,
    content_type: HeaderValue,
    body: &T,
) -> Response {
    serde_into(
        status,
        content_type,
        Vec::with_capacity(ANSWER_CAPACITY),
        body,
    )
}

/// `body` encoded by serde after whatever `bytes` holds (nothing, from every caller).
fn serde_into<T: Serialize>(
    status: StatusCode,
    content_type: HeaderValue,
    mut bytes: Vec<u8>,
    body: &T,
) -> Response {
    match serde_json::to_writer(&mut bytes, body) {
        Ok(()) => json_bytes(status, content_type, bytes),
        // Our own types always serialize; answer something valid regardless.
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, JSON)],
            r#"{"error":"internal","message":"could not encode the answer"}"#,
        )
            .into_response(),
    }
}

/// Room for a check's answer (~150 bytes): one allocation, no regrowth.
const ANSWER_CAPACITY: usize = 256;

/// A response of JSON already encoded.
fn json_bytes(status: StatusCode, content_type: HeaderValue, bytes: Vec<u8>) -> Response {
    let mut response = Response::new(axum::body::Body::from(bytes));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    // Room for the content type and every decision header (`set_headers`) at once: the map
    // is allocated once instead of grown per insert.
    headers.reserve(12);
    headers.insert(CONTENT_TYPE, content_type);
    response
}

/// One check's answer: written directly when it is plain (every allowed answer), through
/// serde otherwise; the same text either way.
fn check_answer(status: StatusCode, content_type: HeaderValue, body: &CheckResponse) -> Response {
    let mut bytes = Vec::with_capacity(ANSWER_CAPACITY);
    if body.write_plain_json(&mut bytes) {
        json_bytes(status, content_type, bytes)
    } else {
        // `write_plain_json` left the buffer empty: serde writes into the same allocation.
        serde_into(status, content_type, bytes, body)
    }
}

/// A string borrowed from the body when it has no escapes, so parsing allocates nothing.
#[derive(Debug)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// One check of a batch. Mirrors `sluice_api::CheckRequest`, borrowed from the body.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a check object such as {\"policy\": \"public\", \"key\": \"user:1\"}")]
struct IncomingCheck<'a> {
    #[serde(borrow)]
    policy: Text<'a>,
    #[serde(borrow)]
    key: Text<'a>,
    #[serde(default)]
    cost: Option<u64>,
    #[serde(borrow, default)]
    tier: Option<Text<'a>>,
    #[serde(borrow, default)]
    endpoint: Option<Text<'a>>,
}

impl IncomingCheck<'_> {
    fn input(&self) -> CheckInput<'_> {
        CheckInput {
            policy: &self.policy.0,
            key: &self.key.0,
            cost: self.cost,
            tier: self.tier.as_ref().map(|t| &*t.0),
            endpoint: self.endpoint.as_ref().map(|e| &*e.0),
        }
    }
}

/// A single check or a batch (`checks`): every field optional, so either shape parses and a
/// missing field is named by us.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
struct Incoming<'a> {
    #[serde(borrow, default)]
    policy: Option<Text<'a>>,
    #[serde(borrow, default)]
    key: Option<Text<'a>>,
    #[serde(default)]
    cost: Option<u64>,
    #[serde(borrow, default)]
    tier: Option<Text<'a>>,
    #[serde(borrow, default)]
    endpoint: Option<Text<'a>>,
    #[serde(borrow, default)]
    checks: Option<Vec<IncomingCheck<'a>>>,
}

fn parse(body: &[u8]) -> Result<Incoming<'_>, ApiError> {
    parse_json(body)
}

/// A JSON body as `T`, or a 400 naming the missing, unknown or wrong-typed field.
pub(crate) fn parse_json<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, ApiError> {
    // The fast path: a well-formed body parses once, without tracking the path (which costs
    // a few percent of a check). Only a bad body is parsed again, to name its field.
    if let Ok(parsed) = serde_json::from_slice(body) {
        return Ok(parsed);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let mut field = (path != ".").then_some(path);
        // A missing field is reported at its parent; name the field itself.
        let message = inner.to_string();
        if let Some(name) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
        {
            field = Some(match field {
                Some(parent) => format!("{parent}.{name}"),
                None => name.to_owned(),
            });
        }
        let message = match &field {
            Some(field) if !inner.is_syntax() && !inner.is_eof() => format!("{field}: {message}"),
            _ => format!("malformed JSON: {message}"),
        };
        ApiError::bad_request(message, field)
    })?;
    de.end()
        .map_err(|err| ApiError::bad_request(format!("malformed JSON: {err}"), None))?;
    Ok(parsed)
}

fn required<'a>(value: &'a Option<Text<'_>>, field: &str) -> Result<&'a str, ApiError> {
    value.as_ref().map(|t| &*t.0).ok_or_else(|| {
        ApiError::bad_request(format!("missing field `{field}`"), Some(field.to_owned()))
    })
}

/// The caller's trace, read from the `traceparent` header without copying the headers.
#[derive(Debug)]
struct Traced(TraceParent);

impl<S: Send + Sync> FromRequestParts<S> for Traced {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Traced(TraceParent::from_headers(&parts.headers)))
    }
}

async fn check(
    State(app): State<App>,
    Traced(parent): Traced,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_rejection(&rejection).into_response(),
    };
    match decide(&app, &body, &parent).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

fn body_rejection(rejection: &BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            codes::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        )
    } else {
        ApiError::bad_request(format!("could not read the body: {rejection}"), None)
    }
}

async fn decide(app: &App, body: &[u8], parent: &TraceParent) -> Result<Response, ApiError> {
    let incoming = parse(body)?;
    let now_ms = app.clock.now_ms();
    if let Some(checks) = &incoming.checks {
        let inputs: Vec<CheckInput<'_>> = checks.iter().map(IncomingCheck::input).collect();
        let verdicts = app
            .limiter
            .check_batch_traced(&inputs, now_ms, parent)
            .await?;
        return Ok(batch_response(&verdicts));
    }
    let input = CheckInput {
        policy: required(&incoming.policy, "policy")?,
        key: required(&incoming.key, "key")?,
        cost: incoming.cost,
        tier: incoming.tier.as_ref().map(|t| &*t.0),
        endpoint: incoming.endpoint.as_ref().map(|e| &*e.0),
    };
    let verdict = app.limiter.check_traced(&input, now_ms, parent).await?;
    let body = body_of(&verdict);
    let mut response = if verdict.allowed {
        check_answer(StatusCode::OK, JSON, &body)
    } else {
        check_answer(StatusCode::TOO_MANY_REQUESTS, PROBLEM_JSON, &body)
    };
    set_headers(response.headers_mut(), &verdict);
    Ok(response)
}

pub(crate) fn body_of(verdict: &Verdict) -> CheckResponse {
    let d = &verdict.decision;
    CheckResponse {
        allowed: verdict.allowed,
        policy: verdict.policy.name.to_string(),
        limit: d.limit,
        remaining: d.remaining,
        reset: d.reset_secs(),
        retry_after: d.retry_after_secs(),
        delay_ms: d.delay_ms,
        degraded: verdict.degraded,
        problem: (!verdict.allowed)
            .then(|| Problem::quota_exceeded(vec![verdict.policy.name.to_string()])),
    }
}

fn batch_response(verdicts: &[Verdict]) -> Response {
    let allowed = verdicts.iter().all(|v| v.allowed);
    let mut violated: Vec<String> = Vec::new();
    for v in verdicts.iter().filter(|v| !v.allowed) {
        if !violated.iter().any(|p| **p == *v.policy.name) {
            violated.push(v.policy.name.to_string());
        }
    }
    let body = BatchResponse {
        allowed,
        results: verdicts.iter().map(body_of).collect(),
        problem: (!allowed).then(|| Problem::quota_exceeded(violated)),
    };
    let mut response = if allowed {
        json_response(StatusCode::OK, &body)
    } else {
        json_with(StatusCode::TOO_MANY_REQUESTS, PROBLEM_JSON, &body)
    };
    if let Some(worst) = most_restrictive(verdicts) {
        set_headers(response.headers_mut(), worst);
    }
    response
}

/// The denied result with the longest wait, else the allowed one with the least left.
fn most_restrictive(verdicts: &[Verdict]) -> Option<&Verdict> {
    verdicts
        .iter()
        .filter(|v| !v.allowed)
        .max_by_key(|v| v.decision.retry_after_ms)
        .or_else(|| verdicts.iter().min_by_key(|v| v.decision.remaining))
}

pub(crate) fn set_headers(headers: &mut HeaderMap, verdict: &Verdict) {
    let d = &verdict.decision;
    // A no-op on answers of `json_with`, which made the room already.
    headers.reserve(10);
    let limit = if d.limit == verdict.limit.params.limit {
        verdict.limit.limit_header.clone()
    } else {
        HeaderValue::from(d.limit)
    };
    headers.insert(X_LIMIT, limit);
    headers.insert(X_REMAINING, HeaderValue::from(d.remaining));
    headers.insert(X_RESET, HeaderValue::from(d.reset_secs()));
    headers.insert(RATELIMIT_POLICY, verdict.limit.policy_header.clone());
    let retry = d.retry_after_secs();
    let t = retry.unwrap_or_else(|| d.secs_until_reset(verdict.now_ms));
    // Built on the stack and copied once: a `String` handed to `HeaderValue` costs a second
    // allocation whenever its capacity is not its length.
    let name = verdict.policy.name.as_bytes();
    let mut value = [0u8; 2 * 20 + 64 + 8];
    let mut numbers = itoa::Buffer::new();
    let mut len = 0;
    for part in [
        b"\"".as_slice(),
        name,
        b"\";r=",
        numbers.format(d.remaining).as_bytes(),
        b";t=",
        itoa::Buffer::new().format(t).as_bytes(),
    ] {
        let Some(room) = value.get_mut(len..len + part.len()) else {
            break;
        };
        room.copy_from_slice(part);
        len += part.len();
    }
    if let Ok(value) = HeaderValue::from_bytes(&value[..len]) {
        headers.insert(RATELIMIT, value);
    }
    if let Some(retry) = retry {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry));
    }
    if verdict.degraded {
        headers.insert(X_DEGRADED, ONE);
    }
    if verdict.shadow {
        headers.insert(X_SHADOW, ONE);
    }
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

/// `GET /v1/top?policy=P&by=rejected|checked&n=20&period=5m|60m`.
async fn top_keys(
    State(app): State<App>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let field = |name: &str| query.get(name).map(String::as_str);
    let bad = |name: &str, why: &str| {
        ApiError::bad_request(format!("{name}: {why}"), Some(name.to_owned()))
    };
    let policy = field("policy").ok_or_else(|| bad("policy", "required"))?;
    let by = match field("by") {
        None => By::Rejected,
        Some(text) => By::parse(text).ok_or_else(|| bad("by", "must be rejected or checked"))?,
    };
    let period = match field("period") {
        None => Period::FiveMinutes,
        Some(text) => Period::parse(text).ok_or_else(|| bad("period", "must be 5m or 60m"))?,
    };
    let n = match field("n") {
        None => 20,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_TOP).contains(n))
            .ok_or_else(|| bad("n", &format!("must be an integer from 1 to {MAX_TOP}")))?,
    };
    let report = app
        .limiter
        .top()
        .top(policy, period, by, n, app.clock.now_ms())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                codes::UNKNOWN_POLICY,
                format!("unknown policy {policy:?}"),
            )
            .field(Some("policy".to_owned()))
        })?;
    let body = TopResponse {
        policy: policy.to_owned(),
        by: by.as_str().to_owned(),
        period: period.as_str().to_owned(),
        approximate: true,
        error_bound: TopErrorBound {
            checked: report.error_checked,
            rejected: report.error_rejected,
        },
        total_checked: report.total_checked,
        total_rejected: report.total_rejected,
        keys: report
            .entries
            .into_iter()
            .map(|e| TopEntry {
                key: e.key,
                rejected: e.rejected,
                checked: e.checked,
                ratio: e.ratio,
            })
            .collect(),
    };
    Ok(json_response(StatusCode::OK, &body))
}

async fn not_found(uri: http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::NOT_FOUND,
        format!("no route {}", uri.path()),
    )
}

async fn method_not_allowed(method: http::Method, uri: http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        codes::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

#[cfg(test)]
mod tests {
    //! How fail modes look on the wire; the e2e tests cover everything the memory store can do.

    use std::sync::Arc;

    use axum::body::Body;
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
