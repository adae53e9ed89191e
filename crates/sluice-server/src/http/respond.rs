//! The HTTP side of every answer: the service's answers and errors (bodies, headers, the
//! error answer) made axum `Response`s, with the content type and the room for the decision
//! headers reserved at once.

use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use serde::Serialize;
use sluice_api::CheckResponse;

use crate::service::answer::{batch_body, most_restrictive, set_headers};
use crate::service::json::{ANSWER_CAPACITY, ApiError, JSON, ONE, PROBLEM_JSON};
use crate::service::limiter::Verdict;

/// One check's answer: written directly when it is plain (every allowed answer), through
/// serde otherwise; the same text either way.
pub(crate) fn check_answer(
    status: StatusCode,
    content_type: HeaderValue,
    body: &CheckResponse,
) -> Response {
    let mut bytes = Vec::with_capacity(ANSWER_CAPACITY);
    if body.write_plain_json(&mut bytes) {
        json_bytes(status, content_type, bytes)
    } else {
        // `write_plain_json` left the buffer empty: serde writes into the same allocation.
        serde_into(status, content_type, bytes, body)
    }
}

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
