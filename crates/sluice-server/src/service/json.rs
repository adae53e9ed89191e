//! The JSON every answer is written in, whatever the transport asked: its content types, and
//! the error answer (`{"error", "message", "field"}`) a failed check or a refused request
//! gets, with the status that goes with it. A transport turns them into its protocol (HTTP:
//! `http/respond.rs`).

use http::{HeaderValue, StatusCode};
use sluice_api::{ErrorBody, codes};

use crate::service::limiter::LimitError;

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");
pub(crate) const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
pub(crate) const ONE: HeaderValue = HeaderValue::from_static("1");

/// A JSON error answer.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) body: ErrorBody,
    /// Answered with `Retry-After: 1` (the backend is unavailable).
    pub(crate) retry_after: bool,
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

/// Room for a check's answer (~150 bytes): one allocation, no regrowth.
pub(crate) const ANSWER_CAPACITY: usize = 256;
