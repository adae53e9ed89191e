//! The service every API connection calls. `POST /v1/check` with a declared body within the
//! limit, the one route a sidecar's hot path takes, goes straight to its handler; every other
//! request goes through the [`router`](crate::http::router). The router's work is the check's
//! largest cost after hyper's own (issue 41, docs/src/internals/performance.md): its path
//! match, its extensions (the matched path, the body limit), the body boxed into axum's type
//! and each layer's future, none of which this one route needs. The answer is the router's, byte for
//! byte: the same handler ([`check::answer`]) decides and writes it, and a request the router
//! would treat differently (no `Content-Length`, one over the limit, another method or path)
//! goes to the router.

use std::pin::Pin;

use axum::Router;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use http::header::CONTENT_LENGTH;
use http::{Method, Request};
use hyper::body::{Body, Incoming};
use sluice_api::MAX_BODY_BYTES;
use tower::ServiceExt;

use super::check;
use crate::service::app::App;
use crate::service::json::ApiError;
use crate::telemetry::TraceParent;

/// The routes of one listener, with the check's direct path when the listener serves it.
#[derive(Debug, Clone)]
pub struct Api {
    router: Router,
    /// The app the direct check path decides with; `None` on a listener without the check
    /// API (`listen.metrics`).
    checks: Option<App>,
}

impl Api {
    /// `router` (the whole API, [`crate::http::router`] of `app`), the check on its direct
    /// path.
    pub fn new(router: Router, app: App) -> Api {
        Api {
            router,
            checks: Some(app),
        }
    }

    /// `router` alone, for a listener that serves no checks.
    pub fn routes(router: Router) -> Api {
        Api {
            router,
            checks: None,
        }
    }

    /// The app of the check's direct path, when this listener serves checks:
    /// [`crate::server::http1`] answers a plain check with it ([`answer_check`]).
    pub(crate) fn direct_checks(&self) -> Option<&App> {
        self.checks.as_ref()
    }

    /// The answer to `request`.
    pub async fn answer(self, request: Request<Incoming>) -> Response {
        if let Some(app) = &self.checks
            && is_direct_check(&request)
        {
            let (parts, body) = request.into_parts();
            let parent = TraceParent::from_headers(&parts.headers);
            return match read_body(body).await {
                Ok(body) => answer_check(app, &body, &parent).await,
                Err(err) => ApiError::bad_request(format!("could not read the body: {err}"), None)
                    .into_response(),
            };
        }
        match self.router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// `POST /v1/check` declaring a body the router would read whole (the 413 of a larger one,
/// and a body without a declared length, stay the router's).
fn is_direct_check<B>(request: &Request<B>) -> bool {
    request.method() == Method::POST
        && request.uri().path() == "/v1/check"
        && request
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok())
            .is_some_and(is_direct_length)
}

/// Whether a check declaring a body of `length` bytes takes the direct path: the router
/// answers a larger one (its 413).
pub(crate) fn is_direct_length(length: usize) -> bool {
    length <= MAX_BODY_BYTES
}

/// The answer to the check (or batch) in `body`, the direct path's, for a caller that read the
/// request itself ([`crate::server::http1`]).
pub(crate) async fn answer_check(app: &App, body: &[u8], parent: &TraceParent) -> Response {
    check::answer(app, body, parent).await
}

/// Why a declared body could not be read (the client left or broke the framing): the text
/// axum's `Bytes` extractor gives the same failure.
#[derive(Debug, thiserror::Error)]
#[error("Failed to buffer the request body: {0}")]
struct BodyError(#[source] hyper::Error);

/// The whole body: the one chunk as hyper read it (no copy) when it came in one, as a small
/// check does. hyper ends a body at its declared length, so this reads at most
/// [`MAX_BODY_BYTES`].
async fn read_body(mut body: Incoming) -> Result<Bytes, BodyError> {
    let mut first: Option<Bytes> = None;
    let mut more: Option<BytesMut> = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame.map_err(BodyError)?.into_data() else {
            continue; // trailers: not part of the body
        };
        match (&mut first, &mut more) {
            (None, _) => first = Some(data),
            (Some(head), None) => {
                let mut joined = BytesMut::with_capacity(head.len() + data.len());
                joined.extend_from_slice(head);
                joined.extend_from_slice(&data);
                more = Some(joined);
            }
            (Some(_), Some(joined)) => joined.extend_from_slice(&data),
        }
    }
    Ok(match more {
        Some(joined) => joined.freeze(),
        None => first.unwrap_or_default(),
    })
}
