//! The JSON shapes of the API that are not decisions: the error answer every 4xx/5xx the
//! daemon writes itself, encoding helpers, body parsing that names the bad field, and the
//! fallbacks for unknown paths and methods.

use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use sluice_api::{ErrorBody, MAX_BODY_BYTES, codes};

use crate::limiter::LimitError;

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

pub(crate) fn body_rejection(rejection: &BytesRejection) -> ApiError {
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

pub(crate) async fn not_found(uri: http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::NOT_FOUND,
        format!("no route {}", uri.path()),
    )
}

pub(crate) async fn method_not_allowed(method: http::Method, uri: http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        codes::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
