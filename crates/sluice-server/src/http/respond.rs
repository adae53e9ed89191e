//! The HTTP side of every answer: the service's answers and errors (bodies, headers, the
//! error answer) made axum `Response`s, with the content type and the room for the decision
//! headers reserved at once.

use std::sync::LazyLock;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Serialize;
use sluice_api::CheckResponse;

use crate::service::answer::HeaderTexts;
use crate::service::answer::{
    RATELIMIT, RATELIMIT_POLICY, X_LIMIT, X_REMAINING, X_RESET, batch_body, limit_value,
    most_restrictive, set_headers, set_rare_headers,
};
use crate::service::json::{ANSWER_CAPACITY, ApiError, JSON, ONE, PROBLEM_JSON};
use crate::service::limiter::Verdict;

/// One check's answer: its body written directly when it is plain (every allowed answer),
/// through serde otherwise (the same text either way), and its headers.
///
/// The headers come from a clone of [`TEMPLATE`] with their values set in place, by position:
/// no header name is hashed and the map is allocated once. The numbers of the varying values
/// are written after the body in the body's own buffer and shared from it, so the body and
/// those values cost one allocation (and the sharing's one) rather than one each.
pub(crate) fn check_answer(
    status: StatusCode,
    content_type: HeaderValue,
    body: &CheckResponse,
    verdict: &Verdict,
) -> Response {
    let mut bytes = Vec::with_capacity(ANSWER_CAPACITY);
    if !body.write_plain_json(&mut bytes) {
        // `write_plain_json` left the buffer empty: serde writes into the same allocation.
        if serde_json::to_writer(&mut bytes, body).is_err() {
            return serde_into(status, content_type, bytes, body);
        }
    }
    let body_end = bytes.len();
    let texts = HeaderTexts::write(&mut bytes, verdict);
    let shared = Bytes::from(bytes);
    let mut headers = TEMPLATE.clone();
    let mut values = headers.values_mut();
    for value in [
        content_type,
        limit_value(verdict),
        texts.remaining(&shared),
        texts.reset(&shared),
        verdict.limit.policy_header.clone(),
    ] {
        if let Some(slot) = values.next() {
            *slot = value;
        }
    }
    match (texts.ratelimit(&shared), values.next()) {
        (Some(value), Some(slot)) => *slot = value,
        // A policy name no header may hold: the answer goes without `RateLimit`, as before.
        _ => {
            headers.remove(RATELIMIT);
        }
    }
    set_rare_headers(&mut headers, verdict);
    let mut response = Response::new(axum::body::Body::from(shared.slice(..body_end)));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// The headers of every check answer, in their order on the wire, with placeholder values
/// [`check_answer`] overwrites.
static TEMPLATE: LazyLock<HeaderMap> = LazyLock::new(|| {
    let mut headers = HeaderMap::with_capacity(12);
    for name in [
        CONTENT_TYPE,
        X_LIMIT,
        X_REMAINING,
        X_RESET,
        RATELIMIT_POLICY,
        RATELIMIT,
    ] {
        headers.insert(name, ONE);
    }
    headers
});

/// A batch's answer: 200 when every check was allowed, else 429 as a problem; the headers of
/// its most restrictive check.
pub(crate) fn batch_response(verdicts: &[Verdict]) -> Response {
    let body = batch_body(verdicts);
    let mut response = if body.allowed {
        json_response(StatusCode::OK, &body)
    } else {
        json_with(StatusCode::TOO_MANY_REQUESTS, PROBLEM_JSON, &body)
    };
    if let Some(worst) = most_restrictive(verdicts) {
        set_headers(response.headers_mut(), worst);
    }
    response
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
pub(crate) fn serde_into<T: Serialize>(
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

/// A response of JSON already encoded.
pub(crate) fn json_bytes(
    status: StatusCode,
    content_type: HeaderValue,
    bytes: Vec<u8>,
) -> Response {
    let mut response = Response::new(axum::body::Body::from(bytes));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    // Room for the content type and every decision header (`set_headers`) at once: the map
    // is allocated once instead of grown per insert.
    headers.reserve(12);
    headers.insert(CONTENT_TYPE, content_type);
    response
}
