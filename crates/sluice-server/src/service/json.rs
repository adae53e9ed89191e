//! The JSON every answer is written in, whatever the transport asked: the encoding helpers
//! of decision bodies and the error answer (`{"error", "message", "field"}`) a failed check or
//! a refused request gets, with the status and headers that go with it.

use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use serde::Serialize;
use sluice_api::{ErrorBody, codes};

use crate::service::limiter::LimitError;

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");
pub(crate) const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
pub(crate) const ONE: HeaderValue = HeaderValue::from_static("1");

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

/// Room for a check's answer (~150 bytes): one allocation, no regrowth.
pub(crate) const ANSWER_CAPACITY: usize = 256;

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
