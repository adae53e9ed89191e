//! A request that declares a body over [`MAX_BODY_BYTES`] gets its 413 before any of the body
//! is read: the body limit alone would wait for the bytes (a declared 10 GB, sent slowly,
//! would hold the connection as long as the client likes).
//!
//! A hand-written layer rather than `axum::middleware::from_fn`: it sits on every request, and
//! `from_fn` boxes the rest of the router and its future per request (measured: ~1,000
//! instructions a check, 3% of the check path), where this one only reads a header.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::response::{IntoResponse, Response};
use futures::future::{Either, Ready, ready};
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use sluice_api::{MAX_BODY_BYTES, codes};
use tower::{Layer, Service};

use crate::service::json::ApiError;

/// Wraps every route in [`RefuseLargeBodies`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RefuseLargeBodiesLayer;

impl<S> Layer<S> for RefuseLargeBodiesLayer {
    type Service = RefuseLargeBodies<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RefuseLargeBodies { inner }
    }
}

/// Answers 413 to a request declaring too large a body; passes the rest to `inner`.
#[derive(Debug, Clone)]
pub(crate) struct RefuseLargeBodies<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for RefuseLargeBodies<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if declares_too_large(request.headers()) {
            Either::Left(ready(Ok(too_large())))
        } else {
            Either::Right(self.inner.call(request))
        }
    }
}

fn declares_too_large(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|length| length > MAX_BODY_BYTES as u64)
}

fn too_large() -> Response {
    let mut response = ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        codes::PAYLOAD_TOO_LARGE,
        format!("the body is over {MAX_BODY_BYTES} bytes"),
    )
    .into_response();
    // The unread body cannot be skipped: the connection ends with this answer.
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}
