//! A tower [`Layer`] that rate-limits an axum/hyper service with a sluice daemon, so a Rust
//! service gets the same limits, headers and 429 answers as one behind a proxy, without glue.
//!
//! Per request it derives the key — the authenticated user ([`UserId`] request extension,
//! put there by your authentication), else `ip:` + the client address ([`ClientIp`]
//! extension, axum's `ConnectInfo<SocketAddr>` with the `axum` feature, or a plain
//! `SocketAddr` extension) — and asks the
//! daemon (`POST /v1/check`, the plan tier from a [`PlanTier`] extension, the path as the
//! `endpoint` label). Then:
//! - allowed: the inner service answers, with the daemon's rate-limit headers added (after
//!   waiting `delay_ms` when a leaky bucket asks for it);
//! - denied: `429` with the documented body (`application/problem+json`) and headers; the inner
//!   service is not called;
//! - the daemon unreachable, timed out or answering an error: the policy's fail mode —
//!   open lets the request through marked `X-RateLimit-Degraded: 1`, closed answers `503`
//!   `{"error": "backend_unavailable"}` with `Retry-After: 1`, like the daemon itself.
//!   [`RateLimitLayer::from_daemon`] reads the policy's `fail` from the daemon; otherwise it
//!   is set with [`RateLimitLayer::fail`] (default open).
//!
//! A request with neither a user nor a client address is passed through unlimited: there is
//! no key to count it under (serve axum with `into_make_service_with_connect_info`).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use sluice_api::{CheckRequest, ErrorBody, PoliciesResponse, codes};
use tower::{Layer, Service};

use crate::{Client, ClientError};

/// The authenticated caller, as a request extension: the key is this id as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserId(pub String);

/// The client's address, as a request extension (for servers other than axum's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// The caller's plan tier, as a request extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTier(pub String);

/// What the layer does when the daemon cannot decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Let the request through, marked `X-RateLimit-Degraded: 1`.
    Open,
    /// Answer `503 backend_unavailable`.
    Closed,
}

/// The daemon's headers a response carries.
const PASSED_ON: [&str; 8] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit-policy",
    "ratelimit",
    "retry-after",
    "x-ratelimit-degraded",
    "x-ratelimit-shadow",
];

/// Longest leaky-bucket delay honoured; a longer one is a denial in all but name.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// Why [`RateLimitLayer::from_daemon`] could not build a layer.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the daemon has no policy {0:?}")]
    UnknownPolicy(String),
}

/// Rate-limits the wrapped service under one policy.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    config: Arc<Config>,
}

#[derive(Debug, Clone)]
struct Config {
    client: Arc<Client>,
    policy: String,
    cost: u64,
    fail: FailMode,
}

impl RateLimitLayer {
    /// Checks every request against `policy` with `client`, failing open.
    pub fn new(client: Arc<Client>, policy: impl Into<String>) -> Self {
        RateLimitLayer {
            config: Arc::new(Config {
                client,
                policy: policy.into(),
                cost: 1,
                fail: FailMode::Open,
            }),
        }
    }

    /// As [`new`](Self::new), with the policy's fail mode read from the daemon
    /// (`GET /v1/policies`); an unknown policy is an error here rather than on every request.
    pub async fn from_daemon(
        client: Arc<Client>,
        policy: impl Into<String>,
    ) -> Result<Self, LayerError> {
        let policy = policy.into();
        let answer = client
            .send(http::Method::GET, "/v1/policies", &[], Bytes::new())
            .await?;
        let policies: PoliciesResponse = answer.json()?;
        let Some(view) = policies.policies.get(&policy) else {
            return Err(LayerError::UnknownPolicy(policy));
        };
        let fail = if view.fail == "closed" {
            FailMode::Closed
        } else {
            FailMode::Open
        };
        Ok(RateLimitLayer::new(client, policy).fail(fail))
    }

    /// What to do when the daemon cannot decide.
    pub fn fail(mut self, fail: FailMode) -> Self {
        Arc::make_mut(&mut self.config).fail = fail;
        self
    }

    /// The cost of each request (default 1).
    pub fn cost(mut self, cost: u64) -> Self {
        Arc::make_mut(&mut self.config).cost = cost;
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service [`RateLimitLayer`] makes.
#[derive(Debug, Clone)]
pub struct RateLimit<S> {
    inner: S,
    config: Arc<Config>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, B, RB> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    RB: From<Bytes> + Send + 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<RB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The instance polled ready serves this call; a fresh clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move {
            let Some(check) = check_of(&config, &request) else {
                return inner.call(request).await;
            };
            let outcome = config.client.check(&check).await;
            let (headers, delay) = match outcome {
                Ok(outcome) if outcome.status == 200 => (
                    outcome.headers,
                    Duration::from_millis(outcome.body.delay_ms),
                ),
                Ok(outcome) if outcome.status == 429 => {
                    let body = serde_json::to_vec(&outcome.body).unwrap_or_default();
                    let mut response = Response::new(RB::from(Bytes::from(body)));
                    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                    response.headers_mut().insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/problem+json"),
                    );
                    copy_headers(&outcome.headers, response.headers_mut());
                    return Ok(response);
                }
                // Any other answer (503 of a fail-closed daemon, a 4xx of a misconfigured
                // layer) or no answer: the daemon could not decide.
                Ok(_) | Err(_) => match config.fail {
                    FailMode::Closed => return Ok(unavailable()),
                    FailMode::Open => {
                        let mut headers = HeaderMap::new();
                        headers.insert("x-ratelimit-degraded", HeaderValue::from_static("1"));
                        (headers, Duration::ZERO)
                    }
                },
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay.min(MAX_DELAY)).await;
            }
            let mut response = inner.call(request).await?;
            copy_headers(&headers, response.headers_mut());
            Ok(response)
        })
    }
}

/// The check of a request, or `None` when there is no caller to count it under.
fn check_of<B>(config: &Config, request: &Request<B>) -> Option<CheckRequest> {
    let key = match request.extensions().get::<UserId>() {
        Some(UserId(user)) if !user.is_empty() => user.clone(),
        _ => format!("ip:{}", client_ip(request)?),
    };
    Some(CheckRequest {
        cost: Some(config.cost),
        tier: request
            .extensions()
            .get::<PlanTier>()
            .map(|PlanTier(tier)| tier.clone()),
        endpoint: Some(request.uri().path().to_owned()),
        ..CheckRequest::new(config.policy.clone(), key)
    })
}

fn client_ip<B>(request: &Request<B>) -> Option<IpAddr> {
    if let Some(ClientIp(ip)) = request.extensions().get::<ClientIp>() {
        return Some(*ip);
    }
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(addr)) = request
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(addr.ip());
    }
    request.extensions().get::<SocketAddr>().map(SocketAddr::ip)
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for name in PASSED_ON {
        if let Some(value) = from.get(name) {
            to.insert(name, value.clone());
        }
    }
}

fn unavailable<RB: From<Bytes>>() -> Response<RB> {
    let body = ErrorBody {
        error: codes::BACKEND_UNAVAILABLE.to_owned(),
        message: "the rate limiter is unavailable".to_owned(),
        field: None,
    };
    let mut response = Response::new(RB::from(Bytes::from(
        serde_json::to_vec(&body).unwrap_or_default(),
    )));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}
